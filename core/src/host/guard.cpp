// Guarded allocations (backplane/debug.h): the bookkeeping. Backend::allocate
// and Backend::deallocate (backend.cpp) call guard_for_new/guard_of_freed.
#include <backplane/debug.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "boundary.h"

namespace bp {

namespace {

std::mutex g_mu;
std::unordered_map<const void*, detail::GuardSizes> g_guarded;  // handle -> its guards
std::vector<debug::GuardViolation> g_violations;

}  // namespace

namespace detail {

std::atomic<bool> g_any_guarded{false};
std::atomic<bool> g_any_poison{false};
namespace {
std::atomic<int> g_poison[kMaxBackends] = {};  // the byte + 1 for a backend's slot; 0: off
}  // namespace

int poison_for(int backend_id) {
  if (backend_id < 0) return -1;
  return g_poison[backend_slot(backend_id)].load(std::memory_order_relaxed) - 1;
}
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

void set_poison(int backend_id, int byte) {
  if (backend_id < 0)
    throw ValueError("[set_poison] no backend has id " + std::to_string(backend_id));
  if (byte < -1 || byte > 255)
    throw ValueError("[set_poison] the pattern is a byte (0 to 255) or -1 (off), got " +
                     std::to_string(byte));
  detail::g_poison[backend_slot(backend_id)].store(byte + 1, std::memory_order_relaxed);
  bool any = false;
  for (const auto& p : detail::g_poison) any = any || p.load(std::memory_order_relaxed) != 0;
  detail::g_any_poison.store(any, std::memory_order_relaxed);
}
int poison(int backend_id) { return detail::poison_for(backend_id); }

std::vector<GuardViolation> take_guard_violations() {
  std::lock_guard lock(g_mu);
  std::vector<GuardViolation> out;
  out.swap(g_violations);
  return out;
}

std::string describe(const GuardViolation& v) {
  std::string out =
      "an allocation of " + std::to_string(v.size) + " bytes on " + v.backend + " had ";
  if (v.changed)
    out += std::to_string(v.changed) + " byte(s) after its end overwritten (the first at +" +
           std::to_string(v.first) + ")";
  if (v.changed && v.changed_before) out += " and ";
  if (v.changed_before)
    out += std::to_string(v.changed_before) +
           " byte(s) before its start overwritten (the nearest at -" +
           std::to_string(v.nearest_before) + ")";
  return out + (v.changed && !v.changed_before ? ": a kernel wrote past the end of its output"
                : !v.changed                   ? ": a kernel wrote before the start of its output"
                                               : ": a kernel wrote outside its output");
}

}  // namespace debug
}  // namespace bp
