// A host-memory backend with two devices that counts the byte copies it is
// asked for, so that a test can see which path the core takes: between its
// own devices (copy_on_device) or through the host, and in what sizes.
// The counts are read with dlsym, so this fake exports more than the entry.
#include <algorithm>
#include <atomic>
#include <cstddef>

#include "host_kernels.hpp"

namespace {

std::atomic<long> g_to_host{0}, g_from_host{0}, g_on_device{0};
std::atomic<std::size_t> g_largest_from_host{0};

class TwoDevicesPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "two_devices"; }
  int32_t device_count(std::string&) const override { return 2; }
  void register_kernels(bp::sdk::Registrar& r) override { bp::fake::register_fill_and_copy(r); }
  void copy_to_host(int32_t device, bp_stream s, void* host, const void* mem, uint64_t offset,
                    std::size_t n) override {
    ++g_to_host;
    Plugin::copy_to_host(device, s, host, mem, offset, n);
  }
  void copy_from_host(int32_t device, bp_stream s, void* mem, uint64_t offset, const void* host,
                      std::size_t n) override {
    ++g_from_host;
    for (std::size_t seen = g_largest_from_host.load();
         n > seen && !g_largest_from_host.compare_exchange_weak(seen, n);) {
    }
    Plugin::copy_from_host(device, s, mem, offset, host, n);
  }
  void copy_on_device(bp_stream s, int32_t dst_device, void* dst, uint64_t dst_offset,
                      int32_t src_device, const void* src, uint64_t src_offset,
                      std::size_t n) override {
    ++g_on_device;
    Plugin::copy_on_device(s, dst_device, dst, dst_offset, src_device, src, src_offset, n);
  }
};

}  // namespace

// counts[0..3] = copy_to_host calls, copy_from_host calls, copy_on_device
// calls, the largest copy_from_host in bytes.
extern "C" BP_PLUGIN_EXPORT void two_devices_copy_counts(long counts[4]) {
  counts[0] = g_to_host.load();
  counts[1] = g_from_host.load();
  counts[2] = g_on_device.load();
  counts[3] = static_cast<long>(g_largest_from_host.load());
}

BP_SDK_PLUGIN(TwoDevicesPlugin)
