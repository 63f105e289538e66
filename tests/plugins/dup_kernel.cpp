// Registers add for float32 twice, from two lines: the core must refuse the
// plugin and name both registrations.
#include "fake_kernels.hpp"

namespace {
class DupKernelPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "dup_kernel"; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_basic(r);
    r.add<&bp::fake::add_f32>(BP_OP_ADD, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
    r.add<&bp::fake::add_f32>(BP_OP_ADD, {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}, BP_ORIGIN);
  }
};
}  // namespace

BP_SDK_PLUGIN(DupKernelPlugin)
