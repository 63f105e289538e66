// Device memory: one cl_mem per block, handed to the core as the opaque
// handle (plugin.h, "Memory"); offsets travel beside it. Freed blocks are
// kept per (device, stream) in size classes and handed out again on the
// same stream: work on one in-order queue runs in order, so a block freed
// while a kernel still reads it is safe to reuse there (the core keeps a
// block from other streams until their work on it is done, as for the cuda
// plugin). Creating a buffer costs microseconds on every driver; taking one
// from the cache costs a map lookup. OpenCL keeps a released buffer alive
// until the commands that use it are done, so a release needs no wait.
#include <map>
#include <unordered_map>

#include "opencl_backend.h"

namespace bp::opencl {

namespace {

constexpr std::size_t kMinBlock = 512;
constexpr std::size_t kSmall = std::size_t{1} << 20;  // power-of-two classes below this
constexpr std::size_t kLargeStep = std::size_t{2} << 20;

std::size_t size_class(std::size_t n) {
  if (n <= kMinBlock) return kMinBlock;
  if (n <= kSmall) {
    std::size_t c = kMinBlock;
    while (c < n) c <<= 1;
    return c;
  }
  return (n + kLargeStep - 1) / kLargeStep * kLargeStep;
}

struct Pool {
  std::mutex mu;
  // Free blocks by (stream, class).
  std::map<std::pair<bp_stream, std::size_t>, std::vector<cl_mem>> free;
  std::unordered_map<cl_mem, std::size_t> class_of;  // every block alive, free or not
  uint64_t allocated = 0, cached = 0, num_allocs = 0, num_system = 0;
};

Pool& pool(int32_t index) {
  static auto* pools = new std::array<Pool, 64>();
  BP_SDK_REQUIRE(index >= 0 && index < 64, "device index " << index << " is out of range");
  return (*pools)[static_cast<std::size_t>(index)];
}

// The most a device keeps cached: a quarter of its memory.
uint64_t cache_limit(const Device& d) { return d.memory / 4; }

// Releases every cached block of `stream` (all streams when `all`). Holds p.mu.
void release_cached(Pool& p, bp_stream stream, bool all) {
  for (auto it = p.free.begin(); it != p.free.end();) {
    if (!all && it->first.first != stream) {
      ++it;
      continue;
    }
    for (cl_mem m : it->second) {
      p.cached -= it->first.second;
      p.class_of.erase(m);
      clReleaseMemObject(m);
    }
    it = p.free.erase(it);
  }
}

}  // namespace

cl_mem allocate(int32_t index, bp_stream stream, std::size_t nbytes) {
  const Device& d = device(index);
  if (d.max_alloc != 0 && nbytes > d.max_alloc) throw std::bad_alloc();
  const std::size_t cls =
      std::min<std::size_t>(size_class(nbytes), std::max<uint64_t>(d.max_alloc, nbytes));
  Pool& p = pool(index);
  std::lock_guard<std::mutex> lock(p.mu);
  ++p.num_allocs;
  auto it = p.free.find({stream, cls});
  if (it != p.free.end() && !it->second.empty()) {
    cl_mem m = it->second.back();
    it->second.pop_back();
    p.cached -= cls;
    p.allocated += cls;
    return m;
  }
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(d.context, CL_MEM_READ_WRITE, cls, nullptr, &err);
  if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES) {
    release_cached(p, nullptr, true);  // give the cache back, then try again
    m = clCreateBuffer(d.context, CL_MEM_READ_WRITE, cls, nullptr, &err);
  }
  BP_CL_CHECK(err);
  ++p.num_system;
  p.class_of[m] = cls;
  p.allocated += cls;
  return m;
}

void deallocate(int32_t index, bp_stream stream, cl_mem mem) {
  if (mem == nullptr) return;
  const Device& d = device(index);
  Pool& p = pool(index);
  std::lock_guard<std::mutex> lock(p.mu);
  auto it = p.class_of.find(mem);
  if (it == p.class_of.end()) {  // not ours: nothing to cache
    clReleaseMemObject(mem);
    return;
  }
  const std::size_t cls = it->second;
  p.allocated -= cls;
  // A block freed after its stream was destroyed has no queue to be reused on.
  if (p.cached + cls > cache_limit(d) || !stream_alive(index, stream)) {
    p.class_of.erase(it);
    clReleaseMemObject(mem);
    return;
  }
  p.free[{stream, cls}].push_back(mem);
  p.cached += cls;
}

void release_stream_blocks(int32_t index, bp_stream stream) {
  Pool& p = pool(index);
  std::lock_guard<std::mutex> lock(p.mu);
  release_cached(p, stream, false);
}

void memory_stats(int32_t index, bp_memory_stats& out) {
  device(index);
  Pool& p = pool(index);
  std::lock_guard<std::mutex> lock(p.mu);
  out.allocated_bytes = p.allocated;
  out.reserved_bytes = p.allocated + p.cached;
  out.num_allocs = p.num_allocs;
  out.num_system_allocs = p.num_system;
}

}  // namespace bp::opencl
