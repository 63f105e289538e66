// Internal header of the opencl plugin: errors, devices, programs (built
// from the embedded OpenCL C and cached on disk), streams with their error
// records, events, and the launch helpers the kernel families share.
#pragma once

// OpenCL 1.2 API: what every ICD and PoCL implement. Include this header
// before any other OpenCL header (clblast_c.h too), which would default it.
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <backplane/plugin.h>

#include <array>
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
#include <vector>

namespace bp::opencl {

using bp::sdk::KernelCall;
using bp::sdk::Registrar;
using bp::sdk::TensorRef;

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

// Every message starts with the op or entry point the calling thread runs
// (bp::sdk::OpScope), raised with the SDK's BP_SDK_REQUIRE, BP_SDK_UNSUPPORTED
// and BP_SDK_FAIL; outside every scope, "opencl".
using bp::sdk::current_op;
using bp::sdk::OpScope;

// Name of an OpenCL error code ("CL_OUT_OF_RESOURCES").
const char* cl_error_name(cl_int err);
[[noreturn]] void throw_cl_error(const char* call, cl_int err);
// Runs an OpenCL call; on failure throws "[op] <call> failed: CL_...".
#define BP_CL_CHECK(expr)                                                          \
  do {                                                                             \
    const cl_int bp_cl_err_ = (expr);                                              \
    if (bp_cl_err_ != CL_SUCCESS) ::bp::opencl::throw_cl_error(#expr, bp_cl_err_); \
  } while (0)

// ---------------------------------------------------------------------------
// Devices (device.cpp)
// ---------------------------------------------------------------------------

struct Device {
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  cl_context context = nullptr;  // one per device
  cl_device_type type = 0;
  std::string name, platform_name, vendor, driver_version, version;
  uint64_t memory = 0;
  bool fp64 = false;
  bool correctly_rounded = false;  // -cl-fp32-correctly-rounded-divide-sqrt is available
  size_t max_work_group = 1;
  uint64_t max_alloc = 0;
};

// The usable devices, GPUs first, then CPUs, then the rest, found on first
// use; empty with `reason` filled when there is none.
const std::vector<Device>& devices(std::string* reason = nullptr);
const Device& device(int32_t index);  // throws "[op] ... has no device N"
// "pthread-skylake [Portable Computing Language; OpenCL 3.0 PoCL 3.1; driver 3.1]"
std::string describe(const Device& d);
// Plugin options: where program binaries are cached ("" when off). Like
// log_programs, process-wide: the last instance's option applies.
void set_cache_dir(std::string dir);
std::string cache_dir();
// Plugin option log=on: each program built or loaded, with its time, on stderr.
void set_log_programs(bool on);
bool log_programs();

// ---------------------------------------------------------------------------
// Programs (program.cpp)
// ---------------------------------------------------------------------------

// What one program is compiled for: its kernel source (one of kernels/*.cl)
// and the dtype roles it uses, e.g. {"T", float32}, {"O", int64}.
struct ProgramSpec {
  const char* family;  // "pointwise", "copy", "sum", ...
  std::vector<std::pair<std::string, bp_dtype>> roles;
  std::string extra;  // more source, appended after the family's
};

// The kernel `name` of the program for `spec` on `device`, built on first
// use (or loaded from the disk cache) and kept for the process. A kernel
// object is not safe to use from two threads at once: each thread gets its
// own. A build failure throws with the compiler's log.
cl_kernel kernel(int32_t device, const ProgramSpec& spec, const char* name);
// The OpenCL C source of `spec` (tests and the docs show it).
std::string program_source(const Device& d, const ProgramSpec& spec);

// ---------------------------------------------------------------------------
// Streams, error records and events (stream.cpp)
// ---------------------------------------------------------------------------

// What kernels record about a failure found on the device (int[8]):
// code, op, value (lo, hi), limit (lo, hi), dim, generation.
inline constexpr int kRecordInts = 8;
inline constexpr int kErrIndexOutOfRange = 1;
inline constexpr int kErrNegativeExponent = 2;

struct Stream {
  int device = 0;
  uint64_t id = 0;                   // unique in the process
  cl_command_queue queue = nullptr;  // in order
  cl_mem errors = nullptr;           // the record kernels write
  std::mutex mu;                     // guards epoch
  int32_t epoch = 0;                 // generation of the record not reported yet
  // Commands enqueued so far, and how many of them a synchronisation saw
  // finish: a stream with nothing enqueued since is idle without asking the
  // driver (a marker enqueued to ask takes a moment to complete even then).
  std::atomic<uint64_t> submitted{0}, synced{0};
  ~Stream();
};

Stream& resolve(int32_t device, bp_stream stream);
// False once stream_destroy has run for `stream` (NULL: the default stream, always alive).
bool stream_alive(int32_t device, bp_stream stream);
bp_stream create_stream(int32_t device);
void destroy_stream(int32_t device, bp_stream stream);
// Waits for the stream's work; throws DeviceError for a failure of it.
void synchronize_stream(Stream& s);
bool query_stream(Stream& s);
void synchronize_device(int32_t device);

bp_event create_event(int32_t device);
void destroy_event(bp_event event);
void record_event(int32_t device, bp_event event, bp_stream stream);
// The device time (ms) between two events' markers (their profiling end
// times); nullopt while either is pending.
std::optional<double> elapsed_events(bp_event start, bp_event end);
void wait_event(int32_t device, bp_stream stream, bp_event event);
bool query_event(bp_event event);
void synchronize_event(bp_event event);

// ---------------------------------------------------------------------------
// Memory (memory.cpp)
// ---------------------------------------------------------------------------

// A block of at least `nbytes` for work on `stream` (cached blocks first).
cl_mem allocate(int32_t device, bp_stream stream, std::size_t nbytes);
// Back to `stream`'s cache (the stream it was allocated for).
void deallocate(int32_t device, bp_stream stream, cl_mem mem);
// Releases the cached blocks of a stream being destroyed.
void release_stream_blocks(int32_t device, bp_stream stream);
void memory_stats(int32_t device, bp_memory_stats& stats);
inline cl_mem as_mem(const void* handle) { return static_cast<cl_mem>(const_cast<void*>(handle)); }

// ---------------------------------------------------------------------------
// Launching (launch.cpp)
// ---------------------------------------------------------------------------

// Kernel-side `Geo` (kernels/common.cl): a walk over n elements of up to 4
// operands, dims innermost first, byte strides and offsets.
struct Geo {
  cl_long n = 0;
  cl_long ndim = 0;
  cl_long size[BP_MAX_DIMS] = {};
  cl_long st[4][BP_MAX_DIMS] = {};
  cl_long off[4] = {};
};

// A coalesced walk over the output's shape for the operands (the output
// first, the inputs broadcast to its shape): their byte strides and
// offsets, dims contiguous in every operand merged, the output's fastest
// dim innermost.
Geo coalesced(const std::vector<TensorRef>& ops);
// True when the walk is one run of consecutive elements in every operand
// (the DENSE program variant applies): ndim 1, each stride its element size.
bool dense(const Geo& g, const std::vector<TensorRef>& ops);
// `spec` with the DENSE variant chosen when `g` allows it.
ProgramSpec variant(ProgramSpec spec, const Geo& g, const std::vector<TensorRef>& ops);
// A walk over `shape` in row-major order, dims not merged (so element i of
// the walk is element i in row-major order), for operand k with element
// strides `strides[k]` over `shape`, element size `esize[k]` and byte offset
// `offsets[k]`.
Geo plain(int ndim, const int64_t* shape, const std::vector<const int64_t*>& strides,
          const std::vector<int64_t>& esize, const std::vector<int64_t>& offsets);

// An operand's element size and byte offset, and its stride and size along
// `dim` (a 0-d operand: stride 0, size 1), for the kernels' arguments.
inline int64_t esize(const TensorRef& t) {
  return static_cast<int64_t>(bp::sdk::dtype_size(t.dtype()));
}
inline int64_t offset(const TensorRef& t) { return static_cast<int64_t>(t.raw().byte_offset); }
inline int64_t stride_at(const TensorRef& t, int dim) { return t.ndim() == 0 ? 0 : t.stride(dim); }
inline int64_t size_at(const TensorRef& t, int dim) { return t.ndim() == 0 ? 1 : t.size(dim); }

// The dim an op along one dim takes (ints[0]), checked against `ndim` (a
// 0-d operand has dim 0).
int dim_attr(const KernelCall& c, int ndim);

// Sets kernel arguments in order.
class Args {
 public:
  explicit Args(cl_kernel k) : k_(k) {}
  template <class T>
  Args& operator<<(const T& v) {
    set(sizeof(T), &v);
    return *this;
  }
  Args& mem(const void* handle) {
    cl_mem m = as_mem(handle);
    set(sizeof(cl_mem), &m);
    return *this;
  }

 private:
  void set(std::size_t n, const void* p);
  cl_kernel k_;
  cl_uint i_ = 0;
};

// Enqueues `k` over `items` work-items in groups of `local` (0: the
// plugin's default), rounded up; nothing for zero items.
void launch(Stream& s, cl_kernel k, std::size_t items, std::size_t local = 0);
// `local` halved until kernel `k` can run work-groups of that size on the
// device (CL_KERNEL_WORK_GROUP_SIZE). launch() applies it; a caller whose
// global size depends on the group size applies it first.
std::size_t fit_local(cl_kernel k, int32_t device, std::size_t local);
// The scalar attribute as the kernel's R_SCALAR reads it for dtype `d`:
// int64 for integers and bool (0 or 1), float bits for float16, bfloat16
// and float32, double bits for float64.
cl_long scalar_bits(const bp_scalar& s, bp_dtype d);
// The device's element-wise work-group size.
std::size_t default_local(int32_t device);

// Kernel families (one file each) register their kernels.
void register_pointwise_kernels(Registrar& r);
void register_copy_kernels(Registrar& r);
void register_reduce_kernels(Registrar& r);
void register_sort_kernels(Registrar& r);  // sort.cpp: argsort, cumsum
void register_index_kernels(Registrar& r);
void register_matmul_kernels(Registrar& r);
void register_nn_kernels(Registrar& r);     // nn.cpp: the pools (core:: overrides)
void register_optim_kernels(Registrar& r);  // optim.cpp: sgd_step, adam_step (core:: overrides)

// The copy kernel from `src` to `dst` (any dtypes, same shape), on `s`:
// matmul uses it to make operands contiguous and to convert float16.
void enqueue_copy(Stream& s, const bp_tensor& dst, const bp_tensor& src);

}  // namespace bp::opencl
