// The tensor runtime's shared helpers: current streams, the backend behind
// a tensor or device, new tensors and views made without the public checks,
// views recorded for autograd, host reads, overlap checks, the fallback and
// copies; not installed.
#pragma once

#include <backplane/backend.h>
#include <backplane/dispatcher.h>
#include <backplane/error.h>
#include <backplane/plugin.h>
#include <backplane/stream.h>
#include <backplane/tensor.h>

#include <atomic>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace bp::detail {

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
inline Backend& backend_of(const Tensor& t) { return t.impl()->storage->backend(); }
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

}  // namespace bp::detail
