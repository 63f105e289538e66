// Storage, tensor metadata, and moving values between host and device.
#include <backplane/autograd.h>
#include <backplane/ops.h>
#include <backplane/tensor.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <vector>

#include "autograd/graph.h"
#include "block_cache.h"
#include "internal.h"

namespace bp {

void* StorageImpl::operator new(std::size_t size) { return detail::cached_new<StorageImpl>(size); }
void StorageImpl::operator delete(void* p, std::size_t size) noexcept {
  detail::cached_delete<StorageImpl>(p, size);
}
void* TensorImpl::operator new(std::size_t size) { return detail::cached_new<TensorImpl>(size); }
void TensorImpl::operator delete(void* p, std::size_t size) noexcept {
  detail::cached_delete<TensorImpl>(p, size);
}

StorageImpl::StorageImpl(IntrusivePtr<Backend> backend, Device device, std::size_t nbytes,
                         bp_stream stream)
    : backend_(std::move(backend)), device_(device), nbytes_(nbytes), stream_(stream) {
  // Zero-size tensors still get a distinct, valid allocation: plugins need
  // not special-case size 0.
  data_ = backend_->allocate(device.index, nbytes ? nbytes : 1, stream, &offset_);
}

StorageImpl::StorageImpl(IntrusivePtr<Backend> backend, Device device, void* handle,
                         std::size_t nbytes, bp_stream stream, ExternalOwner owner)
    : backend_(std::move(backend)),
      device_(device),
      nbytes_(nbytes),
      data_(handle),
      stream_(stream),
      external_(new ExternalOwner(owner)) {}

StorageImpl::~StorageImpl() {
  StreamUsers* u = users_.load(std::memory_order_acquire);
  if (__builtin_expect(external_ != nullptr, 0)) {
    backend_->release_import(device_.index, data_, stream_, u ? u->streams.data() : nullptr,
                             u ? u->streams.size() : 0);
    if (external_->release) external_->release(external_->owner);
    delete external_;
    delete u;
    return;
  }
  if (u == nullptr) {
    backend_->deallocate(device_.index, data_, nbytes_ ? nbytes_ : 1, stream_);
    return;
  }
  backend_->deallocate(device_.index, data_, nbytes_ ? nbytes_ : 1, stream_, u->streams.data(),
                       u->streams.size());
  delete u;
}

void StorageImpl::record_stream(bp_stream stream) {
  if (stream == stream_) return;
  StreamUsers* u = users_.load(std::memory_order_acquire);
  if (u == nullptr) {
    auto* fresh = new StreamUsers;
    if (users_.compare_exchange_strong(u, fresh, std::memory_order_acq_rel))
      u = fresh;
    else
      delete fresh;  // another thread made it first: `u` is theirs
  }
  std::lock_guard lock(u->mu);
  for (bp_stream s : u->streams)
    if (s == stream) return;
  u->streams.push_back(stream);
}

namespace detail {

IntrusivePtr<Backend> acquire_backend(Device d) {
  IntrusivePtr<Backend> b = PluginLoader::instance().acquire(d.backend);
  if (__builtin_expect(!b, 0)) {
    BP_CHECK(d.backend >= 0, "[device] no backend selected for this tensor");
    throw PluginError("[device] backend #" + std::to_string(d.backend) +
                      " is not loaded any more (it was unloaded); load it again and use the "
                      "Device value it gives");
  }
  return b;
}

namespace {
static_assert(kMaxDims == BP_MAX_DIMS, "the core's rank limit is the plugin ABI's");

// Gives a new tensor whose sizes and strides are set, of `n` elements whose
// strides reach `bytes` bytes, its dtype, device and memory.
Tensor allocate_impl(IntrusivePtr<TensorImpl> impl, int64_t n, int64_t bytes, DType dtype,
                     Device device, IntrusivePtr<Backend> backend) {
  impl->dtype = dtype;
  impl->device = device;
  impl->numel = n;
  impl->storage = make_intrusive<StorageImpl>(
      std::move(backend), device, static_cast<std::size_t>(bytes), current_stream_of(device));
  impl->version = &impl->storage->version_counter();
  return Tensor(std::move(impl));
}

// `n` elements of `dtype` in bytes, or an error naming the shape.
int64_t checked_bytes(int64_t n, IntArrayRef shape, DType dtype) {
  int64_t bytes = 0;
  BP_CHECK(!__builtin_mul_overflow(n, static_cast<int64_t>(itemsize(dtype)), &bytes),
           "[empty] shape ", shape, " of ", dtype, " needs more bytes than 64 bits can count");
  return bytes;
}

// Finishes a new tensor whose sizes and strides are set: validates the shape
// (CR-8), counts elements, allocates the memory the strides reach.
Tensor finish_empty(IntrusivePtr<TensorImpl> impl, DType dtype, Device device,
                    IntrusivePtr<Backend> backend) {
  const DimVector& shape = impl->sizes;
  const int64_t n = checked_numel(shape, "empty");
  int64_t bytes = 0;
  if (n > 0) {
    const auto [lo, hi] = checked_extent(shape, impl->strides, 0, "empty");
    BP_CHECK(lo >= 0, "[empty] negative strides ", impl->strides, " for shape ", shape);
    bytes = checked_bytes(hi + 1, shape, dtype);
  }
  return allocate_impl(std::move(impl), n, bytes, dtype, device, std::move(backend));
}

IntrusivePtr<TensorImpl> strided_impl(IntArrayRef shape, IntArrayRef strides) {
  auto impl = make_intrusive<TensorImpl>();
  impl->sizes = DimVector(shape);
  impl->strides = DimVector(strides);
  impl->contiguous = bp::is_contiguous(shape, strides);
  return impl;
}

IntrusivePtr<TensorImpl> contiguous_impl(IntArrayRef shape) {
  auto impl = make_intrusive<TensorImpl>();
  impl->sizes = shape;
  if (shape.size() > static_cast<std::size_t>(kMaxDims)) {
    impl->strides = DimVector(shape.size());  // finish_empty rejects the rank
    return impl;
  }
  // Computed on the stack and copied once (resizing the member first cost
  // a memset call, a visible share of a tiny op's result).
  int64_t strides[kMaxDims];
  int64_t acc = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = acc;
    // Wraps only for shapes that finish_empty rejects before using a stride.
    __builtin_mul_overflow(acc, std::max<int64_t>(shape[i], 1), &acc);
  }
  impl->strides = IntArrayRef(strides, shape.size());
  impl->contiguous = true;
  return impl;
}

// The shape is checked before the backend is looked up, so a bad shape is
// reported as such whatever the device.
void check_shape(IntArrayRef shape) { checked_numel(shape, "empty"); }
}  // namespace

Tensor make_empty_strided(IntArrayRef shape, IntArrayRef strides, DType dtype, Device device) {
  check_shape(shape);
  return finish_empty(strided_impl(shape, strides), dtype, device, acquire_backend(device));
}

Tensor make_empty_strided(IntArrayRef shape, IntArrayRef strides, DType dtype, const Tensor& like) {
  return finish_empty(strided_impl(shape, strides), dtype, like.device(),
                      IntrusivePtr<Backend>(&backend_of(like)));
}

Tensor make_empty(IntArrayRef shape, DType dtype, Device device) {
  check_shape(shape);
  return finish_empty(contiguous_impl(shape), dtype, device, acquire_backend(device));
}

Tensor make_empty(IntArrayRef shape, DType dtype, const Tensor& like) {
  const TensorImpl* l = like.impl();
  if (l->numel > 0 && shape.equals(l->sizes)) {
    // `like`'s shape, checked when `like` was made, and its element count:
    // a contiguous layout of them reaches numel elements (most results of
    // element-wise ops, which then skip the shape's checks).
    return allocate_impl(contiguous_impl(shape), l->numel, checked_bytes(l->numel, shape, dtype),
                         dtype, like.device(), IntrusivePtr<Backend>(&backend_of(like)));
  }
  return finish_empty(contiguous_impl(shape), dtype, like.device(),
                      IntrusivePtr<Backend>(&backend_of(like)));
}

Tensor make_view_unrecorded(const Tensor& src, DimVector sizes, DimVector strides, int64_t offset,
                            const char* op) {
  TensorImpl* s = src.impl();
  checked_numel(sizes, op);
  checked_extent(sizes, strides, offset, op);
  auto impl = make_intrusive<TensorImpl>();
  impl->storage = s->storage;
  impl->version = s->version;
  impl->own_version = s->own_version;
  impl->base = s->base ? s->base : IntrusivePtr<TensorImpl>(s);
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = s->dtype;
  impl->device = s->device;
  impl->view_made_in_no_grad = s->view_made_in_no_grad || !GradMode::is_enabled();
  impl->refresh();
  return Tensor(std::move(impl));
}

std::string describe_tensor(const Tensor& t) {
  std::ostringstream os;
  os << "tensor of shape " << t.sizes() << ", dtype " << t.dtype() << " on " << t.device();
  return os.str();
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  BP_CHECK(a.device() == b.device(), "[", op, "] expected all tensors on one device, got ",
           describe_tensor(a), " and ", describe_tensor(b),
           "; move one with .to(device) first (no implicit transfers)");
}

}  // namespace detail

