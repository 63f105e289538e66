// The asyncref backend: a small asynchronous device, built out of tree like
// hostref. What makes it one:
//   - memory the host cannot address: handles are the block's address with
//     the top bit flipped (a non-canonical address: the core faults if it
//     ever dereferences one); host_addressable = 0;
//   - a worker thread per stream (bp::sdk::StreamWorker): kernels, copies,
//     memsets and frees run on it, after the call that enqueued them;
//   - events: a worker's position, waited for by another worker or the host.
// Its kernels are hostref's host loops (the core profile's families), each
// deferred onto its stream's worker by bp::sdk::DeferringRegistrar.
#include <backplane/sdk/deferred.hpp>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "../hostref/hostref.h"

namespace asyncref {

using bp::sdk::StreamWorker;
using bp::sdk::WorkerMark;
using Worker = std::shared_ptr<StreamWorker>;

constexpr uintptr_t kFlip = uintptr_t{1} << 63;
void* handle_of(void* p) { return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) ^ kFlip); }
char* address_of(const void* h) {
  return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(h) ^ kFlip);
}

struct Stream {
  Worker worker = std::make_shared<StreamWorker>();
};
struct Event {
  std::mutex mu;
  WorkerMark mark;
};

class AsyncrefPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "asyncref"; }
  int32_t dl_device_type() const override { return 12; /* kDLExtDev */ }
  void device_props(int32_t device, bp_device_props& props) const override {
    BP_SDK_CHECK(device == 0, "device_props", "asyncref has one device (0), got " << device);
    std::snprintf(props.name, sizeof(props.name), "%s",
                  "worker thread per stream, memory the host cannot address");
    props.host_addressable = 0;
  }

  void register_kernels(bp::sdk::Registrar& core) override {
    bp::sdk::Registrar r = deferring_.wrap(core);
    hostref::register_copy_kernels(r);
    hostref::register_binary_kernels(r);
    hostref::register_compare_kernels(r);
    hostref::register_unary_kernels(r);
    hostref::register_reduce_kernels(r);
  }

  // --- memory: every access on the stream's worker ---------------------------
  void* allocate(int32_t device, bp_stream stream, std::size_t nbytes,
                 std::size_t alignment) override {
    return handle_of(Plugin::allocate(device, stream, nbytes, alignment));
  }
  void deallocate(int32_t, bp_stream stream, void* mem, std::size_t) override {
    worker(stream)->push([p = address_of(mem)] { std::free(p); });  // after the work before it
  }
  void copy_from_host(int32_t, bp_stream stream, void* mem, uint64_t offset, const void* host,
                      std::size_t n) override {
    // The caller's buffer is its own again when this returns: keep a copy.
    auto bytes = std::make_shared<std::vector<char>>(static_cast<const char*>(host),
                                                     static_cast<const char*>(host) + n);
    worker(stream)->push([dst = address_of(mem) + offset, bytes] {
      std::memcpy(dst, bytes->data(), bytes->size());
    });
  }
  void copy_to_host(int32_t, bp_stream stream, void* host, const void* mem, uint64_t offset,
                    std::size_t n) override {
    worker(stream)->push([host, src = address_of(mem) + offset, n] { std::memcpy(host, src, n); });
  }
  void copy_on_device(bp_stream stream, int32_t, void* dst, uint64_t dst_offset, int32_t,
                      const void* src, uint64_t src_offset, std::size_t n) override {
    worker(stream)->push([to = address_of(dst) + dst_offset, from = address_of(src) + src_offset,
                          n] { std::memmove(to, from, n); });
  }
  void memset(int32_t, bp_stream stream, void* mem, uint64_t offset, int32_t value,
              std::size_t n) override {
    worker(stream)->push(
        [dst = address_of(mem) + offset, value, n] { std::memset(dst, value, n); });
  }
  void* host_pointer(int32_t, const void*, uint64_t) override {
    throw bp::sdk::Unsupported("[host_pointer] asyncref memory is not host addressable");
  }

  // --- streams and events --------------------------------------------------------
  bp_stream stream_create(int32_t) override {
    auto* s = new Stream;
    std::lock_guard lock(mu_);
    streams_.push_back(s);
    return reinterpret_cast<bp_stream>(s);
  }
  void stream_destroy(int32_t, bp_stream stream) override {
    auto* s = reinterpret_cast<Stream*>(stream);
    {
      std::lock_guard lock(mu_);
      std::erase(streams_, s);
    }
    delete s;  // its worker finishes first (or when the last mark on it goes)
  }
  void stream_synchronize(int32_t, bp_stream stream) override {
    const Worker w = worker(stream);
    w->drain();
    w->report();
  }
  bool stream_query(int32_t, bp_stream stream) override {
    const Worker w = worker(stream);
    if (!w->reached(w->enqueued())) return false;
    w->report();
    return true;
  }
  bp_event event_create(int32_t) override { return reinterpret_cast<bp_event>(new Event); }
  void event_destroy(int32_t, bp_event event) override { delete reinterpret_cast<Event*>(event); }
  void event_record(int32_t, bp_event event, bp_stream stream) override {
    auto* e = reinterpret_cast<Event*>(event);
    Worker w = worker(stream);
    const uint64_t position = w->enqueued();
    std::lock_guard lock(e->mu);
    e->mark = WorkerMark{std::move(w), position};
  }
  void stream_wait_event(int32_t, bp_stream stream, bp_event event) override {
    const WorkerMark m = mark_of(event);
    if (m.worker) worker(stream)->push([m] { m.wait(); });
  }
  bool event_query(int32_t, bp_event event) override {
    const WorkerMark m = mark_of(event);
    if (!m.reached()) return false;
    if (m.worker) m.worker->report();
    return true;
  }
  void event_synchronize(int32_t, bp_event event) override {
    const WorkerMark m = mark_of(event);
    m.wait();
    if (m.worker) m.worker->report();
  }
  void synchronize(int32_t) override {
    std::vector<Worker> all{default_};
    {
      std::lock_guard lock(mu_);
      for (Stream* s : streams_) all.push_back(s->worker);
    }
    for (const Worker& w : all) w->drain();
    for (const Worker& w : all) w->report();
  }

 private:
  Worker worker(bp_stream s) const { return s ? reinterpret_cast<Stream*>(s)->worker : default_; }
  static WorkerMark mark_of(bp_event event) {
    auto* e = reinterpret_cast<Event*>(event);
    std::lock_guard lock(e->mu);
    return e->mark;
  }

  Worker default_ = std::make_shared<StreamWorker>();
  std::mutex mu_;
  std::vector<Stream*> streams_;
  bp::sdk::DeferringRegistrar deferring_{
      bp::sdk::DeferTarget{[this](int32_t, bp_stream s) { return worker(s); },
                           [](void* handle) -> void* { return address_of(handle); }}};
};

}  // namespace asyncref

BP_SDK_PLUGIN(asyncref::AsyncrefPlugin)
