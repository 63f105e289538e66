// The value of one element of each primitive op, with PyTorch's rules, as
// plain functions of element values: what a kernel computes, apart from how
// it walks memory. A plugin's loops (a strided row walk, one element per
// thread, a vectorised tail) call these and stay in agreement with the
// reference on the cases that are easy to get wrong: integer overflow wraps,
// NaN propagates through maximum/minimum/max/min and passes relu and clamp,
// -0.0 keeps its sign under neg, integer pow is exact, anything becomes bool
// as x != 0, argmax/argmin keep the first winner and treat NaN as extreme.
//
//   bp::sdk::map2<float, float>(out, a, b,
//       [alpha](float x, float y) { return bp::sdk::fn::add(x, y, alpha); });
//
// Usable from CUDA device code (BP_HOST_DEVICE), like philox.hpp.
#pragma once

#include <backplane/sdk/philox.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace bp::sdk {

// The type integer arithmetic runs in so that overflow wraps (two's
// complement, as PyTorch's integer tensors do) instead of being undefined:
// the unsigned type of the same width; bool and floating types stay.
template <class T>
using Wrapping = typename std::conditional_t<std::is_integral_v<T> && !std::is_same_v<T, bool>,
                                             std::make_unsigned<T>, std::type_identity<T>>::type;

namespace fn {

// --- arithmetic ---------------------------------------------------------------
// x + alpha * y and x - alpha * y (alpha: ADD's and SUB's scalars[0]).
template <class T>
BP_HOST_DEVICE T add(T x, T y, T alpha) {
  using W = Wrapping<T>;
  return static_cast<T>(static_cast<W>(x) + static_cast<W>(alpha) * static_cast<W>(y));
}
template <class T>
BP_HOST_DEVICE T sub(T x, T y, T alpha) {
  using W = Wrapping<T>;
  return static_cast<T>(static_cast<W>(x) - static_cast<W>(alpha) * static_cast<W>(y));
}
// bool: logical and.
template <class T>
BP_HOST_DEVICE T mul(T x, T y) {
  if constexpr (std::is_same_v<T, bool>)
    return x && y;
  else
    return static_cast<T>(static_cast<Wrapping<T>>(x) * static_cast<Wrapping<T>>(y));
}
template <class T>
BP_HOST_DEVICE T div(T x, T y) {
  return x / y;
}
// NaN propagates: either operand NaN gives NaN.
template <class T>
BP_HOST_DEVICE T maximum(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (x != x) return x;
    if (y != y) return y;
  }
  return x < y ? y : x;
}
template <class T>
BP_HOST_DEVICE T minimum(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (x != x) return x;
    if (y != y) return y;
  }
  return y < x ? y : x;
}
// Floating: std::pow. Integers: exact, by squaring in the unsigned type
// (wrapping like the other integer ops); the caller refuses a negative
// exponent before anything is written.
template <class T>
BP_HOST_DEVICE T pow(T base, T exponent) {
  if constexpr (std::is_floating_point_v<T>) {
    using std::pow;
    return pow(base, exponent);
  } else {
    using U = Wrapping<T>;
    U result = 1, b = static_cast<U>(base);
    for (T e = exponent; e > 0; e >>= 1) {
      if (e & 1) result *= b;
      b *= b;
    }
    return static_cast<T>(result);
  }
}

// --- unary --------------------------------------------------------------------
// NaN passes through (a comparison with NaN is false).
template <class T>
BP_HOST_DEVICE T relu(T x) {
  return x < T(0) ? T(0) : x;
}
// Floating: -x, which keeps the sign of zero (0 - x would lose it).
template <class T>
BP_HOST_DEVICE T neg(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return -x;
  else
    return static_cast<T>(Wrapping<T>(0) - static_cast<Wrapping<T>>(x));
}
// Integers: the most negative value stays itself (wraps), as in PyTorch.
template <class T>
BP_HOST_DEVICE T abs(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    using std::fabs;
    return fabs(x);
  } else {
    return x < T(0) ? neg(x) : x;
  }
}
template <class T>
BP_HOST_DEVICE T sigmoid(T x) {
  using std::exp;
  return T(1) / (T(1) + exp(-x));
}
// min(max(x, lo), hi) with NaN x staying NaN; lo and hi from clamp_bounds.
template <class T>
BP_HOST_DEVICE T clamp(T x, T lo, T hi) {
  T r = x;
  if (r < lo) r = lo;
  if (r > hi) r = hi;
  return r;
}
template <class T>
BP_HOST_DEVICE bool logical_not(T x) {
  return x == T(0);
}

