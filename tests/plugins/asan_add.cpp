// Built with -fsanitize=address: a plugin whose float32 add computes its
// result in a temporary buffer of its own and writes one element past that
// buffer's end, which the conformance suite's guard bytes (behind the
// tensors it allocates) cannot see. `backplane conformance --asan` must fail
// the add cases with AddressSanitizer's report (tests/plugins/CMakeLists.txt).
#include <cstddef>

#include "host_kernels.hpp"

namespace {

void add_through_overrun(const bp::sdk::KernelCall& call) {
  bp::fake::add_biased<0>(call);
  const bp::sdk::TensorRef out = call.output(0);
  const auto n = static_cast<std::size_t>(out.numel());
  float* scratch = new float[n];
  // One element too far: scratch[n] is past the end of the heap buffer.
  volatile float* p = scratch;
  for (std::size_t i = 0; i <= n; ++i) p[i] = 0.0f;
  delete[] scratch;
}

class AsanAddPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "asan_add"; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_fill_and_copy(r);
    r.add<&add_through_overrun>(BP_OP_ADD, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
  }
};

}  // namespace

BP_SDK_PLUGIN(AsanAddPlugin)
