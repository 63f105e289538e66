// Element types, scalars and the promotion rules (PyTorch's).
#pragma once

#include <backplane/plugin.h>

#include <backplane/sdk/half.hpp>
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
  Float16 = BP_DTYPE_FLOAT16,
  BFloat16 = BP_DTYPE_BFLOAT16,
  Int8 = BP_DTYPE_INT8,
  UInt8 = BP_DTYPE_UINT8,
  Int16 = BP_DTYPE_INT16,
};

// Host types of the 16-bit floating dtypes (arithmetic in float).
using Half = sdk::Half;
using BFloat16 = sdk::BFloat16;
inline constexpr int kNumDTypes = BP_DTYPE_COUNT;

// The dtype of floating results when no input decides it.
inline constexpr DType kDefaultFloat = DType::Float32;

constexpr std::size_t itemsize(DType d) {
  switch (d) {
    case DType::Bool:
      return 1;
    case DType::Int32:
      return 4;
    case DType::Int64:
      return 8;
    case DType::Float32:
      return 4;
    case DType::Float64:
      return 8;
    case DType::Float16:
      return 2;
    case DType::BFloat16:
      return 2;
    case DType::Int8:
      return 1;
    case DType::UInt8:
      return 1;
    case DType::Int16:
      return 2;
  }
  return 0;
}
constexpr bool is_floating(DType d) {
  return d == DType::Float32 || d == DType::Float64 || d == DType::Float16 || d == DType::BFloat16;
}
constexpr bool is_integral(DType d) {
  return d == DType::Int32 || d == DType::Int64 || d == DType::Int8 || d == DType::UInt8 ||
         d == DType::Int16;
}
// Every dtype, in the order of their enum values.
inline constexpr DType kAllDTypes[] = {
    DType::Bool,    DType::Int32,    DType::Int64, DType::Float32, DType::Float64,
    DType::Float16, DType::BFloat16, DType::Int8,  DType::UInt8,   DType::Int16};
// True for the C++ types that stand for a floating dtype (float, double,
// Half, BFloat16).
template <class T>
inline constexpr bool is_floating_type_v =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// bool < integer < floating: a result may not be cast down a category in place.
constexpr int category(DType d) { return d == DType::Bool ? 0 : is_integral(d) ? 1 : 2; }

std::string_view name(DType d);
std::ostream& operator<<(std::ostream& os, DType d);

// The smallest dtype that holds both (PyTorch's promote_types).
DType promote_types(DType a, DType b);

template <class T>
struct DTypeOf;
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::Bool;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::Int32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::Int64;
};
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::Float32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::Float64;
};
template <>
struct DTypeOf<Half> {
  static constexpr DType value = DType::Float16;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::BFloat16;
};
template <>
struct DTypeOf<int8_t> {
  static constexpr DType value = DType::Int8;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::UInt8;
};
template <>
struct DTypeOf<int16_t> {
  static constexpr DType value = DType::Int16;
};
template <class T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

// Calls f(T{}) with the C++ type of `d`.
template <class F>
decltype(auto) visit(DType d, F&& f) {
  switch (d) {
    case DType::Bool:
      return f(bool{});
    case DType::Int32:
      return f(int32_t{});
    case DType::Int64:
      return f(int64_t{});
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    case DType::Float16:
      return f(Half{});
    case DType::BFloat16:
      return f(BFloat16{});
    case DType::Int8:
      return f(int8_t{});
    case DType::UInt8:
      return f(uint8_t{});
    case DType::Int16:
      return f(int16_t{});
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
