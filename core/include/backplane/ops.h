// The operations of the front-end, as free functions. Each one checks its
// arguments (devices agree, shapes broadcast, dtypes promote), computes the
// result's metadata and dispatches to the backend's kernel. Tensor methods
// call these.
#pragma once

#include <backplane/error.h>
#include <backplane/tensor.h>

#include <initializer_list>
#include <span>
#include <vector>

namespace bp {

// --- factories ------------------------------------------------------------
Tensor empty(IntArrayRef shape, TensorOptions options = {});
Tensor zeros(IntArrayRef shape, TensorOptions options = {});
Tensor ones(IntArrayRef shape, TensorOptions options = {});
Tensor full(IntArrayRef shape, const Scalar& value, TensorOptions options = {});
// [start, end) in steps of `step`: int64 when every argument is an integer,
// the default float dtype otherwise (unless options name one).
Tensor arange(const Scalar& end, std::optional<TensorOptions> options = std::nullopt);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1,
              std::optional<TensorOptions> options = std::nullopt);

// From host data: `values` in row-major order with `shape`.
template <class T>
Tensor from_vector(const std::vector<T>& values, IntArrayRef shape, TensorOptions options);
template <class T>
Tensor from_vector(const std::vector<T>& values, IntArrayRef shape) {
  return from_vector(values, shape, TensorOptions(dtype_of<T>));
}
template <class T>
Tensor from_vector(const std::vector<T>& values) {
  int64_t n = static_cast<int64_t>(values.size());
  return from_vector(values, IntArrayRef(&n, 1));
}
Tensor from_blob(const void* host_data, DType dtype, IntArrayRef shape, Device device);

// Nested initializer lists: tensor({1, 2}), tensor({{1., 2.}, {3., 4.}}).
// Integers give int64, floating values the default float dtype, bools bool.
namespace detail {
template <class T>
constexpr DType literal_dtype() {
  if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  else if constexpr (std::is_floating_point_v<T>) return kDefaultFloat;
  else return DType::Int64;
}
template <class T>
using Storage = std::conditional_t<std::is_same_v<T, bool>, bool,
                                   std::conditional_t<std::is_floating_point_v<T>, double, int64_t>>;
}  // namespace detail

template <class T>
Tensor tensor(std::initializer_list<T> v, std::optional<DType> dtype = std::nullopt) {
  std::vector<detail::Storage<T>> data(v.begin(), v.end());
  int64_t n = static_cast<int64_t>(v.size());
  return from_vector(data, IntArrayRef(&n, 1), dtype.value_or(detail::literal_dtype<T>()));
}
template <class T>
Tensor tensor(std::initializer_list<std::initializer_list<T>> v,
              std::optional<DType> dtype = std::nullopt) {
  std::vector<detail::Storage<T>> data;
  int64_t cols = v.size() ? static_cast<int64_t>(v.begin()->size()) : 0;
  for (const auto& row : v) {
    BP_CHECK(static_cast<int64_t>(row.size()) == cols,
             "[tensor] nested lists must be rectangular: expected rows of ", cols,
             " elements, got one of ", row.size());
    data.insert(data.end(), row.begin(), row.end());
  }
  int64_t shape[2] = {static_cast<int64_t>(v.size()), cols};
  return from_vector(data, IntArrayRef(shape, 2), dtype.value_or(detail::literal_dtype<T>()));
}
template <class T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> v,
              std::optional<DType> dtype = std::nullopt) {
  std::vector<detail::Storage<T>> data;
  int64_t rows = v.size() ? static_cast<int64_t>(v.begin()->size()) : 0;
  int64_t cols = rows ? static_cast<int64_t>(v.begin()->begin()->size()) : 0;
  for (const auto& plane : v) {
    BP_CHECK(static_cast<int64_t>(plane.size()) == rows,
             "[tensor] nested lists must be rectangular");
    for (const auto& row : plane) {
      BP_CHECK(static_cast<int64_t>(row.size()) == cols,
               "[tensor] nested lists must be rectangular");
      data.insert(data.end(), row.begin(), row.end());
    }
  }
  int64_t shape[3] = {static_cast<int64_t>(v.size()), rows, cols};
  return from_vector(data, IntArrayRef(shape, 3), dtype.value_or(detail::literal_dtype<T>()));
}
// A 0-d tensor.
Tensor scalar_tensor(const Scalar& value, TensorOptions options = {});

// --- elementwise (broadcasting, dtype promotion) ---------------------------
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, const Scalar& b);
Tensor sub(const Tensor& a, const Scalar& b);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Scalar& b);
Tensor relu(const Tensor& a);

// Writes a+alpha*b into an existing `out` (of the broadcast shape and the
// promoted dtype); no allocation.
void add_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }

// --- reductions ------------------------------------------------------------
// Sum of every element (0-d); integers and bool sum to int64.
Tensor sum(const Tensor& a);
Tensor sum(const Tensor& a, IntArrayRef dims, bool keepdim = false);

// --- linear algebra --------------------------------------------------------
// numpy matmul: 1-D and 2-D operands, and batched with broadcast batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);

// --- comparisons on the host (for tests and conformance) -------------------
// True when shapes match and every element is within atol + rtol*|b|.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
// True when shapes and dtypes match and every element is equal.
bool equal(const Tensor& a, const Tensor& b);

}  // namespace bp
