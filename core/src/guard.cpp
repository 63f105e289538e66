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
std::unordered_map<const void*, detail::GuardSizes> g_guarded;  // handle -> its guards
std::vector<debug::GuardViolation> g_violations;

}  // namespace

namespace detail {

std::atomic<bool> g_any_guarded{false};
std::atomic<std::size_t> g_guard_bytes{0};

void remember_guard(const void* mem, GuardSizes guard) {
  std::lock_guard lock(g_mu);
  g_guarded[mem] = guard;
  g_any_guarded.store(true, std::memory_order_relaxed);
}

GuardSizes forget_guard(const void* mem) {
  std::lock_guard lock(g_mu);
  const auto it = g_guarded.find(mem);
  if (it == g_guarded.end()) return {};
  const GuardSizes guard = it->second;
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
  std::string out = "an allocation of " + std::to_string(v.size) + " bytes on " + v.backend + " had ";
  if (v.changed)
    out += std::to_string(v.changed) + " byte(s) after its end overwritten (the first at +" +
           std::to_string(v.first) + ")";
  if (v.changed && v.changed_before) out += " and ";
  if (v.changed_before)
    out += std::to_string(v.changed_before) + " byte(s) before its start overwritten (the nearest at -" +
           std::to_string(v.nearest_before) + ")";
  return out + (v.changed && !v.changed_before ? ": a kernel wrote past the end of its output"
                : !v.changed                  ? ": a kernel wrote before the start of its output"
                                              : ": a kernel wrote outside its output");
}

}  // namespace debug
}  // namespace bp
