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
// Streams. A block belongs to the stream it was allocated for, and
// deallocate() puts it on that stream's free lists (the ABI frees a block
// with the stream it was allocated for; the core defers the free until other
// streams that used it are done). Work enqueued on the stream before the free
// may still use the block, so:
//   - the same stream reuses it at once: its later work runs after that work;
//   - another stream gets it only once that work has completed. Nothing is
//     recorded at free time (deallocate makes no CUDA call). When a stream
//     finds nothing in its own lists or the shared ones, the allocator polls
//     the fences (events) of the other streams that hold free blocks and
//     moves every block freed before a completed fence to the shared lists;
//     a stream with frees not yet covered by a fence gets a new one,
//     recorded on it now (after those frees), for a later request to find
//     completed. Until then the request is served from fresh memory.
//   - shared lists: fresh slab tails, blocks of destroyed streams (their work
//     is done: the core synchronises before destroying a stream) and blocks
//     released by completed fences; any stream takes them at once.
//   - out of memory: the device is synchronised, every cached block becomes
//     shared, the cached large blocks go back to the driver, and the
//     cudaMalloc is retried once.
#include <deque>
#include <map>
#include <unordered_map>
#include <vector>

#include "cuda_backend.h"

namespace bp::cuda {

namespace {

constexpr std::size_t kSmallQuantum = 512;
constexpr std::size_t kSmallLimit = std::size_t(1) << 20;
constexpr std::size_t kSmallClasses = kSmallLimit / kSmallQuantum;
constexpr std::size_t kSlabSize = std::size_t(2) << 20;
constexpr std::size_t kLargeQuantum = std::size_t(2) << 20;
// cudaMalloc guarantees 256; slab offsets are multiples of 512.
constexpr std::size_t kMaxAlignment = 256;

std::size_t round_up(std::size_t n, std::size_t q) { return (n + q - 1) / q * q; }

struct FreeBlock {
  void* ptr;
  std::size_t size;  // the block's size class
  uint64_t seq;      // the stream's free counter when it was freed
};

struct FreeLists {
  // Per small class, in the order of freeing (ascending seq).
  std::vector<std::vector<FreeBlock>> small = std::vector<std::vector<FreeBlock>>(kSmallClasses);
  std::multimap<std::size_t, FreeBlock> large;
  std::size_t count = 0;

  void put(const FreeBlock& b) {
    if (b.size <= kSmallLimit)
      small[b.size / kSmallQuantum - 1].push_back(b);
    else
      large.emplace(b.size, b);
    ++count;
  }

  // A block for a request of `size` (a class size), or nullptr.
  void* take(std::size_t size, std::size_t& block_size) {
    if (count == 0) return nullptr;
    if (size <= kSmallLimit) {
      std::vector<FreeBlock>& list = small[size / kSmallQuantum - 1];
      if (list.empty()) return nullptr;
      void* p = list.back().ptr;
      list.pop_back();
      --count;
      block_size = size;
      return p;
    }
    auto it = large.lower_bound(size);
    if (it == large.end() || it->first > size + size / 4) return nullptr;
    void* p = it->second.ptr;
    block_size = it->first;
    large.erase(it);
    --count;
    return p;
  }

