// One optimiser step (SGD with momentum, Adam) over a model-sized parameter
// set: the backend's fused update kernels (core::sgd_step, core::adam_step)
// against the core's composite in the same run, and LibTorch's
// torch::optim (bench_libtorch.cpp).
#include <backplane/backplane.h>
#include <benchmark/benchmark.h>

#include <memory>
#include <optional>
#include <vector>

#include "bench_common.h"

namespace bp::bench {
namespace {

// kOptimLarge tensors of kOptimElems and as many of kOptimSmall (weights
// and biases), with gradients set once.
std::vector<Tensor> optim_params() {
  manual_seed(0);
  std::vector<Tensor> ps;
  for (int i = 0; i < kOptimTensors; ++i) {
    for (int64_t n : {kOptimElems, kOptimSmall}) {
      Tensor p = randn({n}).requires_grad_();
      p.set_grad(randn({n}) * 0.01);
      ps.push_back(p);
    }
  }
  return ps;
}

// `composite`: the core's composite, which backends without the fused
// kernels run; else the backend's kernel.
void optim_step(benchmark::State& state, bool adam, bool composite) {
  std::optional<CompositeOnlyGuard> only;
  if (composite) only.emplace();
  std::vector<Tensor> ps = optim_params();
  std::unique_ptr<optim::Optimizer> opt;
  if (adam)
    opt = std::make_unique<optim::Adam>(ps, optim::AdamOptions{.lr = 1e-3});
  else
    opt = std::make_unique<optim::SGD>(ps, optim::SGDOptions{.lr = 1e-2, .momentum = 0.9});
  opt->step();  // the state is made outside the timing
  synchronize();
  for (auto _ : state) {
    opt->step();
    synchronize();
  }
  // Adam reads grad, param and two moments and writes three; SGD reads
  // three and writes two.
  state.SetBytesProcessed(state.iterations() * (adam ? 7 : 5) * kOptimTensors *
                          (kOptimElems + kOptimSmall) * int64_t{sizeof(float)});
}

}  // namespace

void register_optim_benchmarks() {
  for (auto [name, adam, composite] : {std::tuple{"adam_step/backplane", true, false},
                                       {"adam_step/composite", true, true},
                                       {"sgd_step/backplane", false, false},
                                       {"sgd_step/composite", false, true}})
    benchmark::RegisterBenchmark(name, optim_step, adam, composite)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
}

}  // namespace bp::bench
