// A plugin whose add computes the right values and then writes one element
// past the end of its output (as a kernel that walks one row too far does);
// fill and copy are correct. The conformance suite must fail its add cases
// as out of bounds, even though every value it compares is right.
#include <cstring>

#include "host_kernels.hpp"

namespace {

void add_then_overrun(const bp::sdk::KernelCall& call) {
  bp::fake::add_biased<0>(call);
  const bp::sdk::TensorRef out = call.output(0);
  if (out.numel() == 0 || !out.is_contiguous()) return;
  const std::size_t item = bp::sdk::dtype_size(out.dtype());
  std::memset(static_cast<char*>(out.base()) + out.numel() * item, 0x7f, item);
}

class OobAddPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "oob_add"; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_fill_and_copy(r);
    r.add<&add_then_overrun>(BP_OP_ADD, bp::fake::kNumericDTypes, BP_ORIGIN);
  }
};

}  // namespace

BP_SDK_PLUGIN(OobAddPlugin)