// --- conversion ---------------------------------------------------------------
// COPY's conversion: static_cast, except that anything becomes bool as x != 0.
template <class To, class From>
BP_HOST_DEVICE To convert(From x) {
  if constexpr (std::is_same_v<To, bool>)
    return x != From(0);
  else
    return static_cast<To>(x);
}

// --- comparisons and logical ops (bool out) -------------------------------------
template <class T>
BP_HOST_DEVICE bool logical_and(T x, T y) {
  return x != T(0) && y != T(0);
}
template <class T>
BP_HOST_DEVICE bool logical_or(T x, T y) {
  return x != T(0) || y != T(0);
}

// --- reductions ---------------------------------------------------------------
enum class Reduction { sum, prod, max, min };

// The far ends of Acc's range (infinities for floating types), as
// constants: device code reads them without calling numeric_limits' host
// functions.
template <class Acc>
inline constexpr Acc kLowest = std::numeric_limits<Acc>::has_infinity
                                   ? -std::numeric_limits<Acc>::infinity()
                                   : std::numeric_limits<Acc>::lowest();
template <class Acc>
inline constexpr Acc kHighest = std::numeric_limits<Acc>::has_infinity
                                    ? std::numeric_limits<Acc>::infinity()
                                    : std::numeric_limits<Acc>::max();

// The value a reduction starts from: 0, 1, or the far end of Acc's range.
template <Reduction R, class Acc>
BP_HOST_DEVICE Acc identity() {
  if constexpr (R == Reduction::sum)
    return Acc(0);
  else if constexpr (R == Reduction::prod)
    return Acc(1);
  else if constexpr (R == Reduction::max)
    return kLowest<Acc>;
  else
    return kHighest<Acc>;
}

// One step of a reduction: sums and products wrap; max and min propagate NaN.
template <Reduction R, class Acc>
BP_HOST_DEVICE Acc combine(Acc a, Acc b) {
  if constexpr (R == Reduction::sum)
    return static_cast<Acc>(static_cast<Wrapping<Acc>>(a) + static_cast<Wrapping<Acc>>(b));
  else if constexpr (R == Reduction::prod)
    return mul(a, b);
  else if constexpr (R == Reduction::max)
    return maximum(a, b);
  else
    return minimum(a, b);
}

// The types of a reduction of T: Out, what SUM and PROD write (int64 for
// bool and integers) and MAX and MIN write (T); Acc, what it accumulates in
// (double for floating sums and products).
template <Reduction R, class T>
struct ReductionTypes {
  static constexpr bool kWidens = R == Reduction::sum || R == Reduction::prod;
  using Out = std::conditional_t<std::is_floating_point_v<T> || !kWidens, T, int64_t>;
  using Acc = std::conditional_t<std::is_floating_point_v<T> && kWidens, double, Out>;
};

// ARGMAX / ARGMIN: whether v replaces the best so far. Strictly better, so
// the first occurrence wins; NaN is the extreme value, so the first NaN wins
// for good.
template <bool kMax, class T>
BP_HOST_DEVICE bool arg_better(T v, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (best != best) return false;
    if (v != v) return true;
  }
  if constexpr (kMax)
    return v > best;
  else
    return v < best;
}

// --- argsort ------------------------------------------------------------------
// ARGSORT's order: whether `a` sorts strictly before `b`. NaN is greater than
// every number (last ascending, first descending); -0.0 equals 0.0; equal
// elements are not before one another, so a stable sort keeps their order.
template <class T>
BP_HOST_DEVICE bool sorts_before(T a, T b, bool descending) {
  if constexpr (std::is_floating_point_v<T>) {
    if (descending) return a == a ? (b == b && a > b) : b == b;
    return b == b ? (a != a ? false : a < b) : a == a;
  } else {
    return descending ? b < a : a < b;
  }
}

// --- random -------------------------------------------------------------------
// RANDOM's element n (= offset + k) of distribution `dist` (0 uniform [0, 1),
// 1 standard normal) for a float32 or float64 output.
template <class T>
BP_HOST_DEVICE T random_value(int64_t dist, uint64_t seed, uint64_t n) {
  if (dist == 1) return static_cast<T>(philox::normal(seed, n));
  if constexpr (std::is_same_v<T, float>)
    return philox::uniform_float(seed, n);
  else
    return philox::uniform_double(seed, n);
}

}  // namespace fn
}  // namespace bp::sdk
