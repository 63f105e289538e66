// A plugin whose add leaves the first element of every row of its result
// unwritten (rows of more than one element); fill and copy are correct.
// `backplane fuzz --poison` must report the element as unwritten-result.
#include "host_kernels.hpp"

namespace {

class UnwrittenAddPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "unwritten_add"; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_fill_and_copy(r);
    r.add<&bp::fake::add_biased<0, true>>(BP_OP_ADD, bp::fake::kNumericDTypes, BP_ORIGIN);
  }
};

}  // namespace

BP_SDK_PLUGIN(UnwrittenAddPlugin)
