// ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM and POW. Integers wrap on overflow
// (the arithmetic runs in the unsigned type of the same width); MAXIMUM and
// MINIMUM propagate NaN; integer POW is exact and refuses negative exponents.
#include "hostref.h"

namespace hostref {

namespace {

enum class Bin { add, sub, mul, div };

template <Bin Op>
void binary_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 2, false);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (Op == Bin::mul) {
      map2<T, T>(c.output(0), c.input(0), c.input(1), [](T x, T y) { return fn::mul(x, y); });
    } else if constexpr (std::is_same_v<T, bool> ||
                         (Op == Bin::div && !std::is_floating_point_v<T>)) {
      bp::sdk::unsupported(c, dt);
    } else if constexpr (Op == Bin::add || Op == Bin::sub) {
      // scalars[0] = alpha, the multiplier of the second operand.
      const T alpha = c.attrs().num_scalars > 0 ? bp::sdk::scalar_as<T>(c.scalar(0)) : T(1);
      map2<T, T>(c.output(0), c.input(0), c.input(1), [alpha](T x, T y) {
        return Op == Bin::add ? fn::add(x, y, alpha) : fn::sub(x, y, alpha);
      });
    } else {
      map2<T, T>(c.output(0), c.input(0), c.input(1), [](T x, T y) { return fn::div(x, y); });
    }
  });
}

template <bool kMax>
void minmax_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 2, false);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    map2<T, T>(c.output(0), c.input(0), c.input(1),
               [](T x, T y) { return kMax ? fn::maximum(x, y) : fn::minimum(x, y); });
  });
}

void pow_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 2, false);
  const TensorRef out = c.output(0), a = c.input(0), b = c.input(1);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      bp::sdk::unsupported(c, dt);
    } else {
      if constexpr (!std::is_floating_point_v<T>) {
        // Scanned before anything is written: a refused call leaves out alone.
        bool negative = false;
        bp::sdk::for_each_row<1>({b}, [&](auto p, auto s, int64_t n) {
          for (int64_t i = 0; i < n; ++i) negative |= at<T>(p[0], s[0], i) < 0;
        });
        BP_SDK_CHECK(!negative, "pow", "integers to negative integer powers are not allowed");
      }
      map2<T, T>(out, a, b, [](T x, T y) { return fn::pow(x, y); });
    }
  });
}

}  // namespace

void register_binary_kernels(Registrar& r) {
  // `x + 2.0` passes 2.0 as an attribute (BP_KERNEL_SCALAR_OPERAND); the
  // SDK hands these kernels a broadcast operand holding it.
  r.add_scalar_operand<&binary_kernel<Bin::add>>(BP_OP_ADD, kNumericDtypes, BP_ORIGIN);
  r.add_scalar_operand<&binary_kernel<Bin::sub>>(BP_OP_SUB, kNumericDtypes, BP_ORIGIN);
  r.add_scalar_operand<&binary_kernel<Bin::mul>>(BP_OP_MUL, kBaseDtypes, BP_ORIGIN);
  r.add_scalar_operand<&binary_kernel<Bin::div>>(BP_OP_DIV, kFloatDtypes, BP_ORIGIN);
  r.add<&minmax_kernel<true>>(BP_OP_MAXIMUM, kBaseDtypes, BP_ORIGIN);
  r.add<&minmax_kernel<false>>(BP_OP_MINIMUM, kBaseDtypes, BP_ORIGIN);
  r.add<&pow_kernel>(BP_OP_POW, kNumericDtypes, BP_ORIGIN);
}

}  // namespace hostref
