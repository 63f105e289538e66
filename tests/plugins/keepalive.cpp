// A working plugin for the library-lifetime test: unloaded while one of its
// tensors is alive, its code must stay mapped until that tensor goes.
#include "fake_kernels.hpp"

namespace {
class KeepalivePlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "keepalive"; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_basic(r);
    r.add<&bp::fake::add_f32>(BP_OP_ADD, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
  }
};
}  // namespace

BP_SDK_PLUGIN(KeepalivePlugin)
