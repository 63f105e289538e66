// The plugin boundary as the host crosses it: error buffers and guarded
// structs a plugin fills, calls that stop a plugin's exception, kernel calls
// (noted when the thread records them), guarded allocations, strings a
// plugin hands over, and the typed error of a failed call; not installed.
#pragma once

#include <backplane/debug.h>
#include <backplane/error.h>
#include <backplane/plugin.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

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

// The calling thread's kernel recording (debug::KernelRecording), or null.
// A kernel call first reads g_kernel_recordings, the number of recordings
// alive in the process (one load of a global), and looks up the thread-local
// only when one is: the thread-local's lookup in a shared library is a call
// into the dynamic loader. (An initial-exec thread-local would avoid that
// call, but would put libbackplane's whole TLS block in the static TLS that
// a library opened with dlopen, as Python opens backplane._C, cannot get.)
extern std::atomic<int> g_kernel_recordings;
extern constinit thread_local debug::KernelRecording* t_kernel_recording;
inline debug::KernelRecording* kernel_recording() noexcept {
  if (__builtin_expect(g_kernel_recordings.load(std::memory_order_relaxed) == 0, 1)) return nullptr;
  return t_kernel_recording;
}

// A kernel call on backend `backend`, guarded; noted when the thread records.
inline bp_status call_plugin_kernel(bp_kernel_fn fn, void* ctx, const bp_kernel_call& call,
                                    bp_error* err, int backend) noexcept {
  if (debug::KernelRecording* r = kernel_recording(); __builtin_expect(r != nullptr, 0))
    r->note(backend, call.op, call.dtype);
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

}  // namespace bp::detail
