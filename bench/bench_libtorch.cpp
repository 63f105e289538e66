// The LibTorch side of the comparisons: the same work through ATen, in the
// same process and run, so ratios compare like with like. Built only when
// CMake finds Torch.
#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <benchmark/benchmark.h>
#if __has_include(<torch/optim/adam.h>)
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#define BACKPLANE_BENCH_TORCH_OPTIM 1
#endif

#include <memory>
#include <vector>

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

// The same DLPack round trip as bench_dlpack.cpp's.
void dlpack_round_trip_libtorch(benchmark::State& state) {
  at::Tensor a = at::ones({4, 4}, at::kFloat);
  for (auto _ : state) {
    at::Tensor b = at::fromDLPack(at::toDLPack(a));
    benchmark::DoNotOptimize(b.unsafeGetTensorImpl());
  }
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

void conv_fwd_libtorch(benchmark::State& state) {
  at::NoGradGuard no_grad;
  at::manual_seed(0);
  const at::Tensor x = at::randn({kConvN, kConvC, kConvHW, kConvHW}),
                   w = at::randn({kConvO, kConvC, 3, 3});
  const at::Tensor b = at::randn({kConvO});
  for (auto _ : state) {
    at::Tensor y = at::conv2d(x, w, b, 1, 1);
    benchmark::DoNotOptimize(y.unsafeGetTensorImpl());
  }
}

void conv_fwd_bwd_libtorch(benchmark::State& state) {
  at::manual_seed(0);
  at::Tensor x = at::randn({kConvN, kConvC, kConvHW, kConvHW}).set_requires_grad(true);
  at::Tensor w = at::randn({kConvO, kConvC, 3, 3}).set_requires_grad(true);
  at::Tensor b = at::randn({kConvO}).set_requires_grad(true);
  const at::Tensor g = at::randn({kConvN, kConvO, kConvHW, kConvHW});
  for (auto _ : state) {
    for (at::Tensor* p : {&x, &w, &b}) p->mutable_grad() = at::Tensor();
    at::conv2d(x, w, b, 1, 1).backward(g);
    benchmark::DoNotOptimize(w.grad().unsafeGetTensorImpl());
  }
}

void resnet_block_libtorch(benchmark::State& state) {
  at::manual_seed(0);
  const at::Tensor x = at::randn({kBlockN, kBlockC, kConvHW, kConvHW});
  at::Tensor w1 = (at::randn({kBlockC, kBlockC, 3, 3}) * 0.05).detach().set_requires_grad(true);
  at::Tensor w2 = (at::randn({kBlockC, kBlockC, 3, 3}) * 0.05).detach().set_requires_grad(true);
  at::Tensor g1 = at::ones({kBlockC}).set_requires_grad(true),
             b1 = at::zeros({kBlockC}).set_requires_grad(true);
  at::Tensor g2 = at::ones({kBlockC}).set_requires_grad(true),
             b2 = at::zeros({kBlockC}).set_requires_grad(true);
  at::Tensor rm1 = at::zeros({kBlockC}), rv1 = at::ones({kBlockC}), rm2 = at::zeros({kBlockC}),
             rv2 = at::ones({kBlockC});
  for (auto _ : state) {
    for (at::Tensor* p : {&w1, &w2, &g1, &b1, &g2, &b2}) p->mutable_grad() = at::Tensor();
    at::Tensor h = at::relu(
        at::batch_norm(at::conv2d(x, w1, {}, 1, 1), g1, b1, rm1, rv1, true, 0.1, 1e-5, false));
    at::Tensor y = at::relu(
        at::batch_norm(at::conv2d(h, w2, {}, 1, 1), g2, b2, rm2, rv2, true, 0.1, 1e-5, false) + x);
    y.sum().backward();
    benchmark::DoNotOptimize(w1.grad().unsafeGetTensorImpl());
  }
}

void norm_pool_libtorch(benchmark::State& state) {
  at::manual_seed(0);
  at::Tensor x = at::randn({kConvN, kConvC, kConvHW, kConvHW}).set_requires_grad(true);
  at::Tensor g = at::ones({kConvC}).set_requires_grad(true),
             b = at::zeros({kConvC}).set_requires_grad(true);
  at::Tensor rm = at::zeros({kConvC}), rv = at::ones({kConvC});
  for (auto _ : state) {
    for (at::Tensor* p : {&x, &g, &b}) p->mutable_grad() = at::Tensor();
    at::Tensor y = at::avg_pool2d(
        at::max_pool2d(at::relu(at::batch_norm(x, g, b, rm, rv, true, 0.1, 1e-5, false)), 3, 2, 1),
        2);
    y.sum().backward();
    benchmark::DoNotOptimize(x.grad().unsafeGetTensorImpl());
  }
}

// ATen's sparse x dense product on a coalesced COO matrix of `density`.
void sparse_mm_libtorch(benchmark::State& state, double density) {
  at::NoGradGuard no_grad;
  at::manual_seed(0);
  const auto nnz = static_cast<int64_t>(density * static_cast<double>(kSparseRows * kSparseRows));
  const at::Tensor idx = at::randint(0, kSparseRows, {2, nnz}, at::kLong);
  const at::Tensor s =
      at::sparse_coo_tensor(idx, at::randn({nnz}), {kSparseRows, kSparseRows}).coalesce();
  const at::Tensor d = at::randn({kSparseRows, kSparseCols});
  for (auto _ : state) {
    at::Tensor c = at::mm(s, d);
    benchmark::DoNotOptimize(c.unsafeGetTensorImpl());
  }
}

// ATen's coalesce of the same kind of matrix (1%, duplicates included).
void coalesce_libtorch(benchmark::State& state) {
  at::NoGradGuard no_grad;
  at::manual_seed(0);
  const auto nnz = static_cast<int64_t>(0.01 * static_cast<double>(kSparseRows * kSparseRows));
  const at::Tensor idx = at::randint(0, kSparseRows, {2, nnz}, at::kLong);
  const at::Tensor s = at::sparse_coo_tensor(idx, at::randn({nnz}), {kSparseRows, kSparseRows});
  for (auto _ : state) {
    at::Tensor c = s.coalesce();
    benchmark::DoNotOptimize(c.unsafeGetTensorImpl());
  }
}

// ATen's stable sort of kSortElements random floats.
void sort_libtorch(benchmark::State& state) {
  at::NoGradGuard no_grad;
  at::manual_seed(0);
  const at::Tensor x = at::randn({kSortElements});
  for (auto _ : state) {
    auto r = at::sort(x, /*stable=*/true, 0, false);
    benchmark::DoNotOptimize(std::get<1>(r).unsafeGetTensorImpl());
  }
}

#ifdef BACKPLANE_BENCH_TORCH_OPTIM
// torch::optim's step over the parameter set of bench_optim.cpp.
void optim_step_libtorch(benchmark::State& state, bool adam) {
  at::manual_seed(0);
  std::vector<at::Tensor> ps;
  for (int i = 0; i < kOptimTensors; ++i)
    for (int64_t n : {kOptimElems, kOptimSmall}) {
      at::Tensor p = at::randn({n}).set_requires_grad(true);
      p.mutable_grad() = at::randn({n}) * 0.01;
      ps.push_back(p);
    }
  std::unique_ptr<torch::optim::Optimizer> opt;
  if (adam)
    opt = std::make_unique<torch::optim::Adam>(ps, torch::optim::AdamOptions(1e-3));
  else
    opt = std::make_unique<torch::optim::SGD>(ps, torch::optim::SGDOptions(1e-2).momentum(0.9));
  opt->step();
  for (auto _ : state) opt->step();
  state.SetBytesProcessed(state.iterations() * (adam ? 7 : 5) * kOptimTensors *
                          (kOptimElems + kOptimSmall) * int64_t{sizeof(float)});
}
#endif

}  // namespace

