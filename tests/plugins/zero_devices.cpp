// A backend whose hardware is absent: it loads, counts no device and says why
// (as a GPU plugin does on a machine without a driver).
#include "fake_kernels.hpp"

namespace {
class ZeroDevicesPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "zero_devices"; }
  int32_t device_count(std::string& reason) const override {
    reason = "fake accelerator: no device found (driver error 100: no device detected)";
    return 0;
  }
  void register_kernels(bp::sdk::Registrar& r) override { bp::fake::register_basic(r); }
};
}  // namespace

BP_SDK_PLUGIN(ZeroDevicesPlugin)
