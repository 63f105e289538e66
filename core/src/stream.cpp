// Streams, events, the calling thread's current streams, synchronize().
#include <backplane/backend.h>
#include <backplane/error.h>
#include <backplane/stream.h>

#include <utility>

#include "internal.h"

namespace bp {

namespace detail {
constinit thread_local CurrentStreams t_current_streams{};
std::atomic<bool> g_streams_guarded{false};
}  // namespace detail

namespace {

// Sets `device`'s current stream for this thread (nullptr: the default).
void set_current(Device device, bp_stream handle) {
  detail::CurrentStreams& c = detail::t_current_streams;
  for (int k = 0; k < c.count; ++k) {
    if (c.device[k] == device) {
      if (handle != nullptr) {
        c.stream[k] = handle;
      } else {
        --c.count;
        c.device[k] = c.device[c.count];
        c.stream[k] = c.stream[c.count];
      }
      return;
    }
  }
  if (handle == nullptr) return;
  detail::g_streams_guarded.store(true, std::memory_order_relaxed);
  BP_CHECK(c.count < detail::CurrentStreams::kMax, "[StreamGuard] at most ",
           detail::CurrentStreams::kMax, " devices may have a non-default current stream at once");
  c.device[c.count] = device;
  c.stream[c.count] = handle;
  ++c.count;
}

}  // namespace

Stream Stream::default_stream(Device device) {
  (void)detail::acquire_backend(device);  // a clear error for a stale device
  return Stream(device, nullptr);
}

Stream Stream::create(Device device) {
  IntrusivePtr<Backend> b = detail::acquire_backend(device);
  return Stream(device, b->create_stream(device.index));
}

void Stream::synchronize() const {
  detail::acquire_backend(device_)->stream_synchronize(device_.index, handle_);
}

bool Stream::query() const {
  if (const std::optional<bool> idle =
          detail::acquire_backend(device_)->stream_query(device_.index, handle()))
    return *idle;
  // A plugin without stream_query (ABI 2.0): a mark recorded now is reached
  // once the work before it is done.
  Event e(device_);
  e.record(*this);
  return e.query();
}

Stream current_stream(Device device) {
  (void)detail::acquire_backend(device);
  return Stream(device, detail::current_stream_of(device));
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(current_stream(stream.device())) {
  set_current(stream.device(), stream.handle());
}

StreamGuard::~StreamGuard() { set_current(previous_.device(), previous_.handle()); }

Event::Event(Device device)
    : backend_(detail::acquire_backend(device)),
      device_(device),
      event_(backend_->event_create(device.index)) {}

Event::~Event() {
  if (event_) backend_->event_destroy(device_.index, event_);
}

Event::Event(Event&& o) noexcept
    : backend_(std::move(o.backend_)),
      device_(o.device_),
      event_(std::exchange(o.event_, nullptr)) {}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (event_) backend_->event_destroy(device_.index, event_);
    backend_ = std::move(o.backend_);
    device_ = o.device_;
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}

void Event::record(const Stream& stream) {
  BP_CHECK(stream.device() == device_, "[Event] an event of ", device_, " cannot mark a stream of ",
           stream.device());
  backend_->event_record(device_.index, event_, stream.handle());
}

void Event::record() { record(current_stream(device_)); }

void Event::block(const Stream& stream) const {
  BP_CHECK(stream.device().backend == device_.backend, "[Event] a stream of ", stream.device(),
           " cannot wait for an event of ", device_, " (another backend)");
  backend_->stream_wait_event(stream.device().index, stream.handle(), event_);
}

bool Event::query() const { return backend_->event_query(device_.index, event_); }

void Event::synchronize() const { backend_->event_synchronize(device_.index, event_); }

std::optional<double> Event::elapsed_since(const Event& start) const {
  BP_CHECK(start.device_ == device_, "[Event::elapsed_since] the events are of devices ",
           start.device_, " and ", device_);
  if (!backend_->has_event_timing()) return std::nullopt;
  start.synchronize();
  synchronize();
  return backend_->event_elapsed_ms(device_.index, start.event_, event_) / 1e3;
}

void synchronize(Device device) { detail::acquire_backend(device)->synchronize(device.index); }

void synchronize() { synchronize(default_device()); }

std::optional<bp_memory_stats> memory_stats(Device device) {
  return detail::acquire_backend(device)->memory_stats(device.index);
}

bool empty_cache(Device device) {
  return detail::acquire_backend(device)->empty_cache(device.index);
}

}  // namespace bp
