// The composite ops: functions the core builds from primitive ops (bp_op),
// so a plugin never implements them. `backplane ops` prints this table and
// whether each backend has the primitives behind every entry. Keep it in
// step with core/src/ops when an op's implementation changes.
#pragma once

#include <backplane/dispatcher.h>

#include <initializer_list>
#include <vector>

namespace bp::cli {

struct CompositeOp {
  const char* name;
  std::vector<Op> uses;  // the primitives its kernels are; empty: no kernel at all
  const char* how;       // one line: what the core does
};

inline const std::vector<CompositeOp>& composite_ops() {
  static const std::vector<CompositeOp> table = {
      // Factories: memory from the plugin's allocator, values from a kernel
      // or from the plugin's own memset / copy_from_host.
      {"empty, empty_like, new_empty", {}, "allocate only"},
      {"zeros, new_zeros", {}, "allocate + the plugin's memset"},
      {"ones, full, scalar_tensor, new_ones, new_full", {Op::Fill}, "allocate + fill"},
      {"zeros_like, ones_like, full_like", {Op::Fill}, "allocate (t's dense strides) + fill"},
      {"rand_like, randn_like",
       {Op::Random, Op::Copy},
       "random, copied into t's strides when those are not contiguous"},
      {"arange, linspace, logspace, tensor, from_vector",
       {},
       "values computed on the host + the plugin's copy_from_host"},
      // Copies.
      {"clone, contiguous, to(dtype), copy_, new_tensor", {Op::Copy}, "allocate + copy"},
      {"to(device)",
       {Op::Copy},
       "the plugin's copy_on_device between its own devices; between plugins "
       "copy_to_host + copy_from_host through host staging buffers (+ copy for a view)"},
      {"fill_, zero_", {Op::Fill}, "fill in place"},
      {"detach", {}, "a new handle on the same storage"},
      // Arithmetic with promotion and scalars.
      {"add/sub/mul/div/pow/eq..ge with a Scalar",
       {Op::Fill},
       "the scalar becomes a 0-d tensor (fill) that broadcasts; then the primitive"},
      {"exp, log, sqrt, sigmoid, tanh, div of integers",
       {Op::Copy},
       "cast to the default float dtype (copy); then the primitive"},
      {"mixed-dtype binary ops, clamp with float bounds",
       {Op::Copy},
       "operands cast to the promoted dtype (copy); then the primitive"},
      // Reductions.
      {"mean", {Op::Sum, Op::Div, Op::Fill}, "sum, then div by the count (a 0-d tensor)"},
      {"max(dim), min(dim)",
       {Op::Argmax, Op::Argmin, Op::Max, Op::Min},
       "argmax/argmin for the indices + max/min for the values"},
      {"argmax(), argmin() over every element",
       {Op::Argmax, Op::Argmin, Op::Copy},
       "the flattened tensor (a copy when it is not viewable)"},
      // Composites a backend may fuse (the named op core::<name>; DV-6).
      {"silu", {Op::Sigmoid, Op::Mul}, "x * sigmoid(x); a backend may fuse it as core::silu"},
      {"layer_norm",
       {Op::Sum, Op::Div, Op::Sub, Op::Mul, Op::Sqrt, Op::Add, Op::Fill},
       "mean, centre, biased variance, sqrt, scale and shift; a backend may fuse it as "
       "core::layer_norm"},
      // Along a dim and indexing.
      {"softmax backward", {Op::Mul, Op::Sub, Op::Sum}, "y * (g - sum(g * y))"},
      {"log_softmax backward", {Op::Exp, Op::Mul, Op::Sub, Op::Sum}, "g - exp(y) * sum(g)"},
      {"scatter, scatter_add (out of place)",
       {Op::Copy, Op::Scatter},
       "clone + scatter in place (reduction 0 or 1)"},
      {"scatter_ with a Scalar value",
       {Op::Fill, Op::Scatter},
       "the value as a 0-d tensor expanded (stride 0) + scatter"},
      {"index_select with an int32 index", {Op::Copy, Op::IndexSelect}, "index cast to int64"},
      // Linear algebra.
      {"matmul with 1-D operands", {Op::Matmul}, "a row / column view, removed afterwards"},
      {"bmm", {Op::Matmul}, "matmul of two 3-D tensors, checked"},
      {"matmul with k = 0", {Op::Fill}, "zero_ of the output"},
      // Views: metadata only, never a kernel.
      {"view, transpose, t, permute, narrow, select, slice, index, expand, squeeze, "
       "unsqueeze, flatten, diagonal, as_strided, unfold",
       {},
       "views: new sizes, strides and offset on the same storage"},
      {"reshape", {Op::Copy}, "a view when the strides allow, else a contiguous copy"},
      // Reading values on the host.
      {"to_vector, item, to_string, allclose, equal",
       {},
       "the plugin's copy_to_host (a contiguous copy first for a view)"},
  };
  return table;
}

}  // namespace bp::cli
