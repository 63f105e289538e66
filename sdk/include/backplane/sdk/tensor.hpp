// Header-only helpers to read the C ABI's tensor descriptors from C++.
#pragma once

#include <backplane/plugin.h>

#include <array>
#include <backplane/sdk/half.hpp>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace bp::sdk {

// Thrown by a kernel for a dtype or layout it does not handle; the edge turns
// it into BP_STATUS_UNSUPPORTED.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown by a kernel for an invalid call; becomes BP_STATUS_INVALID_ARGUMENT.
struct InvalidArgument : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown by a synchronisation for a failure of work enqueued earlier (an
// index out of range found on the device); becomes BP_STATUS_DEVICE_ERROR.
struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline const char* dtype_name(bp_dtype d) {
  switch (d) {
    case BP_DTYPE_BOOL:
      return "bool";
    case BP_DTYPE_INT32:
      return "int32";
    case BP_DTYPE_INT64:
      return "int64";
    case BP_DTYPE_FLOAT32:
      return "float32";
    case BP_DTYPE_FLOAT64:
      return "float64";
    case BP_DTYPE_FLOAT16:
      return "float16";
    case BP_DTYPE_BFLOAT16:
      return "bfloat16";
    case BP_DTYPE_INT8:
      return "int8";
    case BP_DTYPE_UINT8:
      return "uint8";
    case BP_DTYPE_INT16:
      return "int16";
    default:
      return "unknown";
  }
}

inline std::size_t dtype_size(bp_dtype d) {
  switch (d) {
    case BP_DTYPE_BOOL:
      return 1;
    case BP_DTYPE_INT32:
      return 4;
    case BP_DTYPE_INT64:
      return 8;
    case BP_DTYPE_FLOAT32:
      return 4;
    case BP_DTYPE_FLOAT64:
      return 8;
    case BP_DTYPE_FLOAT16:
      return 2;
    case BP_DTYPE_BFLOAT16:
      return 2;
    case BP_DTYPE_INT8:
      return 1;
    case BP_DTYPE_UINT8:
      return 1;
    case BP_DTYPE_INT16:
      return 2;
    default:
      return 0;
  }
}

// The dtypes added in ABI 2.0 (float16, bfloat16, int8, uint8, int16). A
// host plugin may compute them in a wider dtype (compute_dtype) with its
// kernels for that one: Registrar::emulate_narrow_dtypes.
inline bool is_narrow(bp_dtype d) { return d >= BP_DTYPE_FLOAT16 && d <= BP_DTYPE_INT16; }
inline bp_dtype compute_dtype(bp_dtype d) {
  if (d == BP_DTYPE_FLOAT16 || d == BP_DTYPE_BFLOAT16) return BP_DTYPE_FLOAT32;
  if (d == BP_DTYPE_INT8 || d == BP_DTYPE_UINT8 || d == BP_DTYPE_INT16) return BP_DTYPE_INT64;
  return d;
}

// DLPack dtype -> bp_dtype (BP_DTYPE_COUNT when it is none of ours).
inline bp_dtype from_dl(bp_dl_dtype t) {
  if (t.lanes != 1) return BP_DTYPE_COUNT;
  if (t.code == 6 && t.bits == 8) return BP_DTYPE_BOOL;
  if (t.code == 0 && t.bits == 32) return BP_DTYPE_INT32;
  if (t.code == 0 && t.bits == 64) return BP_DTYPE_INT64;
  if (t.code == 2 && t.bits == 32) return BP_DTYPE_FLOAT32;
  if (t.code == 2 && t.bits == 64) return BP_DTYPE_FLOAT64;
  if (t.code == 2 && t.bits == 16) return BP_DTYPE_FLOAT16;
  if (t.code == 4 && t.bits == 16) return BP_DTYPE_BFLOAT16;
  if (t.code == 0 && t.bits == 8) return BP_DTYPE_INT8;
  if (t.code == 1 && t.bits == 8) return BP_DTYPE_UINT8;
  if (t.code == 0 && t.bits == 16) return BP_DTYPE_INT16;
  return BP_DTYPE_COUNT;
}

constexpr bp_dl_dtype to_dl(bp_dtype d) {
  switch (d) {
    case BP_DTYPE_BOOL:
      return {6, 8, 1};
    case BP_DTYPE_INT32:
      return {0, 32, 1};
    case BP_DTYPE_INT64:
      return {0, 64, 1};
    case BP_DTYPE_FLOAT32:
      return {2, 32, 1};
    case BP_DTYPE_FLOAT64:
      return {2, 64, 1};
    case BP_DTYPE_FLOAT16:
      return {2, 16, 1};
    case BP_DTYPE_BFLOAT16:
      return {4, 16, 1};
    case BP_DTYPE_INT8:
      return {0, 8, 1};
    case BP_DTYPE_UINT8:
      return {1, 8, 1};
    case BP_DTYPE_INT16:
      return {0, 16, 1};
    default:
      return {0, 0, 0};
  }
}

// C++ type <-> bp_dtype.
template <class T>
struct dtype_of;
template <>
struct dtype_of<bool> {
  static constexpr bp_dtype value = BP_DTYPE_BOOL;
};
template <>
struct dtype_of<int32_t> {
  static constexpr bp_dtype value = BP_DTYPE_INT32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr bp_dtype value = BP_DTYPE_INT64;
};
template <>
struct dtype_of<float> {
  static constexpr bp_dtype value = BP_DTYPE_FLOAT32;
};
template <>
struct dtype_of<double> {
  static constexpr bp_dtype value = BP_DTYPE_FLOAT64;
};
template <>
struct dtype_of<Half> {
  static constexpr bp_dtype value = BP_DTYPE_FLOAT16;
};
template <>
struct dtype_of<BFloat16> {
  static constexpr bp_dtype value = BP_DTYPE_BFLOAT16;
};
template <>
struct dtype_of<int8_t> {
  static constexpr bp_dtype value = BP_DTYPE_INT8;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr bp_dtype value = BP_DTYPE_UINT8;
};
template <>
struct dtype_of<int16_t> {
  static constexpr bp_dtype value = BP_DTYPE_INT16;
};

// Calls f(T{}) with the C++ type of `d`, for the dtypes of ABI 1 (bool,
// int32, int64, float32, float64); throws Unsupported otherwise. Kernels
// that handle the narrow dtypes natively use visit_any_dtype.
template <class F>
decltype(auto) visit_dtype(bp_dtype d, F&& f) {
  switch (d) {
    case BP_DTYPE_BOOL:
      return f(bool{});
    case BP_DTYPE_INT32:
      return f(int32_t{});
    case BP_DTYPE_INT64:
      return f(int64_t{});
    case BP_DTYPE_FLOAT32:
      return f(float{});
    case BP_DTYPE_FLOAT64:
      return f(double{});
    default:
      throw Unsupported(std::string("dtype ") + dtype_name(d) + " is not handled here");
  }
}

// Every dtype, the narrow ones as Half, BFloat16, int8_t, uint8_t, int16_t.
template <class F>
decltype(auto) visit_any_dtype(bp_dtype d, F&& f) {
  switch (d) {
    case BP_DTYPE_FLOAT16:
      return f(Half{});
    case BP_DTYPE_BFLOAT16:
      return f(BFloat16{});
    case BP_DTYPE_INT8:
      return f(int8_t{});
    case BP_DTYPE_UINT8:
      return f(uint8_t{});
    case BP_DTYPE_INT16:
      return f(int16_t{});
    default:
      return visit_dtype(d, std::forward<F>(f));
  }
}

// A read-only view of one bp_tensor descriptor.
class TensorRef {
 public:
  explicit TensorRef(const bp_tensor& t) : t_(&t) {}

  int ndim() const { return t_->ndim; }
  int64_t size(int d) const { return t_->shape[d]; }
  int64_t stride(int d) const { return t_->strides[d]; }
  const int64_t* shape() const { return t_->shape; }
  const int64_t* strides() const { return t_->strides; }
  bp_dtype dtype() const { return from_dl(t_->dtype); }
  int32_t device() const { return t_->device.device_id; }
  const bp_tensor& raw() const { return *t_; }

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < t_->ndim; ++d) n *= t_->shape[d];
    return n;
  }

  // Address of the first element (for a plugin whose memory handles are
  // host addresses).
  void* base() const { return static_cast<char*>(t_->data) + t_->byte_offset; }
  template <class T>
  T* data() const {
    return static_cast<T*>(base());
  }

  // Row-major contiguous (size-1 dims may have any stride).
  bool is_contiguous() const {
    int64_t expected = 1;
    for (int d = t_->ndim - 1; d >= 0; --d) {
      if (t_->shape[d] == 1) continue;
      if (t_->strides[d] != expected) return false;
      expected *= t_->shape[d];
    }
    return true;
  }

 private:
  const bp_tensor* t_;
};

