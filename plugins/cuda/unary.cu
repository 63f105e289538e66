// Unary ops: one functor per dtype with the op as a run-time switch, so the
// whole family costs one set of kernels per dtype; the switch is uniform
// across a launch and free next to the memory traffic.
#include <cmath>
#include <limits>

#include "elementwise.cuh"

namespace bp::cuda {

namespace {

enum UnaryKind : int { kNeg, kAbs, kExp, kLog, kSqrt, kSigmoid, kTanh, kErf, kClamp, kRelu };

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
    case BP_OP_ERF:
      return kErf;
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
    switch (kind) {
      case kNeg:
        return fn::neg(x);  // floating: keeps the sign of zero
      case kAbs:
        return fn::abs(x);
      case kClamp:
        return fn::clamp(x, lo, hi);  // NaN stays NaN; lo > hi gives hi
      case kRelu:
        return fn::relu(x);
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
          return fn::sigmoid(x);
        case kTanh:
          return f32 ? tanhf(x) : tanh(x);
        case kErf:
          return f32 ? erff(x) : erf(x);
        default:
          break;
      }
    }
    return x;
  }
};

template <class T>
struct LogicalNotFn {
  __device__ bool operator()(T x) const { return fn::logical_not(x); }
};

void unary_kernel(const KernelCall& c) {
  const int64_t given = c.op() == BP_OP_CLAMP ? check::clamp(c) : 0;
  if (c.op() != BP_OP_CLAMP) check::elementwise(c, 1, false);
  const TensorRef in = c.input(0), out = c.output(0);
  const UnaryKind kind = unary_kind(c.op());
  const cudaStream_t s = prepare(c).handle;
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      BP_SDK_UNSUPPORTED("not implemented for bool");
    } else {
      UnaryFn<T> f{kind, T(0), T(0)};
      if (kind == kClamp) bp::sdk::clamp_bounds<T>(c, given, &f.lo, &f.hi);
      launch_elementwise<T, T>(s, out, {&in.raw(), nullptr, nullptr}, f);
    }
  });
}

void logical_not_kernel(const KernelCall& c) {
  check::elementwise(c, 1, true);
  const TensorRef in = c.input(0), out = c.output(0);
  const cudaStream_t s = prepare(c).handle;
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
  for (bp_op op : {BP_OP_EXP, BP_OP_LOG, BP_OP_SQRT, BP_OP_SIGMOID, BP_OP_TANH, BP_OP_ERF})
    add_kernel<&unary_kernel>(r, op, kFloatDtypes, BP_ORIGIN);
  add_kernel<&logical_not_kernel>(r, BP_OP_LOGICAL_NOT, kBaseDtypes, BP_ORIGIN);
}

}  // namespace bp::cuda
