// Events: a cudaEvent_t (with timing, for event_elapsed: ABI 2.4) plus a page-locked copy of the
// error record of the stream it marks, taken in stream order just before the
// mark. Once the event has completed the copy is final, so event_query and
// event_synchronize report a failure of the work before the mark without
// waiting for anything after it.
#include <optional>
#include <vector>

#include "cuda_backend.h"

namespace bp::cuda {

namespace {

struct Event {
  int device = 0;
  cudaEvent_t handle = nullptr;
  ErrorRecord* snapshot = nullptr;  // page-locked; written by the stream before the mark
  std::mutex mu;                    // guards what follows
  bool recorded = false;
  std::weak_ptr<Stream> stream;  // where it was last recorded
};

Event& event_of(int device, bp_event event) {
  BP_SDK_REQUIRE(event != nullptr, "no event given");
  Event& e = *reinterpret_cast<Event*>(event);
  BP_SDK_REQUIRE(e.device == device,
                 "an event of device " << e.device << " was given for device " << device);
  return e;
}

// Events destroyed while their mark was pending: the copy into their snapshot
// may still run, so the page-locked memory is reused only once it has.
struct Graveyard {
  std::mutex mu;
  std::vector<Event*> events;
};

Graveyard& graveyard() {
  static Graveyard* g = new Graveyard();  // never destroyed
  return *g;
}

void free_event(Event* e) {
  (void)cudaEventDestroy(e->handle);
  give_host_record(e->snapshot);
  delete e;
}

// Frees the buried events whose marks have been reached.
void reap_graveyard() {
  Graveyard& g = graveyard();
  std::vector<Event*> done;
  {
    std::lock_guard lock(g.mu);
    if (g.events.empty()) return;
    for (auto it = g.events.begin(); it != g.events.end();) {
      if (cudaEventQuery((*it)->handle) == cudaErrorNotReady) {
        ++it;
      } else {
        done.push_back(*it);
        it = g.events.erase(it);
      }
    }
  }
  forget_not_ready();
  for (Event* e : done) free_event(e);
}

// Throws DeviceError when the snapshot of a completed event shows a failure
// its stream has not reported yet.
void report(Event& e) {
  ErrorRecord snapshot{};
  std::shared_ptr<Stream> s;
  {
    std::lock_guard lock(e.mu);
    if (!e.recorded) return;
    s = e.stream.lock();
    snapshot = *e.snapshot;
  }
  // A destroyed stream was synchronised first, which reported its failures.
  if (s == nullptr) return;
  const std::string failure = take_failure(*s, snapshot);
  if (!failure.empty()) throw bp::sdk::DeviceError(failure);
}

}  // namespace

void forget_not_ready() {
  if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
}

bp_event create_event(int device) {
  check_device(device);
  set_device(device);
  reap_graveyard();
  auto e = std::make_unique<Event>();
  e->device = device;
  e->snapshot = take_host_record();
  const cudaError_t err = cudaEventCreateWithFlags(&e->handle, cudaEventDefault);
  if (err != cudaSuccess) {
    give_host_record(e->snapshot);
    throw_cuda_error("cudaEventCreateWithFlags(&e->handle, cudaEventDefault)", err);
  }
  return reinterpret_cast<bp_event>(e.release());
}

void destroy_event(int device, bp_event event) {
  Event* e = &event_of(device, event);
  bool pending = false;
  {
    std::lock_guard lock(e->mu);
    pending = e->recorded && cudaEventQuery(e->handle) == cudaErrorNotReady;
  }
  forget_not_ready();
  if (!pending) {
    free_event(e);
    return;
  }
  Graveyard& g = graveyard();
  std::lock_guard lock(g.mu);
  g.events.push_back(e);
}

void record_event(int device, bp_event event, bp_stream stream) {
  Event& e = event_of(device, event);
  Stream& s = resolve(device, stream);
  set_device(device);
  std::shared_ptr<Stream> owner = s.shared_from_this();
  std::lock_guard lock(e.mu);
  // Recorded again on another stream before the old mark was reached: that
  // stream's copy into the snapshot may still be pending. Ordering this
  // stream after the old mark keeps the two copies in order.
  std::shared_ptr<Stream> previous = e.stream.lock();
  if (e.recorded && previous != nullptr && previous != owner)
    BP_CUDA_CHECK(cudaStreamWaitEvent(s.handle, e.handle, 0));
  snapshot_record(s, e.snapshot);
  BP_CUDA_CHECK(cudaEventRecord(e.handle, s.handle));
  e.stream = owner;
  e.recorded = true;
}

void wait_event(int device, bp_stream stream, bp_event event) {
  BP_SDK_REQUIRE(event != nullptr, "no event given");
  // The event may belong to another device of this backend: CUDA orders
  // streams across devices with it.
  const Event& e = *reinterpret_cast<const Event*>(event);
  Stream& s = resolve(device, stream);
  set_device(device);
  BP_CUDA_CHECK(cudaStreamWaitEvent(s.handle, e.handle, 0));
}

bool query_event(int device, bp_event event) {
  Event& e = event_of(device, event);
  const cudaError_t q = cudaEventQuery(e.handle);
  if (q == cudaErrorNotReady) {
    forget_not_ready();
    return false;
  }
  BP_CUDA_SYNC_CHECK(q);
  report(e);
  return true;
}

std::optional<double> elapsed_event(int device, bp_event start, bp_event end) {
  Event& a = event_of(device, start);
  Event& b = event_of(device, end);
  set_device(device);
  float ms = 0;
  const cudaError_t err = cudaEventElapsedTime(&ms, a.handle, b.handle);
  if (err == cudaErrorNotReady) {
    forget_not_ready();
    return std::nullopt;
  }
  BP_CUDA_CHECK(err);
  return static_cast<double>(ms);
}

void synchronize_event(int device, bp_event event) {
  Event& e = event_of(device, event);
  BP_CUDA_SYNC_CHECK(cudaEventSynchronize(e.handle));
  report(e);
}

}  // namespace bp::cuda
