// The operations of the front-end, as free functions. Each one checks its
// arguments (devices agree, shapes broadcast, dtypes promote), computes the
// result's metadata and dispatches to the backend's kernel. Tensor methods
// call these.
#pragma once

#include <backplane/error.h>
#include <backplane/tensor.h>

#include <initializer_list>
#include <span>
#include <tuple>
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
  if constexpr (std::is_same_v<T, bool>)
    return DType::Bool;
  else if constexpr (std::is_floating_point_v<T>)
    return kDefaultFloat;
  else
    return DType::Int64;
}
template <class T>
using Storage =
    std::conditional_t<std::is_same_v<T, bool>, bool,
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

// `steps` values evenly spaced over the closed interval [start, end] (CR-5).
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, TensorOptions options = {});
// base ** linspace(start, end, steps).
Tensor logspace(const Scalar& start, const Scalar& end, int64_t steps, double base = 10.0,
                TensorOptions options = {});

// *_like: shape, dtype and device of `t` (unless `options` says otherwise),
// t's strides when t is dense and non-overlapping, else contiguous; never
// t's memory; requires grad only when asked (CR-2).
Tensor empty_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
Tensor ones_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
Tensor full_like(const Tensor& t, const Scalar& value,
                 std::optional<TensorOptions> options = std::nullopt);
Tensor rand_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);
Tensor randn_like(const Tensor& t, std::optional<TensorOptions> options = std::nullopt);

// --- random numbers (CR-6) ---------------------------------------------------
// The process-wide generator is counter based (Philox4x32-10): element i of
// a request is a function of (seed, offset + i) only, identical on every
// backend. Each request advances the offset by its number of elements.
void manual_seed(uint64_t seed);
struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};
GeneratorState generator_state();
void set_generator_state(GeneratorState state);
// Uniform on [0, 1) and standard normal; floating dtypes only.
Tensor rand(IntArrayRef shape, TensorOptions options = {});
Tensor randn(IntArrayRef shape, TensorOptions options = {});

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

// --- elementwise unary ------------------------------------------------------
Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
// exp, log, sqrt, sigmoid, tanh compute in floating point: integer and bool
// inputs give the default float dtype.
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor tanh(const Tensor& a);
// The Gaussian error function.
Tensor erf(const Tensor& a);
// min(max(a, lo), hi); either bound may be absent (not both).
Tensor clamp(const Tensor& a, std::optional<Scalar> lo, std::optional<Scalar> hi);
Tensor logical_not(const Tensor& a);
inline Tensor operator-(const Tensor& a) { return neg(a); }

// --- elementwise binary: maximum, minimum, pow, comparisons, logical --------
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor pow(const Tensor& a, const Scalar& exponent);
// Comparisons give bool tensors.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& b);
Tensor ne(const Tensor& a, const Scalar& b);
Tensor lt(const Tensor& a, const Scalar& b);
Tensor le(const Tensor& a, const Scalar& b);
Tensor gt(const Tensor& a, const Scalar& b);
Tensor ge(const Tensor& a, const Scalar& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
// cond ? a : b, broadcasting all three; cond must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

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

// --- composite ops a backend may override (named op "core::<name>") --------
// They are built from primitives, so they run and differentiate on every
// backend; where a backend registers a fused kernel for one, the core runs
// that kernel whenever no gradient is being recorded (see named_ops.h).
// x * sigmoid(x) (PyTorch's silu); floating dtypes.
Tensor silu(const Tensor& x);
// Layer normalisation over the last normalized_shape.size() dims, which
// must be normalized_shape: (x - mean) / sqrt(var + eps), var biased, then
// * weight + bias when given (each of normalized_shape); floating dtypes.
Tensor layer_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// --- reductions ------------------------------------------------------------
// Sum of every element (0-d); integers and bool sum to int64.
Tensor sum(const Tensor& a);
Tensor sum(const Tensor& a, IntArrayRef dims, bool keepdim = false);
// Floating inputs only.
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, IntArrayRef dims, bool keepdim = false);
Tensor prod(const Tensor& a);
Tensor prod(const Tensor& a, int64_t dim, bool keepdim = false);
// Over every element: an error on an empty tensor (there is no identity).
Tensor max(const Tensor& a);
Tensor min(const Tensor& a);
// Over one dim: (values, indices).
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);
// Index of the first maximal/minimal element, over the flattened tensor or one dim.
Tensor argmax(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

// --- along one dim ------------------------------------------------------------
Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);
// out[i][j] = a[index[i][j]][j] for dim 0 (and so on); index is int64.
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
// A copy of `a` with src (or value) written at `index` along `dim`.
Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Scalar& value);
Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
// The positions that sort each line along `dim`: a stable sort (whatever
// `stable` says), NaN above every number, -0.0 equal to 0.0; int64.
Tensor argsort(const Tensor& a, int64_t dim = -1, bool descending = false, bool stable = false);
// (values, indices) of argsort; the values' gradient goes back to where
// each value came from.
std::pair<Tensor, Tensor> sort(const Tensor& a, int64_t dim = -1, bool descending = false,
                               bool stable = false);
// Running sums along `dim` (of `a` converted to `dtype` when given, and in
// that dtype); bool and integer tensors otherwise sum to int64.
Tensor cumsum(const Tensor& a, int64_t dim, std::optional<DType> dtype = std::nullopt);
// (output, inverse, counts): each run of equal consecutive elements (or,
// with `dim`, equal slices along it) kept once; inverse gives each element's
// (slice's) place in the output, counts each run's length. Inverse and
// counts are undefined tensors unless asked for. Not differentiable.
std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& a, bool return_inverse = false,
                                                      bool return_counts = false,
                                                      std::optional<int64_t> dim = std::nullopt);

// --- linear algebra --------------------------------------------------------
// numpy matmul: 1-D and 2-D operands, and batched with broadcast batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);
// Batched matrix product of two 3-D tensors [b, m, k] @ [b, k, n], no broadcasting.
Tensor bmm(const Tensor& a, const Tensor& b);

// --- comparisons on the host (for tests and conformance) -------------------
// True when shapes match and every element is within atol + rtol*|b|.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
// True when shapes and dtypes match and every element is equal.
bool equal(const Tensor& a, const Tensor& b);

}  // namespace bp
