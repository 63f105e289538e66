// A plugin with fill and copy only (every dtype, any strides, host memory):
// with --fallback allow its adds run on the CPU backend and are counted;
// with deny they fail naming the op.
#include "host_kernels.hpp"

namespace {

class PartialPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "partial"; }
  void register_kernels(bp::sdk::Registrar& r) override { bp::fake::register_fill_and_copy(r); }
};

}  // namespace

BP_SDK_PLUGIN(PartialPlugin)
