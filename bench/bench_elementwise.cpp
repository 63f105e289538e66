// Elementwise adds where a training step spends them: mid-size float32 adds
// (4K to 1M elements, in cache) against a serial loop on one core, each as a
// fresh result (`a + b`, what user code writes) and into an existing output
// (add_out); and a 16M-element fresh result against the same add into an
// existing buffer, which is what the allocator's cache of large blocks buys
// (a fresh block from the system pays a page fault per 4 KiB on first touch).
#include <backplane/backplane.h>
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench_common.h"

namespace bp::bench {
namespace {

void add_mid_fresh(benchmark::State& state, int64_t n) {
  const Tensor a = full({n}, 1.0), b = full({n}, 2.0);
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  state.SetBytesProcessed(state.iterations() * 3 * n * 4);
}

void add_mid_out(benchmark::State& state, int64_t n) {
  const Tensor a = full({n}, 1.0), b = full({n}, 2.0);
  Tensor out = empty({n});
  for (auto _ : state) {
    add_out(out, a, b);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * n * 4);
}

// One core, the compiler's vectorised loop: what a size gains nothing over.
void add_mid_serial_loop(benchmark::State& state, int64_t elems) {
  const auto n = static_cast<std::size_t>(elems);
  std::vector<float> a(n, 1.0f), b(n, 2.0f), out(n, 0.0f);
  const float* pa = a.data();
  const float* pb = b.data();
  float* po = out.data();
  for (auto _ : state) {
    for (std::size_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
    benchmark::DoNotOptimize(po);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * static_cast<int64_t>(n) * 4);
}

void add_16M_fresh(benchmark::State& state) {
  const Tensor a = full({kLargeElems}, 1.0), b = full({kLargeElems}, 2.0);
  { Tensor warm = add(a, b); }  // the first block comes from the system: not timed
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  state.SetBytesProcessed(state.iterations() * kLargeAddBytes);
}

}  // namespace

void register_elementwise_benchmarks() {
  for (const int64_t n : kMidSizes) {
    const std::string s = std::to_string(n);
    benchmark::RegisterBenchmark(("add_mid/fresh/" + s).c_str(), add_mid_fresh, n)->UseRealTime();
    benchmark::RegisterBenchmark(("add_mid/out/" + s).c_str(), add_mid_out, n)->UseRealTime();
    benchmark::RegisterBenchmark(("add_mid/serial_loop/" + s).c_str(), add_mid_serial_loop, n)
        ->UseRealTime();
  }
  benchmark::RegisterBenchmark("add_16M_fresh/backplane", add_16M_fresh)->UseRealTime();
}

}  // namespace bp::bench
