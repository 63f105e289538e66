// Header-only argument checks: the contract of every op of backplane/plugin.h
// checked in one place, so that a plugin validates a call with one line and
// every backend reports a bad call with the same words.
//
//   void gather(const bp::sdk::KernelCall& c) {
//     const int dim = bp::sdk::check::gather(c);   // throws InvalidArgument
//     ...
//   }
//
// Each check::OP(c) tests what the header states for OP: operand counts,
// ranks, shapes, dtypes and attributes. They read only the descriptors,
// never tensor memory, so a device plugin calls them on the host before it
// launches anything. The one check that reads memory, check::index_range,
// is for plugins whose memory the host can address.
//
// Messages begin with "[op]", the op's name as the core spells it, taken
// from the call itself.
#pragma once

#include <backplane/plugin.h>

#include <backplane/sdk/op_scope.hpp>
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/strided.hpp>
#include <backplane/sdk/tensor.hpp>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>

// Throws InvalidArgument("[op] message") unless `cond`; the message is
// streamed (`"got " << n`). `op` is a const char*. Where the op is not at
// hand, BP_SDK_REQUIRE (op_scope.hpp) names the current OpScope's.
#define BP_SDK_CHECK(cond, op, ...)                             \
  do {                                                          \
    if (!(cond)) {                                              \
      std::ostringstream bp_sdk_check_os_;                      \
      bp_sdk_check_os_ << "[" << (op) << "] " << __VA_ARGS__;   \
      throw ::bp::sdk::InvalidArgument(bp_sdk_check_os_.str()); \
    }                                                           \
  } while (0)