void register_libtorch_benchmarks() {
#ifdef BACKPLANE_BENCH_TORCH_OPTIM
  benchmark::RegisterBenchmark("adam_step/libtorch", optim_step_libtorch, true)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("sgd_step/libtorch", optim_step_libtorch, false)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
#endif
  benchmark::RegisterBenchmark("sparse_mm_1pct/libtorch", sparse_mm_libtorch, 0.01)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("sparse_mm_0.1pct/libtorch", sparse_mm_libtorch, 0.001)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("coalesce_1pct/libtorch", coalesce_libtorch)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("sort_1M/libtorch", sort_libtorch)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  for (auto [name, fn] : {std::pair{"conv2d_fwd/libtorch", &conv_fwd_libtorch},
                          std::pair{"conv2d_fwd_bwd/libtorch", &conv_fwd_bwd_libtorch},
                          std::pair{"resnet_block/libtorch", &resnet_block_libtorch},
                          std::pair{"norm_pool/libtorch", &norm_pool_libtorch}})
    benchmark::RegisterBenchmark(name, fn)->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("tiny_add_grad/libtorch", tiny_add_grad_libtorch);
  benchmark::RegisterBenchmark("mlp_step/libtorch", mlp_step_libtorch)->UseRealTime();
  benchmark::RegisterBenchmark("tiny_add/libtorch", tiny_add_libtorch);
  benchmark::RegisterBenchmark("dlpack_round_trip/libtorch", dlpack_round_trip_libtorch);
  benchmark::RegisterBenchmark("add_16M/libtorch", add_16M_libtorch)->UseRealTime();
}

}  // namespace bp::bench
