// Helpers shared by the core's sources; not installed.
#pragma once

#include <backplane/debug.h>
#include <backplane/dispatcher.h>
#include <backplane/error.h>
#include <backplane/named_ops.h>
#include <backplane/plugin.h>
#include <backplane/sdk/tensor.hpp>
#include <backplane/tensor.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#ifndef BACKPLANE_VERSION
#define BACKPLANE_VERSION "0.0.0"
#endif

namespace bp::detail {

inline void write_error(bp_error* e, const char* msg) {
  if (e && e->message && e->capacity) std::snprintf(e->message, e->capacity, "%s", msg);
}

// A bp_error for one call across the ABI. The plugin is told kCapacity
// bytes; behind them lie slack bytes whose first 16 hold a guard pattern,
// so a plugin that writes a little too much hits the slack (and is caught)
// rather than the caller's stack, and a message without its NUL is cut at
// kCapacity instead of being read past.
template <std::size_t kCapacity>
class BasicErrorBuffer {
 public:
  BasicErrorBuffer() {
    buf_[0] = '\0';
    std::memcpy(buf_ + kCapacity, kGuard, sizeof kGuard);
  }
  BasicErrorBuffer(const BasicErrorBuffer&) = delete;
  BasicErrorBuffer& operator=(const BasicErrorBuffer&) = delete;
  bp_error* get() { return &err_; }
  // Whether the plugin wrote past the kCapacity bytes it was given.
  bool overrun() const { return std::memcmp(buf_ + kCapacity, kGuard, sizeof kGuard) != 0; }
  bool empty() const { return buf_[0] == '\0'; }
  std::string message(const char* none = "(the plugin gave no message)") const {
    std::string m(buf_, strnlen(buf_, kCapacity));
    if (m.empty()) m = none;
    if (overrun()) {
      // What it wrote is suspect: its start only.
      if (m.size() > 60) m = m.substr(0, 60) + "...";
      m += " [the plugin wrote past the end of the " + std::to_string(kCapacity) +
           "-byte error buffer]";
    }
    return m;
  }

