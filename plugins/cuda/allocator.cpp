// Caching device allocator. cudaMalloc and cudaFree cost tens of
// microseconds and cudaFree synchronises the whole device, so freed blocks are
// kept and handed out again; in a steady state (the same sizes every training
// step) no call reaches the driver.
//
//   small (<= 1 MiB): rounded up to 512 B; one free list per size class;
//     carved from 2 MiB slabs so that a burst of tiny tensors costs one
//     cudaMalloc, not one each. Blocks keep their class forever.
//   large (> 1 MiB): rounded up to 2 MiB; the smallest cached block that is
//     at most a quarter larger is reused, else a new cudaMalloc.
//
// Blocks are reused per stream. The plugin has one stream per device, so a
// device's pool is its stream's pool and a freed block may be reused at once:
// later work on the stream runs after the kernels that used it.
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda_backend.h"

namespace bp::cuda {

namespace {

constexpr std::size_t kSmallQuantum = 512;
constexpr std::size_t kSmallLimit = std::size_t(1) << 20;
constexpr std::size_t kSlabSize = std::size_t(2) << 20;
constexpr std::size_t kLargeQuantum = std::size_t(2) << 20;
// cudaMalloc guarantees 256; slab offsets are multiples of 512.
constexpr std::size_t kMaxAlignment = 256;

std::size_t round_up(std::size_t n, std::size_t q) {
  return (n + q - 1) / q * q;
}

struct Pool {
  std::vector<std::vector<void*>> small_free =
      std::vector<std::vector<void*>>(kSmallLimit / kSmallQuantum);
  std::multimap<std::size_t, void*> large_free;
  char* slab_cursor = nullptr;
  std::size_t slab_left = 0;
  std::vector<std::pair<void*, std::size_t>> segments;  // every cudaMalloc, for release
  uint64_t allocated = 0, reserved = 0, num_allocs = 0, num_system_allocs = 0;
};

struct LiveBlock {
  std::size_t size;       // the block's size class
  std::size_t requested;  // what the caller asked for (allocated_bytes)
  int device;
};

class CachingAllocator {
 public:
  void* allocate(int device, std::size_t nbytes, std::size_t alignment) {
    check_device(device);
    BP_CHECK(alignment <= kMaxAlignment, "alignment " << alignment << " is above the "
                                                      << kMaxAlignment
                                                      << " bytes device memory guarantees");
    const std::size_t want = nbytes == 0 ? 1 : nbytes;
    const bool small = want <= kSmallLimit;
    const std::size_t size = round_up(want, small ? kSmallQuantum : kLargeQuantum);
    std::lock_guard lock(mutex_);
    Pool& pool = pool_for(device);
    void* p = nullptr;
    std::size_t block_size = size;
    if (small) {
      p = take_small(device, pool, size);
    } else {
      auto it = pool.large_free.lower_bound(size);
      if (it != pool.large_free.end() && it->first <= size + size / 4) {
        block_size = it->first;
        p = it->second;
        pool.large_free.erase(it);
      } else {
        p = system_alloc(device, pool, size);
      }
    }
    live_.emplace(p, LiveBlock{block_size, nbytes, device});
    pool.allocated += nbytes;
    ++pool.num_allocs;
    return p;
  }

  void deallocate(void* ptr) {
    if (ptr == nullptr) return;
    std::lock_guard lock(mutex_);
    auto it = live_.find(ptr);
    BP_CHECK(it != live_.end(), "pointer " << ptr << " was not allocated by the cuda backend");
    const LiveBlock b = it->second;
    live_.erase(it);
    Pool& pool = pools_[b.device];
    pool.allocated -= b.requested;
    if (b.size <= kSmallLimit)
      pool.small_free[b.size / kSmallQuantum - 1].push_back(ptr);
    else
      pool.large_free.emplace(b.size, ptr);
  }

  void stats(int device, bp_memory_stats& out) {
    check_device(device);
    std::lock_guard lock(mutex_);
    const Pool& pool = pool_for(device);
    // Fill only what the caller's struct has room for.
    if (BP_HAS_FIELD(&out, bp_memory_stats, allocated_bytes)) out.allocated_bytes = pool.allocated;
    if (BP_HAS_FIELD(&out, bp_memory_stats, reserved_bytes)) out.reserved_bytes = pool.reserved;
    if (BP_HAS_FIELD(&out, bp_memory_stats, num_allocs)) out.num_allocs = pool.num_allocs;
    if (BP_HAS_FIELD(&out, bp_memory_stats, num_system_allocs))
      out.num_system_allocs = pool.num_system_allocs;
  }

