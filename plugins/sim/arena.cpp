// First-fit allocation over an mmap'ed arena with coalescing free blocks.
// The bookkeeping lives on the host heap, never in the arena, so allocating
// and freeing need no access to the device memory itself.
#include "arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <backplane/sdk/tensor.hpp>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>

namespace bp::sim {

namespace {

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

Arena::Arena(std::size_t capacity) : capacity_(round_up(capacity, page_size())) {
  // MAP_NORESERVE: untouched pages cost nothing, so a large arena is cheap.
  void* p = mmap(nullptr, capacity_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw std::runtime_error(std::string("[sim] cannot reserve the device arena: ") +
                             std::strerror(errno));
  base_ = static_cast<char*>(p);
}

Arena::~Arena() { munmap(base_, capacity_); }

void* Arena::allocate(std::size_t nbytes, std::size_t alignment) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::size_t align = alignment < 64 ? 64 : alignment;
  const std::size_t size = round_up(nbytes == 0 ? 1 : nbytes, 64);
  std::size_t at = capacity_;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const std::size_t start = round_up(it->first, align);
    if (start + size > it->first + it->second) continue;
    const std::size_t block = it->first, block_size = it->second;
    free_.erase(it);
    if (start > block) free_[block] = start - block;  // the alignment gap stays free
    if (start + size < block + block_size) free_[start + size] = block + block_size - start - size;
    at = start;
    break;
  }
  if (at == capacity_) {
    const std::size_t start = round_up(top_, align);
    if (start + size > capacity_) throw std::bad_alloc();
    if (start > top_) free_[top_] = start - top_;
    top_ = start + size;
    at = start;
  }
  live_[at] = size;
  allocated_ += size;
  ++num_allocs_;
  return base_ + at;
}

void Arena::deallocate(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::size_t at = static_cast<std::size_t>(static_cast<char*>(ptr) - base_);
  auto live = live_.find(at);
  if (live == live_.end()) return;  // not ours: nothing to free
  std::size_t start = at, size = live->second;
  allocated_ -= size;
  live_.erase(live);
  // Merge with the free neighbours on both sides.
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  if (start + size == top_)
    top_ = start;  // the top block returns to the unused tail
  else
    free_[start] = size;
}

void Arena::stats(bp_memory_stats& out) {
  std::lock_guard<std::mutex> lock(mu_);
  out.allocated_bytes = allocated_;
  out.reserved_bytes = top_;
  out.num_allocs = num_allocs_;
  out.num_system_allocs = 1;  // the arena itself
}

namespace {
constexpr uint64_t kHandleTag = 0xB1A5'0000'0000'0000ull;  // not a canonical address
}  // namespace

void* Arena::handle_of(void* block) const {
  const auto at = static_cast<uint64_t>(static_cast<char*>(block) - base_);
  return reinterpret_cast<void*>(kHandleTag | (at >> 6));
}

char* Arena::resolve(const void* handle, int64_t lo, int64_t hi, const char* op) {
  const auto h = reinterpret_cast<uint64_t>(handle);
  std::lock_guard<std::mutex> lock(mu_);
  std::size_t at = 0, size = 0;
  if ((h & ~0xFFFF'FFFF'FFFFull) == kHandleTag) {
    at = static_cast<std::size_t>((h & 0xFFFF'FFFF'FFFFull) << 6);
    if (auto live = live_.find(at); live != live_.end()) size = live->second;
  }
  if (size == 0) {
    std::ostringstream os;
    os << "[" << op << "] " << handle << " is not the handle of live sim device memory";
    throw bp::sdk::InvalidArgument(os.str());
  }
  if (lo < 0 || hi < lo || static_cast<uint64_t>(hi) > size) {
    std::ostringstream os;
    os << "[" << op << "] bytes [" << lo << ", " << hi << ") are outside the " << size
       << "-byte block " << handle;
    throw bp::sdk::InvalidArgument(os.str());
  }
  return base_ + at;
}

void Arena::protect(std::size_t begin, std::size_t end, int prot) {
  if (end > begin && mprotect(base_ + begin, end - begin, prot) != 0)
    throw std::runtime_error(std::string("[sim] mprotect failed: ") + std::strerror(errno));
}

Arena::Access::Access(Arena& arena, std::initializer_list<Range> ranges)
    : Access(arena, ranges.begin(), ranges.size()) {}

Arena::Access::Access(Arena& arena, const Range* ranges, std::size_t count)
    : lock_(arena.access_mu_), arena_(arena) {
  const std::size_t page = page_size();
  for (std::size_t i = 0; i < count && count_ < kMaxRanges; ++i) {
    if (ranges[i].nbytes == 0) continue;
    const std::size_t at =
        static_cast<std::size_t>(static_cast<const char*>(ranges[i].ptr) - arena_.base_);
    const std::size_t begin = at / page * page;
    const std::size_t end = std::min(round_up(at + ranges[i].nbytes, page), arena_.capacity_);
    arena_.protect(begin, end, PROT_READ | PROT_WRITE);
    open_[count_++] = {begin, end};
  }
}

Arena::Access::~Access() {
  try {
    for (std::size_t i = 0; i < count_; ++i)
      arena_.protect(open_[i].first, open_[i].second, PROT_NONE);
  } catch (...) {
    // A destructor must not throw; the memory merely stays open.
  }
}

}  // namespace bp::sim
