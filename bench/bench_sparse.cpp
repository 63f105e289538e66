// Sparse x dense products (4096 x 4096 at 1% and 0.1% density, by a dense
// 4096 x 256) against the dense matmul of the same shapes in the same run
// (the density below which a COO tensor pays for itself), through the
// backend's core::sparse_mm kernel and through the core's composite; and
// coalescing the 1% matrix's uncoalesced indices (ARGSORT, CUMSUM and
// scatter_add on the device), against LibTorch's coalesce
// (bench_libtorch.cpp), and a stable sort of 1M floats.
#include <backplane/backplane.h>
#include <backplane/sparse/coo.h>
#include <benchmark/benchmark.h>

#include <optional>
#include <random>
#include <tuple>
#include <vector>

#include "bench_common.h"

namespace bp::bench {
namespace {

// A coalesced kSparseRows-square sparse matrix holding `density` of its elements.
SparseTensor random_sparse(double density) {
  const int64_t n = kSparseRows;
  const auto nnz = static_cast<int64_t>(density * static_cast<double>(n * n));
  std::mt19937_64 gen(7);
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  std::vector<int64_t> idx(static_cast<std::size_t>(2 * nnz));
  for (auto& i : idx) i = pick(gen);
  manual_seed(0);
  return sparse_coo_tensor(from_vector(idx, {2, nnz}), randn({nnz}), {n, n}).coalesce();
}

// coalesce() of the 1% matrix before coalescing (duplicates included).
void coalesce(benchmark::State& state) {
  NoGradGuard no_grad;
  const int64_t n = kSparseRows;
  const auto nnz = static_cast<int64_t>(0.01 * static_cast<double>(n * n));
  std::mt19937_64 gen(7);
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  std::vector<int64_t> idx(static_cast<std::size_t>(2 * nnz));
  for (auto& i : idx) i = pick(gen);
  manual_seed(0);
  const SparseTensor s = sparse_coo_tensor(from_vector(idx, {2, nnz}), randn({nnz}), {n, n});
  for (auto _ : state) {
    SparseTensor c = s.coalesce();
    benchmark::DoNotOptimize(c._values().impl());
  }
}

// A stable sort of kSortElements random floats.
void sort_floats(benchmark::State& state) {
  NoGradGuard no_grad;
  manual_seed(0);
  const Tensor x = randn({kSortElements});
  for (auto _ : state) {
    auto [v, i] = sort(x, 0, false, true);
    benchmark::DoNotOptimize(i.impl());
  }
}

// `composite`: the core's composite (gather, multiply, scatter_add), which
// backends without a core::sparse_mm kernel run; else the backend's kernel.
void sparse_mm(benchmark::State& state, double density, bool composite) {
  NoGradGuard no_grad;
  std::optional<CompositeOnlyGuard> only;
  if (composite) only.emplace();
  const SparseTensor s = random_sparse(density);
  const Tensor d = randn({kSparseRows, kSparseCols});
  for (auto _ : state) {
    Tensor c = mm(s, d);
    benchmark::DoNotOptimize(c.impl());
  }
  state.counters["nnz"] = static_cast<double>(s.nnz());
}

void dense_mm(benchmark::State& state) {
  NoGradGuard no_grad;
  manual_seed(0);
  const Tensor a = randn({kSparseRows, kSparseRows}), d = randn({kSparseRows, kSparseCols});
  for (auto _ : state) {
    Tensor c = matmul(a, d);
    benchmark::DoNotOptimize(c.impl());
  }
}

}  // namespace

void register_sparse_benchmarks() {
  for (auto [name, density, composite] : {std::tuple{"sparse_mm_1pct/backplane", 0.01, false},
                                          {"sparse_mm_0.1pct/backplane", 0.001, false},
                                          {"sparse_mm_1pct/composite", 0.01, true},
                                          {"sparse_mm_0.1pct/composite", 0.001, true}})
    benchmark::RegisterBenchmark(name, sparse_mm, density, composite)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("sparse_mm_dense/backplane", dense_mm)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("coalesce_1pct/backplane", coalesce)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("sort_1M/backplane", sort_floats)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace bp::bench
