// Sizes and strides: a small vector that keeps up to kInlineDims values inline
// (no allocation for the ranks users meet), and the shape arithmetic on it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bp {

class DimVector;

// The most dims a tensor may have: the plugin ABI's BP_MAX_DIMS (CR-8).
inline constexpr int kMaxDims = 8;

// A non-owning view of int64 values (sizes, strides, dims), constructible
// from a braced list, a vector or a DimVector: `t.view({3, 3})`.
class IntArrayRef {
 public:
  constexpr IntArrayRef() = default;
  constexpr IntArrayRef(const int64_t* data, std::size_t size) : data_(data), size_(size) {}
  // The list lives until the end of the full expression, which covers the
  // call it is passed to: the intended use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
  constexpr IntArrayRef(std::initializer_list<int64_t> v) : data_(v.begin()), size_(v.size()) {}
#pragma GCC diagnostic pop
  IntArrayRef(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}
  // One value, as PyTorch's `x.sum(0)` or `x.view(-1)`.
  constexpr IntArrayRef(const int64_t& one) : data_(&one), size_(1) {}
  constexpr IntArrayRef(std::span<const int64_t> v) : data_(v.data()), size_(v.size()) {}

  constexpr const int64_t* data() const { return data_; }
  constexpr std::size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr const int64_t* begin() const { return data_; }
  constexpr const int64_t* end() const { return data_ + size_; }
  constexpr int64_t operator[](std::size_t i) const { return data_[i]; }
  constexpr int64_t back() const { return data_[size_ - 1]; }
  constexpr IntArrayRef first(std::size_t n) const { return {data_, n}; }
  bool equals(IntArrayRef o) const {
    if (size_ != o.size_) return false;
    // A plain loop: std::equal becomes a memcmp call, dearer for a few dims.
    const int64_t *a = data(), *b = o.data();
    for (std::size_t i = 0; i < size_; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }

 private:
  const int64_t* data_ = nullptr;
  std::size_t size_ = 0;
};

class DimVector {
 public:
  static constexpr int kInlineDims = 6;

  DimVector() = default;
  DimVector(std::initializer_list<int64_t> v) { assign(v.begin(), v.size()); }
  DimVector(IntArrayRef v) { assign(v.data(), v.size()); }
  explicit DimVector(std::size_t n, int64_t value = 0) {
    resize(n);
    std::fill(begin(), end(), value);
  }
  DimVector(const DimVector& o) { assign(o.data(), o.size()); }
  DimVector(DimVector&& o) noexcept { move_from(o); }
  DimVector& operator=(const DimVector& o) {
    if (this != &o) assign(o.data(), o.size());
    return *this;
  }
  // Copy the values in place (no temporary DimVector).
  DimVector& operator=(IntArrayRef v) {
    assign(v.data(), v.size());
    return *this;
  }
  DimVector& operator=(std::initializer_list<int64_t> v) {
    assign(v.begin(), v.size());
    return *this;
  }
  DimVector& operator=(DimVector&& o) noexcept {
    if (this != &o) {
      free_heap();
      move_from(o);
    }
    return *this;
  }
  ~DimVector() { free_heap(); }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return heap_ ? heap_ : inline_; }
  const int64_t* data() const { return heap_ ? heap_ : inline_; }
  int64_t& operator[](std::size_t i) { return data()[i]; }
  int64_t operator[](std::size_t i) const { return data()[i]; }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + size_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t back() const { return data()[size_ - 1]; }
  operator IntArrayRef() const { return {data(), size_}; }

  void resize(std::size_t n) {
    if (n > capacity()) grow(n);
    if (n > size_) std::fill(data() + size_, data() + n, 0);
    size_ = static_cast<uint32_t>(n);
  }
  void push_back(int64_t v) {
    if (size_ == capacity()) grow(size_ * 2 + 1);
    data()[size_++] = v;
  }
  void insert(std::size_t pos, int64_t v) {
    push_back(0);
    int64_t* d = data();
    std::memmove(d + pos + 1, d + pos, (size_ - 1 - pos) * sizeof(int64_t));
    d[pos] = v;
  }
  void erase(std::size_t pos) {
    int64_t* d = data();
    std::memmove(d + pos, d + pos + 1, (size_ - 1 - pos) * sizeof(int64_t));
    --size_;
  }

