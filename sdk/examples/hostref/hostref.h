// Shared helpers of the hostref kernels: plain loops over the SDK's strided
// walker, argument checks, and the registration function of each op family.
//
// Every kernel here is a straightforward host loop: no threads, no SIMD, no
// library. That keeps the example readable and makes it a reference any
// backend can be compared with. The kernel files use nothing but the SDK
// headers, so another plugin (plugins/sim) can compile them with its own
// memory and entry point.
#pragma once

#include <array>
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/strided.hpp>
#include <backplane/sdk/tensor.hpp>
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>
#include <type_traits>

namespace hostref {

using bp::sdk::KernelCall;
using bp::sdk::Registrar;
using bp::sdk::TensorRef;

// A user error in a call: throws InvalidArgument "[op] message".
#define HOSTREF_CHECK(cond, op, ...)                       \
  do {                                                     \
    if (!(cond)) {                                         \
      std::ostringstream hostref_os_;                      \
      hostref_os_ << "[" << (op) << "] " << __VA_ARGS__;   \
      throw ::bp::sdk::InvalidArgument(hostref_os_.str()); \
    }                                                      \
  } while (0)

inline constexpr std::initializer_list<bp_dtype> kAllDtypes = {
    BP_DTYPE_BOOL, BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64};
inline constexpr std::initializer_list<bp_dtype> kNumericDtypes = {
    BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64};
inline constexpr std::initializer_list<bp_dtype> kFloatDtypes = {BP_DTYPE_FLOAT32,
                                                                 BP_DTYPE_FLOAT64};

// Element i of a row that starts at byte pointer p with a byte stride.
template <class T>
inline T& at(char* p, int64_t stride, int64_t i) {
  return *reinterpret_cast<T*>(p + i * stride);
}

// The unsigned type integer arithmetic runs in, so that overflow wraps (two's
// complement) instead of being undefined; floating types stay as they are.
template <class T>
using Wrapping = typename std::conditional_t<std::is_integral_v<T> && !std::is_same_v<T, bool>,
                                             std::make_unsigned<T>, std::type_identity<T>>::type;

// out[i] = f(a[i]) over one input of type T.
template <class O, class T, class F>
void map1(const TensorRef& out, const TensorRef& a, F f) {
  bp::sdk::for_each_row<2>({out, a}, [&](auto p, auto s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) at<O>(p[0], s[0], i) = f(at<T>(p[1], s[1], i));
  });
}

// out[i] = f(a[i], b[i]) over two inputs of type T. Each element is read
// before it is written, so out may be exactly a or b (in place).
template <class O, class T, class F>
void map2(const TensorRef& out, const TensorRef& a, const TensorRef& b, F f) {
  bp::sdk::for_each_row<3>({out, a, b}, [&](auto p, auto s, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      at<O>(p[0], s[0], i) = f(at<T>(p[1], s[1], i), at<T>(p[2], s[2], i));
  });
}

using bp::sdk::TensorDesc;  // an operand seen with another shape

// Checks operand counts and that every input has out's shape and the dtype
// of input `dispatch` (input `skip` excepted); out has that dtype, or bool
// when `bool_out`. Returns the dispatch dtype.
inline bp_dtype check_elementwise(const KernelCall& c, const char* op, int num_inputs,
                                  bool bool_out, int dispatch = 0, int skip = -1) {
  HOSTREF_CHECK(c.num_inputs() == num_inputs && c.num_outputs() == 1, op,
                "expected " << num_inputs << " input(s) and 1 output, got " << c.num_inputs()
                            << " and " << c.num_outputs());
  const TensorRef out = c.output(0);
  const bp_dtype dt = c.input(dispatch).dtype();
  const bp_dtype out_dt = bool_out ? BP_DTYPE_BOOL : dt;
  HOSTREF_CHECK(out.dtype() == out_dt, op,
                "the output must be " << bp::sdk::dtype_name(out_dt) << ", got "
                                      << bp::sdk::dtype_name(out.dtype()));
  for (int i = 0; i < num_inputs; ++i) {
    const TensorRef in = c.input(i);
    HOSTREF_CHECK(i == skip || in.dtype() == dt, op,
                  "input " << i << " is " << bp::sdk::dtype_name(in.dtype()) << ", expected "
                           << bp::sdk::dtype_name(dt));
    HOSTREF_CHECK(in.ndim() == out.ndim(), op,
                  "input " << i << " has rank " << in.ndim() << ", the output " << out.ndim());
    for (int d = 0; d < out.ndim(); ++d)
      HOSTREF_CHECK(in.size(d) == out.size(d), op,
                    "input " << i << " has size " << in.size(d) << " in dim " << d
                             << ", the output " << out.size(d));
  }
  return dt;
}

// ints[slot] as a dim of a rank-`ndim` tensor (negative counts from the end;
// a 0-d tensor accepts 0 and -1).
inline int dim_attr(const KernelCall& c, const char* op, int slot, int ndim) {
  HOSTREF_CHECK(c.attrs().num_ints > slot, op, "the dim (ints[" << slot << "]) is missing");
  const int64_t dim = c.attrs().ints[slot];
  const int64_t rank = ndim > 0 ? ndim : 1;
  HOSTREF_CHECK(dim >= -rank && dim < rank, op,
                "dim " << dim << " is out of range for a tensor of rank " << ndim);
  return static_cast<int>(dim < 0 ? dim + rank : dim);
}

// Thrown for a dtype the kernel was registered for but cannot compute.
[[noreturn]] inline void unsupported(const char* op, bp_dtype dt) {
  throw bp::sdk::Unsupported(std::string("[") + op + "] not implemented for " +
                             bp::sdk::dtype_name(dt));
}

// One function per op family, each in its own file.
void register_copy_kernels(Registrar& r);     // copy.cpp: FILL, COPY
void register_binary_kernels(Registrar& r);   // binary.cpp: ADD..DIV, MAXIMUM, MINIMUM, POW
void register_compare_kernels(Registrar& r);  // compare.cpp: EQ..GE, LOGICAL_AND/OR, WHERE
void register_unary_kernels(Registrar& r);    // unary.cpp: RELU, NEG..CLAMP, LOGICAL_NOT
void register_reduce_kernels(Registrar& r);   // reduce.cpp: SUM, PROD, MAX, MIN, ARGMAX, ARGMIN
void register_matmul_kernels(Registrar& r);   // matmul.cpp: MATMUL
void register_softmax_kernels(Registrar& r);  // softmax.cpp: SOFTMAX, LOG_SOFTMAX
void register_index_kernels(Registrar& r);    // index.cpp: GATHER, SCATTER, INDEX_SELECT
void register_random_kernels(Registrar& r);   // random.cpp: RANDOM

// Every primitive op of plugin.h.
inline void register_all_kernels(Registrar& r) {
  register_copy_kernels(r);
  register_binary_kernels(r);
  register_compare_kernels(r);
  register_unary_kernels(r);
  register_reduce_kernels(r);
  register_matmul_kernels(r);
  register_softmax_kernels(r);
  register_index_kernels(r);
  register_random_kernels(r);
}

}  // namespace hostref