namespace bp::sdk {

// Dtype lists for Registrar::add. The base dtypes are the five of ABI 2.0
// (bool, int32, int64, float32, float64); the reduced-precision and small
// integer dtypes (float16, bfloat16, int8, uint8, int16) a plugin lists by
// name where it computes them.
inline constexpr std::initializer_list<bp_dtype> kBaseDtypes = {
    BP_DTYPE_BOOL, BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64};
// The name this list had before it was named for what it holds.
[[deprecated("kAllDtypes holds 5 of the 10 dtypes: use kBaseDtypes")]] inline constexpr std::
    initializer_list<bp_dtype>
        kAllDtypes = kBaseDtypes;
inline constexpr std::initializer_list<bp_dtype> kNumericDtypes = {
    BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64};
inline constexpr std::initializer_list<bp_dtype> kFloatDtypes = {BP_DTYPE_FLOAT32,
                                                                 BP_DTYPE_FLOAT64};

// Declines a call for a dtype the kernel was registered for but does not
// compute: BP_STATUS_UNSUPPORTED, which sends the call to the fallback policy.
[[noreturn]] inline void unsupported(const KernelCall& c, bp_dtype dt) {
  throw Unsupported(std::string("[") + op_name(c.op()) + "] not implemented for " + dtype_name(dt));
}

// The dtype SUM and PROD write for input dtype `in` (int64 for bool and
// integers, the input's for floating dtypes); MAX and MIN write `in`.
inline bp_dtype reduce_out_dtype(int op, bp_dtype in) {
  const bool widen = op == BP_OP_SUM || op == BP_OP_PROD;
  const bool floating = in == BP_DTYPE_FLOAT32 || in == BP_DTYPE_FLOAT64;
  return widen && !floating ? BP_DTYPE_INT64 : in;
}

// A CLAMP bound (scalars[0] or [1]) as T. For an integer T a fractional
// bound rounds inwards (ceil for lo, floor for hi) and saturates to T's
// range, which clamps every integer exactly as the real bound would; a NaN
// bound cannot clamp an integer tensor (InvalidArgument).
template <class T>
T clamp_bound(const bp_scalar& s, bool lower) {
  using lim = std::numeric_limits<T>;
  const bool is_float = s.dtype == BP_DTYPE_FLOAT32 || s.dtype == BP_DTYPE_FLOAT64;
  if constexpr (std::is_floating_point_v<T>) {
    return is_float ? static_cast<T>(s.value.f) : static_cast<T>(s.value.i);
  } else {
    if (is_float) {
      BP_SDK_CHECK(s.value.f == s.value.f, "clamp", "a NaN bound cannot clamp an integer tensor");
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

// CLAMP's effective bounds as T: the given ones (see clamp_bound), the
// type's extremes (infinities for floating T) for the others.
template <class T>
void clamp_bounds(const KernelCall& c, int64_t given, T* lo, T* hi) {
  using lim = std::numeric_limits<T>;
  *lo = (given & 1) ? clamp_bound<T>(c.scalar(0), true)
                    : (lim::has_infinity ? -lim::infinity() : lim::lowest());
  *hi = (given & 2) ? clamp_bound<T>(c.scalar(1), false)
                    : (lim::has_infinity ? lim::infinity() : lim::max());
}

namespace check {

// `inputs` inputs and `outputs` outputs.
inline void arity(const KernelCall& c, int inputs, int outputs) {
  BP_SDK_CHECK(c.num_inputs() == inputs && c.num_outputs() == outputs, op_name(c.op()),
               "expected " << inputs << " input(s) and " << outputs << " output(s), got "
                           << c.num_inputs() << " and " << c.num_outputs());
}

// `a` has `out`'s rank and sizes; `what` names `a` in the message.
inline void same_shape(const KernelCall& c, const TensorRef& a, const char* what,
                       const TensorRef& out) {
  // The core describes operands of the output's shape with the output's
  // own sizes array: one comparison for the common case.
  if (a.shape() == out.shape() && a.ndim() == out.ndim()) return;
  const char* op = op_name(c.op());
  BP_SDK_CHECK(a.ndim() == out.ndim(), op,
               what << " has rank " << a.ndim() << ", the output " << out.ndim());
  for (int d = 0; d < out.ndim(); ++d)
    BP_SDK_CHECK(
        a.size(d) == out.size(d), op,
        what << " has size " << a.size(d) << " in dim " << d << ", the output " << out.size(d));
}

// An element-wise op of `num_inputs` inputs and one output: every input has
// the output's shape and the dtype of input `dispatch` (input `skip`
// excepted); the output has that dtype, or bool when `bool_out`. Returns the
// dispatch dtype.
inline bp_dtype elementwise(const KernelCall& c, int num_inputs, bool bool_out, int dispatch = 0,
                            int skip = -1) {
  const char* op = op_name(c.op());
  arity(c, num_inputs, 1);
  const TensorRef out = c.output(0);
  const bp_dtype dt = c.input(dispatch).dtype();
  const bp_dtype out_dt = bool_out ? BP_DTYPE_BOOL : dt;
  BP_SDK_CHECK(out.dtype() == out_dt, op,
               "the output must be " << dtype_name(out_dt) << ", got " << dtype_name(out.dtype()));
  for (int i = 0; i < num_inputs; ++i) {
    const TensorRef in = c.input(i);
    BP_SDK_CHECK(
        i == skip || in.dtype() == dt, op,
        "input " << i << " is " << dtype_name(in.dtype()) << ", expected " << dtype_name(dt));
    same_shape(c, in, i == 0 ? "input 0" : i == 1 ? "input 1" : "input 2", out);
  }
  return dt;
}

// WHERE: out = in0 ? in1 : in2 with a bool condition in0 and values in1,
// in2 of one dtype, all of out's shape. Returns the values' dtype.
inline bp_dtype where(const KernelCall& c) {
  const bp_dtype dt = elementwise(c, 3, false, /*dispatch=*/1, /*skip=*/0);
  BP_SDK_CHECK(c.input(0).dtype() == BP_DTYPE_BOOL, "where",
               "the condition must be bool, got " << dtype_name(c.input(0).dtype()));
  return dt;
}

// ints[slot] as a dim of a rank-`ndim` tensor, negatives counted from the
// end; a 0-d tensor accepts 0 and -1.
inline int dim(const KernelCall& c, int slot, int ndim) {
  const char* op = op_name(c.op());
  BP_SDK_CHECK(c.attrs().num_ints > slot, op, "the dim (ints[" << slot << "]) is missing");
  const int64_t d = c.attrs().ints[slot];
  const int64_t rank = ndim > 0 ? ndim : 1;
  BP_SDK_CHECK(d >= -rank && d < rank, op,
               "dim " << d << " is out of range for a tensor of rank " << ndim);
  return static_cast<int>(d < 0 ? d + rank : d);
}

// FILL: no input, one output, the value in scalars[0].
inline void fill(const KernelCall& c) {
  arity(c, 0, 1);
  BP_SDK_CHECK(c.attrs().num_scalars >= 1, "fill", "the value (scalars[0]) is missing");
}

// COPY: one input of the output's shape, any dtypes.
inline void copy(const KernelCall& c) {
  arity(c, 1, 1);
  same_shape(c, c.input(0), "the input", c.output(0));
}

// CLAMP: element-wise, with ints[0]'s bound flags and the scalars they
// name. Returns the flags (bit 0: lo in scalars[0], bit 1: hi in scalars[1]).
inline int64_t clamp(const KernelCall& c) {
  elementwise(c, 1, false);
  BP_SDK_CHECK(c.attrs().num_ints >= 1, "clamp", "the bound flags (ints[0]) are missing");
  const int64_t given = c.attrs().ints[0];
  const int needed = (given & 2) ? 2 : (given & 1) ? 1 : 0;
  BP_SDK_CHECK(
      c.attrs().num_scalars >= needed, "clamp",
      "ints[0] = " << given << " needs " << needed << " scalars, got " << c.attrs().num_scalars);
  return given;
}

// SUM, PROD, MAX, MIN: out has the input's rank, each dim the input's size
// or 1, and reduce_out_dtype; MAX and MIN refuse an empty input.
inline void reduce(const KernelCall& c) {
  const char* op = op_name(c.op());
  arity(c, 1, 1);
  const TensorRef in = c.input(0), out = c.output(0);
  BP_SDK_CHECK(in.ndim() == out.ndim(), op,
               "the output must keep the input's rank " << in.ndim() << ", got " << out.ndim());
  for (int d = 0; d < in.ndim(); ++d)
    BP_SDK_CHECK(out.size(d) == in.size(d) || out.size(d) == 1, op,
                 "output dim " << d << " must be " << in.size(d) << " or 1, got " << out.size(d));
  if (c.op() == BP_OP_MAX || c.op() == BP_OP_MIN)
    BP_SDK_CHECK(in.numel() > 0 || out.numel() == 0, op, "cannot reduce an empty tensor");
  const bp_dtype want = reduce_out_dtype(c.op(), in.dtype());
  BP_SDK_CHECK(out.dtype() == want, op,
               "a " << dtype_name(in.dtype()) << " " << op << " is " << dtype_name(want)
                    << ", the output is " << dtype_name(out.dtype()));
}

// ARGMAX, ARGMIN: int64 out of the input's shape with dim ints[0] of size 1,
// and a non-empty line when there is anything to write. Returns the dim.
inline int arg_reduce(const KernelCall& c) {
  const char* op = op_name(c.op());
  arity(c, 1, 1);
  const TensorRef in = c.input(0), out = c.output(0);
  const int d = dim(c, 0, in.ndim());
  BP_SDK_CHECK(out.dtype() == BP_DTYPE_INT64, op,
               "the output must be int64, got " << dtype_name(out.dtype()));
  BP_SDK_CHECK(out.ndim() == in.ndim(), op,
               "the output must keep the input's rank " << in.ndim() << ", got " << out.ndim());
  for (int k = 0; k < in.ndim(); ++k)
    BP_SDK_CHECK(
        out.size(k) == (k == d ? 1 : in.size(k)), op,
        "output dim " << k << " must be " << (k == d ? 1 : in.size(k)) << ", got " << out.size(k));
  BP_SDK_CHECK(out.numel() == 0 || in.ndim() == 0 || in.size(d) > 0, op,
               "cannot reduce over dim " << d << " of size 0");
  return d;
}

// ARGSORT: one input, an int64 output of its shape; the dim in ints[0] and
// the direction in ints[1] (1: descending; absent: ascending). Returns the
// dim; *descending gets the direction.
inline int argsort(const KernelCall& c, bool* descending) {
  arity(c, 1, 1);
  const TensorRef in = c.input(0), out = c.output(0);
  same_shape(c, in, "the input", out);
  BP_SDK_CHECK(out.dtype() == BP_DTYPE_INT64, "argsort",
               "the output must be int64, got " << dtype_name(out.dtype()));
  const int d = dim(c, 0, in.ndim());
  const int64_t dir = c.attrs().num_ints > 1 ? c.attrs().ints[1] : 0;
  BP_SDK_CHECK(dir == 0 || dir == 1, "argsort", "ints[1] (descending) must be 0 or 1, got " << dir);
  *descending = dir == 1;
  return d;
}

// CUMSUM's output dtype: int64 for bool and integer inputs, the input's for
// floating ones.
inline bp_dtype cumsum_out_dtype(bp_dtype in) {
  const bool floating = in == BP_DTYPE_FLOAT32 || in == BP_DTYPE_FLOAT64 ||
                        in == BP_DTYPE_FLOAT16 || in == BP_DTYPE_BFLOAT16;
  return floating ? in : BP_DTYPE_INT64;
}

// CUMSUM: one input, an output of its shape and cumsum_out_dtype, the dim in
// ints[0]. Returns the dim.
inline int cumsum(const KernelCall& c) {
  arity(c, 1, 1);
  const TensorRef in = c.input(0), out = c.output(0);
  same_shape(c, in, "the input", out);
  const bp_dtype want = cumsum_out_dtype(in.dtype());
  BP_SDK_CHECK(out.dtype() == want, "cumsum",
               "the cumsum of " << dtype_name(in.dtype()) << " is " << dtype_name(want)
                                << ", the output is " << dtype_name(out.dtype()));
  return dim(c, 0, in.ndim());
}

// SOFTMAX, LOG_SOFTMAX: element-wise over one input, along dim ints[0].
// Returns the dim.
inline int softmax(const KernelCall& c) {
  elementwise(c, 1, false);
  return dim(c, 0, c.input(0).ndim());
}

// MATMUL: operands of one rank >= 2 and one dtype whose shapes chain, batch
// dims broadcast to the output's. Returns the number of matrices.
inline int64_t matmul(const KernelCall& c) {
  arity(c, 2, 1);
  const TensorRef a = c.input(0), b = c.input(1), out = c.output(0);
  const int nd = out.ndim();
  BP_SDK_CHECK(
      nd >= 2 && a.ndim() == nd && b.ndim() == nd, "matmul",
      "operands must share a rank >= 2, got " << a.ndim() << ", " << b.ndim() << " -> " << nd);
  BP_SDK_CHECK(a.dtype() == out.dtype() && b.dtype() == out.dtype(), "matmul",
               "operands must share one dtype, got " << dtype_name(a.dtype()) << ", "
                                                     << dtype_name(b.dtype()) << " -> "
                                                     << dtype_name(out.dtype()));
  const int64_t m = out.size(nd - 2), n = out.size(nd - 1), k = a.size(nd - 1);
  BP_SDK_CHECK(a.size(nd - 2) == m && b.size(nd - 2) == k && b.size(nd - 1) == n, "matmul",
               "shapes do not chain: [" << a.size(nd - 2) << ", " << k << "] @ [" << b.size(nd - 2)
                                        << ", " << b.size(nd - 1) << "] -> [" << m << ", " << n
                                        << "]");
  int64_t batch = 1;
  for (int d = 0; d < nd - 2; ++d) {
    BP_SDK_CHECK(a.size(d) == out.size(d) && b.size(d) == out.size(d), "matmul",
                 "batch dim " << d << " is not broadcast to the output's " << out.size(d));
    batch *= out.size(d);
  }
  return batch;
}

// The index operand of GATHER, SCATTER and INDEX_SELECT is int64.
inline void int64_index(const KernelCall& c, const TensorRef& index) {
  BP_SDK_CHECK(index.dtype() == BP_DTYPE_INT64, op_name(c.op()),
               "the index must be int64, got " << dtype_name(index.dtype()));
}

// GATHER: out[i][j] = in0[in1[i][j]][j] (dim 0). Input, index and output
// share a rank; the index has the output's shape, no larger than the input
// outside the dim. Returns the dim.
inline int gather(const KernelCall& c) {
  arity(c, 2, 1);
  const TensorRef self = c.input(0), index = c.input(1), out = c.output(0);
  int64_index(c, index);
  BP_SDK_CHECK(
      out.dtype() == self.dtype(), "gather",
      "the output is " << dtype_name(out.dtype()) << ", the input " << dtype_name(self.dtype()));
  BP_SDK_CHECK(self.ndim() == out.ndim() && index.ndim() == out.ndim(), "gather",
               "input, index and output must share one rank, got "
                   << self.ndim() << ", " << index.ndim() << ", " << out.ndim());
  const int d = dim(c, 0, self.ndim());
  TensorDesc x(self), o(out), idx(index);
  for (int k = 0; k < o.ndim(); ++k) {
    BP_SDK_CHECK(
        idx.size(k) == o.size(k), "gather",
        "the index has size " << idx.size(k) << " in dim " << k << ", the output " << o.size(k));
    BP_SDK_CHECK(k == d || o.size(k) <= x.size(k), "gather",
                 "the index has size " << o.size(k) << " in dim " << k << ", more than the input's "
                                       << x.size(k));
  }
  return d;
}

// INDEX_SELECT: a 1-D index; out keeps the input's rank and sizes but the
// dim's, which is the index's length. Returns the dim.
inline int index_select(const KernelCall& c) {
  arity(c, 2, 1);
  const TensorRef self = c.input(0), index = c.input(1), out = c.output(0);
  int64_index(c, index);
  BP_SDK_CHECK(index.ndim() <= 1, "index_select",
               "the index must be 1-D, got rank " << index.ndim());
  BP_SDK_CHECK(
      out.dtype() == self.dtype(), "index_select",
      "the output is " << dtype_name(out.dtype()) << ", the input " << dtype_name(self.dtype()));
  BP_SDK_CHECK(self.ndim() == out.ndim(), "index_select",
               "the output must keep the input's rank " << self.ndim() << ", got " << out.ndim());
  const int d = dim(c, 0, self.ndim());
  TensorDesc x(self), o(out), flat(index);
  const int64_t m = flat.size(0);
  for (int k = 0; k < o.ndim(); ++k)
    BP_SDK_CHECK(
        o.size(k) == (k == d ? m : x.size(k)), "index_select",
        "output dim " << k << " must be " << (k == d ? m : x.size(k)) << ", got " << o.size(k));
  return d;
}

struct ScatterArgs {
  int dim;
  int64_t reduction;  // 0 none (last write wins), 1 add
};

// SCATTER: index and source share a shape no larger than the output outside
// the dim, and one rank with it; the source has the output's dtype. A
// reduction other than 0 or 1 is declined (Unsupported).
inline ScatterArgs scatter(const KernelCall& c) {
  arity(c, 2, 1);
  const TensorRef index = c.input(0), src = c.input(1), out = c.output(0);
  int64_index(c, index);
  const int64_t reduction = c.attrs().num_ints > 1 ? c.attrs().ints[1] : 0;
  if (reduction != 0 && reduction != 1)
    throw Unsupported("[scatter] reduction " + std::to_string(reduction) +
                      " is not supported (0 none, 1 add)");
  BP_SDK_CHECK(
      src.dtype() == out.dtype(), "scatter",
      "the source is " << dtype_name(src.dtype()) << ", the output " << dtype_name(out.dtype()));
  BP_SDK_CHECK(index.ndim() == out.ndim() && src.ndim() == out.ndim(), "scatter",
               "index, source and output must share one rank, got "
                   << index.ndim() << ", " << src.ndim() << ", " << out.ndim());
  const int d = dim(c, 0, out.ndim());
  TensorDesc o(out), idx(index), s(src);
  for (int k = 0; k < o.ndim(); ++k) {
    BP_SDK_CHECK(
        s.size(k) == idx.size(k), "scatter",
        "the source has size " << s.size(k) << " in dim " << k << ", the index " << idx.size(k));
    BP_SDK_CHECK(k == d || idx.size(k) <= o.size(k), "scatter",
                 "the index has size " << idx.size(k) << " in dim " << k
                                       << ", more than the output's " << o.size(k));
  }
  return {d, reduction};
}

struct RandomArgs {
  int64_t distribution;  // 0 uniform [0, 1), 1 standard normal
  uint64_t seed;
  uint64_t offset;
};

// RANDOM: no input, one output, ints[0..2] = distribution, seed, offset.
inline RandomArgs random(const KernelCall& c) {
  arity(c, 0, 1);
  BP_SDK_CHECK(
      c.attrs().num_ints >= 3, "random",
      "expected ints[0..2] = distribution, seed, offset; got " << c.attrs().num_ints << " ints");
  const int64_t dist = c.attrs().ints[0];
  BP_SDK_CHECK(dist == 0 || dist == 1, "random",
               "unknown distribution " << dist << " (0 uniform, 1 normal)");
  return {dist, static_cast<uint64_t>(c.attrs().ints[1]), static_cast<uint64_t>(c.attrs().ints[2])};
}

struct LayerNormArgs {
  int64_t normalized_dims;  // the trailing dims each row spans
  int64_t row_size;         // their product: the elements of one row
  double eps;
};

// core::layer_norm (an override of the core's composite): inputs x, weight,
// bias of one dtype; the output has x's shape; ints[0] = the number of
// normalised trailing dims, scalars[0] = eps; weight and bias have one
// element per row position. The core checks this before calling; a kernel
// checks again what it relies on, so that no call makes it read out of bounds.
inline LayerNormArgs layer_norm(const KernelCall& c) {
  constexpr const char* op = "core::layer_norm";
  arity(c, 3, 1);
  const TensorRef x = c.input(0), w = c.input(1), b = c.input(2), out = c.output(0);
  same_shape(c, x, "the input", out);
  BP_SDK_CHECK(c.attrs().num_ints >= 1 && c.attrs().num_scalars >= 1, op,
               "normalized_dims (ints[0]) and eps (scalars[0]) are required");
  const int64_t k = c.attrs().ints[0];
  BP_SDK_CHECK(k >= 1 && k <= x.ndim(), op,
               "normalized_dims " << k << " is out of range for rank " << x.ndim());
  int64_t n = 1;
  for (int64_t d = x.ndim() - k; d < x.ndim(); ++d) n *= x.size(static_cast<int>(d));
  for (const TensorRef* t : {&w, &b, &out})
    BP_SDK_CHECK(t->dtype() == x.dtype(), op,
                 "operands must share x's dtype " << dtype_name(x.dtype()));
  BP_SDK_CHECK(w.numel() == n && b.numel() == n, op,
               "weight and bias must have " << n << " elements");
  return {k, n, c.scalar(0).value.f};
}

// Throws unless every element of `index` (int64, in host-addressable
// memory) lies in [0, size): the first one outside is named.
inline void index_range(const KernelCall& c, const TensorRef& index, int dim, int64_t size) {
  for_each_row<1>({index}, [&](auto p, auto s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = *reinterpret_cast<const int64_t*>(p[0] + i * s[0]);
      BP_SDK_CHECK(v >= 0 && v < size, op_name(c.op()),
                   "index " << v << " is out of range for dim " << dim << " of size " << size
                            << " (valid range: [0, " << size << "))");
    }
  });
}

}  // namespace check
}  // namespace bp::sdk
