// The LibTorch side of the comparisons: the same work through ATen, in the
// same process and run, so ratios compare like with like. Built only when
// CMake finds Torch.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include "bench_common.h"

namespace bp::bench {
namespace {

// Eager overhead of one tiny op; grad mode off, as on the Backplane side.
void tiny_add_libtorch(benchmark::State& state) {
  at::NoGradGuard no_grad;
  at::Tensor a = at::ones({1}, at::kFloat), b = at::ones({1}, at::kFloat);
  for (auto _ : state) {
    at::Tensor c = at::add(a, b);
    benchmark::DoNotOptimize(c.unsafeGetTensorImpl());
  }
}

void add_16M_libtorch(benchmark::State& state) {
  at::NoGradGuard no_grad;
  at::Tensor a = at::full({kLargeElems}, 1.0f), b = at::full({kLargeElems}, 2.0f);
  at::Tensor out = at::empty({kLargeElems}, at::kFloat);
  at::add_out(out, a, b);  // first touch of `out` outside the timing
  for (auto _ : state) {
    at::add_out(out, a, b);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kLargeAddBytes);
}

// Recording one autograd node per op.
void tiny_add_grad_libtorch(benchmark::State& state) {
  at::Tensor a = at::ones({1}, at::kFloat).set_requires_grad(true);
  at::Tensor b = at::ones({1}, at::kFloat).set_requires_grad(true);
  for (auto _ : state) {
    at::Tensor c = at::add(a, b);
    benchmark::DoNotOptimize(c.unsafeGetTensorImpl());
  }
}

void mlp_step_libtorch(benchmark::State& state) {
  at::manual_seed(0);
  at::Tensor x = at::randn({kBatch, kWidth});
  at::Tensor w1 = (at::randn({kWidth, kWidth}) * 0.05).detach().set_requires_grad(true);
  at::Tensor b1 = at::zeros({kWidth}).set_requires_grad(true);
  at::Tensor w2 = (at::randn({kWidth, kWidth}) * 0.05).detach().set_requires_grad(true);
  at::Tensor b2 = at::zeros({kWidth}).set_requires_grad(true);
  for (auto _ : state) {
    for (at::Tensor* p : {&w1, &b1, &w2, &b2}) p->mutable_grad() = at::Tensor();
    at::Tensor h = at::relu(at::matmul(x, w1) + b1);
    at::Tensor y = at::matmul(h, w2) + b2;
    (y * y).mean().backward();
    benchmark::DoNotOptimize(w1.grad().unsafeGetTensorImpl());
  }
}

}  // namespace

void register_libtorch_benchmarks() {
  benchmark::RegisterBenchmark("tiny_add_grad/libtorch", tiny_add_grad_libtorch);
  benchmark::RegisterBenchmark("mlp_step/libtorch", mlp_step_libtorch)->UseRealTime();
  benchmark::RegisterBenchmark("tiny_add/libtorch", tiny_add_libtorch);
  benchmark::RegisterBenchmark("add_16M/libtorch", add_16M_libtorch)->UseRealTime();
}

}  // namespace bp::bench