// A descriptor with its own shape and strides, to walk an operand as if it
// had another shape: a dim collapsed to size 1, a dim broadcast, or a 0-d
// tensor seen as [1].
class TensorDesc {
 public:
  explicit TensorDesc(const TensorRef& t) : t_(t.raw()) {
    for (int d = 0; d < t.ndim(); ++d) {
      shape_[d] = t.size(d);
      strides_[d] = t.stride(d);
    }
    finish();
  }
  // The data and dtype of `t` with the shape of `shape_of`, all strides 0.
  TensorDesc(const TensorRef& t, const TensorRef& shape_of) : t_(t.raw()) {
    t_.ndim = shape_of.ndim();
    for (int d = 0; d < shape_of.ndim(); ++d) shape_[d] = shape_of.size(d);
    finish();
  }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;

  int ndim() const { return t_.ndim; }
  int64_t& size(int d) { return shape_[d]; }
  int64_t& stride(int d) { return strides_[d]; }
  TensorRef ref() const { return TensorRef(t_); }

 private:
  void finish() {
    if (t_.ndim == 0) {
      t_.ndim = 1;
      shape_[0] = 1;
      strides_[0] = 0;
    }
    t_.shape = shape_.data();
    t_.strides = strides_.data();
  }

  std::array<int64_t, BP_MAX_DIMS> shape_{}, strides_{};
  bp_tensor t_;
};

