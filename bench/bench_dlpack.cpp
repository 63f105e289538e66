// DLPack exchange: a tensor handed out (to_dlpack) and taken back
// (from_dlpack), then dropped, which frees the import and calls the export's
// deleter: what every crossing to NumPy or PyTorch costs on top of the work.
// Against LibTorch's at::toDLPack / at::fromDLPack in the same run.
#include <backplane/backplane.h>
#include <benchmark/benchmark.h>

#include "bench_common.h"

namespace bp::bench {
namespace {

void dlpack_round_trip(benchmark::State& state) {
  const Tensor a = full({4, 4}, 1.0);
  for (auto _ : state) {
    Tensor b = from_dlpack(to_dlpack(a));
    benchmark::DoNotOptimize(b.impl());
  }
}

}  // namespace

void register_dlpack_benchmarks() {
  benchmark::RegisterBenchmark("dlpack_round_trip/backplane", dlpack_round_trip);
}

}  // namespace bp::bench
