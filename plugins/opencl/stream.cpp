// Streams are in-order command queues; events are markers (cl_event)
// enqueued on them. Each stream owns an error record in device memory that
// its kernels write when they find a bad value (kernels/common.cl,
// record_error); the host reads it only at synchronisation points: after
// clFinish for a stream or the device, and from a snapshot enqueued with an
// event for an event. A report clears the record by writing a new
// generation, so a snapshot taken before the clear is not reported twice.
#include <algorithm>

#include "opencl_backend.h"

namespace bp::opencl {

namespace {

struct Event {
  int device = 0;
  Stream* stream = nullptr;       // where it was last recorded
  cl_event marker = nullptr;      // the last record's marker
  cl_mem snapshot = nullptr;      // the stream's error record as of the marker
};

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

cl_mem make_record(const Device& d, cl_command_queue q, int32_t generation) {
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(d.context, CL_MEM_READ_WRITE, sizeof(cl_int) * kRecordInts, nullptr,
                            &err);
  BP_CL_CHECK(err);
  cl_int init[kRecordInts] = {};
  init[7] = generation;
  BP_CL_CHECK(clEnqueueWriteBuffer(q, m, CL_TRUE, 0, sizeof init, init, 0, nullptr, nullptr));
  return m;
}

std::unique_ptr<Stream> new_stream(int32_t index) {
  const Device& d = device(index);
  auto s = std::make_unique<Stream>();
  s->device = index;
  cl_int err = CL_SUCCESS;
  s->queue = clCreateCommandQueue(d.context, d.id, 0, &err);
  BP_CL_CHECK(err);
  s->errors = make_record(d, s->queue, 0);
  return s;
}

// Reports (throws) the failure in `record` unless it was reported already;
// clears the stream's record first.
void report(Stream& s, const cl_int* record) {
  if (record[0] == 0) return;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (record[7] != s.epoch) return;
    ++s.epoch;
    cl_int clear[kRecordInts] = {};
    clear[7] = s.epoch;
    BP_CL_CHECK(clEnqueueWriteBuffer(s.queue, s.errors, CL_TRUE, 0, sizeof clear, clear, 0,
                                     nullptr, nullptr));
  }
  throw bp::sdk::DeviceError(describe_record(record));
}

void check_record(Stream& s) {
  cl_int record[kRecordInts] = {};
  BP_CL_CHECK(clEnqueueReadBuffer(s.queue, s.errors, CL_TRUE, 0, sizeof record, record, 0, nullptr,
                                  nullptr));
  report(s, record);
}

Stream& default_stream(int32_t index) {
  static std::mutex mu;
  static auto* streams = new std::vector<std::unique_ptr<Stream>>();
  std::lock_guard<std::mutex> lock(mu);
  if (streams->empty()) streams->resize(devices().size());
  device(index);  // checks the index
  auto& s = (*streams)[static_cast<std::size_t>(index)];
  if (!s) s = new_stream(index);
  return *s;
}

// Every stream made by stream_create, for synchronize().
std::mutex& live_mutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<Stream*>& live_streams() {
  static auto* v = new std::vector<Stream*>;
  return *v;
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

Event& as_event(bp_event e) {
  return *reinterpret_cast<Event*>(e);
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

bp_stream create_stream(int32_t index) {
  Stream* s = new_stream(index).release();
  std::lock_guard<std::mutex> lock(live_mutex());
  live_streams().push_back(s);
  return reinterpret_cast<bp_stream>(s);
}

void destroy_stream(int32_t index, bp_stream stream) {
  (void)index;
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
  const cl_int err = clGetEventInfo(marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status,
                                    &status, nullptr);
  clReleaseEvent(marker);
  BP_CL_CHECK(err);
  if (status != CL_COMPLETE) return false;
  check_record(s);
  s.synced = upto;
  return true;
}

void synchronize_device(int32_t index) {
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(live_mutex());
    for (Stream* s : live_streams())
      if (s->device == index) streams.push_back(s);
  }
  synchronize_stream(default_stream(index));
  for (Stream* s : streams) synchronize_stream(*s);
}

bp_event create_event(int32_t index) {
  const Device& d = device(index);
  auto* e = new Event;
  e->device = index;
  cl_int err = CL_SUCCESS;
  e->snapshot = clCreateBuffer(d.context, CL_MEM_READ_WRITE, sizeof(cl_int) * kRecordInts, nullptr,
                               &err);
  if (err != CL_SUCCESS) {
    delete e;
    throw_cl_error("clCreateBuffer", err);
  }
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
  BP_CL_CHECK(clEnqueueCopyBuffer(s.queue, s.errors, e.snapshot, 0, 0,
                                  sizeof(cl_int) * kRecordInts, 0, nullptr, nullptr));
  cl_event marker = nullptr;
  BP_CL_CHECK(clEnqueueMarkerWithWaitList(s.queue, 0, nullptr, &marker));
  ++s.submitted;
  clFlush(s.queue);
  if (e.marker != nullptr) clReleaseEvent(e.marker);
  e.marker = marker;
  e.stream = &s;
}

void wait_event(int32_t index, bp_stream stream, bp_event event) {
  Event& e = as_event(event);
  if (e.marker == nullptr) return;
  Stream& s = resolve(index, stream);
  BP_CL_CHECK(clEnqueueBarrierWithWaitList(s.queue, 1, &e.marker, nullptr));
  ++s.submitted;
}

namespace {
void check_snapshot(Event& e) {
  cl_int record[kRecordInts] = {};
  BP_CL_CHECK(clEnqueueReadBuffer(reader_queue(e.device), e.snapshot, CL_TRUE, 0, sizeof record, record,
                                  0, nullptr, nullptr));
  report(*e.stream, record);
}
}  // namespace

bool query_event(bp_event event) {
  Event& e = as_event(event);
  if (e.marker == nullptr) return true;
  cl_int status = CL_QUEUED;
  BP_CL_CHECK(clGetEventInfo(e.marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                             nullptr));
  if (status < 0) throw_cl_error("the event's work", status);
  if (status != CL_COMPLETE) return false;
  check_snapshot(e);
  return true;
}

void synchronize_event(bp_event event) {
  Event& e = as_event(event);
  if (e.marker == nullptr) return;
  BP_CL_CHECK(clWaitForEvents(1, &e.marker));
  check_snapshot(e);
}

}  // namespace bp::opencl
