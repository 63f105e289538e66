// A plugin whose add kernel never returns. Each conformance case that adds
// must fail with the time limit while the run goes on.
#include <chrono>
#include <thread>

#include "host_kernels.hpp"

namespace {

void add_hangs(const bp::sdk::KernelCall&) {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

class HangPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "hang"; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_fill_and_copy(r);
    r.add<&add_hangs>(BP_OP_ADD, bp::fake::kNumericDTypes, BP_ORIGIN);
  }
};

}  // namespace

BP_SDK_PLUGIN(HangPlugin)
