// A plugin whose add is off by one; fill and copy are correct. The
// conformance suite must fail its add cases with the values it got and the
// values the reference computed, and report its other ops as unsupported.
// Also built as libbackplane_twin_old.so, _twin_new.so (WRONG_ADD_BIAS 0:
// a right add) and _twin_wrong.so, all three named "twin": builds of one
// plugin that conformance compares by path.
#include "host_kernels.hpp"

#ifndef WRONG_ADD_NAME
#define WRONG_ADD_NAME "wrong_add"
#endif
#ifndef WRONG_ADD_BIAS
#define WRONG_ADD_BIAS 1
#endif

namespace {

class WrongAddPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return WRONG_ADD_NAME; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_fill_and_copy(r);
    r.add<&bp::fake::add_biased<WRONG_ADD_BIAS>>(BP_OP_ADD, bp::fake::kNumericDTypes, BP_ORIGIN);
  }
};

}  // namespace

BP_SDK_PLUGIN(WrongAddPlugin)
