// Host memory: 64-byte aligned for large buffers (a cache line, and what
// AVX-512 loads want), plain malloc for small ones that ask for no more than
// its natural 16 (aligned_alloc takes glibc's slow memalign path, which
// dominated the cost of a tiny op), recently freed blocks kept for reuse
// (up to 256 bytes per thread and size class, 4 KiB to 4 MiB by exact size,
// larger ones by size class up to a bound), with the statistics
// memory_stats reports.
#include "allocator.h"

#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {
std::size_t rounded_size(std::size_t nbytes, std::size_t alignment) {
  return (nbytes + alignment - 1) / alignment * alignment;
}
constexpr std::size_t kMallocAlignment = 16;
// The alignment a block of `nbytes` is rounded to, also used on deallocate.
std::size_t block_alignment(std::size_t nbytes) { return nbytes >= 512 ? 64 : kMallocAlignment; }
constexpr std::size_t kLargeBlock = std::size_t{4} << 20;
constexpr std::size_t kLargeStep = std::size_t{2} << 20;
constexpr std::size_t kLargeStepsUpTo = std::size_t{16} << 20;
constexpr std::size_t kMediumBlock = std::size_t{4} << 10;
constexpr std::size_t kMediumBlocks = 32;
constexpr std::size_t kMediumBytes = std::size_t{32} << 20;
// Blocks of up to kSmallMax bytes are cached per thread, below the
// allocator's accounting as malloc's own per-thread cache is below malloc's:
// a freed one leaves `reserved` and waits in its size class (16, 32, ...
// 256 bytes) for the thread's next allocation of the class (malloc and free
// were a tenth of a 1-element op); the thread's destructors give its blocks
// back to malloc. Blocks are plain malloc memory, so any allocator instance
// may take them. Off under AddressSanitizer, which then still sees each free
// and reports a use after it.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSmallCacheOn = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSmallCacheOn = false;
#else
constexpr bool kSmallCacheOn = true;
#endif
#else
constexpr bool kSmallCacheOn = true;
#endif
constexpr int kSmallClasses = 5;
constexpr int kSmallPerClass = 16;
constexpr std::size_t kSmallMax = std::size_t{16} << (kSmallClasses - 1);
// The size class of a small request of `nbytes` (the same on allocate and
// deallocate, which is told the size asked for), and its block size.
int small_class(std::size_t nbytes) {
  return nbytes <= 16 ? 0 : nbytes <= 32 ? 1 : nbytes <= 64 ? 2 : nbytes <= 128 ? 3 : 4;
}
constexpr std::size_t small_block(int k) { return std::size_t{16} << k; }

// Trivially destructible, so it stays readable after the thread's
// destructors ran: `closed` then sends later frees to free().
struct SmallBlocks {
  void* blocks[kSmallClasses][kSmallPerClass];
  int count[kSmallClasses];
  bool flush_registered;
  bool closed;
};
// Everything an allocation reads of its thread, in one thread-local object:
// the plugin is loaded with dlopen, so each thread-local lookup is a call
// to __tls_get_addr.
struct ThreadState {
  HostAllocator::RecentCounters recent[HostAllocator::kRecentAllocators];
  SmallBlocks small;
};
thread_local ThreadState t_state{};
ThreadState& this_thread() noexcept {
  ThreadState* t = &t_state;
#if defined(__GNUC__)
  asm("" : "+r"(t));  // looked up once per call: GCC may otherwise repeat the lookup
#endif
  return *t;
}
struct SmallBlocksFlush {
  void touch() {}
  ~SmallBlocksFlush() {
    SmallBlocks& s = t_state.small;
    for (int k = 0; k < kSmallClasses; ++k)
      while (s.count[k] > 0) std::free(s.blocks[k][--s.count[k]]);
    s.closed = true;
  }
};
thread_local SmallBlocksFlush t_small_flush;

std::size_t effective_alignment(std::size_t alignment, std::size_t nbytes) {
  std::size_t a = block_alignment(nbytes);
  while (a < alignment) a <<= 1;  // aligned_alloc needs a power of two
  return a;
}
}  // namespace

