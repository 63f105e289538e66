// A working plugin that a test copies into several folders to see which copy
// a lookup by name picks.
#include "fake_kernels.hpp"

namespace {
class SearchProbePlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "search_probe"; }
  void register_kernels(bp::sdk::Registrar& r) override { bp::fake::register_basic(r); }
};
}  // namespace

BP_SDK_PLUGIN(SearchProbePlugin)
