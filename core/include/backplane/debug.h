// Guarded allocations, for conformance: every allocation on every backend
// gets `bytes` more at its end, filled with a pattern through the plugin's
// memset; when it is freed the pattern is read back through the plugin's
// copy to host, and a change is recorded. A kernel that writes past the end
// of its output is so caught on any device, host-addressable or not. Off (0)
// by default; it costs a memset per allocation and a synchronous read per
// free.
#pragma once

#include <backplane/dispatcher.h>
#include <backplane/tensor.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace bp::debug {

void set_guard_bytes(std::size_t bytes);
std::size_t guard_bytes();

struct GuardViolation {
  std::string backend;
  std::size_t size = 0;     // the allocation's size as asked for
  std::size_t first = 0;    // the first changed byte after the end, counted from the end
  std::size_t changed = 0;  // how many of the guard bytes after the end changed
  // The guard before the start (tensors' storages have one): how many of
  // its bytes changed, and the changed one nearest the start (1: the byte
  // just before it).
  std::size_t changed_before = 0;
  std::size_t nearest_before = 0;
};

// The violations recorded since the last call, which it clears.
std::vector<GuardViolation> take_guard_violations();

// Poisoned allocations, for the fuzzer: every allocation on the backend
// `backend_id` is filled with `byte` (0-255) through the plugin's memset
// before anything uses it, so that an element a kernel leaves unwritten
// holds a known pattern instead of whatever the memory held. -1 turns it
// off (the default). The check itself is the caller's: run an op under two
// patterns and compare (a written element does not depend on the pattern).
void set_poison(int backend_id, int byte);
int poison(int backend_id);  // the byte, or -1

// "an allocation of 16 bytes on wrong_add had 4 byte(s) after its end
// overwritten (the first at +0): a kernel wrote past the end of its output",
// or "... before its start ... (the nearest at -4) ...".
std::string describe(const GuardViolation& v);

// A kernel a call reached: the backend it ran on (its label: "dup#2" for a
// second file named dup), the op and the dtype it was chosen for ("add",
// "float32").
struct ReachedKernel {
  std::string backend, op, dtype;
  bool operator==(const ReachedKernel&) const = default;
};

// Records, while it lives, which kernels the calling thread's ops reach (each
// once, in the order first reached). Scopes nest: an inner one records for
// itself only. Off, the dispatcher pays one test of a thread-local pointer
// per kernel call.
class KernelRecording {
 public:
  KernelRecording();
  ~KernelRecording();
  KernelRecording(const KernelRecording&) = delete;
  KernelRecording& operator=(const KernelRecording&) = delete;

  // What was reached so far.
  std::vector<ReachedKernel> kernels() const;

  // The dispatcher's side: a kernel of `op` for `dtype` called on the
  // backend of that id (its name is taken now: it may be unloaded later).
  void note(int backend, int op, int dtype) noexcept;
  // A named op's kernel ("core::conv2d") that ran (and did not decline).
  void note_named(int backend, std::string_view name, int dtype) noexcept;

 private:
  struct Entry {
    int backend, op, dtype;
    std::string backend_name;
    std::string named;  // a named op's name; empty for a builtin op
  };
  std::vector<Entry> entries_;
  KernelRecording* outer_;
};

// Calls the kernel of a builtin `op` (no scalar or int attributes: mul,
// neg, ...) `calls` times with ready-made descriptors of `inputs` and `out`
// (same dtype, `out` of the result's shape and the inputs already of it):
// the kernel looked up once and called through the ABI on the current
// stream, without the core's checks, output allocation, autograd or
// synchronisation. What `backplane perf` sets against the full path of the
// same op to show the framework's share of a tiny op. Throws the kernel's
// error, or NotImplementedError when the backend has no such kernel.
void call_kernel_directly(Op op, const std::vector<Tensor>& inputs, const Tensor& out,
                          int64_t calls);

}  // namespace bp::debug
