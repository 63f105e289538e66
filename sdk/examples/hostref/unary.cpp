// RELU, NEG, ABS, CLAMP (numeric dtypes), EXP, LOG, SQRT, SIGMOID, TANH
// (floating dtypes) and LOGICAL_NOT (every dtype, bool out). Integer NEG and
// ABS wrap; NaN passes through RELU and CLAMP unchanged.
#include <cmath>
#include <limits>

#include "hostref.h"

namespace hostref {

namespace {

enum class Un { relu, neg, abs, exp, log, sqrt, sigmoid, tanh };

constexpr const char* kUnNames[] = {"relu", "neg", "abs", "exp", "log", "sqrt", "sigmoid", "tanh"};

template <Un Op, class T>
T apply(T x) {
  using W = Wrapping<T>;
  if constexpr (Op == Un::relu) return x < T(0) ? T(0) : x;
  if constexpr (Op == Un::neg) {
    if constexpr (std::is_floating_point_v<T>)
      return -x;  // keeps the sign of zero, which 0 - x would lose
    else
      return static_cast<T>(W(0) - static_cast<W>(x));
  }
  if constexpr (Op == Un::abs) {
    if constexpr (std::is_floating_point_v<T>)
      return std::fabs(x);
    else
      return x < T(0) ? static_cast<T>(W(0) - static_cast<W>(x)) : x;
  }
  if constexpr (Op == Un::exp) return std::exp(x);
  if constexpr (Op == Un::log) return std::log(x);
  if constexpr (Op == Un::sqrt) return std::sqrt(x);
  if constexpr (Op == Un::sigmoid) return T(1) / (T(1) + std::exp(-x));
  if constexpr (Op == Un::tanh) return std::tanh(x);
}

template <Un Op>
void unary_kernel(const KernelCall& c) {
  constexpr const char* name = kUnNames[static_cast<int>(Op)];
  constexpr bool floating_only = Op != Un::relu && Op != Un::neg && Op != Un::abs;
  const bp_dtype dt = check_elementwise(c, name, 1, false);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> || (floating_only && !std::is_floating_point_v<T>))
      unsupported(name, dt);
    else
      map1<T, T>(c.output(0), c.input(0), [](T x) { return apply<Op>(x); });
  });
}

// A clamp bound as T. For an integer T a fractional bound rounds inwards
// (ceil for lo, floor for hi) and saturates to T's range, which clamps every
// integer exactly as the real-valued bound would.
template <class T>
T clamp_bound(const bp_scalar& s, bool lower) {
  using lim = std::numeric_limits<T>;
  const bool is_float = s.dtype == BP_DTYPE_FLOAT32 || s.dtype == BP_DTYPE_FLOAT64;
  if constexpr (std::is_floating_point_v<T>) {
    return is_float ? static_cast<T>(s.value.f) : static_cast<T>(s.value.i);
  } else {
    if (is_float) {
      HOSTREF_CHECK(s.value.f == s.value.f, "clamp", "a NaN bound cannot clamp an integer tensor");
      const double v = lower ? std::ceil(s.value.f) : std::floor(s.value.f);
      if (v <= static_cast<double>(lim::lowest())) return lim::lowest();
      if (v >= static_cast<double>(lim::max())) return lim::max();
      return static_cast<T>(v);
    }
    if (s.value.i <= static_cast<int64_t>(lim::lowest())) return lim::lowest();
    if (s.value.i >= static_cast<int64_t>(lim::max())) return lim::max();
    return static_cast<T>(s.value.i);
  }
}

// min(max(x, lo), hi); ints[0] bit 0: lo given (scalars[0]), bit 1: hi given (scalars[1]).
void clamp_kernel(const KernelCall& c) {
  const bp_dtype dt = check_elementwise(c, "clamp", 1, false);
  HOSTREF_CHECK(c.attrs().num_ints >= 1, "clamp", "the bound flags (ints[0]) are missing");
  const int64_t given = c.attrs().ints[0];
  const int needed = (given & 2) ? 2 : (given & 1) ? 1 : 0;
  HOSTREF_CHECK(
      c.attrs().num_scalars >= needed, "clamp",
      "ints[0] = " << given << " needs " << needed << " scalars, got " << c.attrs().num_scalars);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      unsupported("clamp", dt);
    } else {
      using lim = std::numeric_limits<T>;
      const T lo = (given & 1) ? clamp_bound<T>(c.scalar(0), true)
                               : (lim::has_infinity ? -lim::infinity() : lim::lowest());
      const T hi = (given & 2) ? clamp_bound<T>(c.scalar(1), false)
                               : (lim::has_infinity ? lim::infinity() : lim::max());
      map1<T, T>(c.output(0), c.input(0), [lo, hi](T x) {
        T r = x;  // comparisons with NaN are false: NaN stays NaN
        if (r < lo) r = lo;
        if (r > hi) r = hi;
        return r;
      });
    }
  });
}

void logical_not_kernel(const KernelCall& c) {
  const bp_dtype dt = check_elementwise(c, "logical_not", 1, true);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    map1<bool, T>(c.output(0), c.input(0), [](T x) { return x == T(0); });
  });
}

}  // namespace

void register_unary_kernels(Registrar& r) {
  r.add<&unary_kernel<Un::relu>>(BP_OP_RELU, kNumericDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::neg>>(BP_OP_NEG, kNumericDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::abs>>(BP_OP_ABS, kNumericDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::exp>>(BP_OP_EXP, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::log>>(BP_OP_LOG, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::sqrt>>(BP_OP_SQRT, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::sigmoid>>(BP_OP_SIGMOID, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::tanh>>(BP_OP_TANH, kFloatDtypes, BP_ORIGIN);
  r.add<&clamp_kernel>(BP_OP_CLAMP, kNumericDtypes, BP_ORIGIN);
  r.add<&logical_not_kernel>(BP_OP_LOGICAL_NOT, kAllDtypes, BP_ORIGIN);
}

}  // namespace hostref
