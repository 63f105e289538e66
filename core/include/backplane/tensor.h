// Tensor: a cheap-to-copy handle (one pointer) over a shared TensorImpl.
// Copying a handle aliases (IP-8); views share the Storage and the
// VersionCounter of their base (IP-3, IP-7).
#pragma once

#include <backplane/backend.h>
#include <backplane/device.h>
#include <backplane/dtype.h>
#include <backplane/intrusive_ptr.h>
#include <backplane/shape.h>
#include <backplane/stream.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <source_location>
#include <string>
#include <variant>
#include <vector>

namespace bp {

// Counts in-place modifications of a block of memory (IP-7). Every view of
// a storage shares the storage's counter.
class VersionCounter {
 public:
  uint32_t get() const noexcept { return v_.load(std::memory_order_relaxed); }
  void bump() noexcept { v_.fetch_add(1, std::memory_order_relaxed); }
  // Continues another counter's count (a tensor given new data keeps its history).
  void reset_to(uint32_t v) noexcept { v_.store(v, std::memory_order_relaxed); }

 private:
  std::atomic<uint32_t> v_{0};
};

// A counter of its own, for a tensor that shares memory but not history
// with others (PyTorch's `.data`).
class SharedVersionCounter : public RefCounted {
 public:
  VersionCounter counter;
};

// A block of device memory, allocated and freed by its backend, which it
// keeps loaded. It carries the version counter of its views, so that a new
// tensor costs no extra allocation for it.
class StorageImpl : public RefCounted {
 public:
  // Allocates `nbytes` on `device` for work on `stream` (ABI 2.0 handle).
  StorageImpl(IntrusivePtr<Backend> backend, Device device, std::size_t nbytes, bp_stream stream);
  // Memory another library owns (bp::from_dlpack): `handle` is what the
  // backend's import_memory made of it. When the storage dies, the backend
  // lets go of the handle once the streams that used it are done, and then
  // `release(owner)` hands the memory back.
  struct ExternalOwner {
    void (*release)(void* owner) noexcept = nullptr;
    void* owner = nullptr;
  };
  StorageImpl(IntrusivePtr<Backend> backend, Device device, void* handle, std::size_t nbytes,
              bp_stream stream, ExternalOwner owner);
  ~StorageImpl() override;
  // From a per-thread cache of freed objects (tensor.cpp).
  static void* operator new(std::size_t size);
  static void operator delete(void* p, std::size_t size) noexcept;

  // The plugin's handle for the memory: never dereferenced nor offset by
  // the core (byte offsets travel beside it).
  void* data() const noexcept { return data_; }
  // The byte offset of the storage's first byte from the handle: 0, or the
  // guard placed before it when guarded allocations are on (debug.h).
  // Every address the core hands a plugin adds it.
  std::size_t offset() const noexcept { return offset_; }
  std::size_t nbytes() const noexcept { return nbytes_; }
  Device device() const noexcept { return device_; }
  Backend& backend() const noexcept { return *backend_; }
  // The stream the memory was allocated for.
  bp_stream stream() const noexcept { return stream_; }
  VersionCounter& version_counter() noexcept { return version_; }
  // Marks the memory as used by `stream`: when freed, it is not reused
  // until the work enqueued on `stream` by then has finished.
  void record_stream(bp_stream stream);
  // Whether the memory is another library's (the ExternalOwner constructor).
  bool imported() const noexcept { return external_ != nullptr; }

