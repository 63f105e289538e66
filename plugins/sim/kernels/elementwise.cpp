// The element-wise ops, one thread per output element: FILL, COPY, ADD..POW,
// MAXIMUM, MINIMUM, the comparisons, LOGICAL_AND/OR, WHERE, the unary ops,
// CLAMP and LOGICAL_NOT. The value of each element is the SDK's
// (bp::sdk::fn), the same as every other backend's.
#include <backplane/sdk/widen.hpp>
#include <cmath>
#include <utility>

#include "grid.h"

namespace bp::sim {

namespace {

template <class O, class... Ts, class F, std::size_t... K>
void map_grid(const TensorRef& out, const std::array<TensorRef, sizeof...(Ts)>& in, F& f,
              std::index_sequence<K...>) {
  constexpr int N = sizeof...(Ts) + 1;
  const Grid<N> g = grid<N>({out, in[K]...}, out);
  launch(g.numel(), [&](int64_t i) {
    const auto p = g.at(i);
    ref<O>(p[0]) = f(ref<Ts>(p[K + 1])...);
  });
}

// out[i] = f(in[0][i], ...), the inputs of types Ts, out of type O; each
// thread reads its elements before writing its own, so out may be an input.
template <class O, class... Ts, class F>
void map(const TensorRef& out, const std::array<TensorRef, sizeof...(Ts)>& in, F f) {
  map_grid<O, Ts...>(out, in, f, std::index_sequence_for<Ts...>{});
}

void fill_kernel(const KernelCall& c) {
  check::fill(c);
  bp::sdk::visit_dtype(c.output(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = bp::sdk::scalar_as<T>(c.scalar(0));
    map<T>(c.output(0), {}, [v]() { return v; });
  });
}

// A copy between dtypes is a host walk in the SDK (cast_copy) that any
// dtype pair and layout take; on sim it runs on the queue like a kernel.
void copy_kernel(const KernelCall& c) {
  check::copy(c);
  bp::sdk::cast_copy(c.output(0), c.input(0));
}

// The value of a binary op's element; alpha scales ADD's and SUB's y.
template <bp_op Op, class T>
T binary_value(T x, T y, T alpha) {
  if constexpr (Op == BP_OP_ADD) return fn::add(x, y, alpha);
  if constexpr (Op == BP_OP_SUB) return fn::sub(x, y, alpha);
  if constexpr (Op == BP_OP_MUL) return fn::mul(x, y);
  if constexpr (Op == BP_OP_DIV) return fn::div(x, y);
  if constexpr (Op == BP_OP_MAXIMUM) return fn::maximum(x, y);
  if constexpr (Op == BP_OP_MINIMUM) return fn::minimum(x, y);
  if constexpr (Op == BP_OP_POW) return fn::pow(x, y);
}

template <bp_op Op>
void binary_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 2, false);
  const TensorRef a = c.input(0), b = c.input(1);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> && Op != BP_OP_MUL && Op != BP_OP_MAXIMUM &&
                  Op != BP_OP_MINIMUM) {
      bp::sdk::unsupported(c, dt);
    } else {
      if constexpr (Op == BP_OP_POW && !std::is_floating_point_v<T>) {
        // A first pass, before anything is written: a refused call changes nothing.
        const Grid<1> g = grid<1>({b}, b);
        bool negative = false;
        launch(g.numel(), [&](int64_t i) { negative |= ref<T>(g.at(i)[0]) < T(0); });
        BP_SDK_CHECK(!negative, "pow", "integers to negative integer powers are not allowed");
      }
      const bool scaled = (Op == BP_OP_ADD || Op == BP_OP_SUB) && c.attrs().num_scalars > 0;
      const T alpha = scaled ? bp::sdk::scalar_as<T>(c.scalar(0)) : T(1);
      map<T, T, T>(c.output(0), {a, b},
                   [alpha](T x, T y) { return binary_value<Op, T>(x, y, alpha); });
    }
  });
}

template <bp_op Op, class T>
bool compare_value(T x, T y) {
  if constexpr (Op == BP_OP_EQ) return x == y;
  if constexpr (Op == BP_OP_NE) return x != y;
  if constexpr (Op == BP_OP_LT) return x < y;
  if constexpr (Op == BP_OP_LE) return x <= y;
  if constexpr (Op == BP_OP_GT) return x > y;
  if constexpr (Op == BP_OP_GE) return x >= y;
  if constexpr (Op == BP_OP_LOGICAL_AND) return fn::logical_and(x, y);
  if constexpr (Op == BP_OP_LOGICAL_OR) return fn::logical_or(x, y);
}

template <bp_op Op>
void compare_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 2, true);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    map<bool, T, T>(c.output(0), {c.input(0), c.input(1)},
                    [](T x, T y) { return compare_value<Op, T>(x, y); });
  });
}

// out = in0 ? in1 : in2; the condition is bool, the dispatch dtype in1's.
void where_kernel(const KernelCall& c) {
  const bp_dtype dt = check::where(c);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    map<T, bool, T, T>(c.output(0), {c.input(0), c.input(1), c.input(2)},
                       [](bool m, T x, T y) { return m ? x : y; });
  });
}

