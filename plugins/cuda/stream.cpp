// One non-default stream per device, created on first use, and the calling
// thread's current device. Everything the plugin queues goes to that stream,
// so the caching allocator can hand a freed block to the next request without
// an event: the next user runs after every kernel that touched the block.
#include <array>
#include <atomic>
#include <mutex>

#include "cuda_backend.h"

namespace bp::cuda {

namespace {

constexpr int kMaxDevices = 64;

// Zero-initialised at load, filled under the mutex, read without it.
std::array<std::atomic<cudaStream_t>, kMaxDevices> g_streams{};
std::array<std::atomic<int>, kMaxDevices> g_sm_counts{};
std::mutex g_mutex;

// The runtime keeps a current device per thread; cudaSetDevice on every
// call would cost a driver round trip per kernel.
thread_local int t_device = -1;

void check_index(int device) {
  BP_CHECK(device >= 0 && device < kMaxDevices,
           "device index " << device << " is outside [0, " << kMaxDevices << ")");
}

}  // namespace

void set_device(int device) {
  if (t_device == device) return;
  check_index(device);
  BP_CUDA_CHECK(cudaSetDevice(device));
  t_device = device;
}

cudaStream_t stream(int device) {
  check_index(device);
  cudaStream_t s = g_streams[device].load(std::memory_order_acquire);
  if (s != nullptr) return s;
  check_device(device);
  std::lock_guard lock(g_mutex);
  s = g_streams[device].load(std::memory_order_relaxed);
  if (s == nullptr) {
    set_device(device);
    // Non-blocking: no implicit ordering with the legacy default stream,
    // which other libraries in the process may use.
    BP_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    g_streams[device].store(s, std::memory_order_release);
  }
  return s;
}

cudaStream_t prepare(const TensorRef& t) {
  const int device = t.device();
  set_device(device);
  return stream(device);
}

int sm_count(int device) {
  check_index(device);
  int n = g_sm_counts[device].load(std::memory_order_relaxed);
  if (n > 0) return n;
  BP_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  g_sm_counts[device].store(n, std::memory_order_relaxed);
  return n;
}

void synchronize(int device) {
  check_device(device);
  set_device(device);
  BP_CUDA_CHECK(cudaStreamSynchronize(stream(device)));
}

}  // namespace bp::cuda
