// Built twice, as libbackplane_dup_a.so and libbackplane_dup_b.so: two
// different files that both call themselves "dup".
#include "fake_kernels.hpp"

#ifndef DUP_VARIANT
#error "DUP_VARIANT must name the build (a or b)"
#endif

namespace {
class DupPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "dup"; }
  const char* version() const override { return "0.1.0-" DUP_VARIANT; }
  void register_kernels(bp::sdk::Registrar& r) override { bp::fake::register_basic(r); }
};
}  // namespace

BP_SDK_PLUGIN(DupPlugin)