  // Moves the blocks freed at or before `seq` (all when seq is UINT64_MAX) to `to`.
  void move_freed_by(uint64_t seq, FreeLists& to) {
    for (std::vector<FreeBlock>& list : small) {
      std::size_t n = 0;
      while (n < list.size() && list[n].seq <= seq) to.put(list[n++]);
      list.erase(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(n));
      count -= n;
    }
    for (auto it = large.begin(); it != large.end();) {
      if (it->second.seq <= seq) {
        to.put(it->second);
        it = large.erase(it);
        --count;
      } else {
        ++it;
      }
    }
  }
};

// A marker on a stream: once complete, every block the stream freed up to
// `seq` is free for any stream.
struct Fence {
  cudaEvent_t event;
  uint64_t seq;
};

// The blocks of one stream.
struct StreamPool {
  cudaStream_t handle = nullptr;
  FreeLists free;
  uint64_t freed = 0;        // blocks freed so far; the seq of the latest
  uint64_t fenced = 0;       // the highest seq a recorded fence covers
  std::deque<Fence> fences;  // oldest first
};

// One device.
struct Pool {
  FreeLists shared;
  std::unordered_map<uint64_t, StreamPool> streams;  // by Stream::id
  std::vector<cudaEvent_t> spare_events;
  char* slab_cursor = nullptr;
  std::size_t slab_left = 0;
  std::vector<std::pair<void*, std::size_t>> segments;  // every cudaMalloc, for release
  uint64_t allocated = 0, reserved = 0, num_allocs = 0, num_system_allocs = 0;
};

struct LiveBlock {
  std::size_t size;       // the block's size class
  std::size_t requested;  // what the caller asked for (allocated_bytes)
  int device;
  uint64_t stream;  // Stream::id it was allocated for
};

class CachingAllocator {
 public:
  void* allocate(const Stream& s, std::size_t nbytes, std::size_t alignment) {
    BP_SDK_REQUIRE(alignment <= kMaxAlignment, "alignment " << alignment << " is above the "
                                                            << kMaxAlignment
                                                            << " bytes device memory guarantees");
    const int device = s.device;
    const std::size_t want = nbytes == 0 ? 1 : nbytes;
    const bool small = want <= kSmallLimit;
    const std::size_t size = round_up(want, small ? kSmallQuantum : kLargeQuantum);
    std::lock_guard lock(mutex_);
    set_device(device);
    Pool& pool = pool_for(device);
    StreamPool& own = pool.streams[s.id];
    own.handle = s.handle;
    std::size_t block_size = size;
    void* p = own.free.take(size, block_size);
    if (p == nullptr) p = pool.shared.take(size, block_size);
    if (p == nullptr && reclaim(pool, s.id)) p = pool.shared.take(size, block_size);
    if (p == nullptr)
      p = small ? carve_small(device, pool, size) : system_alloc(device, pool, size);
    live_.emplace(p, LiveBlock{block_size, nbytes, device, s.id});
    pool.allocated += nbytes;
    ++pool.num_allocs;
    return p;
  }

  void deallocate(void* ptr) {
    if (ptr == nullptr) return;
    std::lock_guard lock(mutex_);
    auto it = live_.find(ptr);
    BP_SDK_REQUIRE(it != live_.end(),
                   "pointer " << ptr << " was not allocated by the cuda backend");
    const LiveBlock b = it->second;
    live_.erase(it);
    Pool& pool = pools_[b.device];
    pool.allocated -= b.requested;
    auto sp = pool.streams.find(b.stream);
    if (sp == pool.streams.end()) {
      // Its stream was destroyed, after its work was done.
      pool.shared.put(FreeBlock{ptr, b.size, 0});
      return;
    }
    sp->second.free.put(FreeBlock{ptr, b.size, ++sp->second.freed});
  }

