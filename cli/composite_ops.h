// The composite ops: functions the core builds from primitive ops (bp_op),
// so a plugin never implements them. `backplane ops` prints this table and
// whether each backend has the primitives behind every entry. Each entry's
// probe runs it under kernel recording, and a test holds the primitives it
// reaches to the entry's list: change an op's implementation in
// core/src/ops and the test names the entry to update.
#pragma once

#include <backplane/backplane.h>
#include <backplane/debug.h>
#include <backplane/dispatcher.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

namespace bp::cli {

struct CompositeOp {
  const char* name;
  std::vector<Op> uses;  // the primitives its kernels are; empty: no kernel at all
  const char* how;       // one line: what the core does
  // Runs the composite on the default device and returns the kernels it
  // reached: what tests/composite_ops_test.cpp holds `uses` to, so that the
  // table cannot drift from core/src/ops.
  std::vector<debug::ReachedKernel> (*probe)();
};

namespace composite_probe {
// Float32 0, 1, ..., n - 1.
inline Tensor f32(int64_t n) { return arange(n, TensorOptions(DType::Float32)); }
// The kernels `f` reaches.
template <class F>
std::vector<debug::ReachedKernel> record(F f) {
  debug::KernelRecording r;
  f();
  return r.kernels();
}
// The kernels `f` reaches besides those of the ops it names itself, for an
// entry whose kernels come before "then the primitive".
template <class F>
std::vector<debug::ReachedKernel> record_besides(std::vector<std::string> primitives, F f) {
  std::vector<debug::ReachedKernel> out;
  for (debug::ReachedKernel& k : record(f))
    if (std::find(primitives.begin(), primitives.end(), k.op) == primitives.end())
      out.push_back(std::move(k));
  return out;
}
}  // namespace composite_probe

#define BP_PROBE(...)                \
  [] {                               \
    using namespace composite_probe; \
    __VA_ARGS__                      \
  }

inline const std::vector<CompositeOp>& composite_ops() {
  static const std::vector<CompositeOp> table = {
      // Factories: memory from the plugin's allocator, values from a kernel
      // or from the plugin's own memset / copy_from_host.
      {"empty, empty_like, new_empty",
       {},
       "allocate only",
       BP_PROBE(auto x = f32(6); return record([&] {
                  bp::empty({2, 3});
                  bp::empty_like(x);
                  x.new_empty({2});
                });)},
      {"zeros, new_zeros",
       {},
       "allocate + the plugin's memset",
       BP_PROBE(auto x = f32(6); return record([&] {
                  bp::zeros({2, 3});
                  x.new_zeros({2});
                });)},
      {"ones, full, scalar_tensor, new_ones, new_full",
       {Op::Fill},
       "allocate + fill",
       BP_PROBE(auto x = f32(6); return record([&] {
                  bp::ones({2});
                  bp::full({2}, 3.0);
                  bp::scalar_tensor(2.0);
                  x.new_ones({2});
                  x.new_full({2}, 1.5);
                });)},
      {"zeros_like, ones_like, full_like",
       {Op::Fill},
       "allocate (t's dense strides) + fill",
       BP_PROBE(auto x = f32(6); return record([&] {
                  bp::zeros_like(x);
                  bp::ones_like(x);
                  bp::full_like(x, 2.0);
                });)},
      {"rand_like, randn_like",
       {Op::Random, Op::Copy},
       "random, copied into t's strides when those are not contiguous",
       BP_PROBE(auto x = f32(6).view({2, 3}).t(); return record([&] {
                  bp::rand_like(x);
                  bp::randn_like(x);
                });)},
      {"arange, linspace, logspace, tensor, from_vector",
       {},
       "values computed on the host + the plugin's copy_from_host",
       BP_PROBE(return record([&] {
                         bp::arange(5);
                         bp::linspace(0, 1, 5);
                         bp::logspace(0, 1, 5);
                         bp::tensor({1.0f, 2.0f});
                         bp::from_vector(std::vector<float>{1, 2});
                       });)},
      // Copies.
      {"clone, contiguous, to(dtype), copy_, new_tensor",
       {Op::Copy},
       "allocate + copy",
       BP_PROBE(auto x = f32(6).view({2, 3}).t(); auto y = f32(6).view({3, 2}); return record([&] {
                  x.clone();
                  x.contiguous();
                  x.to(DType::Float64);
                  y.copy_(x);
                  x.new_tensor(x);
                });)},
      {"to(device)",
       {Op::Copy},
       "the plugin's copy_on_device between its own devices; between plugins "
       "copy_to_host + copy_from_host through host staging buffers (+ copy for a view)",
       nullptr},  // two backends: composite_ops_test checks it,
      {"fill_, zero_", {Op::Fill}, "fill in place", BP_PROBE(auto x = f32(6); return record([&] {
                                                               x.fill_(2.0);
                                                               x.zero_();
                                                             });)},
      {"detach",
       {},
       "a new handle on the same storage",
       BP_PROBE(auto x = f32(6); return record([&] { x.detach(); });)},
      // Arithmetic with promotion and scalars.
      {"add/sub/mul/div/pow/eq..ge with a Scalar",
       {Op::Fill},
       "the scalar becomes a 0-d tensor (fill) that broadcasts; then the primitive",
       BP_PROBE(auto x = f32(6); return record_besides({"pow", "eq"},
                                                       [&] {
                                                         bp::pow(x, 2.0);
                                                         bp::eq(x, 1.0);
                                                       });)},
      {"exp, log, sqrt, sigmoid, tanh, div of integers",
       {Op::Copy},
       "cast to the default float dtype (copy); then the primitive",
       BP_PROBE(auto i = bp::arange(1, 5); return record_besides({"exp"}, [&] { bp::exp(i); });)},
      {"mixed-dtype binary ops, clamp with float bounds",
       {Op::Copy},
       "operands cast to the promoted dtype (copy); then the primitive",
       BP_PROBE(auto i = bp::arange(1, 5);
                auto x = bp::arange(1, 5, 1, TensorOptions(DType::Float64));
                return record_besides({"maximum"}, [&] { bp::maximum(i, x); });)},
      // Reductions.
      {"mean",
       {Op::Sum, Op::Div, Op::Fill},
       "sum, then div by the count (a 0-d tensor)",
       BP_PROBE(auto x = f32(6); return record([&] { bp::mean(x); });)},
      {"max(dim), min(dim)",
       {Op::Argmax, Op::Argmin, Op::Max, Op::Min},
       "argmax/argmin for the indices + max/min for the values",
       BP_PROBE(auto x = f32(6).view({2, 3}); return record([&] {
                  bp::max(x, 1);
                  bp::min(x, 1);
                });)},
      {"argmax(), argmin() over every element",
       {Op::Argmax, Op::Argmin, Op::Copy},
       "the flattened tensor (a copy when it is not viewable)",
       BP_PROBE(auto x = f32(6).view({2, 3}).t(); return record([&] {
                  x.argmax();
                  x.argmin();
                });)},
      // Composites a backend may fuse (the named op core::<name>; DV-6).
      {"silu",
       {Op::Sigmoid, Op::Mul},
       "x * sigmoid(x); a backend may fuse it as core::silu",
       BP_PROBE(auto x = f32(6).view({2, 3}).t(); return record([&] { bp::silu(x); });)},
      {"layer_norm",
       {Op::Sum, Op::Div, Op::Sub, Op::Mul, Op::Sqrt, Op::Add, Op::Fill},
       "mean, centre, biased variance, sqrt, scale and shift; a backend may fuse it as "
       "core::layer_norm",
       BP_PROBE(auto x = f32(6).view({2, 3}); auto w = f32(6).view({3, 2}).select(1, 0);
                return record([&] { bp::layer_norm(x, {3}, w, w); });)},
      // Along a dim and indexing.
      {"softmax backward",
       {Op::Mul, Op::Sub, Op::Sum},
       "y * (g - sum(g * y))",
       BP_PROBE(auto x = f32(6).view({2, 3}).requires_grad_(); auto y = bp::softmax(x, 1);
                auto g = bp::ones_like(y); return record([&] { y.backward(g); });)},
      {"log_softmax backward",
       {Op::Exp, Op::Mul, Op::Sub, Op::Sum},
       "g - exp(y) * sum(g)",
       BP_PROBE(auto x = f32(6).view({2, 3}).requires_grad_(); auto y = bp::log_softmax(x, 1);
                auto g = bp::ones_like(y); return record([&] { y.backward(g); });)},
      {"scatter, scatter_add (out of place)",
       {Op::Copy, Op::Scatter},
       "clone + scatter in place (reduction 0 or 1)",
       BP_PROBE(auto x = f32(6); auto i = bp::tensor({int64_t{0}, int64_t{2}});
                auto v = bp::tensor({1.0f, 2.0f}); return record([&] {
                  bp::scatter(x, 0, i, v);
                  bp::scatter_add(x, 0, i, v);
                });)},
      {"scatter_ with a Scalar value",
       {Op::Fill, Op::Scatter},
       "the value as a 0-d tensor expanded (stride 0) + scatter",
       BP_PROBE(auto x = f32(6); auto i = bp::tensor({int64_t{0}, int64_t{2}});
                return record([&] { x.scatter_(0, i, 4.0); });)},
      {"index_select with an int32 index",
       {Op::Copy, Op::IndexSelect},
       "index cast to int64",
       BP_PROBE(auto x = f32(6); auto i = bp::tensor({0, 2}, DType::Int32);
                return record([&] { bp::index_select(x, 0, i); });)},
      // Linear algebra.
      {"matmul with 1-D operands",
       {Op::Matmul},
       "a row / column view, removed afterwards",
       BP_PROBE(auto a = f32(3); auto b = f32(6).view({3, 2});
                return record([&] { bp::matmul(a, b); });)},
      {"bmm",
       {Op::Matmul},
       "matmul of two 3-D tensors, checked",
       BP_PROBE(auto a = f32(12).view({2, 2, 3}); auto b = f32(12).view({2, 3, 2});
                return record([&] { bp::bmm(a, b); });)},
      {"matmul with k = 0",
       {Op::Fill},
       "zero_ of the output",
       BP_PROBE(auto a = bp::empty({2, 0}); auto b = bp::empty({0, 3});
                return record([&] { bp::matmul(a, b); });)},
      // Views: metadata only, never a kernel.
      {"view, transpose, t, permute, narrow, select, slice, index, expand, squeeze, "
       "unsqueeze, flatten, diagonal, as_strided, unfold",
       {},
       "views: new sizes, strides and offset on the same storage",
       BP_PROBE(auto x = f32(6).view({2, 3}); return record([&] {
                  x.transpose(0, 1);
                  x.t();
                  x.permute({1, 0});
                  x.narrow(1, 0, 2);
                  x.select(0, 1);
                  x.slice(1, 0, 3, 2);
                  x.unsqueeze(0).expand({2, 2, 3}).squeeze(0);
                  x.flatten();
                  x.diagonal();
                  x.as_strided({2}, {1});
                  x.unfold(1, 2, 1);
                });)},
      {"reshape",
       {Op::Copy},
       "a view when the strides allow, else a contiguous copy",
       BP_PROBE(auto x = f32(6).view({2, 3}); return record([&] {
                  x.reshape({3, 2});
                  x.t().reshape({6});
                });)},
      // Reading values on the host.
      {"to_vector, item, to_string, allclose, equal",
       {},
       "the plugin's copy_to_host (a contiguous copy first for a view)",
       BP_PROBE(auto x = f32(6).view({2, 3}); auto y = f32(1); return record([&] {
                  x.to_vector<float>();
                  y.item<float>();
                  x.to_string();
                });)},
  };
  return table;
}
#undef BP_PROBE

}  // namespace bp::cli