namespace {
void add(std::atomic<int64_t>& c, int64_t v) {
  c.store(c.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}
}  // namespace

std::atomic<uint64_t> HostAllocator::next_serial_{1};

HostAllocator::Counters& HostAllocator::local(RecentCounters* recent) {
  // The thread's counters of the few allocators it used last, keyed by
  // serial (never by address, which a later instance may reuse), most
  // recent first. A thread that comes back to an allocator it dropped from
  // its list gets new counters: the sum stays right.
  if (recent[0].serial == serial_) return *recent[0].counters;
  constexpr int kEntries = kRecentAllocators;
  int hit = kEntries - 1;
  for (int i = 1; i < kEntries; ++i)
    if (recent[i].serial == serial_) hit = i;
  RecentCounters e = recent[hit];
  if (e.serial != serial_) {
    auto c = std::make_unique<Counters>();
    std::lock_guard lock(mu_);
    e = RecentCounters{serial_, c.get()};
    threads_.push_back(std::move(c));
  }
  for (int i = hit; i > 0; --i) recent[i] = recent[i - 1];
  recent[0] = e;
  return *e.counters;
}

HostAllocator::~HostAllocator() {
  for (const Cached& b : cache_) std::free(b.ptr);
  for (const Cached& b : medium_) std::free(b.ptr);
}

LargeCacheLimits LargeCacheLimits::for_this_machine() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const std::size_t total = pages > 0 && page > 0
                                ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                                : std::size_t{8} << 30;
  return {std::min(total / 8, std::size_t{4} << 30), total / 16};
}

std::size_t HostAllocator::large_class(std::size_t n) {
  if (n <= kLargeStepsUpTo) return rounded_size(n, kLargeStep);
  // 2^k < n <= 2^(k+1): steps of 2^(k-3), eight classes per doubling.
  const int k = static_cast<int>(std::bit_width(n - 1)) - 1;
  return rounded_size(n, std::size_t{1} << (k - 3));
}

namespace {
// MemAvailable of /proc/meminfo in bytes (free memory plus what the kernel
// can reclaim at once, such as clean page cache); `fallback` when unreadable.
std::size_t mem_available(std::size_t fallback) {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return fallback;
  char line[128];
  std::size_t kb = 0;
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f) != nullptr)
    found = std::sscanf(line, "MemAvailable: %zu kB", &kb) == 1;
  std::fclose(f);
  return found ? kb << 10 : fallback;
}
}  // namespace

bool HostAllocator::under_pressure() const {
  if (limits_.keep_free_bytes == 0) return false;
  // sysinfo's free figure first (a system call, well under a microsecond
  // beside the free of a block of megabytes); only when it is low, the
  // kernel's estimate of what is available, page cache it can drop included.
  struct sysinfo si {};
  if (sysinfo(&si) != 0) return false;
  const std::size_t unit = si.mem_unit == 0 ? 1 : si.mem_unit;
  const std::size_t free_now =
      (static_cast<std::size_t>(si.freeram) + static_cast<std::size_t>(si.bufferram)) * unit;
  if (free_now >= limits_.keep_free_bytes) return false;
  return mem_available(free_now) < limits_.keep_free_bytes;
}

std::vector<HostAllocator::Cached> HostAllocator::take_cached_locked() {
  std::vector<Cached> drop;
  drop.swap(cache_);
  drop.insert(drop.end(), medium_.begin(), medium_.end());
  medium_.clear();
  cached_bytes_ = medium_bytes_ = 0;
  return drop;
}

void HostAllocator::release(const std::vector<Cached>& blocks, Counters& c) {
  for (const Cached& b : blocks) {
    std::free(b.ptr);
    add(c.reserved, -static_cast<int64_t>(b.size));
  }
  cache_releases_.fetch_add(static_cast<int64_t>(blocks.size()), std::memory_order_relaxed);
}

void HostAllocator::empty_cache() {
  std::vector<Cached> drop;
  {
    std::lock_guard lock(cache_mu_);
    drop = take_cached_locked();
  }
  release(drop, local(this_thread().recent));
}

