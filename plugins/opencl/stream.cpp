// Streams are in-order command queues; events are markers (cl_event)
// enqueued on them. Each stream owns an error record in device memory that
// its kernels write when they find a bad value (kernels/common.cl,
// record_error); the host reads it only at synchronisation points: after
// clFinish for a stream or the device, and from a snapshot enqueued with an
// event for an event. A report clears the record by writing a new
// generation (enqueued, not waited for), so a snapshot taken before the
// clear is not reported twice. Events may be recorded, queried and waited
// on from several threads at once, and may outlive the stream they were
// recorded on.
#include <algorithm>

#include "opencl_backend.h"

namespace bp::opencl {

namespace {

struct Event {
  std::mutex mu;  // guards everything below
  int device = 0;
  Stream* stream = nullptr;   // where it was last recorded
  uint64_t stream_id = 0;     // that stream's id (its address may be reused)
  cl_event marker = nullptr;  // the last record's marker
  cl_mem snapshot = nullptr;  // the stream's error record as of the marker
};

// What one query works on, taken under the event's lock with references of
// its own, so a concurrent record or destroy cannot release it meanwhile.
struct Taken {
  int device = 0;
  Stream* stream = nullptr;
  uint64_t stream_id = 0;
  cl_event marker = nullptr;
  cl_mem snapshot = nullptr;
  Taken() = default;
  Taken(const Taken&) = delete;
  Taken& operator=(const Taken&) = delete;
  ~Taken() {
    if (marker != nullptr) clReleaseEvent(marker);
    if (snapshot != nullptr) clReleaseMemObject(snapshot);
  }
};

std::atomic<uint64_t> g_next_stream_id{1};

std::string describe_record(const cl_int* r) {
  std::ostringstream os;
  os << "[" << bp::sdk::op_name(r[1]) << "] ";
  const int64_t value = (static_cast<int64_t>(r[3]) << 32) | static_cast<uint32_t>(r[2]);
  const int64_t limit = (static_cast<int64_t>(r[5]) << 32) | static_cast<uint32_t>(r[4]);
  if (r[0] == kErrIndexOutOfRange)
    os << "index " << value << " is out of range for dimension " << r[6] << " of size " << limit;
  else if (r[0] == kErrNegativeExponent)
    os << "integers to negative integer powers are not allowed: exponent " << value;
  else
    os << "a kernel reported failure " << r[0];
  os << " (found on the device)";
  return os.str();
}

cl_mem make_record(const Device& d) {
  cl_int err = CL_SUCCESS;
  cl_mem m =
      clCreateBuffer(d.context, CL_MEM_READ_WRITE, sizeof(cl_int) * kRecordInts, nullptr, &err);
  BP_CL_CHECK(err);
  return m;
}

// Enqueues a write of an empty record with `generation` (the pattern is
// copied when the call returns: nothing waits).
void enqueue_clear(Stream& s, int32_t generation) {
  cl_int clear[kRecordInts] = {};
  clear[7] = generation;
  BP_CL_CHECK(clEnqueueFillBuffer(s.queue, s.errors, clear, sizeof clear, 0, sizeof clear, 0,
                                  nullptr, nullptr));
  ++s.submitted;
}

std::unique_ptr<Stream> new_stream(int32_t index) {
  const Device& d = device(index);
  auto s = std::make_unique<Stream>();
  s->device = index;
  s->id = g_next_stream_id++;
  cl_int err = CL_SUCCESS;
  // Profiling on: an event's marker carries the device's timestamps
  // (event_elapsed, ABI 2.4).
  s->queue = clCreateCommandQueue(d.context, d.id, CL_QUEUE_PROFILING_ENABLE, &err);
  BP_CL_CHECK(err);
  s->errors = make_record(d);
  enqueue_clear(*s, 0);
  return s;
}

// Reports (throws) the failure in `record` unless it was reported already;
// enqueues the clear first.
void report(Stream& s, const cl_int* record) {
  if (record[0] == 0) return;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (record[7] != s.epoch) return;
    ++s.epoch;
    enqueue_clear(s, s.epoch);
  }
  throw bp::sdk::DeviceError(describe_record(record));
}

void check_record(Stream& s) {
  cl_int record[kRecordInts] = {};
  BP_CL_CHECK(clEnqueueReadBuffer(s.queue, s.errors, CL_TRUE, 0, sizeof record, record, 0, nullptr,
                                  nullptr));
  report(s, record);
}

std::mutex& default_mutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<std::unique_ptr<Stream>>& default_streams() {
  static auto* v = new std::vector<std::unique_ptr<Stream>>();
  return *v;
}

Stream& default_stream(int32_t index) {
  std::lock_guard<std::mutex> lock(default_mutex());
  auto& streams = default_streams();
  if (streams.empty()) streams.resize(devices().size());
  device(index);  // checks the index
  auto& s = streams[static_cast<std::size_t>(index)];
  if (!s) s = new_stream(index);
  return *s;
}

// Every stream made by stream_create and not destroyed yet.
std::mutex& live_mutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<Stream*>& live_streams() {
  static auto* v = new std::vector<Stream*>;
  return *v;
}

// The stream `id` names, when it is still alive (holds live_mutex()).
Stream* find_alive(int32_t index, Stream* s, uint64_t id) {
  if (s == &default_stream(index)) return s;
  const auto& v = live_streams();
  return std::find(v.begin(), v.end(), s) != v.end() && s->id == id ? s : nullptr;
}

// A queue of its own per device for reading event snapshots: a read on the
// stream's queue would wait for work enqueued after the event.
cl_command_queue reader_queue(int32_t index) {
  static std::mutex mu;
  static auto* queues = new std::vector<cl_command_queue>();
  std::lock_guard<std::mutex> lock(mu);
  if (queues->empty()) queues->resize(devices().size(), nullptr);
  const Device& d = device(index);
  cl_command_queue& q = (*queues)[static_cast<std::size_t>(index)];
  if (q == nullptr) {
    cl_int err = CL_SUCCESS;
    q = clCreateCommandQueue(d.context, d.id, 0, &err);
    BP_CL_CHECK(err);
  }
  return q;
}

Event& as_event(bp_event e) { return *reinterpret_cast<Event*>(e); }

void take(bp_event event, Taken& t) {
  Event& e = as_event(event);
  std::lock_guard<std::mutex> lock(e.mu);
  t.device = e.device;
  t.stream = e.stream;
  t.stream_id = e.stream_id;
  if (e.marker != nullptr) {
    clRetainEvent(e.marker);
    t.marker = e.marker;
  }
  if (e.snapshot != nullptr) {
    clRetainMemObject(e.snapshot);
    t.snapshot = e.snapshot;
  }
}

// Reports a failure the snapshot holds, against its stream if that is still
// alive (a failure of a destroyed stream's work goes with it).
void check_snapshot(const Taken& t) {
  cl_int record[kRecordInts] = {};
  BP_CL_CHECK(clEnqueueReadBuffer(reader_queue(t.device), t.snapshot, CL_TRUE, 0, sizeof record,
                                  record, 0, nullptr, nullptr));
  if (record[0] == 0) return;
  std::lock_guard<std::mutex> lock(live_mutex());
  if (Stream* s = find_alive(t.device, t.stream, t.stream_id)) report(*s, record);
}

}  // namespace

