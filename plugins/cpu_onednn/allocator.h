// The cpu_onednn plugin's host allocator (allocator.cpp): aligned host
// memory with running statistics and caches of freed blocks.
#pragma once

#include <backplane/plugin.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace bp::cpu {

// The bounds of the cache of large freed blocks.
struct LargeCacheLimits {
  // The most bytes of freed large blocks kept for reuse: the least recently
  // freed go back to the system beyond it.
  std::size_t limit_bytes = 0;
  // Memory pressure: while the system has less than this available, freed
  // large blocks go back at once and the cache is emptied.
  std::size_t keep_free_bytes = 0;
  // The defaults for this machine: an eighth of its memory up to 4 GiB,
  // and a sixteenth of it kept free.
  static LargeCacheLimits for_this_machine();
};

class HostAllocator {
 public:
  explicit HostAllocator(LargeCacheLimits limits = LargeCacheLimits::for_this_machine())
      : limits_(limits) {}
  HostAllocator(const HostAllocator&) = delete;
  HostAllocator& operator=(const HostAllocator&) = delete;
  ~HostAllocator();
  void* allocate(std::size_t nbytes, std::size_t alignment);
  void deallocate(void* ptr, std::size_t nbytes);
  void stats(bp_memory_stats& out) const;
  // Gives every cached medium and large block back to the system.
  void empty_cache();
  const LargeCacheLimits& limits() const { return limits_; }

  // The block size of a large request of `n` bytes (kLargeBlock and up):
  // 2 MiB steps up to 16 MiB, then eight size classes per power of two
  // (at most 12.5% over the request), so that a freed block serves every
  // later request of its class.
  static std::size_t large_class(std::size_t n);

  // One thread's counts. Only the owning thread writes them, with plain
  // relaxed loads and stores: a locked increment per allocation was a
  // visible share of a tiny op. A block freed by another thread is
  // subtracted there, so one thread's figure may go negative; the sum is right.
  struct Counters {
    std::atomic<int64_t> allocated{0}, reserved{0}, allocs{0};
  };
  // A thread's counters of one allocator, keyed by its serial.
  struct RecentCounters {
    uint64_t serial = 0;
    Counters* counters = nullptr;
  };
  static constexpr int kRecentAllocators = 4;

 private:
  struct Cached {
    void* ptr;
    std::size_t size;
  };
  // This thread's counters of this allocator; `recent` is the thread's list
  // of the allocators it used last, most recent first.
  Counters& local(RecentCounters* recent);
  // Whether the system has less memory available than limits_ keep free.
  bool under_pressure() const;
  // Takes every cached block out (under cache_mu_) for the caller to free.
  std::vector<Cached> take_cached_locked();
  // Frees blocks taken out of the caches and counts them.
  void release(const std::vector<Cached>& blocks, Counters& c);

  // Tells this allocator's per-thread counters from those of an earlier
  // instance that may have lived at the same address (a plugin reloaded
  // while another instance's tensors live: DV-5).
  static std::atomic<uint64_t> next_serial_;
  const uint64_t serial_ = next_serial_.fetch_add(1, std::memory_order_relaxed);
  const LargeCacheLimits limits_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Counters>> threads_;  // kept after a thread exits

  // Large blocks (kLargeBlock and up, in size classes) freed recently, the
  // least recently freed first, kept for the next request of their class: a
  // fresh one costs a page fault per 4 KiB on first touch (10 ms for the
  // 77 MB output of a large convolution), every step of a training loop.
  // At most limits_.limit_bytes in all.
  mutable std::mutex cache_mu_;
  std::vector<Cached> cache_;
  std::size_t cached_bytes_ = 0;
  // Medium blocks (4 KiB up to kLargeBlock, exact sizes) freed recently:
  // glibc's aligned path (memalign, and the consolidation a free of such a
  // block triggers) costs about 0.4 us, a tenth of a 64 x 64 matmul. The
  // most recently freed first; at most kMediumBlocks blocks and
  // kMediumBytes in all.
  std::vector<Cached> medium_;
  std::size_t medium_bytes_ = 0;
  std::atomic<int64_t> system_allocs_{0};
  std::atomic<int64_t> cache_releases_{0};
};

}  // namespace bp::cpu