 private:
  static constexpr char kGuard[16] = {'\x5a', '\xa5', '\x5a', '\xa5', 'g',    'u', 'a', 'r',
                                      'd',    '\xa5', '\x5a', '\xa5', '\x5a', '!', '!', '!'};
  char buf_[kCapacity + 256];
  bp_error err_{sizeof(bp_error), buf_, kCapacity};
};
using ErrorBuffer = BasicErrorBuffer<1024>;

// A struct the core hands a plugin to fill (bp_device_props,
// bp_memory_stats), with slack behind it holding a pattern: intact() is
// false when the plugin wrote past the struct.
template <class T>
struct GuardedStruct {
  T value{};
  unsigned char slack[256];
  GuardedStruct() {
    std::memset(slack, 0xA5, sizeof slack);
    value.struct_size = sizeof(T);
  }
  bool intact() const {
    for (unsigned char b : slack)
      if (b != 0xA5) return false;
    return true;
  }
};

// Runs f, a call into a plugin: a C++ exception that escapes the plugin
// (one written without the SDK's trampolines) stops here, at the boundary.
// A call with a status returns BP_STATUS_RUNTIME_ERROR with the exception's
// message in `err`; one without (deallocate, destroy) returns normally.
template <class F>
auto guarded(bp_error* err, F&& f) noexcept -> decltype(f()) {
  using R = decltype(f());
  try {
    return f();
  } catch (const std::exception& e) {
    write_error(err, (std::string("a C++ exception escaped the plugin: ") + e.what()).c_str());
  } catch (...) {
    write_error(err, "a C++ exception that is not a std::exception escaped the plugin");
  }
  if constexpr (std::is_same_v<R, bp_status>)
    return BP_STATUS_RUNTIME_ERROR;
  else if constexpr (!std::is_void_v<R>)
    return R{};
}

// The calling thread's kernel recording (debug::KernelRecording), or null:
// initial-exec, so that testing it is one load, without a call into the
// dynamic loader.
extern constinit thread_local debug::KernelRecording* t_kernel_recording
    __attribute__((tls_model("initial-exec")));

// A kernel call on backend `backend`, guarded; noted when the thread records.
inline bp_status call_plugin_kernel(bp_kernel_fn fn, void* ctx, const bp_kernel_call& call,
                                    bp_error* err, int backend) noexcept {
  if (__builtin_expect(t_kernel_recording != nullptr, 0))
    t_kernel_recording->note(backend, call.op, call.dtype);
  return guarded(err, [&] { return fn(ctx, &call, err); });
}

// Guarded allocations (guard.cpp, backplane/debug.h).
extern std::atomic<bool> g_any_guarded;  // set once one was made: frees look them up
inline constexpr int kGuardPattern = 0xA5;
extern std::atomic<std::size_t> g_guard_bytes;  // debug::set_guard_bytes
// The guard a new allocation gets: an inline load on the allocation path.
inline std::size_t guard_for_new() { return g_guard_bytes.load(std::memory_order_relaxed); }
// The guard bytes of an allocation: before the memory its user addresses
// (lead) and after it (tail).
struct GuardSizes {
  std::size_t lead = 0, tail = 0;
};
void remember_guard(const void* mem, GuardSizes guard);
void record_guard_violation(debug::GuardViolation v);
GuardSizes forget_guard(const void* mem);  // its guards; zero when unguarded

// A string a plugin hands over (a name, a version), copied: at most
// `max_bytes` are read; nullopt when no NUL comes within them.
std::optional<std::string> bounded_string(const char* s, std::size_t max_bytes);

// Throws the typed error for a failed plugin call.
[[noreturn]] void raise_status(bp_status st, std::string_view what, std::string_view backend,
                               const std::string& message);

inline void check_status(bp_status st, std::string_view what, std::string_view backend,
                         const ErrorBuffer& err) {
  if (__builtin_expect(st != BP_STATUS_OK, 0)) raise_status(st, what, backend, err.message());
}
inline void check_status(bp_status st, std::string_view what, std::string_view backend) {
  if (__builtin_expect(st != BP_STATUS_OK, 0)) raise_status(st, what, backend, "(no message)");
}

// The calling thread's non-default current streams (stream.cpp): a plain
// array, so that the hot path reads it without a TLS initialisation guard.
struct CurrentStreams {
  static constexpr int kMax = 8;
  int count;
  Device device[kMax];
  bp_stream stream[kMax];
};
extern constinit thread_local CurrentStreams t_current_streams;
// Set once any thread has made a non-default stream current: until then
// every call takes the default stream without touching thread-local state
// (which costs a call into the dynamic loader from a shared library).
extern std::atomic<bool> g_streams_guarded;

// The current stream's handle for `device` (nullptr: the default stream).
inline bp_stream current_stream_of(Device device) noexcept {
  if (!g_streams_guarded.load(std::memory_order_relaxed)) return nullptr;
  const CurrentStreams& c = t_current_streams;
  for (int k = 0; k < c.count; ++k)
    if (c.device[k] == device) return c.stream[k];
  return nullptr;
}

// The backend that owns a tensor's memory: valid while the tensor lives,
// even after the backend was unloaded (DV-4).
inline Backend& backend_of(const Tensor& t) {
  return t.impl()->storage->backend();
}
// The backend a Device value names, with a reference that keeps it loaded;
// throws when the value names no loaded backend (DV-4).
IntrusivePtr<Backend> acquire_backend(Device d);

// Where the int64 0/1 `flags` ([n], n > 0) hold 1, found on their device
// with CUMSUM and SCATTER: each element's rank among the flagged elements
// up to it, minus 1 (`rank`), the flagged positions in order
// (`positions`) and their count (the one value read back).
struct Flagged {
  Tensor rank, positions;
  int64_t count = 0;
};
Flagged flagged(const Tensor& flags);
// The runs of equal consecutive slices of `x` along dim `d` (size > 0, any
// layout): flagged() of the slices that start a run, so `rank` is each
// slice's run and `positions` each run's first slice.
Flagged consecutive_runs(const Tensor& x, int64_t d);

// A new tensor with contiguous strides (or `strides` when given) and fresh
// memory, on the device a Device value names, or on the device (and
// backend) of the tensor `like`, the lock-free way for op results.
Tensor make_empty(IntArrayRef shape, DType dtype, Device device);
Tensor make_empty(IntArrayRef shape, DType dtype, const Tensor& like);
Tensor make_empty_strided(IntArrayRef shape, IntArrayRef strides, DType dtype, Device device);
Tensor make_empty_strided(IntArrayRef shape, IntArrayRef strides, DType dtype, const Tensor& like);
// A view of `src`'s memory with new metadata; shares storage and version
// counter. Checks the shape first (CR-8, naming `op`). No recording.
Tensor make_view_unrecorded(const Tensor& src, DimVector sizes, DimVector strides, int64_t offset,
                            const char* op);

}  // namespace bp::detail