// Same strides on every dim that is not of size 1 (for equal shapes).
inline bool same_strides(const TensorRef& a, const TensorRef& b) {
  if (a.ndim() != b.ndim()) return false;
  for (int d = 0; d < a.ndim(); ++d)
    if (a.size(d) != 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

// Positive strides that cover exactly numel() consecutive elements in some
// dim order: the tensor can be walked as one flat block from base().
inline bool is_dense(const TensorRef& t) {
  std::array<std::pair<int64_t, int64_t>, BP_MAX_DIMS> dims{};  // (stride, size)
  int n = 0;
  for (int d = 0; d < t.ndim(); ++d) {
    if (t.size(d) == 0) return true;
    if (t.size(d) == 1) continue;
    if (t.stride(d) <= 0 || n == BP_MAX_DIMS) return false;
    dims[n++] = {t.stride(d), t.size(d)};
  }
  // Insertion sort: at most BP_MAX_DIMS entries.
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && dims[j] < dims[j - 1]; --j) std::swap(dims[j], dims[j - 1]);
  int64_t expected = 1;
  for (int i = 0; i < n; ++i) {
    if (dims[i].first != expected) return false;
    expected *= dims[i].second;
  }
  return true;
}

// Reads a scalar attribute as T.
template <class T>
T scalar_as(const bp_scalar& s) {
  if (s.dtype == BP_DTYPE_FLOAT32 || s.dtype == BP_DTYPE_FLOAT64) return static_cast<T>(s.value.f);
  return static_cast<T>(s.value.i);
}

}  // namespace bp::sdk
