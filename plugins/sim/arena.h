// The sim device's memory: one mmap'ed arena that is PROT_NONE whenever the
// plugin is not inside one of its own entry points, so that the host (the
// core, a case, a debugger print) faults on any direct access, as it would
// on a real accelerator's memory.
#pragma once

#include <backplane/plugin.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace bp::sim {

class Arena {
 public:
  // Reserves `capacity` bytes of address space, inaccessible.
  explicit Arena(std::size_t capacity);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  std::size_t capacity() const { return capacity_; }

  // A block of at least `nbytes`, aligned to `alignment` (at least 64).
  // Throws std::bad_alloc when the arena is full.
  void* allocate(std::size_t nbytes, std::size_t alignment);
  void deallocate(void* ptr);
  void stats(bp_memory_stats& out);

  // What the core sees of a block: a handle that is not an address (a
  // non-canonical value that faults if dereferenced), so that any code
  // outside the plugin that offsets or reads it is caught.
  void* handle_of(void* block) const;
  // The start of the live block `handle` names, after checking that bytes
  // [lo, hi) of it exist; throws InvalidArgument naming `op` otherwise
  // (a handle the core made up or offset, or memory already freed).
  char* resolve(const void* handle, int64_t lo, int64_t hi, const char* op);

  // Bytes [ptr, ptr + nbytes) of the arena that one plugin call uses.
  struct Range {
    const void* ptr;
    std::size_t nbytes;
  };

  // Opens the pages of `ranges` for the lifetime of the object: takes the
  // arena's lock (one plugin call at a time, or one call's re-protect would
  // fault another's kernel) and makes just those pages readable and
  // writable. Opening only what the call uses keeps the cost of a call
  // independent of how much memory is allocated, and keeps every other
  // tensor's memory closed even during the call.
  class Access {
   public:
    Access(Arena& arena, std::initializer_list<Range> ranges);
    Access(Arena& arena, const Range* ranges, std::size_t count);
    ~Access();
    Access(const Access&) = delete;
    Access& operator=(const Access&) = delete;

   private:
    static constexpr std::size_t kMaxRanges = 8;
    std::lock_guard<std::mutex> lock_;
    Arena& arena_;
    std::pair<std::size_t, std::size_t> open_[kMaxRanges];  // page-rounded [begin, end)
    std::size_t count_ = 0;
  };

 private:
  void protect(std::size_t begin, std::size_t end, int prot);

  std::mutex mu_;         // the block maps and counters
  std::mutex access_mu_;  // one Access (page opening) at a time
  char* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t top_ = 0;                                // bytes ever handed out from the start
  std::map<std::size_t, std::size_t> free_;            // offset -> size, below top_
  std::unordered_map<std::size_t, std::size_t> live_;  // offset -> block size
  uint64_t allocated_ = 0, num_allocs_ = 0;
};

}  // namespace bp::sim