 private:
  IntrusivePtr<Backend> backend_;
  Device device_;
  std::size_t nbytes_;
  std::size_t offset_ = 0;
  void* data_ = nullptr;
  bp_stream stream_ = nullptr;
  VersionCounter version_;
  // Other streams that used the memory (record_stream): made on first use,
  // so that a storage of one stream carries one null pointer.
  struct StreamUsers {
    std::mutex mu;
    std::vector<bp_stream> streams;
  };
  std::atomic<StreamUsers*> users_{nullptr};
  ExternalOwner* external_ = nullptr;  // set only for imported memory
};

struct AutogradMeta;  // autograd.h; allocated only for tensors in a graph
void destroy_autograd_meta(AutogradMeta* m) noexcept;

class TensorImpl : public RefCounted {
 public:
  // User-provided so that `new TensorImpl()` does not zero the whole object
  // (inline dim storage included) before the member initialisers run.
  TensorImpl() {}
  ~TensorImpl() override {
    if (AutogradMeta* m = autograd.load(std::memory_order_acquire)) destroy_autograd_meta(m);
  }
  // From a per-thread cache of freed objects (tensor.cpp).
  static void* operator new(std::size_t size);
  static void operator delete(void* p, std::size_t size) noexcept;

  IntrusivePtr<StorageImpl> storage;
  VersionCounter* version = nullptr;               // the storage's, or own_version's
  IntrusivePtr<SharedVersionCounter> own_version;  // set only for a separate history
  IntrusivePtr<TensorImpl> base;                   // the tensor that owns the memory, for views
  DimVector sizes;
  DimVector strides;
  int64_t offset = 0;  // in elements
  int64_t numel = 0;
  DType dtype = DType::Float32;
  Device device;
  bool contiguous = true;
  // Mirrors the autograd state so the no-grad fast path tests one byte:
  // a leaf the user flagged, or the result of a recorded op. Atomic because
  // requires_grad_ may race with recording on another thread.
  std::atomic<bool> requires_grad{false};
  // A view made while grad mode was off (or from such a view): modifying it
  // in place while recording is an error (AG-14).
  bool view_made_in_no_grad = false;
  // Made on first use; several threads may record ops on one leaf at once,
  // so it is published with a compare-and-swap (autograd::meta).
  std::atomic<AutogradMeta*> autograd{nullptr};

  void refresh() {  // recompute numel and contiguity after a metadata change
    numel = bp::numel(sizes);
    contiguous = bp::is_contiguous(sizes, strides);
  }
};

struct TensorOptions {
  DType dtype_ = kDefaultFloat;   // meaningful when has_dtype_, else the default
  bool has_dtype_ = false;        // whether the caller named a dtype
  std::optional<Device> device_;  // the default backend when empty
  bool requires_grad_ = false;

  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d), has_dtype_(true) {}
  TensorOptions(Device d) : device_(d) {}
  // Builders return a copy, so a chain never refers to a dead temporary.
  [[nodiscard]] TensorOptions dtype(DType d) const {
    TensorOptions o = *this;
    o.dtype_ = d;
    o.has_dtype_ = true;
    return o;
  }
  [[nodiscard]] TensorOptions device(Device d) const {
    TensorOptions o = *this;
    o.device_ = d;
    return o;
  }
  [[nodiscard]] TensorOptions requires_grad(bool r = true) const {
    TensorOptions o = *this;
    o.requires_grad_ = r;
    return o;
  }
  Device resolved_device() const { return device_ ? *device_ : default_device(); }
};

// Layout of a copy: keep the source's strides when they are dense (PyTorch's
// preserve_format) or make it row-major contiguous.
enum class MemoryFormat { Preserve, Contiguous };

