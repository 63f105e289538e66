// Binary ops in four functor families (arithmetic, comparison, logical,
// where), each one set of kernels per dtype with the op as a run-time
// switch: a uniform branch costs nothing next to the memory traffic, and it
// keeps the number of kernels nvcc has to build small.
#include <cmath>

#include "elementwise.cuh"

namespace bp::cuda {

namespace {

enum ArithKind : int { kAdd, kSub, kMul, kDiv, kMaximum, kMinimum, kPow };
enum CompareKind : int { kEq, kNe, kLt, kLe, kGt, kGe };

template <class T>
struct ArithFn {
  int kind;
  T alpha;

  // Only mul, maximum and minimum are registered for bool; div for
  // floating dtypes only.
  __device__ T operator()(T a, T b) const {
    switch (kind) {
      case kAdd:
        return fn::add(a, b, alpha);
      case kSub:
        return fn::sub(a, b, alpha);
      case kMul:
        return fn::mul(a, b);
      case kDiv:
        return fn::div(a, b);
      case kMaximum:
        return fn::maximum(a, b);
      case kMinimum:
        return fn::minimum(a, b);
      default:
        if constexpr (std::is_same_v<T, bool>)
          return a;  // not registered
        else
          return fn::pow(a, b);  // negative integer exponents: see NegativeCheck
    }
  }
};

// The scalar form of ADD..DIV (BP_KERNEL_SCALAR_OPERAND): the second operand
// is the call's scalars[1], passed to the kernel by value in its argument.
template <class T>
struct ArithScalarFn {
  ArithFn<T> f;
  T y;
  __device__ T operator()(T a) const { return f(a, y); }
};

template <class T>
struct CompareFn {
  int kind;
  __device__ bool operator()(T a, T b) const {
    switch (kind) {
      case kEq:
        return a == b;
      case kNe:
        return a != b;
      case kLt:
        return a < b;
      case kLe:
        return a <= b;
      case kGt:
        return a > b;
      default:
        return a >= b;
    }
  }
};

template <class T>
struct LogicalFn {
  bool is_and;
  __device__ bool operator()(T a, T b) const {
    return is_and ? fn::logical_and(a, b) : fn::logical_or(a, b);
  }
};

template <class T>
struct WhereFn {
  __device__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

// Flags any negative element (an integer exponent pow cannot take): in the
// stream's error record (reported at the next synchronisation) and in the
// call's flag, which stops the pow kernel.
template <class T>
struct NegativeCheck {
  ErrorRecord* errors;
  int32_t* failed;
  __device__ void operator()(char* (&p)[1]) const {
    const T v = *reinterpret_cast<const T*>(p[0]);
    if (v < T(0)) {
      record_error(errors, kNegativeExponent, BP_OP_POW, static_cast<int64_t>(v), 0, 0);
      *failed = 1;
    }
  }
};

// Integer pow behind a NegativeCheck: when the check failed it writes back
// the operand the output aliases (so an in-place pow leaves it unchanged).
template <class T>
struct GuardedIntPowFn {
  const int32_t* failed;
  bool keep_exponent;  // the output is the exponent's memory, not the base's
  __device__ T operator()(T a, T b) const {
    if (*failed) return keep_exponent ? b : a;
    return fn::pow(a, b);
  }
};

void arith_kernel(const KernelCall& c) {
  const bool scalar_form = c.num_inputs() == 1 && c.op() >= BP_OP_ADD && c.op() <= BP_OP_DIV;
  check::elementwise(c, scalar_form ? 1 : 2, false);
  BP_SDK_CHECK(!scalar_form || c.attrs().num_scalars >= 2, op_name(c.op()),
               "the scalar form takes the operand as scalars[1]");
  const TensorRef out = c.output(0), a = c.input(0), b = c.input(scalar_form ? 0 : 1);
  const int kind = c.op() == BP_OP_ADD       ? kAdd
                   : c.op() == BP_OP_SUB     ? kSub
                   : c.op() == BP_OP_MUL     ? kMul
                   : c.op() == BP_OP_DIV     ? kDiv
                   : c.op() == BP_OP_MAXIMUM ? kMaximum
                   : c.op() == BP_OP_MINIMUM ? kMinimum
                                             : kPow;
  Stream& st = prepare(c);
  const cudaStream_t s = st.handle;
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T alpha = T(1);
    if ((kind == kAdd || kind == kSub) && c.attrs().num_scalars > 0)
      alpha = bp::sdk::scalar_as<T>(c.scalar(0));
    if (scalar_form) {
      launch_elementwise<T, T>(s, out, {&a.raw(), nullptr, nullptr},
                               ArithScalarFn<T>{{kind, alpha}, bp::sdk::scalar_as<T>(c.scalar(1))});
      return;
    }
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (kind == kPow) {
        // Checked on the device before computing, in stream order (no host
        // wait): a failed pow writes nothing new, so an in-place one leaves
        // its input unchanged; the failure is reported by the next
        // synchronisation of the stream.
        const CheckFlag flag(st);
        launch_strided<1>(s, b.ndim(), b.shape(), {static_cast<char*>(b.base())}, {b.strides()},
                          {int64_t(sizeof(T))}, NegativeCheck<T>{st.errors, flag.get()});
        const bool keep_exponent = out.base() == b.base() && out.base() != a.base();
        launch_elementwise<T, T, T>(s, out, {&a.raw(), &b.raw(), nullptr},
                                    GuardedIntPowFn<T>{flag.get(), keep_exponent});
        return;
      }
    }
    launch_elementwise<T, T, T>(s, out, {&a.raw(), &b.raw(), nullptr}, ArithFn<T>{kind, alpha});
  });
}