void Tensor::throw_undefined(const std::source_location& where) {
  // "int64_t bp::Tensor::size(int64_t) const" -> "size"
  std::string_view f = where.function_name();
  f = f.substr(0, f.find('('));
  if (const auto colon = f.rfind("::"); colon != std::string_view::npos) f = f.substr(colon + 2);
  if (const auto space = f.rfind(' '); space != std::string_view::npos) f = f.substr(space + 1);
  throw ValueError("[" + std::string(f) +
                   "] the tensor is undefined: a default-constructed "
                   "bp::Tensor holds no tensor. Assign one before use (test with .defined())");
}

int64_t Tensor::size(int64_t d) const { return impl()->sizes[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return impl()->strides[wrap_dim(d, dim(), "stride")]; }

const void* Tensor::data_ptr() const {
  StorageImpl& st = *impl()->storage;
  Backend& b = st.backend();
  BP_CHECK(b.host_addressable(device().index), "[data_ptr] the memory of backend '", b.name(),
           "' is not host addressable: it has no host address (compare tensors' memory with "
           "shares_storage() and storage_offset())");
  // Host code reads what the address points at: the device's work first.
  b.synchronize(device().index);
  return b.host_pointer(device().index, st.data(),
                        st.offset() + static_cast<uint64_t>(impl()->offset) * itemsize());
}

void Tensor::record_stream(const Stream& stream) const {
  BP_CHECK(stream.device() == device(), "[record_stream] a tensor on ", device(),
           " cannot be used by a stream of ", stream.device());
  impl()->storage->record_stream(stream.handle());
}

namespace detail {
void read_bytes(const Tensor& c, void* out) {
  if (c.numel() == 0) return;
  // The storage's own backend: it stays usable after PluginLoader::unload,
  // so a tensor outliving its plugin's registration can still be read.
  const StorageImpl& s = *c.impl()->storage;
  s.backend().read_to_host(c.device().index, current_stream_of(c.device()), out, s.data(),
                           s.offset() + static_cast<uint64_t>(c.storage_offset()) * c.itemsize(),
                           static_cast<uint64_t>(c.numel()) * c.itemsize());
}
}  // namespace detail

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = is_contiguous() ? *this : contiguous();
  const std::size_t n = static_cast<std::size_t>(c.numel());
  std::vector<T> out(n);
  if (n == 0) return out;
  visit(c.dtype(), [&](auto tag) {
    // Raw element type on the device (bytes for bool: vector<bool> has no data()).
    using S = std::conditional_t<std::is_same_v<decltype(tag), bool>, uint8_t, decltype(tag)>;
    std::vector<S> raw(n);
    detail::read_bytes(c, raw.data());
    for (std::size_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, bool>)
        out[i] = raw[i] != S(0);
      else
        out[i] = static_cast<T>(raw[i]);
    }
  });
  return out;
}

template <class T>
T Tensor::item() const {
  BP_CHECK(numel() == 1, "[item] only a tensor with one element can be converted to a scalar, got ",
           detail::describe_tensor(*this));
  return to_vector<T>()[0];
}

Scalar Tensor::item() const {
  if (dtype() == DType::Bool) return Scalar(item<bool>());
  if (is_integral(dtype())) return Scalar(item<int64_t>());
  return Scalar(item<double>());
}

#define BP_INSTANTIATE(T)                               \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
BP_INSTANTIATE(bool)
BP_INSTANTIATE(int32_t)
BP_INSTANTIATE(int64_t)
BP_INSTANTIATE(float)
BP_INSTANTIATE(double)
BP_INSTANTIATE(Half)
BP_INSTANTIATE(BFloat16)
BP_INSTANTIATE(int8_t)
BP_INSTANTIATE(uint8_t)
BP_INSTANTIATE(int16_t)
#undef BP_INSTANTIATE

}  // namespace bp
