// Small and medium float32 matmuls (n x n by n x n, n = 64 and 256): the
// whole eager path (shape checks, output allocation, dispatch, the kernel:
// oneDNN's matmul on cpu_onednn) against oneDNN's matmul primitive called
// directly, created once as a program would, memory objects per call. The
// difference at n = 64 is the framework's share of a small matmul.
#include <backplane/backplane.h>
#include <benchmark/benchmark.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "bench_common.h"

namespace bp::bench {
namespace {

void matmul_backplane(benchmark::State& state, int64_t n) {
  NoGradGuard no_grad;
  manual_seed(0);
  const Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  state.SetItemsProcessed(state.iterations() * 2 * n * n * n);
}

void matmul_onednn(benchmark::State& state, int64_t n) {
  using dnnl::memory;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const memory::desc md({n, n}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), eng));
  std::vector<float> a(static_cast<std::size_t>(n * n), 1.0f), b(a), c(a);
  for (auto _ : state) {
    memory ma(md, eng, a.data()), mb(md, eng, b.data()), mc(md, eng, c.data());
    prim.execute(s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
    s.wait();
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * 2 * n * n * n);
}

}  // namespace

void register_matmul_benchmarks() {
  benchmark::RegisterBenchmark("matmul_64/backplane", matmul_backplane, 64);
  benchmark::RegisterBenchmark("matmul_64/onednn", matmul_onednn, 64);
  benchmark::RegisterBenchmark("matmul_256/backplane", matmul_backplane, 256);
  benchmark::RegisterBenchmark("matmul_256/onednn", matmul_onednn, 256);
}

}  // namespace bp::bench