namespace bp::autograd {
// Replays a view op on another tensor of the source's shape (for backward).
using ViewReplay = std::function<Tensor(const Tensor&)>;
// Records `out`, a view of `src` made by `replay`, under `grad_name`
// ("TransposeBackward0"); under no-grad it only notes the base's history.
void record_view(const char* grad_name, const Tensor& src, const Tensor& out, ViewReplay replay);
// as_strided's view, whose backward goes by storage position.
void record_as_strided(const Tensor& src, const Tensor& out);
}  // namespace bp::autograd

namespace bp::detail {

// A view made by the view op `op`; `replay` repeats it on any tensor of
// src's shape (a lambda, turned into a std::function only when recorded).
template <class Replay>
Tensor make_view(const Tensor& src, DimVector sizes, DimVector strides, int64_t offset,
                 const char* op, const char* grad_name, Replay&& replay) {
  Tensor out = make_view_unrecorded(src, std::move(sizes), std::move(strides), offset, op);
  if (__builtin_expect(src.requires_grad(), 0))
    autograd::record_view(grad_name, src, out, std::forward<Replay>(replay));
  return out;
}

// Gives a fresh, contiguous, not yet shared tensor another shape with the
// same element count (results of reductions and matmul are not views).
inline void reshape_fresh(Tensor& t, DimVector shape) {
  t.impl()->strides = contiguous_strides(shape);
  t.impl()->sizes = std::move(shape);
  t.impl()->refresh();
}

// DLPack's code, bits and lanes of each dtype, by enum value.
inline constexpr bp_dl_dtype kDlDtypes[kNumDTypes] = {
    {6, 8, 1},  {0, 32, 1}, {0, 64, 1}, {2, 32, 1}, {2, 64, 1},
    {2, 16, 1}, {4, 16, 1}, {0, 8, 1},  {1, 8, 1},  {0, 16, 1}};
constexpr bool dl_table_matches_sdk() {
  for (int d = 0; d < kNumDTypes; ++d) {
    const bp_dl_dtype a = kDlDtypes[d], b = sdk::to_dl(static_cast<bp_dtype>(d));
    if (a.code != b.code || a.bits != b.bits || a.lanes != b.lanes) return false;
  }
  return true;
}
static_assert(dl_table_matches_sdk(), "kDlDtypes must say what bp::sdk::to_dl says");

// An ABI descriptor of `t` (pointers into t's metadata; t must outlive it).
inline bp_tensor describe(const Tensor& t, int32_t dl_device_type) {
  TensorImpl* i = t.impl();
  bp_tensor d;
  d.data = i->storage->data();
  d.device = {dl_device_type, i->device.index};
  d.ndim = static_cast<int32_t>(i->sizes.size());
  d.dtype = kDlDtypes[static_cast<int>(i->dtype)];
  d.shape = const_cast<int64_t*>(i->sizes.data());
  d.strides = const_cast<int64_t*>(i->strides.data());
  d.byte_offset = i->storage->offset() + static_cast<uint64_t>(i->offset) * itemsize(i->dtype);
  return d;
}

// Same, seen with another shape and strides (broadcast operands).
inline bp_tensor describe_as(const Tensor& t, const DimVector& shape, const DimVector& strides,
                             int32_t dl_device_type) {
  bp_tensor d = describe(t, dl_device_type);
  d.ndim = static_cast<int32_t>(shape.size());
  d.shape = const_cast<int64_t*>(shape.data());
  d.strides = const_cast<int64_t*>(strides.data());
  return d;
}

// The ABI's description of one kernel call (pointers into the spans and
// `attrs`, which must outlive it).
inline bp_kernel_call make_call(int32_t op, DType dtype, Device device,
                                std::span<const bp_tensor> inputs,
                                std::span<const bp_tensor> outputs, const bp_attrs& attrs) {
  bp_kernel_call call;
  call.struct_size = sizeof(call);
  call.device = device.index;
  call.reserved = 0;
  call.stream = current_stream_of(device);
  call.op = op;
  call.dtype = static_cast<int32_t>(dtype);
  call.num_inputs = static_cast<int32_t>(inputs.size());
  call.num_outputs = static_cast<int32_t>(outputs.size());
  call.inputs = inputs.data();
  call.outputs = outputs.data();
  call.attrs = &attrs;
  return call;
}

inline bp_attrs make_attrs() {
  bp_attrs a;
  a.struct_size = sizeof(bp_attrs);
  a.num_scalars = 0;
  a.num_ints = 0;
  return a;
}

// "tensor of shape [2, 3], dtype float32 on cpu_onednn:0", for messages.
std::string describe_tensor(const Tensor& t);

// The elements of `t` as its printed form lays them out (PyTorch's line
// width, summarised above 1000 elements), continuation lines indented by
// `indent` + 1: without "tensor(" nor the dtype; `t` must not be empty.
std::string print_elements(const Tensor& t, int indent);
// Whether a printed tensor on `d` leaves its device unsaid: d is the
// default device (false when there is none).
bool is_default_device(Device d);

// The raw bytes of contiguous `c` (numel * itemsize) into host memory,
// waiting for the device (to_vector, safetensors).
void read_bytes(const Tensor& c, void* out);

// A parameter's gradient set to none, or zeroed in place (cut from any graph
// first): Module::zero_grad and Optimizer::zero_grad.
void clear_grad(Tensor& param, bool set_to_none);

// Both on one device, else an error naming both (DV-1).
void check_same_device(const char* op, const Tensor& a, const Tensor& b);

// IP-6: `out` may not have elements sharing memory, and may not partially
// overlap `in` (being exactly `in` is allowed).
// Memory-overlap checks (overlap.cpp): metadata only for the usual
// layouts, else proportional to the elements, never to the storage extent.
bool has_internal_overlap(IntArrayRef sizes, IntArrayRef strides);
bool partially_overlap(const Tensor& out, const Tensor& in);
void check_writable(const char* op, const Tensor& out);
void check_no_partial_overlap(const char* op, const Tensor& out, const Tensor& in);

// Runs a kernel the device's backend lacks on the CPU backend when the
// fallback policy allows it; false when it does not apply.
bool try_fallback(Op op, DType dtype, Device device, std::span<const bp_tensor> inputs,
                  std::span<const bp_tensor> outputs, const bp_attrs& attrs);

// Fills a tensor that nothing else has seen yet: no checks, no version
// bump (a new tensor starts at version 0), no recording.
void fill_fresh(const Tensor& t, const Scalar& value);

// A new tensor of `shape` filled with `value`, on `like`'s device and
// backend: no lookup, so it works while `like`'s backend is unloaded (DV-4).
inline Tensor full_on(IntArrayRef shape, const Scalar& value, DType dtype, const Tensor& like) {
  Tensor t = make_empty(shape, dtype, like);
  fill_fresh(t, value);
  return t;
}

// Copies `src` into `dst` (same shape after broadcasting `src`), converting
// dtype and crossing devices through the backends' copy functions.
void copy_into(const Tensor& dst, const Tensor& src);

// A name of [a-z0-9_]+: a backend's, or either half of a named op's.
inline bool is_plain_name(std::string_view n) {
  if (n.empty()) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

// Named ops (named_ops.cpp): a plugin's registration, checked (name, schema,
// a name it registered already, another backend's schema for the name), and
// the removal of every named kernel of a backend when it is destroyed.
void register_named_kernel(int backend, const std::string& backend_name,
                           const bp_named_kernel_registration& reg, std::string origin);
void remove_named_kernels(int backend);
// Runs the backend's override of the composite `name` ("core::silu") when
// there is one for the first input's dtype, no gradient is being recorded
// and no CompositeOnlyGuard is alive, into a new tensor like the first
// input; an undefined tensor when the composite must run (also when the
// kernel declined the call).
Tensor run_override(std::string_view name, const std::vector<Tensor>& inputs,
                    const std::vector<OpAttr>& attrs);
// For an op whose gradient the core defines itself (conv2d and its
// backward): runs the backend's "core::<name>" into `outputs` (allocated by
// the caller) whether or not a gradient is being recorded (the inputs are
// passed detached), unless a CompositeOnlyGuard is alive. False when the
// composite must run: no override for the dtype, or the kernel declined.
bool run_kernel_override(std::string_view name, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& outputs, const std::vector<OpAttr>& attrs);

// The functions and objects a shared library exports (its ELF dynamic
// symbols); raises bp::Error when the file cannot be read as ELF.
std::vector<std::string> exported_symbols(const std::string& path);
// The functions and objects it imports (undefined dynamic symbols), and the
// libraries it needs (DT_NEEDED, in order); the same errors.
std::vector<std::string> imported_symbols(const std::string& path);
std::vector<std::string> needed_libraries(const std::string& path);

// Whether --backend's text names a file (a '/' in it, or ending in .so)
// rather than a backend (plugin_loader.cpp).
bool looks_like_path(std::string_view s);

}  // namespace bp::detail
