// Per-thread caches of freed blocks of one size, for the objects every op
// makes and frees: the result's TensorImpl and StorageImpl, and under
// autograd its AutogradMeta and the op's node. A tiny op makes each once
// and frees it at the end of the statement; taking a block back from the
// thread's own list costs a few loads where malloc and free cost tens of
// nanoseconds (a quarter of a 1-element add went to them).
// A block freed on another thread joins that thread's list. A thread's
// blocks go back to malloc when it exits. Under AddressSanitizer the cache
// is off, so that a use after free is still reported.
#pragma once

#include <cstddef>
#include <new>

namespace bp::detail {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kBlockCacheOn = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kBlockCacheOn = false;
#else
inline constexpr bool kBlockCacheOn = true;
#endif
#else
inline constexpr bool kBlockCacheOn = true;
#endif

template <std::size_t Size>
class BlockCache {
 public:
  static void* take() {
    List& l = this_thread();
    if (kBlockCacheOn && l.n > 0) return l.blocks[--l.n];
    return ::operator new(Size);
  }

  static void give(void* p) noexcept {
    List& l = this_thread();
    if (kBlockCacheOn && l.n < kCapacity && !l.closed) {
      if (!l.flush_registered) {
        l.flush_registered = true;
        flusher_.touch();  // constructs this thread's flusher, whose destructor empties the list
      }
      l.blocks[l.n++] = p;
      return;
    }
    ::operator delete(p);
  }

 private:
  static constexpr int kCapacity = 32;
  // Trivially destructible, so it stays readable after the thread's
  // destructors ran (`closed` then sends late frees to operator delete).
  struct List {
    void* blocks[kCapacity];
    int n;
    bool flush_registered;
    bool closed;
  };
  struct Flusher {
    void touch() {}
    ~Flusher() {
      List& l = list_;
      while (l.n > 0) ::operator delete(l.blocks[--l.n]);
      l.closed = true;
    }
  };
  static inline thread_local List list_{};
  // The list's address, looked up once per call: GCC otherwise repeats the
  // thread-local lookup (a call to __tls_get_addr in a shared library) on
  // the path that joins after the first free's registration.
  static List& this_thread() noexcept {
    List* l = &list_;
#if defined(__GNUC__)
    asm("" : "+r"(l));
#endif
    return *l;
  }
  static inline thread_local Flusher flusher_;
};

// Blocks are whole multiples of 64 bytes, so that classes of nearly the same
// size (the nodes of different ops) share one cache; exactly sizeof(T) when
// the cache is off, so that AddressSanitizer sees a write past the object.
template <class T>
inline constexpr std::size_t kBlockOf = kBlockCacheOn ? (sizeof(T) + 63) / 64 * 64 : sizeof(T);

// Class-specific operator new and delete of T through BlockCache: objects
// of exactly sizeof(T) (never a derived class's) use the cache.
template <class T>
void* cached_new(std::size_t size) {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                "the caches hand out blocks of operator new's default alignment");
  return size == sizeof(T) ? BlockCache<kBlockOf<T>>::take() : ::operator new(size);
}
template <class T>
void cached_delete(void* p, std::size_t size) noexcept {
  if (size == sizeof(T))
    BlockCache<kBlockOf<T>>::give(p);
  else
    ::operator delete(p);
}

}  // namespace bp::detail
