// Internal header of the cuda plugin, shared by the host files (.cpp) and the
// kernel files (.cu): checks and error prefixes, streams and their error
// records, events, the caching allocator, scratch memory, and kernel
// registration.
#pragma once

#include <backplane/plugin.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <backplane/sdk/checks.hpp>
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/tensor.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>

namespace bp::cuda {

using bp::sdk::KernelCall;
using bp::sdk::Registrar;
using bp::sdk::TensorRef;

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

// Every message starts with the op or entry point the calling thread runs
// (bp::sdk::OpScope, set by the SDK's scoped_kernel_thunk and each entry point), raised with
// the SDK's BP_SDK_REQUIRE / BP_SDK_UNSUPPORTED; outside every scope, "cuda".
using bp::sdk::current_op;
using bp::sdk::OpScope;
// Name of a bp_op as users see it ("add", "log_softmax", ...).
const char* op_name(int op);

[[noreturn]] void throw_cuda_error(const char* call, cudaError_t err);

// Runs a CUDA runtime call; on failure throws "[op] <call>: <name>: <text>".
#define BP_CUDA_CHECK(expr)                                                             \
  do {                                                                                  \
    const cudaError_t bp_cuda_err_ = (expr);                                            \
    if (bp_cuda_err_ != cudaSuccess) ::bp::cuda::throw_cuda_error(#expr, bp_cuda_err_); \
  } while (0)

[[noreturn]] void throw_sync_error(const char* call, cudaError_t err);

// For a call that waits for (or asks about) work enqueued earlier: an error
// it returns is a failure of that work, thrown as bp::sdk::DeviceError.
#define BP_CUDA_SYNC_CHECK(expr)                                                        \
  do {                                                                                  \
    const cudaError_t bp_cuda_err_ = (expr);                                            \
    if (bp_cuda_err_ != cudaSuccess) ::bp::cuda::throw_sync_error(#expr, bp_cuda_err_); \
  } while (0)

// cudaErrorNotReady from a query is an answer, not a failure: makes sure it
// does not linger as the thread's last error (launches check that).
void forget_not_ready();

// ---------------------------------------------------------------------------
// Devices (device.cpp)
// ---------------------------------------------------------------------------

inline constexpr int kMaxDevices = 64;

// Number of usable devices, cached after the first call; 0 with `reason`
// filled (the runtime's error name and text) when there is none.
int device_count(std::string& reason);
int device_count();
void fill_device_props(int32_t device, bp_device_props& props);
// Throws "[op] ... has no device N" unless 0 <= device < device_count().
void check_device(int32_t device);

// ---------------------------------------------------------------------------
// Failures found on the device (errors.cu)
// ---------------------------------------------------------------------------

// What a kernel found wrong in the values it read.
enum ErrorCode : int32_t {
  kNoError = 0,
  kIndexOutOfRange = 1,   // value: the index; limit: the dim's size; dim: the dim
  kNegativeExponent = 2,  // value: the exponent (integer pow)
};

// One per stream, in device memory. Kernels of the stream write into it
// (record_error in elementwise.cuh: atomicCAS on `code`, so the first failure
// wins and later ones are dropped until it is reported); the host reads it
// only at synchronisation points, from a copy enqueued on the stream, and
// clears it by writing a new `generation`. A snapshot whose generation is
// older than the stream's `epoch` was reported already.
struct ErrorRecord {
  int32_t code;  // ErrorCode; 0: nothing found
  int32_t op;    // bp_op of the kernel that found it
  int64_t value;
  int64_t limit;
  int32_t dim;
  uint32_t generation;  // written only by the host's clears
};

// ---------------------------------------------------------------------------
// Streams and events (stream.cpp, event.cpp)
// ---------------------------------------------------------------------------

// What a bp_stream points at. The NULL bp_stream stands for the device's
// default stream: one per device, made on first use, never destroyed.
struct Stream : std::enable_shared_from_this<Stream> {
  int device = 0;
  cudaStream_t handle = nullptr;     // non-blocking
  ErrorRecord* errors = nullptr;     // this stream's record (device memory)
  uint64_t id = 0;                   // unique in the process: the allocator's key
  std::atomic<void*> blas{nullptr};  // cuBLAS handle bound to `handle` (matmul.cu)
  std::mutex mu;                     // guards epoch and alive
  uint32_t epoch = 0;                // generation of the record not reported yet
  bool alive = true;                 // false once stream_destroy has run
  ~Stream();
};

// Makes `device` current on the calling thread (cached: no call when it already is).
void set_device(int device);
// The device's default stream (the NULL bp_stream), created on first use.
Stream& default_stream(int device);
// The Stream behind a bp_stream of `device` (NULL: the default one).
Stream& resolve(int device, bp_stream stream);
// Makes the call's device current and returns the stream its work goes to.
Stream& prepare(const KernelCall& c);
// Number of SMs of `device`, cached; sizes grids that must fill the GPU.
int sm_count(int device);

bp_stream create_stream(int device);
void destroy_stream(int device, bp_stream stream);
// Waits for the stream's work; throws bp::sdk::DeviceError for a failure of it.
void synchronize_stream(int device, bp_stream stream);
// Whether the stream is idle (cudaStreamQuery); once it is, reports a
// failure of its work as synchronize_stream does.
bool query_stream(int device, bp_stream stream);
// Waits for every stream of the device; throws DeviceError for their failures.
void synchronize_device(int device);

bp_event create_event(int device);
void destroy_event(int device, bp_event event);
void record_event(int device, bp_event event, bp_stream stream);
void wait_event(int device, bp_stream stream, bp_event event);
// True once the mark is reached; then, like synchronize_event, throws
// DeviceError for a failure of the stream's work before the mark.
bool query_event(int device, bp_event event);
void synchronize_event(int device, bp_event event);
// cudaEventElapsedTime between two events' marks (ms); nullopt while pending.
std::optional<double> elapsed_event(int device, bp_event start, bp_event end);

// Error records (errors.cu). Device records are kept per device and reused;
// host records are page-locked, so that a copy into them stays asynchronous.
ErrorRecord* take_device_record(int device);
void give_device_record(int device, ErrorRecord* record);
ErrorRecord* take_host_record();
void give_host_record(ErrorRecord* record);
// A page-locked ErrorRecord for the duration of a scope.
class HostRecord {
 public:
  HostRecord() : p_(take_host_record()) {}
  ~HostRecord() {
    if (p_ != nullptr) give_host_record(p_);
  }
  HostRecord(HostRecord&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  HostRecord(const HostRecord&) = delete;
  HostRecord& operator=(const HostRecord&) = delete;
  HostRecord& operator=(HostRecord&&) = delete;
  ErrorRecord* get() const { return p_; }

 private:
  ErrorRecord* p_;
};
// Enqueues on `s` a write of an empty record with `generation`.
void reset_record(const Stream& s, uint32_t generation);
// Enqueues on `s` a copy of its record into `snapshot` (page-locked).
void snapshot_record(const Stream& s, ErrorRecord* snapshot);
// The failure a snapshot of `s`'s record shows, if it was not reported yet:
// returns its message ("[gather] index 7 is out of range ...") and clears
// the record (enqueued on `s`); "" when there is nothing to report.
std::string take_failure(Stream& s, const ErrorRecord& snapshot);

// ---------------------------------------------------------------------------
// Memory (allocator.cpp)
// ---------------------------------------------------------------------------

// The caching allocator's entry points (one allocator for all devices). A
// block belongs to the stream it was allocated for (see allocator.cpp).
void* allocate(const Stream& s, std::size_t nbytes, std::size_t alignment);
void deallocate(void* ptr);
void memory_stats(int device, bp_memory_stats& stats);
// Gives the cached large blocks of `device` back to the driver.
void empty_cache(int device);
// stream_destroy calls this once the stream's work is done: its cached blocks
// become free for every stream.
void forget_stream(int device, uint64_t stream_id);
// The caching allocator is shared by every instance of this plugin in the
// process (a reload while tensors of the first instance live, or the same
// library opened under two paths: DV-5). Each instance holds it; the cached
// memory goes back to the driver only when the last instance is destroyed.
void hold_allocator();
void release_allocator();

// stream_destroy hands the stream's cuBLAS handle back for reuse (matmul.cu).
void recycle_blas_handle(int device, void* handle);

// Device memory for the duration of one kernel call, allocated for the
// call's stream. It goes back to that stream's pool when the object dies,
// before the kernels that use it have run; that is safe because the next
// user of the block on that stream is ordered after them, and other streams
// get it only once the stream has passed them.
class Scratch {
 public:
  Scratch(const Stream& s, std::size_t nbytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_;
};

// A zeroed int32 in scratch memory, for one call whose checking kernel must
// stop the kernel that writes (scatter, integer pow): the first sets it on a
// bad value, the second reads it and writes nothing, so a failed in-place op
// leaves its operands unchanged without the host waiting for the check.
class CheckFlag {
 public:
  explicit CheckFlag(const Stream& s);
  int32_t* get() const { return scratch_.as<int32_t>(); }

 private:
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

// The dtypes the CUDA kernels handle (not yet float16, bfloat16, int8,
// uint8, int16: the capability table says so, and the core reports them as
// not implemented here).
inline constexpr uint32_t kFloatDtypes =
    BP_DTYPE_BIT(BP_DTYPE_FLOAT32) | BP_DTYPE_BIT(BP_DTYPE_FLOAT64);
inline constexpr uint32_t kNumericDtypes =
    kFloatDtypes | BP_DTYPE_BIT(BP_DTYPE_INT32) | BP_DTYPE_BIT(BP_DTYPE_INT64);
inline constexpr uint32_t kBaseDtypes = kNumericDtypes | BP_DTYPE_BIT(BP_DTYPE_BOOL);

template <bp::sdk::KernelFn Fn>
void add_kernel(Registrar& r, bp_op op, uint32_t dtype_mask, const char* origin,
                uint32_t flags = 0) {
  // The SDK's scoped entry names the op in every message the kernel raises.
  r.add_raw(op, dtype_mask, &bp::sdk::scoped_kernel_thunk<Fn>, nullptr, origin, flags);
}

void register_copy_kernels(Registrar& r);
void register_unary_kernels(Registrar& r);
void register_binary_kernels(Registrar& r);
void register_reduce_kernels(Registrar& r);
void register_softmax_kernels(Registrar& r);
void register_matmul_kernels(Registrar& r);
void register_index_kernels(Registrar& r);
void register_random_kernels(Registrar& r);
void register_conv_kernels(Registrar& r);       // conv.cpp: core::conv2d and its backward on cuDNN
void register_pool_norm_kernels(Registrar& r);  // pool_norm.cpp: pooling, batch_norm (cuDNN, nn.cu)
void register_sort_kernels(Registrar& r);

}  // namespace bp::cuda
