// Internal header of the cuda plugin, shared by the host files (.cpp) and the
// kernel files (.cu): checks and error prefixes, the per-device stream, the
// caching allocator, scratch memory, and kernel registration.
#pragma once

#include <backplane/plugin.h>
#include <cuda_runtime_api.h>

#include <backplane/sdk/checks.hpp>
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/tensor.hpp>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

namespace bp::cuda {

using bp::sdk::KernelCall;
using bp::sdk::Registrar;
using bp::sdk::TensorRef;

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

// The op or entry point the calling thread is running: every message starts
// with it, so an error raised deep in a helper still names what the user called.
const char* current_op();
// Name of a bp_op as users see it ("add", "log_softmax", ...).
const char* op_name(int op);

// Sets current_op() for the lifetime of the scope.
class OpScope {
 public:
  explicit OpScope(const char* name);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  const char* previous_;
};

// User-facing check: throws InvalidArgument("[op] ...") with streamed values.
#define BP_CHECK(cond, ...)                                                   \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::ostringstream bp_check_os_;                                        \
      bp_check_os_ << "[" << ::bp::cuda::current_op() << "] " << __VA_ARGS__; \
      throw ::bp::sdk::InvalidArgument(bp_check_os_.str());                   \
    }                                                                         \
  } while (0)

// Throws Unsupported("[op] ...") for a dtype or layout that is not handled.
#define BP_UNSUPPORTED(...)                                                 \
  do {                                                                      \
    std::ostringstream bp_check_os_;                                        \
    bp_check_os_ << "[" << ::bp::cuda::current_op() << "] " << __VA_ARGS__; \
    throw ::bp::sdk::Unsupported(bp_check_os_.str());                       \
  } while (0)

[[noreturn]] void throw_cuda_error(const char* call, cudaError_t err);

// Runs a CUDA runtime call; on failure throws "[op] <call>: <name>: <text>".
#define BP_CUDA_CHECK(expr)                                                             \
  do {                                                                                  \
    const cudaError_t bp_cuda_err_ = (expr);                                            \
    if (bp_cuda_err_ != cudaSuccess) ::bp::cuda::throw_cuda_error(#expr, bp_cuda_err_); \
  } while (0)

// ---------------------------------------------------------------------------
// Devices and streams (device.cpp, stream.cpp)
// ---------------------------------------------------------------------------

// Number of usable devices, cached after the first call; 0 with `reason`
// filled (the runtime's error name and text) when there is none.
int device_count(std::string& reason);
int device_count();
void fill_device_props(int32_t device, bp_device_props& props);
// Throws "[op] ... has no device N" unless 0 <= device < device_count().
void check_device(int32_t device);

// Makes `device` current on the calling thread (cached: no call when it already is).
void set_device(int device);
// The device's stream, created on first use. Every kernel, copy and memset of
// the plugin runs on it, so work on one device is ordered without events.
cudaStream_t stream(int device);
// Makes the tensor's device current and returns that device's stream.
cudaStream_t prepare(const TensorRef& t);
// Number of SMs of `device`, cached; sizes grids that must fill the GPU.
int sm_count(int device);
// Waits for everything queued on the device's stream.
void synchronize(int device);

// ---------------------------------------------------------------------------
// Memory (allocator.cpp, copy.cu)
// ---------------------------------------------------------------------------

// The caching allocator's entry points (one allocator for all devices).
void* allocate(int device, std::size_t nbytes, std::size_t alignment);
void deallocate(int device, void* ptr, std::size_t nbytes);
void memory_stats(int device, bp_memory_stats& stats);
// The caching allocator is shared by every instance of this plugin in the
// process (a reload while tensors of the first instance live, or the same
// library opened under two paths: DV-5). Each instance holds it; the cached
// memory goes back to the driver only when the last instance is destroyed.
void hold_allocator();
void release_allocator();

void copy_from_host(int device, void* dst, const void* src, std::size_t nbytes);
void copy_to_host(int device, void* dst, const void* src, std::size_t nbytes);
void copy_on_device(int dst_device, void* dst, int src_device, const void* src, std::size_t nbytes);
void memset_device(int device, void* dst, int value, std::size_t nbytes);

// Device memory for the duration of one kernel call. It goes back to the
// stream's pool when the object dies, before the kernels that use it have
// run; that is safe because the next user of the block is ordered after them
// on the same stream.
class Scratch {
 public:
  Scratch(int device, std::size_t nbytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  int device_;
  std::size_t nbytes_;
  void* ptr_;
};

// What a checking kernel reports: whether a bad value was seen, the lowest
// negative one and the highest non-negative one (0 when there is none), so
// that the message names the same value whatever the thread order.
struct DeviceError {
  int64_t lowest;
  int64_t highest;
  int32_t raised;
  int32_t reserved;
  // The value a message names: the lowest when negative, else the highest.
  int64_t culprit() const { return lowest < 0 ? lowest : highest; }
};

// A zeroed DeviceError on the device. read() waits for the stream: kernels
// that validate their inputs (indices, integer exponents) block on it.
class ErrorFlag {
 public:
  ErrorFlag(int device, cudaStream_t stream);
  DeviceError* get() const { return scratch_.as<DeviceError>(); }
  DeviceError read() const;

 private:
  cudaStream_t stream_;
  Scratch scratch_;
};

// ---------------------------------------------------------------------------
// Layout helpers
// ---------------------------------------------------------------------------

using bp::sdk::is_dense;
using bp::sdk::same_strides;
// Throws unless `t` has `out`'s shape.
void check_same_shape(const TensorRef& t, const TensorRef& out, const char* what);

// out = cast(in) for any dtypes and strides (the COPY kernel), on `s`.
void copy_tensor(cudaStream_t s, const bp_tensor& out, const bp_tensor& in);
// Sets every element of `out` to zero, on `s`.
void fill_zero(cudaStream_t s, const bp_tensor& out);

// ---------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------

namespace check = bp::sdk::check;  // the contract of each op (backplane/sdk/checks.hpp)

inline constexpr uint32_t kAllDtypes = BP_DTYPE_MASK_ALL;
inline constexpr uint32_t kFloatDtypes =
    BP_DTYPE_BIT(BP_DTYPE_FLOAT32) | BP_DTYPE_BIT(BP_DTYPE_FLOAT64);
inline constexpr uint32_t kNumericDtypes =
    kFloatDtypes | BP_DTYPE_BIT(BP_DTYPE_INT32) | BP_DTYPE_BIT(BP_DTYPE_INT64);

// The C entry of a kernel: names the op for error messages, then runs Fn
// with exceptions turned into a status.
template <bp::sdk::KernelFn Fn>
bp_status kernel_entry(void*, const bp_kernel_call* call, bp_error* error) noexcept {
  OpScope scope(op_name(call->op));
  return bp::sdk::guarded(error, [&] { Fn(KernelCall(*call)); });
}

template <bp::sdk::KernelFn Fn>
void add_kernel(Registrar& r, bp_op op, uint32_t dtype_mask, const char* origin) {
  r.add_raw(op, dtype_mask, &kernel_entry<Fn>, nullptr, origin);
}

void register_copy_kernels(Registrar& r);
void register_unary_kernels(Registrar& r);
void register_binary_kernels(Registrar& r);
void register_reduce_kernels(Registrar& r);
void register_softmax_kernels(Registrar& r);
void register_matmul_kernels(Registrar& r);
void register_index_kernels(Registrar& r);
void register_random_kernels(Registrar& r);

}  // namespace bp::cuda
