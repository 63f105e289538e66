// Unary ops: one functor per dtype with the op as a run-time switch, so the
// whole family costs one set of kernels per dtype; the switch is uniform
// across a launch and free next to the memory traffic.
#include <cmath>
#include <limits>

#include "elementwise.cuh"

namespace bp::cuda {

namespace {

enum UnaryKind : int { kNeg, kAbs, kExp, kLog, kSqrt, kSigmoid, kTanh, kClamp, kRelu };

UnaryKind unary_kind(bp_op op) {
  switch (op) {
    case BP_OP_NEG:
      return kNeg;
    case BP_OP_ABS:
      return kAbs;
    case BP_OP_EXP:
      return kExp;
    case BP_OP_LOG:
      return kLog;
    case BP_OP_SQRT:
      return kSqrt;
    case BP_OP_SIGMOID:
      return kSigmoid;
    case BP_OP_TANH:
      return kTanh;
    case BP_OP_CLAMP:
      return kClamp;
    default:
      return kRelu;
  }
}

template <class T>
struct UnaryFn {
  int kind;
  T lo, hi;  // CLAMP's bounds; an absent bound is the dtype's extreme

  __device__ T operator()(T x) const {
    using U = Wrapping<T>;
    switch (kind) {
      case kNeg:
        if constexpr (std::is_floating_point_v<T>)
          return -x;  // keeps the sign of zero: -(+0) is -0
        else
          return static_cast<T>(U(0) - static_cast<U>(x));
      case kAbs:
        if constexpr (std::is_floating_point_v<T>)
          return fabs(x);
        else
          return x < T(0) ? static_cast<T>(U(0) - static_cast<U>(x)) : x;
      case kClamp:
        // Comparisons with NaN are false: a NaN input stays NaN; lo > hi gives hi.
        if (x < lo) x = lo;
        if (x > hi) x = hi;
        return x;
      case kRelu:
        return x < T(0) ? T(0) : x;
      default:
        break;
    }
    if constexpr (std::is_floating_point_v<T>) {
      const bool f32 = std::is_same_v<T, float>;
      switch (kind) {
        case kExp:
          return f32 ? expf(x) : exp(x);
        case kLog:
          return f32 ? logf(x) : log(x);
        case kSqrt:
          return f32 ? sqrtf(x) : sqrt(x);
        case kSigmoid:
          return T(1) / (T(1) + (f32 ? expf(-x) : exp(-x)));
        case kTanh:
          return f32 ? tanhf(x) : tanh(x);
        default:
          break;
      }
    }
    return x;
  }
};

template <class T>
struct LogicalNotFn {
  __device__ bool operator()(T x) const { return x == T(0); }
};

// A CLAMP bound as T, as the reference takes it: for an integer T a
// fractional bound rounds inwards (ceil for lo, floor for hi) and every bound
// saturates to T's range, which clamps each integer as the real bound would.
template <class T>
T clamp_bound(const bp_scalar& s, bool lower) {
  using lim = std::numeric_limits<T>;
  const bool is_float = s.dtype == BP_DTYPE_FLOAT32 || s.dtype == BP_DTYPE_FLOAT64;
  if constexpr (std::is_floating_point_v<T>) {
    return is_float ? static_cast<T>(s.value.f) : static_cast<T>(s.value.i);
  } else {
    if (is_float) {
      double v = s.value.f;
      BP_CHECK(v == v, "a NaN bound cannot clamp an integer tensor");
      v = lower ? std::ceil(v) : std::floor(v);
      if (v <= static_cast<double>(lim::lowest())) return lim::lowest();
      if (v >= static_cast<double>(lim::max())) return lim::max();
      return static_cast<T>(v);
    }
    const int64_t i = s.value.i;
    if (i <= static_cast<int64_t>(lim::lowest())) return lim::lowest();
    if (i >= static_cast<int64_t>(lim::max())) return lim::max();
    return static_cast<T>(i);
  }
}

void unary_kernel(const KernelCall& c) {
  BP_CHECK(c.num_inputs() == 1 && c.num_outputs() == 1,
           "expected 1 input and 1 output, got " << c.num_inputs() << " and " << c.num_outputs());
  const TensorRef in = c.input(0), out = c.output(0);
  check_same_shape(in, out, "the input");
  BP_CHECK(in.dtype() == out.dtype(), "the input is " << bp::sdk::dtype_name(in.dtype())
                                                      << " but the output is "
                                                      << bp::sdk::dtype_name(out.dtype()));
  const UnaryKind kind = unary_kind(c.op());
  const cudaStream_t s = prepare(out);
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      BP_UNSUPPORTED("not implemented for bool");
    } else {
      using lim = std::numeric_limits<T>;
      UnaryFn<T> f{kind, T(0), T(0)};
      if (kind == kClamp) {
        const bp_attrs& a = c.attrs();
        BP_CHECK(a.num_ints >= 1, "the bound flags (ints[0]) are missing");
        const int64_t given = a.ints[0];
        const int needed = (given & 2) ? 2 : (given & 1) ? 1 : 0;
        BP_CHECK(a.num_scalars >= needed,
                 "ints[0] = " << given << " needs " << needed << " scalars, got " << a.num_scalars);
        f.lo = (given & 1) ? clamp_bound<T>(c.scalar(0), true)
                           : (lim::has_infinity ? -lim::infinity() : lim::lowest());
        f.hi = (given & 2) ? clamp_bound<T>(c.scalar(1), false)
                           : (lim::has_infinity ? lim::infinity() : lim::max());
      }
      launch_elementwise<T, T>(s, out, {&in.raw(), nullptr, nullptr}, f);
    }
  });
}

void logical_not_kernel(const KernelCall& c) {
  BP_CHECK(c.num_inputs() == 1 && c.num_outputs() == 1,
           "expected 1 input and 1 output, got " << c.num_inputs() << " and " << c.num_outputs());
  const TensorRef in = c.input(0), out = c.output(0);
  check_same_shape(in, out, "the input");
  BP_CHECK(out.dtype() == BP_DTYPE_BOOL,
           "the output must be bool, got " << bp::sdk::dtype_name(out.dtype()));
  const cudaStream_t s = prepare(out);
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_elementwise<bool, T>(s, out, {&in.raw(), nullptr, nullptr}, LogicalNotFn<T>{});
  });
}

}  // namespace

void register_unary_kernels(Registrar& r) {
  add_kernel<&unary_kernel>(r, BP_OP_NEG, kNumericDtypes, BP_ORIGIN);
  add_kernel<&unary_kernel>(r, BP_OP_ABS, kNumericDtypes, BP_ORIGIN);
  add_kernel<&unary_kernel>(r, BP_OP_RELU, kNumericDtypes, BP_ORIGIN);
  add_kernel<&unary_kernel>(r, BP_OP_CLAMP, kNumericDtypes, BP_ORIGIN);
  for (bp_op op : {BP_OP_EXP, BP_OP_LOG, BP_OP_SQRT, BP_OP_SIGMOID, BP_OP_TANH})
    add_kernel<&unary_kernel>(r, op, kFloatDtypes, BP_ORIGIN);
  add_kernel<&logical_not_kernel>(r, BP_OP_LOGICAL_NOT, kAllDtypes, BP_ORIGIN);
}

}  // namespace bp::cuda
