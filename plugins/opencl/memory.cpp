// Device memory: one cl_mem per allocation, handed to the core as the
// opaque handle (plugin.h, "Memory"); offsets travel beside it. OpenCL
// keeps a released buffer alive until the commands that use it are done,
// so deallocate needs no synchronisation.
#include <atomic>

#include "opencl_backend.h"

namespace bp::opencl {

namespace {

struct Stats {
  std::atomic<uint64_t> allocated{0}, num_allocs{0};
};

Stats& stats(int32_t index) {
  static auto* all = new std::array<Stats, 64>();
  BP_CHECK(index >= 0 && index < 64, "device index " << index << " is out of range");
  return (*all)[static_cast<std::size_t>(index)];
}

}  // namespace

cl_mem allocate(int32_t index, std::size_t nbytes) {
  const Device& d = device(index);
  if (d.max_alloc != 0 && nbytes > d.max_alloc) throw std::bad_alloc();
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(d.context, CL_MEM_READ_WRITE, nbytes == 0 ? 1 : nbytes, nullptr, &err);
  BP_CL_CHECK(err);
  Stats& s = stats(index);
  s.allocated += nbytes;
  ++s.num_allocs;
  return m;
}

void deallocate(int32_t index, cl_mem mem, std::size_t nbytes) {
  if (mem == nullptr) return;
  clReleaseMemObject(mem);
  stats(index).allocated -= nbytes;
}

void memory_stats(int32_t index, bp_memory_stats& out) {
  device(index);
  Stats& s = stats(index);
  out.allocated_bytes = s.allocated;
  out.reserved_bytes = s.allocated;
  out.num_allocs = s.num_allocs;
  out.num_system_allocs = s.num_allocs;
}

}  // namespace bp::opencl
