// A plugin whose add computes the right values and then writes one element
// past the end of its output (as a kernel that walks one row too far does),
// or, built with OOB_BEFORE (oob_before_add), one element before its start
// (a row index off by minus one); fill and copy are correct. The
// conformance suite must fail its add cases as out of bounds, even though
// every value it compares is right.
#include <cstring>

#include "host_kernels.hpp"

namespace {

void add_then_overrun(const bp::sdk::KernelCall& call) {
  bp::fake::add_biased<0>(call);
  const bp::sdk::TensorRef out = call.output(0);
  if (out.numel() == 0 || !out.is_contiguous()) return;
  const std::size_t item = bp::sdk::dtype_size(out.dtype());
#ifdef OOB_BEFORE
  std::memset(static_cast<char*>(out.base()) - item, 0x7f, item);
#else
  std::memset(static_cast<char*>(out.base()) + out.numel() * item, 0x7f, item);
#endif
}

class OobAddPlugin final : public bp::sdk::Plugin {
 public:
#ifdef OOB_BEFORE
  const char* name() const override { return "oob_before_add"; }
#else
  const char* name() const override { return "oob_add"; }
#endif
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_fill_and_copy(r);
    r.add<&add_then_overrun>(BP_OP_ADD, bp::fake::kNumericDTypes, BP_ORIGIN);
  }
};

}  // namespace

BP_SDK_PLUGIN(OobAddPlugin)