  void forget_stream(int device, uint64_t id) {
    std::lock_guard lock(mutex_);
    if (pools_.size() <= static_cast<std::size_t>(device)) return;
    Pool& pool = pools_[device];
    auto it = pool.streams.find(id);
    if (it == pool.streams.end()) return;
    it->second.free.move_freed_by(UINT64_MAX, pool.shared);
    for (const Fence& f : it->second.fences) pool.spare_events.push_back(f.event);
    pool.streams.erase(it);
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

  // Gives the cached large blocks of `device` back to the driver, after a
  // device-wide wait (empty_cache). Small blocks stay: they are carved from
  // shared slabs.
  void empty_cache(int device) {
    check_device(device);
    std::lock_guard lock(mutex_);
    set_device(device);
    release_cached(pool_for(device));
  }

  // Frees every segment, in use or not: only for the plugin's destruction,
  // when the core holds no storage of ours any more.
  void release_all() {
    std::lock_guard lock(mutex_);
    for (std::size_t d = 0; d < pools_.size(); ++d) {
      Pool& pool = pools_[d];
      if (pool.segments.empty() && pool.spare_events.empty() && pool.streams.empty()) continue;
      set_device(static_cast<int>(d));
      // cudaFree waits for the device; the fences are complete after it.
      for (auto& [p, n] : pool.segments) BP_CUDA_CHECK(cudaFree(p));
      for (auto& [id, sp] : pool.streams)
        for (const Fence& f : sp.fences) (void)cudaEventDestroy(f.event);
      for (cudaEvent_t e : pool.spare_events) (void)cudaEventDestroy(e);
      pool = Pool{};
    }
    live_.clear();
  }

 private:
  Pool& pool_for(int device) {
    if (pools_.size() <= static_cast<std::size_t>(device)) pools_.resize(device + 1);
    return pools_[device];
  }

  // Moves to the shared lists the blocks of other streams whose fences have
  // completed, and fences the streams with uncovered frees. True when a
  // block moved.
  bool reclaim(Pool& pool, uint64_t except) {
    bool moved = false;
    for (auto& [id, sp] : pool.streams) {
      if (id == except || sp.free.count == 0) continue;
      uint64_t done = 0;
      while (!sp.fences.empty()) {
        const cudaError_t q = cudaEventQuery(sp.fences.front().event);
        if (q == cudaErrorNotReady) {
          forget_not_ready();
          break;
        }
        BP_CUDA_CHECK(q);
        done = sp.fences.front().seq;
        pool.spare_events.push_back(sp.fences.front().event);
        sp.fences.pop_front();
      }
      if (done > 0) {
        const std::size_t before = pool.shared.count;
        sp.free.move_freed_by(done, pool.shared);
        moved = moved || pool.shared.count != before;
      }
      if (sp.free.count > 0 && sp.freed > sp.fenced) {
        cudaEvent_t e = nullptr;
        if (!pool.spare_events.empty()) {
          e = pool.spare_events.back();
          pool.spare_events.pop_back();
        } else {
          BP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        }
        const cudaError_t err = cudaEventRecord(e, sp.handle);
        if (err != cudaSuccess) {
          pool.spare_events.push_back(e);
          throw_cuda_error("cudaEventRecord(e, sp.handle)", err);
        }
        sp.fences.push_back(Fence{e, sp.freed});
        sp.fenced = sp.freed;
      }
    }
    return moved;
  }

  void* carve_small(int device, Pool& pool, std::size_t size) {
    if (pool.slab_left < size) {
      // The slab's tail becomes a free block of its own class, not waste;
      // never used, so any stream may take it.
      if (pool.slab_left > 0) pool.shared.put(FreeBlock{pool.slab_cursor, pool.slab_left, 0});
      pool.slab_left = 0;
      pool.slab_cursor = static_cast<char*>(system_alloc(device, pool, kSlabSize));
      pool.slab_left = kSlabSize;
    }
    void* p = pool.slab_cursor;
    pool.slab_cursor += size;
    pool.slab_left -= size;
    return p;
  }

  void* system_alloc(int device, Pool& pool, std::size_t size) {
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, size);
    if (err == cudaErrorMemoryAllocation) {
      // Out of memory: give the cached large blocks back and try once more.
      (void)cudaGetLastError();
      release_cached(pool);
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

  // After a device-wide wait every cached block is idle: all become shared,
  // and the large ones go back to the driver. Only on the out-of-memory path.
  void release_cached(Pool& pool) {
    BP_CUDA_CHECK(cudaDeviceSynchronize());
    for (auto& [id, sp] : pool.streams) {
      sp.free.move_freed_by(UINT64_MAX, pool.shared);
      for (const Fence& f : sp.fences) pool.spare_events.push_back(f.event);
      sp.fences.clear();
      sp.fenced = sp.freed;
    }
    for (auto& [size, b] : pool.shared.large) {
      BP_CUDA_CHECK(cudaFree(b.ptr));
      for (auto it = pool.segments.begin(); it != pool.segments.end(); ++it) {
        if (it->first == b.ptr) {
          pool.segments.erase(it);
          break;
        }
      }
      pool.reserved -= size;
    }
    pool.shared.count -= pool.shared.large.size();
    pool.shared.large.clear();
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

void* allocate(const Stream& s, std::size_t nbytes, std::size_t alignment) {
  return the_allocator().allocate(s, nbytes, alignment);
}

void deallocate(void* ptr) { the_allocator().deallocate(ptr); }

void memory_stats(int device, bp_memory_stats& stats) { the_allocator().stats(device, stats); }

void empty_cache(int device) { the_allocator().empty_cache(device); }

void forget_stream(int device, uint64_t stream_id) {
  the_allocator().forget_stream(device, stream_id);
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

Scratch::Scratch(const Stream& s, std::size_t nbytes) : ptr_(allocate(s, nbytes, 256)) {}

Scratch::~Scratch() {
  try {
    deallocate(ptr_);
  } catch (...) {
    // Only a broken invariant (an unknown pointer) throws here; a destructor must not.
  }
}

}  // namespace bp::cuda
