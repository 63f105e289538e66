// RELU, NEG, ABS, CLAMP (numeric dtypes), EXP, LOG, SQRT, SIGMOID, TANH, ERF
// (floating dtypes) and LOGICAL_NOT (every dtype, bool out). Integer NEG and
// ABS wrap; NaN passes through RELU and CLAMP unchanged.
#include <cmath>

#include "hostref.h"

namespace hostref {

namespace {

enum class Un { relu, neg, abs, exp, log, sqrt, sigmoid, tanh, erf };

template <Un Op, class T>
T apply(T x) {
  using std::exp, std::log, std::sqrt, std::tanh, std::erf;
  if constexpr (Op == Un::relu) return fn::relu(x);
  if constexpr (Op == Un::neg) return fn::neg(x);
  if constexpr (Op == Un::abs) return fn::abs(x);
  if constexpr (Op == Un::exp) return exp(x);
  if constexpr (Op == Un::log) return log(x);
  if constexpr (Op == Un::sqrt) return sqrt(x);
  if constexpr (Op == Un::sigmoid) return fn::sigmoid(x);
  if constexpr (Op == Un::tanh) return tanh(x);
  if constexpr (Op == Un::erf) return erf(x);
}

template <Un Op>
void unary_kernel(const KernelCall& c) {
  constexpr bool floating_only = Op != Un::relu && Op != Un::neg && Op != Un::abs;
  const bp_dtype dt = check::elementwise(c, 1, false);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> || (floating_only && !std::is_floating_point_v<T>))
      bp::sdk::unsupported(c, dt);
    else
      map1<T, T>(c.output(0), c.input(0), [](T x) { return apply<Op>(x); });
  });
}

// min(max(x, lo), hi); ints[0] bit 0: lo given (scalars[0]), bit 1: hi given (scalars[1]).
void clamp_kernel(const KernelCall& c) {
  const int64_t given = check::clamp(c);
  const bp_dtype dt = c.input(0).dtype();
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      bp::sdk::unsupported(c, dt);
    } else {
      T lo, hi;
      bp::sdk::clamp_bounds<T>(c, given, &lo, &hi);
      map1<T, T>(c.output(0), c.input(0), [lo, hi](T x) { return fn::clamp(x, lo, hi); });
    }
  });
}

void logical_not_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 1, true);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    map1<bool, T>(c.output(0), c.input(0), [](T x) { return fn::logical_not(x); });
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
  r.add<&unary_kernel<Un::erf>>(BP_OP_ERF, kFloatDtypes, BP_ORIGIN);
  r.add<&clamp_kernel>(BP_OP_CLAMP, kNumericDtypes, BP_ORIGIN);
  r.add<&logical_not_kernel>(BP_OP_LOGICAL_NOT, kBaseDtypes, BP_ORIGIN);
}

}  // namespace hostref