void* HostAllocator::allocate(std::size_t nbytes, std::size_t alignment) {
  const std::size_t a = effective_alignment(alignment, nbytes);
  if (kSmallCacheOn && nbytes <= kSmallMax) {
    // A block of the class's size, at 16 bytes' alignment or more: any
    // cached block of the class serves a request that asks for no more than
    // 16; a larger alignment gets a fresh block (cached when freed).
    const int k = small_class(nbytes);
    ThreadState& t = this_thread();
    Counters& c = local(t.recent);
    SmallBlocks& sb = t.small;
    void* p = nullptr;
    if (a <= kMallocAlignment && sb.count[k] > 0) {
      p = sb.blocks[k][--sb.count[k]];
    } else {
      p = a <= kMallocAlignment ? std::malloc(small_block(k))
                                : std::aligned_alloc(a, rounded_size(small_block(k), a));
      if (p == nullptr) throw std::bad_alloc();
      system_allocs_.fetch_add(1, std::memory_order_relaxed);
    }
    add(c.reserved, static_cast<int64_t>(small_block(k)));
    add(c.allocated, static_cast<int64_t>(nbytes));
    add(c.allocs, 1);
    return p;
  }
  std::size_t n = rounded_size(nbytes == 0 ? 1 : nbytes, a);
  // Large blocks come in size classes of 2 MiB steps or more (a multiple of
  // every alignment asked for), so that deallocate, which is not told the
  // alignment, finds the same class; only blocks of the default alignment
  // are taken from the caches.
  const bool large = n >= kLargeBlock;
  const bool cacheable = large && a <= block_alignment(n);
  const bool medium = !large && n >= kMediumBlock && a <= block_alignment(n);
  if (large) n = large_class(rounded_size(n, std::max(a, kLargeStep)));
  void* p = nullptr;
  bool reused = false;
  if (medium || cacheable) {
    std::vector<Cached>& list = medium ? medium_ : cache_;
    std::lock_guard lock(cache_mu_);
    // The most recently freed block of the size: its pages are the likeliest
    // to be in cache.
    for (std::size_t i = list.size(); i-- > 0;)
      if (list[i].size == n) {
        p = list[i].ptr;
        (medium ? medium_bytes_ : cached_bytes_) -= n;
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
        reused = true;
        break;
      }
  }
  Counters& c = local(this_thread().recent);
  if (p == nullptr) {
    p = a <= kMallocAlignment ? std::malloc(n) : std::aligned_alloc(a, n);
    if (p == nullptr) {
      // Give the cached blocks back and try once more.
      std::vector<Cached> drop;
      {
        std::lock_guard lock(cache_mu_);
        drop = take_cached_locked();
      }
      release(drop, c);
      p = a <= kMallocAlignment ? std::malloc(n) : std::aligned_alloc(a, n);
    }
    if (p == nullptr) throw std::bad_alloc();
    system_allocs_.fetch_add(1, std::memory_order_relaxed);
  }
  add(c.allocated, static_cast<int64_t>(nbytes));
  if (!reused) add(c.reserved, static_cast<int64_t>(n));  // a cached block stayed reserved
  add(c.allocs, 1);
  return p;
}

void HostAllocator::deallocate(void* ptr, std::size_t nbytes) {
  if (ptr == nullptr) return;
  // The alignment is not passed back; the size decides it for every caller
  // that asks for no more than the default, so the reserved figure is exact
  // for them and close for the rest.
  ThreadState& t = this_thread();
  Counters& c = local(t.recent);
  add(c.allocated, -static_cast<int64_t>(nbytes));
  if (kSmallCacheOn && nbytes <= kSmallMax) {
    const int k = small_class(nbytes);
    add(c.reserved, -static_cast<int64_t>(small_block(k)));
    SmallBlocks& sb = t.small;
    if (sb.count[k] < kSmallPerClass && !sb.closed) {
      if (!sb.flush_registered) {
        sb.flush_registered = true;
        t_small_flush.touch();  // constructs the flush, run by this thread's destructors
      }
      sb.blocks[k][sb.count[k]++] = ptr;
      return;
    }
    std::free(ptr);
    return;
  }
  const std::size_t n = nbytes == 0 ? 1 : nbytes;
  std::size_t block = rounded_size(n, block_alignment(n));
  if (block >= kLargeBlock) {
    block = large_class(block);  // the class allocate() rounded the request to
    std::vector<Cached> drop;
    const bool keep = block <= limits_.limit_bytes && !under_pressure();
    {
      std::lock_guard lock(cache_mu_);
      if (keep) {
        cache_.push_back({ptr, block});  // still reserved
        cached_bytes_ += block;
        // Over the bound: the least recently freed blocks go back.
        std::size_t k = 0;
        std::size_t bytes = cached_bytes_;
        while (bytes > limits_.limit_bytes) bytes -= cache_[k++].size;
        if (k > 0) {
          drop.assign(cache_.begin(), cache_.begin() + static_cast<std::ptrdiff_t>(k));
          cache_.erase(cache_.begin(), cache_.begin() + static_cast<std::ptrdiff_t>(k));
          cached_bytes_ = bytes;
        }
      } else if (block <= limits_.limit_bytes) {
        drop = take_cached_locked();  // memory is short: give back what the caches hold
      }
    }
    release(drop, c);
    if (keep) return;
  } else if (block >= kMediumBlock) {
    std::vector<Cached> drop;
    {
      std::lock_guard lock(cache_mu_);
      while (!medium_.empty() &&
             (medium_.size() == kMediumBlocks || medium_bytes_ + block > kMediumBytes)) {
        // Make room: the least recently freed blocks go back to the system.
        drop.push_back(medium_.front());
        medium_bytes_ -= medium_.front().size;
        medium_.erase(medium_.begin());
      }
      medium_.push_back({ptr, block});  // still reserved
      medium_bytes_ += block;
    }
    release(drop, c);
    return;
  }
  add(c.reserved, -static_cast<int64_t>(block));
  std::free(ptr);
}

