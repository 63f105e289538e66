// Devices as the CUDA runtime sees them. Without a driver (or with one older
// than the runtime the plugin was linked with) cudaGetDeviceCount fails; the
// plugin then has zero devices and passes the runtime's own words on.
#include <mutex>

#include "cuda_backend.h"

namespace bp::cuda {

namespace {

struct DeviceCount {
  int count = 0;
  std::string reason;
};

std::string runtime_version_text() {
  const int v = CUDART_VERSION;  // the runtime linked in, not the driver's
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

DeviceCount query_device_count() {
  DeviceCount result;
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    std::string what;
    if (err == cudaErrorInsufficientDriver)
      what = "no CUDA driver, or one older than the CUDA " + runtime_version_text() + " runtime";
    else if (err == cudaErrorNoDevice)
      what = "no CUDA device";
    else
      what = "the CUDA runtime could not start";
    result.reason = what + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
    return result;
  }
  if (n == 0) {
    result.reason = "no CUDA device: cudaGetDeviceCount found none";
    return result;
  }
  result.count = n;
  return result;
}

const DeviceCount& cached_device_count() {
  static std::once_flag once;
  static DeviceCount* cached = nullptr;
  std::call_once(once, [] { cached = new DeviceCount(query_device_count()); });
  return *cached;
}

}  // namespace

int device_count(std::string& reason) {
  const DeviceCount& c = cached_device_count();
  reason = c.reason;
  return c.count;
}

int device_count() { return cached_device_count().count; }

void check_device(int32_t device) {
  const DeviceCount& c = cached_device_count();
  BP_SDK_REQUIRE(device >= 0 && device < c.count,
                 "the cuda backend has no device "
                     << device << " (it has " << c.count << ")"
                     << (c.count == 0 ? ": " + c.reason : std::string()));
}

void fill_device_props(int32_t device, bp_device_props& props) {
  check_device(device);
  cudaDeviceProp p{};
  BP_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  std::snprintf(props.name, sizeof(props.name), "%.96s (sm_%d%d, %d SMs)", p.name, p.major, p.minor,
                p.multiProcessorCount);
  props.total_memory = static_cast<uint64_t>(p.totalGlobalMem);
  // Device memory is not host memory: the core must go through the copy functions.
  props.host_addressable = 0;
}

}  // namespace bp::cuda