void compare_kernel(const KernelCall& c) {
  check::elementwise(c, 2, true);
  const TensorRef out = c.output(0), a = c.input(0), b = c.input(1);
  const cudaStream_t s = prepare(c).handle;
  const bp_op op = c.op();
  bp::sdk::visit_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const std::array<const bp_tensor*, 3> in{&a.raw(), &b.raw(), nullptr};
    if (op == BP_OP_LOGICAL_AND || op == BP_OP_LOGICAL_OR) {
      launch_elementwise<bool, T, T>(s, out, in, LogicalFn<T>{op == BP_OP_LOGICAL_AND});
    } else {
      const int kind = op == BP_OP_EQ   ? kEq
                       : op == BP_OP_NE ? kNe
                       : op == BP_OP_LT ? kLt
                       : op == BP_OP_LE ? kLe
                       : op == BP_OP_GT ? kGt
                                        : kGe;
      launch_elementwise<bool, T, T>(s, out, in, CompareFn<T>{kind});
    }
  });
}

void where_kernel(const KernelCall& c) {
  check::where(c);
  const TensorRef out = c.output(0), cond = c.input(0);
  const cudaStream_t s = prepare(c).handle;
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_elementwise<T, bool, T, T>(s, out, {&cond.raw(), &c.input(1).raw(), &c.input(2).raw()},
                                      WhereFn<T>{});
  });
}

}  // namespace

void register_binary_kernels(Registrar& r) {
  const uint32_t with_bool = kBaseDtypes;
  // Scalars as attributes (ABI 2.5): `x + 2.0` launches one kernel.
  add_kernel<&arith_kernel>(r, BP_OP_ADD, kNumericDtypes, BP_ORIGIN, BP_KERNEL_SCALAR_OPERAND);
  add_kernel<&arith_kernel>(r, BP_OP_SUB, kNumericDtypes, BP_ORIGIN, BP_KERNEL_SCALAR_OPERAND);
  add_kernel<&arith_kernel>(r, BP_OP_MUL, with_bool, BP_ORIGIN, BP_KERNEL_SCALAR_OPERAND);
  add_kernel<&arith_kernel>(r, BP_OP_DIV, kFloatDtypes, BP_ORIGIN, BP_KERNEL_SCALAR_OPERAND);
  add_kernel<&arith_kernel>(r, BP_OP_MAXIMUM, with_bool, BP_ORIGIN);
  add_kernel<&arith_kernel>(r, BP_OP_MINIMUM, with_bool, BP_ORIGIN);
  add_kernel<&arith_kernel>(r, BP_OP_POW, kNumericDtypes, BP_ORIGIN);
  for (bp_op op : {BP_OP_EQ, BP_OP_NE, BP_OP_LT, BP_OP_LE, BP_OP_GT, BP_OP_GE, BP_OP_LOGICAL_AND,
                   BP_OP_LOGICAL_OR})
    add_kernel<&compare_kernel>(r, op, kBaseDtypes, BP_ORIGIN);
  add_kernel<&where_kernel>(r, BP_OP_WHERE, kBaseDtypes, BP_ORIGIN);
}

}  // namespace bp::cuda
