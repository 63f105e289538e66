// A plugin built against ABI 2.0, the minor before options: its bp_plugin
// table ends where 2.1's `options` begin, and it reports minor 0. The
// core must load it, treat its options as absent (so an option given for it
// is refused by name), and run its kernels.
#include <cstddef>

#include "fake_kernels.hpp"

namespace {

class OldMinorPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "old_minor"; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_basic(r);
    // Flag bit 2 means nothing to a 2.0 plugin; the core must not read it
    // as 2.5's BP_KERNEL_SCALAR_OPERAND (this kernel takes two inputs only).
    r.add_raw(BP_OP_ADD, BP_DTYPE_BIT(BP_DTYPE_FLOAT32), &bp::sdk::kernel_thunk<&bp::fake::add_f32>,
              nullptr, BP_ORIGIN, 2u);
  }

  // The SDK's table cut to its 2.0 size. Past it, garbage: a core that read
  // beyond struct_size would find options that are not there.
  const bp_plugin* old_table() {
    old_ = *table();
    old_.abi_minor = 0;
    old_.struct_size = offsetof(bp_plugin, options);
    old_.options = reinterpret_cast<const bp_option_info*>(0x10);
    old_.num_options = 12345;
    return &old_;
  }

 private:
  bp_plugin old_{};
};

}  // namespace

extern "C" BP_PLUGIN_EXPORT bp_status bp_plugin_init(const bp_host*, const bp_plugin** plugin,
                                                     bp_error* error) {
  return bp::sdk::guarded(error, [&] { *plugin = (new OldMinorPlugin())->old_table(); });
}
