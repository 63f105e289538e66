// A plugin whose add is off by one; fill and copy are correct. The
// conformance suite must fail its add cases with the values it got and the
// values the reference computed, and report its other ops as unsupported.
#include "host_kernels.hpp"

namespace {

class WrongAddPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "wrong_add"; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_fill_and_copy(r);
    r.add<&bp::fake::add_biased<1>>(BP_OP_ADD, bp::fake::kNumericDTypes, BP_ORIGIN);
  }
};

}  // namespace

BP_SDK_PLUGIN(WrongAddPlugin)