  // Frees every segment, in use or not: only for the plugin's destruction,
  // when the core holds no storage of ours any more.
  void release_all() {
    std::lock_guard lock(mutex_);
    for (std::size_t d = 0; d < pools_.size(); ++d) {
      Pool& pool = pools_[d];
      if (pool.segments.empty()) continue;
      set_device(static_cast<int>(d));
      for (auto& [p, n] : pool.segments) BP_CUDA_CHECK(cudaFree(p));
      pool = Pool{};
    }
    live_.clear();
  }

 private:
  Pool& pool_for(int device) {
    if (pools_.size() <= static_cast<std::size_t>(device)) pools_.resize(device + 1);
    return pools_[device];
  }

  void* take_small(int device, Pool& pool, std::size_t size) {
    std::vector<void*>& list = pool.small_free[size / kSmallQuantum - 1];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      return p;
    }
    if (pool.slab_left < size) {
      // The slab's tail becomes a free block of its own class, not waste.
      if (pool.slab_left > 0)
        pool.small_free[pool.slab_left / kSmallQuantum - 1].push_back(pool.slab_cursor);
      pool.slab_cursor = static_cast<char*>(system_alloc(device, pool, kSlabSize));
      pool.slab_left = kSlabSize;
    }
    void* p = pool.slab_cursor;
    pool.slab_cursor += size;
    pool.slab_left -= size;
    return p;
  }

  void* system_alloc(int device, Pool& pool, std::size_t size) {
    set_device(device);
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, size);
    if (err == cudaErrorMemoryAllocation) {
      // Out of memory: give the cached large blocks back and try once more.
      (void)cudaGetLastError();
      release_large_free(pool);
      err = cudaMalloc(&p, size);
    }
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      throw std::bad_alloc();
    }
    BP_CUDA_CHECK(err);
    pool.segments.emplace_back(p, size);
    pool.reserved += size;
    ++pool.num_system_allocs;
    return p;
  }

  void release_large_free(Pool& pool) {
    for (auto& [size, p] : pool.large_free) {
      BP_CUDA_CHECK(cudaFree(p));  // synchronises the device: only on this rare path
      for (auto it = pool.segments.begin(); it != pool.segments.end(); ++it) {
        if (it->first == p) {
          pool.segments.erase(it);
          break;
        }
      }
      pool.reserved -= size;
    }
    pool.large_free.clear();
  }

  std::mutex mutex_;
  std::vector<Pool> pools_;
  std::unordered_map<void*, LiveBlock> live_;
};

// Never destroyed: the core may free tensors from static destructors after
// the plugin's own statics would be gone.
CachingAllocator& the_allocator() {
  static CachingAllocator* a = new CachingAllocator();
  return *a;
}

}  // namespace

void* allocate(int device, std::size_t nbytes, std::size_t alignment) {
  return the_allocator().allocate(device, nbytes, alignment);
}

void deallocate(int device, void* ptr, std::size_t nbytes) {
  (void)device;
  (void)nbytes;  // the block remembers its size class
  the_allocator().deallocate(ptr);
}

void memory_stats(int device, bp_memory_stats& stats) {
  the_allocator().stats(device, stats);
}

namespace {
std::mutex g_instances_mu;
int g_instances = 0;
}  // namespace

void hold_allocator() {
  std::lock_guard lock(g_instances_mu);
  ++g_instances;
}

void release_allocator() {
  std::lock_guard lock(g_instances_mu);
  if (--g_instances == 0) the_allocator().release_all();
}

Scratch::Scratch(int device, std::size_t nbytes)
    : device_(device), nbytes_(nbytes), ptr_(allocate(device, nbytes, 256)) {}

Scratch::~Scratch() {
  try {
    deallocate(device_, ptr_, nbytes_);
  } catch (...) {
    // Only a broken invariant (an unknown pointer) throws here; a destructor must not.
  }
}

}  // namespace bp::cuda
