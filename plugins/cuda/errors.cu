// Error records: where kernels leave what they found wrong in the values
// they read (an index out of range, a negative integer exponent), so that no
// kernel waits for the device to validate its arguments.
//
// Each stream has one ErrorRecord in device memory. A kernel that finds a bad
// value claims the record with atomicCAS on `code` (the first failure wins;
// failures found while it is unreported are dropped) and fills in the rest.
// The host never reads device memory behind the stream's back: a
// synchronisation enqueues a copy of the record into page-locked memory on
// the stream, waits, and reads the copy (an event enqueues its copy when it
// is recorded). A failure is reported once: reporting bumps the stream's
// epoch and enqueues a reset that writes it as the record's generation, so a
// copy taken before the reset (an older event's, say) is known as reported.
#include <vector>

#include "elementwise.cuh"

namespace bp::cuda {

namespace {

// Records are carved from small blocks of this size, never given back to the
// driver (a few kilobytes per device), so that creating a stream or an event
// costs no cudaMalloc or cudaHostAlloc in a steady state.
constexpr std::size_t kRecordsPerBlock = 64;
constexpr std::size_t kBlockBytes = kRecordsPerBlock * sizeof(ErrorRecord);

struct RecordPools {
  std::mutex mu;
  std::vector<ErrorRecord*> device_free[kMaxDevices];
  std::vector<ErrorRecord*> host_free;
};

RecordPools& pools() {
  static RecordPools* p = new RecordPools();  // never destroyed, like the streams
  return *p;
}

__global__ void reset_record_kernel(ErrorRecord* r, uint32_t generation) {
  r->code = kNoError;
  r->op = 0;
  r->value = 0;
  r->limit = 0;
  r->dim = 0;
  r->generation = generation;
}

std::string describe(const ErrorRecord& r) {
  std::ostringstream os;
  os << "[" << op_name(r.op) << "] ";
  switch (r.code) {
    case kIndexOutOfRange:
      os << "index " << r.value << " is out of range for dimension " << r.dim << " of size "
         << r.limit;
      break;
    case kNegativeExponent:
      os << "integers to negative integer powers are not allowed: exponent " << r.value;
      break;
    default:
      os << "a kernel reported failure " << r.code;
      break;
  }
  os << " (found on the device)";
  return os.str();
}

}  // namespace

ErrorRecord* take_device_record(int device) {
  RecordPools& p = pools();
  std::lock_guard lock(p.mu);
  std::vector<ErrorRecord*>& list = p.device_free[device];
  if (list.empty()) {
    set_device(device);
    void* block = nullptr;
    BP_CUDA_CHECK(cudaMalloc(&block, kBlockBytes));
    for (std::size_t k = kRecordsPerBlock; k-- > 0;)
      list.push_back(static_cast<ErrorRecord*>(block) + k);
  }
  ErrorRecord* r = list.back();
  list.pop_back();
  return r;
}

void give_device_record(int device, ErrorRecord* record) {
  RecordPools& p = pools();
  std::lock_guard lock(p.mu);
  p.device_free[device].push_back(record);
}

ErrorRecord* take_host_record() {
  RecordPools& p = pools();
  std::lock_guard lock(p.mu);
  if (p.host_free.empty()) {
    void* block = nullptr;
    // Portable: page-locked for every device, so any stream may copy into it.
    BP_CUDA_CHECK(cudaHostAlloc(&block, kBlockBytes, cudaHostAllocPortable));
    for (std::size_t k = kRecordsPerBlock; k-- > 0;)
      p.host_free.push_back(static_cast<ErrorRecord*>(block) + k);
  }
  ErrorRecord* r = p.host_free.back();
  p.host_free.pop_back();
  *r = ErrorRecord{};
  return r;
}

void give_host_record(ErrorRecord* record) {
  RecordPools& p = pools();
  std::lock_guard lock(p.mu);
  p.host_free.push_back(record);
}

void reset_record(const Stream& s, uint32_t generation) {
  set_device(s.device);
  reset_record_kernel<<<1, 1, 0, s.handle>>>(s.errors, generation);
  BP_CUDA_CHECK(cudaGetLastError());
}

void snapshot_record(const Stream& s, ErrorRecord* snapshot) {
  BP_CUDA_CHECK(
      cudaMemcpyAsync(snapshot, s.errors, sizeof(ErrorRecord), cudaMemcpyDeviceToHost, s.handle));
}

std::string take_failure(Stream& s, const ErrorRecord& snapshot) {
  if (snapshot.code == kNoError) return {};
  std::lock_guard lock(s.mu);
  // Reported already (through another synchronisation), or the stream is gone.
  if (snapshot.generation != s.epoch || !s.alive) return {};
  const uint32_t next = s.epoch + 1;
  reset_record(s, next);
  s.epoch = next;
  return describe(snapshot);
}

}  // namespace bp::cuda
