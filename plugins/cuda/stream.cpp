// Streams: the calling thread's current device, each device's default
// stream (the NULL bp_stream), the streams the core creates, and the
// synchronisations that report what kernels found wrong on the device.
//
// Every stream is a non-blocking cudaStream_t (no implicit ordering with the
// legacy default stream, which other libraries in the process may use) with
// an ErrorRecord of its own in device memory. Kernels write failures there
// and never wait; stream_synchronize, event_query / event_synchronize and
// synchronize(device) read the record from a copy enqueued just before the
// wait, report a failure once (DeviceError) and clear it.
#include <array>
#include <vector>

#include "cuda_backend.h"

namespace bp::cuda {

namespace {

std::atomic<uint64_t> g_next_stream_id{1};

// Every live stream, per device, the default ones included. Never destroyed:
// the core may free tensors and streams from static destructors.
struct Registry {
  std::mutex mu;
  std::array<std::atomic<Stream*>, kMaxDevices> defaults{};
  std::array<std::vector<std::shared_ptr<Stream>>, kMaxDevices> live;
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

std::array<std::atomic<int>, kMaxDevices> g_sm_counts{};

// The runtime keeps a current device per thread; cudaSetDevice on every
// call would cost a driver round trip per kernel.
thread_local int t_device = -1;

void check_index(int device) {
  BP_SDK_REQUIRE(device >= 0 && device < kMaxDevices,
                 "device index " << device << " is outside [0, " << kMaxDevices << ")");
}

// A new stream on `device` with an empty error record.
std::shared_ptr<Stream> make_stream(int device) {
  set_device(device);
  auto s = std::make_shared<Stream>();
  s->device = device;
  s->id = g_next_stream_id.fetch_add(1, std::memory_order_relaxed);
  BP_CUDA_CHECK(cudaStreamCreateWithFlags(&s->handle, cudaStreamNonBlocking));
  try {
    s->errors = take_device_record(device);
    // Ordered before any kernel of the stream; the record may come from a
    // destroyed stream, whose work was done.
    reset_record(*s, 0);
  } catch (...) {
    (void)cudaStreamDestroy(s->handle);
    throw;
  }
  return s;
}

}  // namespace

Stream::~Stream() {
  // The last reference goes after stream_destroy (or never, for a default
  // stream): the stream's work, the copies of its record included, is done.
  if (errors != nullptr) give_device_record(device, errors);
}

void set_device(int device) {
  if (t_device == device) return;
  check_index(device);
  BP_CUDA_CHECK(cudaSetDevice(device));
  t_device = device;
}

Stream& default_stream(int device) {
  check_index(device);
  Registry& r = registry();
  Stream* s = r.defaults[device].load(std::memory_order_acquire);
  if (s != nullptr) return *s;
  check_device(device);
  std::lock_guard lock(r.mu);
  s = r.defaults[device].load(std::memory_order_relaxed);
  if (s == nullptr) {
    std::shared_ptr<Stream> made = make_stream(device);
    r.live[device].push_back(made);
    s = made.get();
    r.defaults[device].store(s, std::memory_order_release);
  }
  return *s;
}

Stream& resolve(int device, bp_stream stream) {
  if (stream == nullptr) return default_stream(device);
  Stream& s = *reinterpret_cast<Stream*>(stream);
  BP_SDK_REQUIRE(s.device == device,
                 "a stream of device " << s.device << " was given for work on device " << device);
  return s;
}

Stream& prepare(const KernelCall& c) {
  Stream& s = resolve(c.device(), c.stream());
  set_device(s.device);
  return s;
}

int sm_count(int device) {
  check_index(device);
  int n = g_sm_counts[device].load(std::memory_order_relaxed);
  if (n > 0) return n;
  BP_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  g_sm_counts[device].store(n, std::memory_order_relaxed);
  return n;
}

bp_stream create_stream(int device) {
  check_device(device);
  std::shared_ptr<Stream> s = make_stream(device);
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.live[device].push_back(s);
  return reinterpret_cast<bp_stream>(s.get());
}

void destroy_stream(int device, bp_stream stream) {
  if (stream == nullptr) return;  // the default stream lives as long as the process
  check_index(device);
  Registry& r = registry();
  std::shared_ptr<Stream> s;
  {
    std::lock_guard lock(r.mu);
    auto& live = r.live[device];
    for (auto it = live.begin(); it != live.end(); ++it) {
      if (it->get() == reinterpret_cast<Stream*>(stream)) {
        s = std::move(*it);
        live.erase(it);
        break;
      }
    }
  }
  BP_SDK_REQUIRE(s != nullptr, "stream " << static_cast<const void*>(stream)
                                         << " is not a live stream of device " << device);
  set_device(device);
  // The core synchronises before destroying a stream, so this returns at
  // once; it makes sure nothing still writes to the stream's record or
  // blocks when they are reused. Failures were reported by that sync.
  (void)cudaStreamSynchronize(s->handle);
  forget_stream(device, s->id);
  if (void* blas = s->blas.exchange(nullptr)) recycle_blas_handle(device, blas);
  std::lock_guard lock(s->mu);
  s->alive = false;  // events that still point here report nothing more
  BP_CUDA_CHECK(cudaStreamDestroy(s->handle));
}

void synchronize_stream(int device, bp_stream stream) {
  Stream& s = resolve(device, stream);
  set_device(device);
  HostRecord snapshot;
  // Enqueued before the wait, so it sees every kernel the wait covers and
  // nothing half written; the wait makes it visible to the host.
  snapshot_record(s, snapshot.get());
  BP_CUDA_SYNC_CHECK(cudaStreamSynchronize(s.handle));
  const std::string failure = take_failure(s, *snapshot.get());
  if (!failure.empty()) throw bp::sdk::DeviceError(failure);
}

bool query_stream(int device, bp_stream stream) {
  Stream& s = resolve(device, stream);
  set_device(device);
  const cudaError_t q = cudaStreamQuery(s.handle);
  if (q == cudaErrorNotReady) {
    forget_not_ready();
    return false;
  }
  BP_CUDA_SYNC_CHECK(q);
  // Idle: the wait below only reads the stream's error record back.
  synchronize_stream(device, stream);
  return true;
}

void synchronize_device(int device) {
  check_device(device);
  set_device(device);
  std::vector<std::shared_ptr<Stream>> streams;
  std::vector<HostRecord> snapshots;
  {
    // Under the registry's lock, so that no stream is destroyed between
    // being listed and having its copy enqueued.
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    streams = r.live[device];
    snapshots.reserve(streams.size());
    for (const auto& s : streams) {
      snapshots.emplace_back();
      snapshot_record(*s, snapshots.back().get());
    }
  }
  BP_CUDA_SYNC_CHECK(cudaDeviceSynchronize());
  std::string failures;
  for (std::size_t k = 0; k < streams.size(); ++k) {
    const std::string f = take_failure(*streams[k], *snapshots[k].get());
    if (f.empty()) continue;
    if (!failures.empty()) failures += "; ";
    failures += f;
  }
  if (!failures.empty()) throw bp::sdk::DeviceError(failures);
}

}  // namespace bp::cuda