Stream::~Stream() {
  if (queue != nullptr) {
    clFinish(queue);
    clReleaseCommandQueue(queue);
  }
  if (errors != nullptr) clReleaseMemObject(errors);
}

Stream& resolve(int32_t index, bp_stream stream) {
  if (stream == nullptr) return default_stream(index);
  return *reinterpret_cast<Stream*>(stream);
}

bool stream_alive(int32_t index, bp_stream stream) {
  if (stream == nullptr) return true;
  std::lock_guard<std::mutex> lock(live_mutex());
  const auto& v = live_streams();
  (void)index;
  return std::find(v.begin(), v.end(), reinterpret_cast<Stream*>(stream)) != v.end();
}

bp_stream create_stream(int32_t index) {
  Stream* s = new_stream(index).release();
  std::lock_guard<std::mutex> lock(live_mutex());
  live_streams().push_back(s);
  return reinterpret_cast<bp_stream>(s);
}

void destroy_stream(int32_t index, bp_stream stream) {
  if (stream == nullptr) return;
  Stream* s = reinterpret_cast<Stream*>(stream);
  {
    std::lock_guard<std::mutex> lock(live_mutex());
    auto& v = live_streams();
    v.erase(std::remove(v.begin(), v.end(), s), v.end());
  }
  // Its cached blocks go first: OpenCL keeps a released buffer until the
  // queue's commands that use it are done.
  release_stream_blocks(index, stream);
  delete s;  // finishes the queue's work
}

void synchronize_stream(Stream& s) {
  const uint64_t upto = s.submitted.load();
  BP_CL_CHECK(clFinish(s.queue));
  s.synced = upto;
  check_record(s);
}