namespace {
// Never destroyed: a kernel may run from a static destructor at exit.
HostAllocator& scratch_allocator() {
  static auto* a = new HostAllocator();
  return *a;
}
}  // namespace

void ScratchFree::operator()(void* p) const noexcept { scratch_allocator().deallocate(p, nbytes); }

Scratch scratch_memory(const dnnl::memory::desc& md) {
  const std::size_t n = md.get_size();
  Scratch s;
  if (n == 0) return s;
  s.buffer =
      std::unique_ptr<void, ScratchFree>(scratch_allocator().allocate(n, 64), ScratchFree{n});
  s.memory = dnnl::memory(md, dnnl_engine(), s.buffer.get());
  return s;
}

dnnl::primitive_attr scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

Scratch scratchpad_for(const dnnl::primitive_desc_base& pd) {
  return scratch_memory(pd.scratchpad_desc());
}

void empty_scratch_cache() { scratch_allocator().empty_cache(); }

void HostAllocator::stats(bp_memory_stats& out) const {
  int64_t allocated = 0, reserved = 0, allocs = 0;
  {
    std::lock_guard lock(mu_);
    for (const auto& c : threads_) {
      allocated += c->allocated.load(std::memory_order_relaxed);
      reserved += c->reserved.load(std::memory_order_relaxed);
      allocs += c->allocs.load(std::memory_order_relaxed);
    }
  }
  // Fill only what the caller's struct has room for.
  if (BP_HAS_FIELD(&out, bp_memory_stats, allocated_bytes))
    out.allocated_bytes = static_cast<uint64_t>(allocated);
  if (BP_HAS_FIELD(&out, bp_memory_stats, reserved_bytes))
    out.reserved_bytes = static_cast<uint64_t>(reserved);
  if (BP_HAS_FIELD(&out, bp_memory_stats, num_allocs))
    out.num_allocs = static_cast<uint64_t>(allocs);
  // Large blocks come from the cache when one of their size was freed.
  if (BP_HAS_FIELD(&out, bp_memory_stats, num_system_allocs))
    out.num_system_allocs = static_cast<uint64_t>(system_allocs_.load(std::memory_order_relaxed));
  std::size_t cached = 0;
  {
    std::lock_guard lock(cache_mu_);
    cached = cached_bytes_ + medium_bytes_;
  }
  if (BP_HAS_FIELD(&out, bp_memory_stats, cached_bytes)) out.cached_bytes = cached;
  if (BP_HAS_FIELD(&out, bp_memory_stats, cache_limit_bytes))
    out.cache_limit_bytes = limits_.limit_bytes + kMediumBytes;
  if (BP_HAS_FIELD(&out, bp_memory_stats, num_cache_releases))
    out.num_cache_releases = static_cast<uint64_t>(cache_releases_.load(std::memory_order_relaxed));
}

}  // namespace bp::cpu
