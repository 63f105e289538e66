// Guarded allocations (backplane/debug.h): the bookkeeping. Backend::allocate
// and Backend::deallocate (backend.cpp) call guard_for_new/guard_of_freed.
#include <backplane/debug.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "internal.h"

namespace bp {

namespace {

std::mutex g_mu;
std::unordered_map<const void*, std::size_t> g_guarded;  // handle -> its guard bytes
std::vector<debug::GuardViolation> g_violations;

}  // namespace

namespace detail {

std::atomic<bool> g_any_guarded{false};
std::atomic<std::size_t> g_guard_bytes{0};

void remember_guard(const void* mem, std::size_t guard) {
  std::lock_guard lock(g_mu);
  g_guarded[mem] = guard;
  g_any_guarded.store(true, std::memory_order_relaxed);
}

std::size_t forget_guard(const void* mem) {
  std::lock_guard lock(g_mu);
  const auto it = g_guarded.find(mem);
  if (it == g_guarded.end()) return 0;
  const std::size_t guard = it->second;
  g_guarded.erase(it);
  return guard;
}

void record_guard_violation(debug::GuardViolation v) {
  std::lock_guard lock(g_mu);
  g_violations.push_back(std::move(v));
}

}  // namespace detail

namespace debug {

void set_guard_bytes(std::size_t bytes) { detail::g_guard_bytes.store(bytes); }
std::size_t guard_bytes() { return detail::g_guard_bytes.load(); }

std::vector<GuardViolation> take_guard_violations() {
  std::lock_guard lock(g_mu);
  std::vector<GuardViolation> out;
  out.swap(g_violations);
  return out;
}

std::string describe(const GuardViolation& v) {
  return "an allocation of " + std::to_string(v.size) + " bytes on " + v.backend + " had " +
         std::to_string(v.changed) + " byte(s) after its end overwritten (the first at +" +
         std::to_string(v.first) + "): a kernel wrote past the end of its output";
}

}  // namespace debug
}  // namespace bp
