// A small intrusive reference-counted pointer: one allocation per object and
// one atomic counter, cheaper to copy than std::shared_ptr.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace bp {

// Base of every intrusively counted object.
class RefCounted {
 public:
  RefCounted() = default;
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;
  virtual ~RefCounted() = default;

  void retain() const noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() const noexcept {
    // A count of 1 held by the caller means no other owner exists who could
    // copy it concurrently, so the last release needs no locked instruction.
    if (refs_.load(std::memory_order_acquire) == 1 ||
        refs_.fetch_sub(1, std::memory_order_acq_rel) == 1)
      delete this;
  }
  // For make_intrusive: the first reference of an object no one else sees yet.
  void adopt_first_reference() const noexcept { refs_.store(1, std::memory_order_relaxed); }
  uint32_t use_count() const noexcept { return refs_.load(std::memory_order_relaxed); }

 private:
  mutable std::atomic<uint32_t> refs_{0};
};

template <class T>
class IntrusivePtr {
 public:
  IntrusivePtr() noexcept = default;
  IntrusivePtr(std::nullptr_t) noexcept {}
  explicit IntrusivePtr(T* p) noexcept : p_(p) {
    if (p_) p_->retain();
  }
  IntrusivePtr(const IntrusivePtr& o) noexcept : p_(o.p_) {
    if (p_) p_->retain();
  }
  IntrusivePtr(IntrusivePtr&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  template <class U>
  requires std::is_convertible_v<U*, T*> IntrusivePtr(const IntrusivePtr<U>& o)
  noexcept : p_(o.get()) {
    if (p_) p_->retain();
  }
  // Takes over o's reference (no count changes: no locked instruction).
  template <class U>
  requires std::is_convertible_v<U*, T*> IntrusivePtr(IntrusivePtr<U>&& o)
  noexcept : p_(std::exchange(o.p_, nullptr)) {}
  ~IntrusivePtr() {
    if (p_) p_->release();
  }
  IntrusivePtr& operator=(IntrusivePtr o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }

  // Takes over a reference the caller already holds (no increment).
  static IntrusivePtr adopt(T* p) noexcept {
    IntrusivePtr r;
    r.p_ = p;
    return r;
  }

  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  bool operator==(const IntrusivePtr& o) const noexcept { return p_ == o.p_; }
  void reset() noexcept { IntrusivePtr().swap_with(*this); }
  void swap_with(IntrusivePtr& o) noexcept { std::swap(p_, o.p_); }

 private:
  template <class U>
  friend class IntrusivePtr;
  T* p_ = nullptr;
};

template <class T, class... Args>
IntrusivePtr<T> make_intrusive(Args&&... args) {
  T* p = new T(std::forward<Args>(args)...);
  p->adopt_first_reference();
  return IntrusivePtr<T>::adopt(p);
}

}  // namespace bp
