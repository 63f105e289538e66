// Host memory: 64-byte aligned (a cache line, and what AVX-512 loads want),
// with the statistics that memory_stats reports.
#include <cstdlib>
#include <new>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {
std::size_t rounded_size(std::size_t nbytes, std::size_t alignment) {
  return (nbytes + alignment - 1) / alignment * alignment;
}
std::size_t effective_alignment(std::size_t alignment) {
  std::size_t a = 64;
  while (a < alignment) a <<= 1;  // aligned_alloc needs a power of two
  return a;
}
}  // namespace

void* HostAllocator::allocate(std::size_t nbytes, std::size_t alignment) {
  const std::size_t a = effective_alignment(alignment);
  const std::size_t n = rounded_size(nbytes == 0 ? 1 : nbytes, a);
  void* p = std::aligned_alloc(a, n);
  if (p == nullptr) throw std::bad_alloc();
  allocated_bytes_.fetch_add(nbytes, std::memory_order_relaxed);
  reserved_bytes_.fetch_add(n, std::memory_order_relaxed);
  num_allocs_.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void HostAllocator::deallocate(void* ptr, std::size_t nbytes) {
  if (ptr == nullptr) return;
  std::free(ptr);
  // The alignment is not passed back; 64 is what almost every caller asks
  // for, so the reserved figure is exact for them and close for the rest.
  allocated_bytes_.fetch_sub(nbytes, std::memory_order_relaxed);
  reserved_bytes_.fetch_sub(rounded_size(nbytes == 0 ? 1 : nbytes, 64), std::memory_order_relaxed);
}

void HostAllocator::stats(bp_memory_stats& out) const {
  // Fill only what the caller's struct has room for.
  if (BP_HAS_FIELD(&out, bp_memory_stats, allocated_bytes))
    out.allocated_bytes = allocated_bytes_.load(std::memory_order_relaxed);
  if (BP_HAS_FIELD(&out, bp_memory_stats, reserved_bytes))
    out.reserved_bytes = reserved_bytes_.load(std::memory_order_relaxed);
  const uint64_t allocs = num_allocs_.load(std::memory_order_relaxed);
  if (BP_HAS_FIELD(&out, bp_memory_stats, num_allocs)) out.num_allocs = allocs;
  // No caching: every allocation goes to the system allocator.
  if (BP_HAS_FIELD(&out, bp_memory_stats, num_system_allocs)) out.num_system_allocs = allocs;
}

}  // namespace bp::cpu