// A Python-style slice for indexing: Slice(), Slice(1), Slice(1, None, 2).
inline constexpr std::nullopt_t None = std::nullopt;
struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
  Slice(std::optional<int64_t> start_ = None, std::optional<int64_t> stop_ = None,
        int64_t step_ = 1)
      : start(start_), stop(stop_), step(step_) {}
};
using TensorIndex = std::variant<int64_t, Slice>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(IntrusivePtr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return static_cast<bool>(impl_); }
  // The tensor's state; an undefined tensor raises a ValueError naming the
  // calling function instead of crashing (CR-9).
  TensorImpl* impl(std::source_location where = std::source_location::current()) const {
    if (__builtin_expect(!impl_, 0)) throw_undefined(where);
    return impl_.get();
  }
  // True when both handles name the same tensor (not merely equal values).
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // --- metadata ---------------------------------------------------------
  int64_t dim() const { return static_cast<int64_t>(impl()->sizes.size()); }
  IntArrayRef sizes() const { return impl()->sizes; }
  IntArrayRef strides() const { return impl()->strides; }
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t numel() const { return impl()->numel; }
  DType dtype() const { return impl()->dtype; }
  Device device() const { return impl()->device; }
  int64_t storage_offset() const { return impl()->offset; }
  std::size_t itemsize() const { return bp::itemsize(impl()->dtype); }
  bool is_contiguous() const { return impl()->contiguous; }
  // True when this tensor is a view of another tensor's memory.
  bool is_view() const { return static_cast<bool>(impl()->base); }
  // The tensor that owns the memory of a view (undefined when not a view).
  Tensor base() const { return Tensor(impl()->base); }
  // The shared in-place modification count (IP-7).
  uint32_t version() const { return impl()->version->get(); }
  // Host address of the first element, for a backend whose memory is host
  // addressable (it waits for the streams using the memory first); throws
  // ValueError otherwise. To compare memory on any device, use
  // shares_storage() and storage_offset().
  const void* data_ptr() const;
  // Marks this tensor's memory as used by `stream` (a stream other than
  // the one it was made on): freeing it then waits for that stream's work,
  // as in PyTorch's record_stream.
  void record_stream(const Stream& stream) const;
  bool shares_storage(const Tensor& o) const { return impl()->storage == o.impl()->storage; }

  // --- autograd (autograd.h has the engine and the no-grad guard) ----------
  bool requires_grad() const {
    const TensorImpl* i = impl();
    // A view requires grad whenever its base does (AG-14), as in PyTorch.
    return i->requires_grad.load(std::memory_order_relaxed) ||
           (i->base && i->base->requires_grad.load(std::memory_order_relaxed));
  }
  // Flags a leaf; only floating tensors may require grad (CR-1, AG-1), and
  // only leaves may change the flag.
  Tensor& requires_grad_(bool requires_grad = true);
  // True for tensors the user made and results of ops recorded by no graph.
  bool is_leaf() const;
  // The accumulated gradient of a leaf (or of a non-leaf after retain_grad()).
  // Reading it on a non-leaf without retain_grad() warns and gives undefined.
  Tensor grad() const;
  // Replaces or clears (Tensor()) the gradient, e.g. zero_grad's set-to-none.
  void set_grad(const Tensor& grad);
  // The name of the node that made this tensor ("MulBackward0"), "" for a leaf.
  std::string grad_fn_name() const;
  // Keeps the gradient of a non-leaf after backward (AG-4).
  Tensor& retain_grad();
  bool retains_grad() const;
  // Calls `hook(grad)` when the gradient for this tensor is computed; a
  // defined return value replaces the gradient (AG-12).
  void register_hook(std::function<Tensor(const Tensor&)> hook);
  // On a leaf: calls `hook(grad)` with leaf.grad() each time backward has
  // accumulated a gradient into it (PyTorch's register_post_accumulate_grad_hook,
  // which passes the leaf; a hook here captures the leaf if it needs it).
  void register_post_accumulate_grad_hook(std::function<void(const Tensor& grad)> hook);
  // Backpropagates from this tensor. `gradient` may be omitted only for a
  // one-element tensor (AG-2). retain_graph keeps the graph for another pass.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // Same memory, same version counter, outside the graph: a leaf that does
  // not require grad (CP-2).
  Tensor detach() const;
  // Detaches this tensor in place and returns it; refused on views (CP-3).
  Tensor& detach_();
  // Same memory, its own version counter: changes through it are invisible
  // to autograd (PyTorch's .data, CP-4).
  Tensor data() const;

  // --- views (no copy, no kernel) -----------------------------------------
  Tensor view(IntArrayRef shape) const;
  Tensor reshape(IntArrayRef shape) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor permute(IntArrayRef dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop,
               int64_t step = 1) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor index(std::initializer_list<TensorIndex> indices) const;
  Tensor expand(IntArrayRef shape) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  // The diagonal of the 2-D planes over (dim1, dim2), shifted by `offset`, as the last dim.
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  // Any sizes/strides over this tensor's memory, from `storage_offset`
  // (the current one when absent). Elements may overlap.
  Tensor as_strided(IntArrayRef size, IntArrayRef stride,
                    std::optional<int64_t> storage_offset = std::nullopt) const;
  // Windows of `size` elements every `step` along `dim`, as a new last dim.
  Tensor unfold(int64_t dim, int64_t size, int64_t step) const;

  // --- copies -----------------------------------------------------------
  Tensor clone(MemoryFormat format = MemoryFormat::Preserve) const;
  Tensor contiguous() const;
  // Copies unless nothing changes (then returns *this).
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor to(Device device, DType dtype) const;

  // --- construction from this tensor (CR-3): dtype and device from *this
  //     unless given ---------------------------------------------------------
  Tensor new_empty(IntArrayRef shape, std::optional<TensorOptions> options = std::nullopt) const;
  Tensor new_zeros(IntArrayRef shape, std::optional<TensorOptions> options = std::nullopt) const;
  Tensor new_ones(IntArrayRef shape, std::optional<TensorOptions> options = std::nullopt) const;
  Tensor new_full(IntArrayRef shape, const Scalar& value,
                  std::optional<TensorOptions> options = std::nullopt) const;
  // Always a copy of `data`, a leaf that does not require grad.
  Tensor new_tensor(const Tensor& data, std::optional<TensorOptions> options = std::nullopt) const;

  // --- in-place (return *this, bump the version) ------------------------
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(const Scalar& value);
  Tensor& zero_();
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& add_(const Scalar& other);
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& sub_(const Scalar& other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(const Scalar& other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(const Scalar& other);
  Tensor& relu_();
  Tensor& neg_();
  Tensor& abs_();
  Tensor& exp_();
  Tensor& log_();
  Tensor& sqrt_();
  Tensor& sigmoid_();
  Tensor& tanh_();
  Tensor& clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi);
  Tensor& pow_(const Scalar& exponent);
  // self[index[i] along dim] = src[i] (or value).
  Tensor& scatter_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor& scatter_(int64_t dim, const Tensor& index, const Scalar& value);
  // self[index[i] along dim] += src[i], every duplicate index counted.
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor& operator+=(const Tensor& o) { return add_(o); }
  Tensor& operator+=(const Scalar& o) { return add_(o); }
  Tensor& operator-=(const Tensor& o) { return sub_(o); }
  Tensor& operator-=(const Scalar& o) { return sub_(o); }
  Tensor& operator*=(const Tensor& o) { return mul_(o); }
  Tensor& operator*=(const Scalar& o) { return mul_(o); }
  Tensor& operator/=(const Tensor& o) { return div_(o); }
  Tensor& operator/=(const Scalar& o) { return div_(o); }

  // --- out-of-place ops -------------------------------------------------
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  Tensor add(const Scalar& other) const;
  Tensor sub(const Scalar& other) const;
  Tensor mul(const Scalar& other) const;
  Tensor div(const Scalar& other) const;
  Tensor relu() const;
  Tensor sum() const;
  Tensor sum(IntArrayRef dims, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const;
  Tensor pow(const Scalar& exponent) const;
  Tensor mean() const;
  Tensor mean(IntArrayRef dims, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor argsort(int64_t dim = -1, bool descending = false, bool stable = false) const;
  std::pair<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false,
                                 bool stable = false) const;
  Tensor cumsum(int64_t dim, std::optional<DType> dtype = std::nullopt) const;

  // --- host data ---------------------------------------------------------
  // The value of a one-element tensor.
  template <class T>
  T item() const;
  Scalar item() const;
  // A host copy of every element in row-major order, converted to T.
  template <class T>
  std::vector<T> to_vector() const;
  // PyTorch-style text: tensor([[0., 1.], [2., 3.]]).
  std::string to_string() const;

 private:
  [[noreturn]] static void throw_undefined(const std::source_location& where);
  IntrusivePtr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace bp
