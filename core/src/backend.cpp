// The Backend wrapper: every call the core makes into a loaded plugin,
// each behind detail::guarded (a C++ exception that escapes the plugin
// becomes an error status at the boundary), with the plugin's statuses
// turned into the core's typed errors.
#include <backplane/backend.h>
#include <backplane/debug.h>
#include <backplane/error.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <optional>

#include "host/backend_library.h"
#include "host/plugin_probe.h"
#include "internal.h"

namespace bp::detail {
// Poisoned allocations (debug::set_poison; guard.cpp).
extern std::atomic<bool> g_any_poison;
int poison_for(int backend_id);
}  // namespace bp::detail

namespace bp {

Backend::Backend(int id, std::unique_ptr<Library> lib, const bp_plugin* api, std::string path,
                 PluginFacts facts)
    : lib_(std::move(lib)),
      api_(api),
      id_(id),
      name_(std::move(facts.name)),
      version_(std::move(facts.version)),
      path_(std::move(path)),
      label_(name_),
      device_count_(facts.device_count),
      no_device_reason_(std::move(facts.no_device_reason)),
      props_(std::move(facts.props)),
      tolerances_(std::move(facts.tolerances)),
      options_(std::move(facts.options)) {}

Backend::~Backend() {
  // Memory waiting for other streams, then the streams made here, then the
  // instance (the ABI destroys streams once their work is done).
  reap_deferred_frees(true);
  for (void* b : staging_)
    if (b) detail::guarded(nullptr, [&] { return api_->host_free(api_->ctx, b); });
  for (auto [device, s] : streams_) {
    detail::ErrorBuffer err;
    (void)detail::guarded(
        err.get(), [&] { return api_->stream_synchronize(api_->ctx, device, s, err.get()); });
    detail::guarded(nullptr, [&] { return api_->stream_destroy(api_->ctx, device, s); });
  }
  detail::load_phase("destroy");
  if (api_->destroy) detail::guarded(nullptr, [&] { return api_->destroy(api_->ctx); });
}

bp_device_props Backend::device_props(int device) const {
  BP_CHECK(device >= 0 && device < device_count_, "[device_props] backend '", name_,
           "' has no device ", device, " (it has ", device_count_, ")");
  return props_[static_cast<std::size_t>(device)];
}

bool Backend::host_addressable(int device) const { return device_props(device).host_addressable; }

std::optional<bp_memory_stats> Backend::memory_stats(int device) const {
  if (!BP_HAS_FIELD(api_, bp_plugin, memory_stats) || api_->memory_stats == nullptr)
    return std::nullopt;
  detail::GuardedStruct<bp_memory_stats> stats;
  detail::ErrorBuffer err;
  const bp_status st = detail::guarded(
      err.get(), [&] { return api_->memory_stats(api_->ctx, device, &stats.value, err.get()); });
  if (!stats.intact())
    throw PluginError("[memory_stats] backend '" + name_ +
                      "' wrote past the end of bp_memory_stats");
  if (st != BP_STATUS_OK) return std::nullopt;
  stats.value.struct_size = sizeof(bp_memory_stats);
  return stats.value;
}

bool Backend::empty_cache(int device) const {
  BP_CHECK(device >= 0 && device < device_count_, "[empty_cache] backend '", name_,
           "' has no device ", device, " (it has ", device_count_, ")");
  if (!BP_HAS_FIELD(api_, bp_plugin, empty_cache) || api_->empty_cache == nullptr) return false;
  detail::ErrorBuffer err;
  const bp_status st =
      detail::guarded(err.get(), [&] { return api_->empty_cache(api_->ctx, device, err.get()); });
  detail::check_status(st, "empty_cache", name_, err);
  return true;
}

bool Backend::imports_memory() const {
  return BP_HAS_FIELD(api_, bp_plugin, release_import) && api_->import_memory != nullptr &&
         api_->release_import != nullptr;
}

void* Backend::import_memory(int device, void* external, std::size_t nbytes) const {
  BP_CHECK(device >= 0 && device < device_count_, "[import_memory] backend '", name_,
           "' has no device ", device, " (it has ", device_count_, ")");
  if (!imports_memory())
    throw ValueError("[import_memory] backend '" + name_ +
                     "' does not import memory it did not allocate (its plugin has no "
                     "import_memory, ABI 2.10)");
  void* handle = nullptr;
  detail::ErrorBuffer err;
  detail::check_status(detail::guarded(err.get(),
                                       [&] {
                                         return api_->import_memory(api_->ctx, device, external,
                                                                    nbytes, &handle, err.get());
                                       }),
                       "import_memory", name_, err);
  if (handle == nullptr)
    throw PluginError("[import_memory] backend '" + name_ + "' returned no handle");
  return handle;
}

void Backend::release_import(int device, void* mem, bp_stream stream, const bp_stream* users,
                             std::size_t num_users) const noexcept {
  // The owner frees the memory as soon as this returns: every stream that
  // used it must be done with it first.
  auto wait = [&](bp_stream s) {
    detail::ErrorBuffer err;
    const bp_status st = detail::guarded(
        err.get(), [&] { return api_->stream_synchronize(api_->ctx, device, s, err.get()); });
    if (st == BP_STATUS_OK) return;
    std::lock_guard lock(deferred_mu_);
    keep_pending_error_locked("[synchronize] backend '" + name_ + "': " + err.message());
  };
  wait(stream);
  for (std::size_t k = 0; k < num_users; ++k) wait(users[k]);
  detail::guarded(nullptr, [&] { return api_->release_import(api_->ctx, device, mem); });
}

void* Backend::allocate(int device, std::size_t nbytes, bp_stream stream,
                        std::size_t* lead_out) const {
  BP_CHECK(device >= 0 && device < device_count_, "[allocate] backend '", name_, "' has no device ",
           device, " (it has ", device_count_, ")",
           device_count_ == 0 ? ": " + no_device_reason_ : std::string());
  if (__builtin_expect(num_deferred_.load(std::memory_order_relaxed) != 0, 0))
    reap_deferred_frees(false);
  void* p = nullptr;
  detail::ErrorBuffer err;
  // Cache-line alignment pays for vector loads on large buffers; small ones
  // take malloc's natural 16 so plugins can serve them from a fast path.
  const std::size_t alignment = nbytes >= 512 ? 64 : 16;
  const std::size_t guard = detail::guard_for_new();  // 0 unless debug::set_guard_bytes
  // The lead keeps the user's memory at the allocation's alignment.
  const std::size_t lead = lead_out != nullptr && guard != 0 ? (guard + 63) / 64 * 64 : 0;
  detail::check_status(detail::guarded(err.get(),
                                       [&] {
                                         return api_->allocate(api_->ctx, device, stream,
                                                               lead + nbytes + guard, alignment, &p,
                                                               err.get());
                                       }),
                       "allocate", name_, err);
  if (p == nullptr) throw PluginError("[allocate] backend '" + name_ + "' returned no memory");
  if (__builtin_expect(guard != 0, 0)) {
    if (lead != 0) memset(device, stream, p, 0, detail::kGuardPattern, lead);
    memset(device, stream, p, lead + nbytes, detail::kGuardPattern, guard);
    detail::remember_guard(p, {lead, guard});
  }
  if (__builtin_expect(detail::g_any_poison.load(std::memory_order_relaxed), 0) && nbytes != 0) {
    const int byte = detail::poison_for(id_);  // debug::set_poison
    if (byte >= 0) memset(device, stream, p, lead, byte, nbytes);
  }
  if (lead_out != nullptr) *lead_out = lead;
  return p;
}

// A guarded allocation's patterns, read back before it is freed: a change
// is recorded (debug::take_guard_violations). Returns the size to free.
std::size_t Backend::check_guard(int device, void* mem, std::size_t nbytes,
                                 bp_stream stream) const noexcept {
  const detail::GuardSizes guard = detail::forget_guard(mem);
  if (guard.tail == 0 && guard.lead == 0) return nbytes;
  try {
    const auto pattern = static_cast<unsigned char>(detail::kGuardPattern);
    debug::GuardViolation v{name_, nbytes, guard.tail, 0, 0, 0};
    // Both margins in one synchronisation: the lead's copy is enqueued, the
    // tail's read waits for the stream.
    std::vector<unsigned char> lead(guard.lead), tail(guard.tail);
    if (guard.lead != 0) copy_to_host(device, stream, lead.data(), mem, 0, guard.lead);
    read_to_host(device, stream, tail.data(), mem, guard.lead + nbytes, guard.tail);
    for (std::size_t i = 0; i < guard.tail; ++i)
      if (tail[i] != pattern) {
        v.first = std::min(v.first, i);
        ++v.changed;
      }
    for (std::size_t i = 0; i < guard.lead; ++i)
      if (lead[i] != pattern) {
        v.nearest_before = guard.lead - i;  // the last one is the nearest
        ++v.changed_before;
      }
    if (v.changed || v.changed_before) detail::record_guard_violation(std::move(v));
  } catch (const DeviceError& e) {
    // The read reached the stream's earlier failure, which the plugin has
    // now handed over: the next synchronisation raises it, as it would have.
    std::lock_guard lock(deferred_mu_);
    keep_pending_error_locked(e.what());
  } catch (...) {
    // The memory could not be read back: nothing to say about it.
  }
  return guard.lead + nbytes + guard.tail;
}

void Backend::deallocate(int device, void* mem, std::size_t nbytes, bp_stream stream,
                         const bp_stream* users, std::size_t num_users) const noexcept {
  if (__builtin_expect(detail::g_any_guarded.load(std::memory_order_relaxed), 0))
    nbytes = check_guard(device, mem, nbytes, stream);
  if (num_users == 0) {
    detail::guarded(nullptr,
                    [&] { return api_->deallocate(api_->ctx, device, stream, mem, nbytes); });
    return;
  }
  // Like a caching allocator's record_stream: the memory goes back to the
  // plugin only when each stream that used it has finished what it had
  // enqueued by now, so no other stream can be handed it while they run.
  DeferredFree f{device, mem, nbytes, stream, {}};
  try {
    for (std::size_t k = 0; k < num_users; ++k) {
      bp_event e = event_create(device);
      f.events.push_back(e);
      event_record(device, e, users[k]);
    }
  } catch (...) {
    // Without an event to wait on, wait for the device instead.
    for (bp_event e : f.events) event_destroy(device, e);
    try {
      synchronize(device);
    } catch (...) {
    }
    detail::guarded(nullptr,
                    [&] { return api_->deallocate(api_->ctx, device, stream, mem, nbytes); });
    return;
  }
  std::lock_guard lock(deferred_mu_);
  deferred_.push_back(std::move(f));
  num_deferred_.store(deferred_.size(), std::memory_order_relaxed);
}

void Backend::reap_deferred_frees(bool wait) const noexcept {
  std::vector<DeferredFree> done;
  {
    std::lock_guard lock(deferred_mu_);
    for (auto it = deferred_.begin(); it != deferred_.end();) {
      bool ready = true;
      for (bp_event e : it->events) {
        // The plugin's entries directly: the Backend's raise what is pending.
        detail::ErrorBuffer err;
        const bp_status st =
            wait ? detail::guarded(
                       err.get(),
                       [&] { return api_->event_synchronize(api_->ctx, it->device, e, err.get()); })
                 : detail::guarded(err.get(), [&] {
                     return api_->event_query(api_->ctx, it->device, e, err.get());
                   });
        if (st == BP_STATUS_NOT_READY) {
          ready = false;
        } else if (st == BP_STATUS_DEVICE_ERROR) {
          // The user stream's work is over, so the memory is free; the
          // plugin has handed its failure to us: the next synchronisation
          // raises it.
          keep_pending_error_locked("[synchronize] backend '" + name_ + "': " + err.message());
        }
        if (!ready) break;
      }
      if (ready) {
        done.push_back(std::move(*it));
        it = deferred_.erase(it);
      } else {
        ++it;
      }
    }
    num_deferred_.store(deferred_.size(), std::memory_order_relaxed);
  }
  for (DeferredFree& f : done) {
    for (bp_event e : f.events) event_destroy(f.device, e);
    detail::guarded(
        nullptr, [&] { return api_->deallocate(api_->ctx, f.device, f.stream, f.mem, f.nbytes); });
  }
}

std::size_t Backend::deferred_frees() const {
  std::lock_guard lock(deferred_mu_);
  return deferred_.size();
}

void Backend::copy_from_host(int device, bp_stream stream, void* mem, uint64_t offset,
                             const void* host, std::size_t n) const {
  detail::ErrorBuffer err;
  detail::check_status(detail::guarded(err.get(),
                                       [&] {
                                         return api_->copy_from_host(api_->ctx, device, stream, mem,
                                                                     offset, host, n, err.get());
                                       }),
                       "copy_from_host", name_, err);
}

void Backend::copy_to_host(int device, bp_stream stream, void* host, const void* mem,
                           uint64_t offset, std::size_t n) const {
  detail::ErrorBuffer err;
  detail::check_status(detail::guarded(err.get(),
                                       [&] {
                                         return api_->copy_to_host(api_->ctx, device, stream, host,
                                                                   mem, offset, n, err.get());
                                       }),
                       "copy_to_host", name_, err);
}

void Backend::read_to_host(int device, bp_stream stream, void* host, const void* mem,
                           uint64_t offset, std::size_t n) const {
  copy_to_host(device, stream, host, mem, offset, n);
  stream_synchronize(device, stream);
}

void Backend::copy_on_device(bp_stream stream, int dst_device, void* dst, uint64_t dst_offset,
                             int src_device, const void* src, uint64_t src_offset,
                             std::size_t n) const {
  detail::ErrorBuffer err;
  detail::check_status(detail::guarded(err.get(),
                                       [&] {
                                         return api_->copy_on_device(api_->ctx, stream, dst_device,
                                                                     dst, dst_offset, src_device,
                                                                     src, src_offset, n, err.get());
                                       }),
                       "copy_on_device", name_, err);
}

void Backend::memset(int device, bp_stream stream, void* mem, uint64_t offset, int value,
                     std::size_t n) const {
  detail::ErrorBuffer err;
  detail::check_status(detail::guarded(err.get(),
                                       [&] {
                                         return api_->memset(api_->ctx, device, stream, mem, offset,
                                                             value, n, err.get());
                                       }),
                       "memset", name_, err);
}

void* Backend::host_pointer(int device, const void* mem, uint64_t offset) const {
  if (api_->host_pointer == nullptr)
    throw ValueError("[host_pointer] backend '" + name_ +
                     "' gives no host address for its memory (it is not host addressable)");
  void* p = nullptr;
  detail::ErrorBuffer err;
  detail::check_status(
      detail::guarded(
          err.get(),
          [&] { return api_->host_pointer(api_->ctx, device, mem, offset, &p, err.get()); }),
      "host_pointer", name_, err);
  if (p == nullptr) throw PluginError("[host_pointer] backend '" + name_ + "' returned no address");
  return p;
}

void* const* Backend::try_acquire_staging() const {
  if (api_->host_alloc == nullptr || api_->host_free == nullptr) return nullptr;
  std::lock_guard lock(staging_mu_);
  if (staging_busy_) return nullptr;
  for (void*& b : staging_) {
    if (b != nullptr) continue;
    detail::ErrorBuffer err;
    if (detail::guarded(
            err.get(), [&] { return api_->host_alloc(api_->ctx, kStagingChunk, &b, err.get()); }) !=
            BP_STATUS_OK ||
        !b) {
      b = nullptr;
      return nullptr;  // pageable memory instead
    }
  }
  staging_busy_ = true;
  return staging_;
}

void Backend::release_staging() const {
  std::lock_guard lock(staging_mu_);
  staging_busy_ = false;
}

bp_stream Backend::create_stream(int device) {
  BP_CHECK(device >= 0 && device < device_count_, "[stream] backend '", name_, "' has no device ",
           device);
  bp_stream s = nullptr;
  detail::ErrorBuffer err;
  detail::check_status(
      detail::guarded(err.get(),
                      [&] { return api_->stream_create(api_->ctx, device, &s, err.get()); }),
      "stream_create", name_, err);
  if (s == nullptr) throw PluginError("[stream_create] backend '" + name_ + "' returned no stream");
  std::lock_guard lock(streams_mu_);
  streams_.emplace_back(device, s);
  return s;
}

void Backend::keep_pending_error_locked(std::string message) const noexcept {
  if (pending_error_.empty()) pending_error_ = std::move(message);
  has_pending_error_.store(true, std::memory_order_release);
}

void Backend::raise_pending_error() const {
  if (!has_pending_error_.load(std::memory_order_acquire)) return;
  std::string m;
  {
    std::lock_guard lock(deferred_mu_);
    m.swap(pending_error_);
    has_pending_error_.store(false, std::memory_order_relaxed);
  }
  if (!m.empty()) throw DeviceError(m);
}

void Backend::stream_synchronize(int device, bp_stream stream) const {
  detail::ErrorBuffer err;
  detail::check_status(
      detail::guarded(
          err.get(),
          [&] { return api_->stream_synchronize(api_->ctx, device, stream, err.get()); }),
      "synchronize", name_, err);
  raise_pending_error();
}

bp_event Backend::event_create(int device) const {
  bp_event e = nullptr;
  detail::ErrorBuffer err;
  detail::check_status(
      detail::guarded(err.get(),
                      [&] { return api_->event_create(api_->ctx, device, &e, err.get()); }),
      "event_create", name_, err);
  if (e == nullptr) throw PluginError("[event_create] backend '" + name_ + "' returned no event");
  return e;
}

void Backend::event_destroy(int device, bp_event event) const noexcept {
  detail::guarded(nullptr, [&] { return api_->event_destroy(api_->ctx, device, event); });
}

void Backend::event_record(int device, bp_event event, bp_stream stream) const {
  detail::ErrorBuffer err;
  detail::check_status(
      detail::guarded(
          err.get(),
          [&] { return api_->event_record(api_->ctx, device, event, stream, err.get()); }),
      "event_record", name_, err);
}

void Backend::stream_wait_event(int device, bp_stream stream, bp_event event) const {
  detail::ErrorBuffer err;
  detail::check_status(
      detail::guarded(
          err.get(),
          [&] { return api_->stream_wait_event(api_->ctx, device, stream, event, err.get()); }),
      "stream_wait_event", name_, err);
}

bool Backend::event_query(int device, bp_event event) const {
  detail::ErrorBuffer err;
  const bp_status st = detail::guarded(
      err.get(), [&] { return api_->event_query(api_->ctx, device, event, err.get()); });
  if (st == BP_STATUS_NOT_READY) return false;
  detail::check_status(st, "event_query", name_, err);
  raise_pending_error();
  return true;
}

bool Backend::has_event_timing() const {
  return BP_HAS_FIELD(api_, bp_plugin, event_elapsed) && api_->event_elapsed != nullptr;
}

double Backend::event_elapsed_ms(int device, bp_event start, bp_event end) const {
  if (!has_event_timing())
    throw NotImplementedError("[event_elapsed] backend '" + name_ + "' does not time events");
  detail::ErrorBuffer err;
  double ms = 0;
  const bp_status st = detail::guarded(err.get(), [&] {
    return api_->event_elapsed(api_->ctx, device, start, end, &ms, err.get());
  });
  if (st == BP_STATUS_NOT_READY)
    throw Error("[event_elapsed] backend '" + name_ + "': an event's mark is not reached yet");
  detail::check_status(st, "event_elapsed", name_, err);
  if (!(ms >= 0) || !std::isfinite(ms))
    throw Error("[event_elapsed] backend '" + name_ + "' gave " + std::to_string(ms) +
                " ms between two marks: a time must be finite and not negative");
  return ms;
}

std::optional<bool> Backend::stream_query(int device, bp_stream stream) const {
  if (!BP_HAS_FIELD(api_, bp_plugin, stream_query) || api_->stream_query == nullptr)
    return std::nullopt;
  detail::ErrorBuffer err;
  const bp_status st = detail::guarded(
      err.get(), [&] { return api_->stream_query(api_->ctx, device, stream, err.get()); });
  if (st == BP_STATUS_NOT_READY) return false;
  detail::check_status(st, "stream_query", name_, err);
  raise_pending_error();
  return true;
}

void Backend::event_synchronize(int device, bp_event event) const {
  detail::ErrorBuffer err;
  detail::check_status(
      detail::guarded(err.get(),
                      [&] { return api_->event_synchronize(api_->ctx, device, event, err.get()); }),
      "synchronize", name_, err);
  raise_pending_error();
}

void Backend::synchronize(int device) const {
  detail::ErrorBuffer err;
  const bp_status st =
      detail::guarded(err.get(), [&] { return api_->synchronize(api_->ctx, device, err.get()); });
  if (num_deferred_.load(std::memory_order_relaxed) != 0) reap_deferred_frees(false);
  detail::check_status(st, "synchronize", name_, err);
  raise_pending_error();
}

}  // namespace bp