bool query_stream(Stream& s) {
  const uint64_t upto = s.submitted.load();
  if (s.synced.load() == upto) return true;
  // An in-order queue is idle once a marker enqueued now is complete.
  cl_event marker = nullptr;
  BP_CL_CHECK(clEnqueueMarkerWithWaitList(s.queue, 0, nullptr, &marker));
  clFlush(s.queue);
  cl_int status = CL_QUEUED;
  const cl_int err =
      clGetEventInfo(marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
  clReleaseEvent(marker);
  BP_CL_CHECK(err);
  if (status != CL_COMPLETE) return false;
  check_record(s);
  s.synced = upto;
  return true;
}

void synchronize_device(int32_t index) {
  // Every stream of the device is finished before a failure is thrown; the
  // lock keeps them from being destroyed meanwhile.
  std::lock_guard<std::mutex> lock(live_mutex());
  std::vector<Stream*> streams{&default_stream(index)};
  for (Stream* s : live_streams())
    if (s->device == index) streams.push_back(s);
  std::exception_ptr first;
  for (Stream* s : streams) {
    try {
      synchronize_stream(*s);
    } catch (const bp::sdk::DeviceError&) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

bp_event create_event(int32_t index) {
  device(index);
  auto* e = new Event;
  e->device = index;
  return reinterpret_cast<bp_event>(e);
}

void destroy_event(bp_event event) {
  if (event == nullptr) return;
  Event* e = &as_event(event);
  if (e->marker != nullptr) clReleaseEvent(e->marker);
  if (e->snapshot != nullptr) clReleaseMemObject(e->snapshot);
  delete e;
}

void record_event(int32_t index, bp_event event, bp_stream stream) {
  Event& e = as_event(event);
  Stream& s = resolve(index, stream);
  std::lock_guard<std::mutex> lock(e.mu);
  // Copies into one snapshot on two queues would be unordered: a record on
  // another stream gets a buffer of its own.
  if (e.snapshot == nullptr || e.stream != &s || e.stream_id != s.id) {
    cl_mem fresh = make_record(device(index));
    if (e.snapshot != nullptr) clReleaseMemObject(e.snapshot);
    e.snapshot = fresh;
  }
  BP_CL_CHECK(clEnqueueCopyBuffer(s.queue, s.errors, e.snapshot, 0, 0, sizeof(cl_int) * kRecordInts,
                                  0, nullptr, nullptr));
  cl_event marker = nullptr;
  BP_CL_CHECK(clEnqueueMarkerWithWaitList(s.queue, 0, nullptr, &marker));
  s.submitted += 2;
  clFlush(s.queue);
  if (e.marker != nullptr) clReleaseEvent(e.marker);
  e.marker = marker;
  e.stream = &s;
  e.stream_id = s.id;
  e.device = index;
}

void wait_event(int32_t index, bp_stream stream, bp_event event) {
  Taken t;
  take(event, t);
  if (t.marker == nullptr) return;
  if (t.device != index) {
    // Devices have contexts of their own, and a queue cannot wait for an
    // event of another context: the host waits for it.
    BP_CL_CHECK(clWaitForEvents(1, &t.marker));
    return;
  }
  Stream& s = resolve(index, stream);
  BP_CL_CHECK(clEnqueueBarrierWithWaitList(s.queue, 1, &t.marker, nullptr));
  ++s.submitted;
}

bool query_event(bp_event event) {
  Taken t;
  take(event, t);
  if (t.marker == nullptr) return true;
  cl_int status = CL_QUEUED;
  BP_CL_CHECK(
      clGetEventInfo(t.marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr));
  if (status < 0) throw_cl_error("the event's work", status);
  if (status != CL_COMPLETE) return false;
  check_snapshot(t);
  return true;
}

std::optional<double> elapsed_events(bp_event start, bp_event end) {
  Taken a, b;
  take(start, a);
  take(end, b);
  if (a.marker == nullptr || b.marker == nullptr)
    throw bp::sdk::InvalidArgument("[event_elapsed] an event that was never recorded");
  cl_ulong t[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    cl_event m = k == 0 ? a.marker : b.marker;
    cl_int status = CL_QUEUED;
    BP_CL_CHECK(
        clGetEventInfo(m, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr));
    if (status < 0) throw_cl_error("the event's work", status);
    if (status != CL_COMPLETE) return std::nullopt;
    BP_CL_CHECK(clGetEventProfilingInfo(m, CL_PROFILING_COMMAND_END, sizeof t[k], &t[k], nullptr));
  }
  return (static_cast<double>(t[1]) - static_cast<double>(t[0])) / 1e6;
}

void synchronize_event(bp_event event) {
  Taken t;
  take(event, t);
  if (t.marker == nullptr) return;
  BP_CL_CHECK(clWaitForEvents(1, &t.marker));
  check_snapshot(t);
}

}  // namespace bp::opencl
