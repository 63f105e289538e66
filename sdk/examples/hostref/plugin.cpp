// The hostref backend: host memory, one device, and every primitive op of
// plugin.h as a plain loop. The entry point is this class, exported with
// BP_SDK_PLUGIN; the kernels register themselves family by family.
#include <atomic>

#include "hostref.h"

namespace hostref {

class HostrefPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "hostref"; }
  const char* version() const override { return "0.1.0"; }

  void device_props(int32_t device, bp_device_props& props) const override {
    BP_SDK_CHECK(device == 0, "device_props", "hostref has one device (0), got " << device);
    std::snprintf(props.name, sizeof(props.name), "%s", "host memory, reference loops");
    props.host_addressable = 1;
  }

  // Its kernels, and the narrow dtypes (float16, bfloat16, int8, uint8,
  // int16) computed through them in float32 and int64.
  void register_kernels(Registrar& r) override {
    register_all_kernels(r);
    r.emulate_narrow_dtypes(wide_);
  }

  // The base class's host allocator, counted so that conformance can check
  // that in-place ops allocate nothing (bp_plugin.memory_stats). Its work
  // runs before each call returns, so the SDK's host streams apply.
  void* allocate(int32_t device, bp_stream stream, std::size_t nbytes,
                 std::size_t alignment) override {
    void* p = Plugin::allocate(device, stream, nbytes, alignment);
    allocated_ += nbytes;
    ++allocs_;
    return p;
  }
  void deallocate(int32_t device, bp_stream stream, void* ptr, std::size_t nbytes) override {
    Plugin::deallocate(device, stream, ptr, nbytes);
    allocated_ -= nbytes;
  }
  void memory_stats(int32_t, bp_memory_stats& stats) override {
    stats.allocated_bytes = allocated_;
    stats.reserved_bytes = allocated_;
    stats.num_allocs = allocs_;
    stats.num_system_allocs = allocs_;
  }

 private:
  std::deque<bp::sdk::WideKernel> wide_;
  std::atomic<uint64_t> allocated_{0}, allocs_{0};
};

}  // namespace hostref

BP_SDK_PLUGIN(hostref::HostrefPlugin)