  bool operator==(const DimVector& o) const {
    if (size_ != o.size_) return false;
    // A plain loop: std::equal becomes a memcmp call, dearer for a few dims.
    const int64_t *a = data(), *b = o.data();
    for (std::size_t i = 0; i < size_; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }

 private:
  std::size_t capacity() const { return heap_ ? heap_cap_ : kInlineDims; }
  void assign(const int64_t* p, std::size_t n) {
    if (n > capacity()) grow(n);
    size_ = static_cast<uint32_t>(n);
    // A plain loop: ranks are tiny and a memmove call costs more than it.
    int64_t* d = data();
    for (std::size_t i = 0; i < n; ++i) d[i] = p[i];
  }
  void grow(std::size_t n) {
    auto* h = new int64_t[n];
    std::memcpy(h, data(), size_ * sizeof(int64_t));
    free_heap();
    heap_ = h;
    heap_cap_ = static_cast<uint32_t>(n);
  }
  void free_heap() {
    delete[] heap_;
    heap_ = nullptr;
  }
  void move_from(DimVector& o) {
    size_ = o.size_;
    if (o.heap_) {
      heap_ = o.heap_;
      heap_cap_ = o.heap_cap_;
      o.heap_ = nullptr;
    } else {
      for (std::size_t i = 0; i < size_; ++i) inline_[i] = o.inline_[i];
    }
    o.size_ = 0;
  }

  int64_t inline_[kInlineDims];
  int64_t* heap_ = nullptr;
  uint32_t size_ = 0;
  uint32_t heap_cap_ = 0;
};

std::ostream& operator<<(std::ostream& os, IntArrayRef v);
inline std::ostream& operator<<(std::ostream& os, const DimVector& v) {
  return os << IntArrayRef(v);
}
std::string to_string(IntArrayRef v);

// Number of elements (1 for a 0-d shape). The shape must be valid.
int64_t numel(IntArrayRef shape);
// CR-8: checks a shape before anything is allocated or viewed: at most
// kMaxDims dims, no negative size, and the product of the sizes (counting a
// 0 as 1, so that strides fit too) within int64. Returns the element
// count; throws a ValueError naming `op` and the shape otherwise.
int64_t checked_numel(IntArrayRef shape, const char* op);
// CR-8: the [lo, hi] storage elements a layout reaches from `offset`
// (lo > hi when it has no element), overflow-checked.
std::pair<int64_t, int64_t> checked_extent(IntArrayRef shape, IntArrayRef strides, int64_t offset,
                                           const char* op);
// Row-major strides for `shape`.
DimVector contiguous_strides(IntArrayRef shape);
// True when (shape, strides) is row-major contiguous; size-1 dims may have any stride.
bool is_contiguous(IntArrayRef shape, IntArrayRef strides);
// True when the elements cover a dense block with no gaps and no overlap, in
// any dim order (a transposed contiguous tensor is dense).
bool is_non_overlapping_and_dense(IntArrayRef shape, IntArrayRef strides);
// The broadcast of two shapes (numpy rules); throws naming `op` when they do not broadcast.
DimVector broadcast_shapes(IntArrayRef a, IntArrayRef b, const char* op);
// Strides that view (shape, strides) as `target` (broadcasting with stride 0).
DimVector broadcast_strides(IntArrayRef shape, IntArrayRef strides, IntArrayRef target);
// Wraps a possibly negative dim into [0, ndim); throws naming the valid range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// Strides for viewing (shape, strides) as `new_shape` without a copy, or
// false when the memory layout does not allow it (PyTorch's computeStride).
bool view_strides(IntArrayRef shape, IntArrayRef strides, IntArrayRef new_shape, DimVector& out);
// Resolves one -1 in `shape` for `numel` elements; throws when it cannot.
DimVector infer_shape(IntArrayRef shape, int64_t numel, const char* op);

}  // namespace bp
