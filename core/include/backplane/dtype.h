// Element types, scalars and the promotion rules (PyTorch's).
#pragma once

#include <backplane/plugin.h>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>
#include <type_traits>

namespace bp {

// The values match bp_dtype, so a DType crosses the ABI unchanged.
enum class DType : uint8_t {
  Bool = BP_DTYPE_BOOL,
  Int32 = BP_DTYPE_INT32,
  Int64 = BP_DTYPE_INT64,
  Float32 = BP_DTYPE_FLOAT32,
  Float64 = BP_DTYPE_FLOAT64,
};
inline constexpr int kNumDTypes = BP_DTYPE_COUNT;

// The dtype of floating results when no input decides it.
inline constexpr DType kDefaultFloat = DType::Float32;

constexpr std::size_t itemsize(DType d) {
  switch (d) {
    case DType::Bool: return 1;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::Float32: return 4;
    case DType::Float64: return 8;
  }
  return 0;
}
constexpr bool is_floating(DType d) { return d == DType::Float32 || d == DType::Float64; }
constexpr bool is_integral(DType d) { return d == DType::Int32 || d == DType::Int64; }

// bool < integer < floating: a result may not be cast down a category in place.
constexpr int category(DType d) { return d == DType::Bool ? 0 : is_integral(d) ? 1 : 2; }

std::string_view name(DType d);
std::ostream& operator<<(std::ostream& os, DType d);

// The smallest dtype that holds both (PyTorch's promote_types).
DType promote_types(DType a, DType b);

template <class T> struct DTypeOf;
template <> struct DTypeOf<bool> { static constexpr DType value = DType::Bool; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::Float32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::Float64; };
template <class T> inline constexpr DType dtype_of = DTypeOf<T>::value;

// Calls f(T{}) with the C++ type of `d`.
template <class F>
decltype(auto) visit(DType d, F&& f) {
  switch (d) {
    case DType::Bool: return f(bool{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
  }
  return f(float{});
}

// A number given by the user (a fill value, an alpha, the other operand of
// `t + 2`). It remembers its category: bool, integer or floating.
class Scalar {
 public:
  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(DType::Bool) { v_.i = v; }
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(DType::Int64) {
    v_.i = static_cast<int64_t>(v);
  }
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(DType::Float64) {
    v_.f = static_cast<double>(v);
  }

  // Bool, Int64 or Float64: the category of the value.
  DType kind() const { return kind_; }
  bool is_floating() const { return kind_ == DType::Float64; }
  bool is_bool() const { return kind_ == DType::Bool; }

  template <class T>
  T to() const {
    if (kind_ == DType::Float64) return static_cast<T>(v_.f);
    return static_cast<T>(v_.i);
  }
  double to_double() const { return to<double>(); }

  // The ABI form.
  bp_scalar to_abi() const {
    bp_scalar s{};
    s.dtype = static_cast<int32_t>(kind_);
    if (kind_ == DType::Float64)
      s.value.f = v_.f;
    else
      s.value.i = v_.i;
    return s;
  }

 private:
  DType kind_;
  union {
    double f;
    int64_t i;
  } v_;
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

// dtype of `tensor op scalar`: a scalar changes the result only when it is of
// a higher category (int tensor + 2.5 -> default float; float32 + 2.5 -> float32).
DType result_type(DType tensor, const Scalar& s);

}  // namespace bp