template <bp_op Op, class T>
T unary_value(T x) {
  using std::exp, std::log, std::sqrt, std::tanh, std::erf;
  if constexpr (Op == BP_OP_RELU) return fn::relu(x);
  if constexpr (Op == BP_OP_NEG) return fn::neg(x);
  if constexpr (Op == BP_OP_ABS) return fn::abs(x);
  if constexpr (Op == BP_OP_EXP) return exp(x);
  if constexpr (Op == BP_OP_LOG) return log(x);
  if constexpr (Op == BP_OP_SQRT) return sqrt(x);
  if constexpr (Op == BP_OP_SIGMOID) return fn::sigmoid(x);
  if constexpr (Op == BP_OP_TANH) return tanh(x);
  if constexpr (Op == BP_OP_ERF) return erf(x);
}

template <bp_op Op>
void unary_kernel(const KernelCall& c) {
  constexpr bool floating_only = Op != BP_OP_RELU && Op != BP_OP_NEG && Op != BP_OP_ABS;
  const bp_dtype dt = check::elementwise(c, 1, false);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> || (floating_only && !std::is_floating_point_v<T>))
      bp::sdk::unsupported(c, dt);
    else
      map<T, T>(c.output(0), {c.input(0)}, [](T x) { return unary_value<Op, T>(x); });
  });
}

// ints[0] bit 0: lo given (scalars[0]), bit 1: hi given (scalars[1]).
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
      map<T, T>(c.output(0), {c.input(0)}, [lo, hi](T x) { return fn::clamp(x, lo, hi); });
    }
  });
}

void logical_not_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 1, true);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    map<bool, T>(c.output(0), {c.input(0)}, [](T x) { return fn::logical_not(x); });
  });
}

}  // namespace

void register_elementwise_kernels(Registrar& r) {
  using bp::sdk::kBaseDtypes, bp::sdk::kFloatDtypes, bp::sdk::kNumericDtypes;
  r.add<&fill_kernel>(BP_OP_FILL, kBaseDtypes, BP_ORIGIN);
  r.add<&copy_kernel>(BP_OP_COPY, kBaseDtypes, BP_ORIGIN);
  // Scalars as attributes: the queued copy of the call keeps scalars[1],
  // and the SDK's thunk makes it a broadcast operand when the call runs.
  r.add_scalar_operand<&binary_kernel<BP_OP_ADD>>(BP_OP_ADD, kNumericDtypes, BP_ORIGIN);
  r.add_scalar_operand<&binary_kernel<BP_OP_SUB>>(BP_OP_SUB, kNumericDtypes, BP_ORIGIN);
  r.add_scalar_operand<&binary_kernel<BP_OP_MUL>>(BP_OP_MUL, kBaseDtypes, BP_ORIGIN);
  r.add_scalar_operand<&binary_kernel<BP_OP_DIV>>(BP_OP_DIV, kFloatDtypes, BP_ORIGIN);
  r.add<&binary_kernel<BP_OP_MAXIMUM>>(BP_OP_MAXIMUM, kBaseDtypes, BP_ORIGIN);
  r.add<&binary_kernel<BP_OP_MINIMUM>>(BP_OP_MINIMUM, kBaseDtypes, BP_ORIGIN);
  r.add<&binary_kernel<BP_OP_POW>>(BP_OP_POW, kNumericDtypes, BP_ORIGIN);
  r.add<&compare_kernel<BP_OP_EQ>>(BP_OP_EQ, kBaseDtypes, BP_ORIGIN);
  r.add<&compare_kernel<BP_OP_NE>>(BP_OP_NE, kBaseDtypes, BP_ORIGIN);
  r.add<&compare_kernel<BP_OP_LT>>(BP_OP_LT, kBaseDtypes, BP_ORIGIN);
  r.add<&compare_kernel<BP_OP_LE>>(BP_OP_LE, kBaseDtypes, BP_ORIGIN);
  r.add<&compare_kernel<BP_OP_GT>>(BP_OP_GT, kBaseDtypes, BP_ORIGIN);
  r.add<&compare_kernel<BP_OP_GE>>(BP_OP_GE, kBaseDtypes, BP_ORIGIN);
  r.add<&compare_kernel<BP_OP_LOGICAL_AND>>(BP_OP_LOGICAL_AND, kBaseDtypes, BP_ORIGIN);
  r.add<&compare_kernel<BP_OP_LOGICAL_OR>>(BP_OP_LOGICAL_OR, kBaseDtypes, BP_ORIGIN);
  r.add<&where_kernel>(BP_OP_WHERE, kBaseDtypes, BP_ORIGIN);
  r.add<&unary_kernel<BP_OP_RELU>>(BP_OP_RELU, kNumericDtypes, BP_ORIGIN);
  r.add<&unary_kernel<BP_OP_NEG>>(BP_OP_NEG, kNumericDtypes, BP_ORIGIN);
  r.add<&unary_kernel<BP_OP_ABS>>(BP_OP_ABS, kNumericDtypes, BP_ORIGIN);
  r.add<&unary_kernel<BP_OP_EXP>>(BP_OP_EXP, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<BP_OP_LOG>>(BP_OP_LOG, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<BP_OP_SQRT>>(BP_OP_SQRT, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<BP_OP_SIGMOID>>(BP_OP_SIGMOID, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<BP_OP_TANH>>(BP_OP_TANH, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<BP_OP_ERF>>(BP_OP_ERF, kFloatDtypes, BP_ORIGIN);
  r.add<&clamp_kernel>(BP_OP_CLAMP, kNumericDtypes, BP_ORIGIN);
  r.add<&logical_not_kernel>(BP_OP_LOGICAL_NOT, kBaseDtypes, BP_ORIGIN);
}

}  // namespace bp::sim
