// backplane-bench: the performance targets of DESIGN.md as Google Benchmark
// programs, with the references they are judged against measured in the
// same run, and the ratios printed at the end.
//
//   backplane-bench [--backend NAME[:N]|PATH] [--plugin-path DIR] [--benchmark_*]
// Exit status 2 when the backend cannot be loaded, 3 when it has no device.
//
// Benchmarks: tiny_add/{backplane,libtorch} (eager overhead of a 1-element
// float32 add), add_16M/{backplane,plain_loop,libtorch} (a 16M-element add
// into an existing output; bytes processed = 3 operands x 16M x 4 bytes).
#include <backplane/backplane.h>
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.h"

namespace bp::bench {
namespace {

// --- benchmarks -----------------------------------------------------------------

// The whole eager path of one op: checks, output allocation, dispatch, the
// kernel across the plugin boundary. No autograd is involved.
void tiny_add_backplane(benchmark::State& state) {
  Tensor a = ones({1}), b = ones({1});
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
}

// `a + 2.0`: the scalar is an attribute of the kernel call where the backend
// takes one (ABI 2.5's BP_KERNEL_SCALAR_OPERAND), else a filled 0-d tensor.
void tiny_add_scalar_backplane(benchmark::State& state) {
  Tensor a = ones({1});
  for (auto _ : state) {
    Tensor c = add(a, 2.0);
    benchmark::DoNotOptimize(c.impl());
  }
}

void add_16M_backplane(benchmark::State& state) {
  Tensor a = full({kLargeElems}, 1.0), b = full({kLargeElems}, 2.0);
  Tensor out = empty({kLargeElems});
  add_out(out, a, b);  // first touch of `out` outside the timing
  for (auto _ : state) {
    add_out(out, a, b);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kLargeAddBytes);
}

// What the memory system allows: the same add as a plain loop, on every
// core as STREAM does (the backend is multi-threaded too).
void add_16M_plain_loop(benchmark::State& state) {
  std::vector<float> a(kLargeElems, 1.0f), b(kLargeElems, 2.0f), out(kLargeElems, 0.0f);
  const float* pa = a.data();
  const float* pb = b.data();
  float* po = out.data();
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < kLargeElems; ++i) po[i] = pa[i] + pb[i];
    benchmark::DoNotOptimize(po);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kLargeAddBytes);
}

// Square adds, dense, and with one operand transposed (a strided walk): the
// strided path must stay within 2x of the dense one. At 2048 x 2048 (48 MiB
// moved) the dense add streams from memory on most machines; at 1024 x 1024
// (12 MiB) it runs from the last-level cache of a server CPU, and at
// 512 x 512 (3 MiB) from the L2 caches of two cores with 1.5 MiB or more
// each: there the transposes' own work is not hidden behind the memory's
// bandwidth.
void square_add(benchmark::State& state, int64_t side, bool transposed) {
  Tensor a = full({side, side}, 1.0), b = full({side, side}, 2.0);
  if (transposed) b = b.t();
  Tensor out = empty({side, side});
  add_out(out, a, b);
  for (auto _ : state) {
    add_out(out, a, b);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * square_add_bytes(side));
}

// An in-place add of one column of a 4096 x 4096 matrix to another: the
// partial-overlap check must cost no more than the metadata (the two
// columns' positions interleave over the whole storage), so the aliased
// form runs as fast as the same add from a column of another matrix.
void column_add_aliased(benchmark::State& state) {
  Tensor x = zeros({kColumnRows, kColumnRows});
  Tensor dst = x.index({Slice(), 0}), src = x.index({Slice(), 1});
  for (auto _ : state) {
    dst.add_(src);
    benchmark::DoNotOptimize(dst.impl());
  }
}

void column_add_separate(benchmark::State& state) {
  Tensor x = zeros({kColumnRows, kColumnRows}), y = zeros({kColumnRows, kColumnRows});
  Tensor dst = x.index({Slice(), 0}), src = y.index({Slice(), 1});
  for (auto _ : state) {
    dst.add_(src);
    benchmark::DoNotOptimize(dst.impl());
  }
}

// y.add_(b) on 1M floats with autograd recording (y is a non-leaf that
// requires grad) against the same under no-grad: add_ needs no old values
// for its gradient, so recording adds a node, not a copy of y.
void inplace_add_1M(benchmark::State& state, bool recorded) {
  Tensor x = ones({kInplaceElems}).requires_grad_();
  Tensor y = x.clone(), b = ones({kInplaceElems});
  std::optional<NoGradGuard> no_grad;
  if (!recorded) no_grad.emplace();
  for (auto _ : state) {
    y.add_(b);
    benchmark::DoNotOptimize(y.impl());
  }
}

// An optimiser-like update, p.add_(g, -lr) on 1M floats under no-grad, with
// the rate changing every step (a schedule) and fixed: the rate is a
// runtime argument, so both cost the same.
void add_alpha_1M(benchmark::State& state, bool changing) {
  NoGradGuard no_grad;
  Tensor p = ones({kInplaceElems}), g = ones({kInplaceElems});
  int step = 0;
  for (auto _ : state) {
    const double lr = changing ? 1e-3 * (1 + step++ % 997) : 1e-3;
    p.add_(g, -lr);
    benchmark::DoNotOptimize(p.impl());
  }
}

// The eager overhead with autograd recording a node.
void tiny_add_grad_backplane(benchmark::State& state) {
  Tensor a = ones({1}).requires_grad_(), b = ones({1}).requires_grad_();
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
}

// Forward and backward of a 2-layer MLP (256 wide, batch 64).
void mlp_step_backplane(benchmark::State& state) {
  manual_seed(0);
  Tensor x = randn({kBatch, kWidth});
  Tensor w1 = randn({kWidth, kWidth}).mul(0.05).detach().requires_grad_();
  Tensor b1 = zeros({kWidth}).requires_grad_();
  Tensor w2 = randn({kWidth, kWidth}).mul(0.05).detach().requires_grad_();
  Tensor b2 = zeros({kWidth}).requires_grad_();
  for (auto _ : state) {
    for (Tensor* p : {&w1, &b1, &w2, &b2}) p->set_grad(Tensor());
    Tensor h = relu(matmul(x, w1).add(b1));
    Tensor y = matmul(h, w2).add(b2);
    y.mul(y).mean().backward();
    benchmark::DoNotOptimize(w1.grad().impl());
  }
}

void register_benchmarks() {
  benchmark::RegisterBenchmark("tiny_add/backplane", tiny_add_backplane);
  benchmark::RegisterBenchmark("tiny_add_scalar/backplane", tiny_add_scalar_backplane);
  // Wall-clock rates: the work runs on several threads, and the CPU time of
  // the calling thread alone would overstate the bandwidth.
  benchmark::RegisterBenchmark("add_16M/backplane", add_16M_backplane)->UseRealTime();
  benchmark::RegisterBenchmark("add_16M/plain_loop", add_16M_plain_loop)->UseRealTime();
  for (const SquareSize& size : kSquareSizes) {
    for (const bool transposed : {false, true}) {
      const std::string label =
          std::string(transposed ? "strided_add_" : "add_") + size.name + "/backplane";
      benchmark::RegisterBenchmark(label.c_str(), square_add, size.side, transposed)->UseRealTime();
    }
  }
  benchmark::RegisterBenchmark("column_add_/aliased", column_add_aliased);
  benchmark::RegisterBenchmark("column_add_/separate", column_add_separate);
  benchmark::RegisterBenchmark("inplace_add_1M/recorded", inplace_add_1M, true)->UseRealTime();
  benchmark::RegisterBenchmark("inplace_add_1M/no_grad", inplace_add_1M, false)->UseRealTime();
  benchmark::RegisterBenchmark("add_alpha_1M/changing", add_alpha_1M, true)->UseRealTime();
  benchmark::RegisterBenchmark("add_alpha_1M/fixed", add_alpha_1M, false)->UseRealTime();
  benchmark::RegisterBenchmark("tiny_add_grad/backplane", tiny_add_grad_backplane);
  benchmark::RegisterBenchmark("mlp_step/backplane", mlp_step_backplane)->UseRealTime();
  register_nn_benchmarks();
  register_matmul_benchmarks();
  register_sparse_benchmarks();
  register_optim_benchmarks();
  register_elementwise_benchmarks();
  register_dlpack_benchmarks();
#ifdef BACKPLANE_BENCH_WITH_LIBTORCH
  register_libtorch_benchmarks();
#endif
}

// --- results and ratios -----------------------------------------------------------

struct Result {
  double seconds_per_iter = 0;  // wall time: the large adds run on many threads
};

// Passes everything to the usual display reporter (so --benchmark_format
// and colours behave as always) and keeps the best time of each benchmark.
class RatioReporter : public benchmark::BenchmarkReporter {
 public:
  explicit RatioReporter(benchmark::BenchmarkReporter* display) : display_(display) {}

  bool ReportContext(const Context& context) override { return display_->ReportContext(context); }
  void ReportRuns(const std::vector<Run>& runs) override {
    // Shown under the names they were registered with: UseRealTime() would
    // append "/real_time", and the Time column is wall clock in every row.
    std::vector<Run> shown = runs;
    for (Run& run : shown) run.run_name.time_type.clear();
    display_->ReportRuns(shown);
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      // With --benchmark_repetitions the median decides; otherwise the best
      // single run (the machine is shared, so noise only ever adds time).
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name == "median") {
        Result r;
        r.seconds_per_iter =
            run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
        medians_[run.run_name.function_name] = r;
        continue;
      }
      if (run.run_type != Run::RT_Iteration || run.iterations == 0) continue;
      Result r;
      r.seconds_per_iter = run.real_accumulated_time / static_cast<double>(run.iterations);
      auto [slot, fresh] = results_.try_emplace(run.run_name.function_name, r);
      if (!fresh && r.seconds_per_iter < slot->second.seconds_per_iter) slot->second = r;
    }
  }
  void Finalize() override { display_->Finalize(); }

  const Result* find(const std::string& name) const {
    if (auto m = medians_.find(name); m != medians_.end()) return &m->second;
    auto it = results_.find(name);
    return it == results_.end() ? nullptr : &it->second;
  }

 private:
  std::unique_ptr<benchmark::BenchmarkReporter> display_;
  std::map<std::string, Result> results_;
  std::map<std::string, Result> medians_;
};

void print_ratio(const RatioReporter& r, const char* label, const char* num, const char* den,
                 bool bandwidth, double bytes = static_cast<double>(kLargeAddBytes)) {
  const Result* n = r.find(num);
  const Result* d = r.find(den);
  if (n == nullptr || d == nullptr) {
    std::printf("  %-30s n/a (%s not run)\n", label, n == nullptr ? num : den);
    return;
  }
  const double ratio = n->seconds_per_iter / d->seconds_per_iter;
  if (!bandwidth) {
    std::printf("  %-30s %.3f  (%.1f ns vs %.1f ns per op)\n", label, ratio,
                n->seconds_per_iter * 1e9, d->seconds_per_iter * 1e9);
    return;
  }
  std::printf("  %-30s %.3f  (%.2f GB/s vs %.2f GB/s: %.0f%% of the reference bandwidth)\n", label,
              ratio, bytes / n->seconds_per_iter / 1e9, bytes / d->seconds_per_iter / 1e9,
              100.0 / ratio);
}

// Speed of `num` relative to `den` (den's time / num's time: 1 is as fast,
// above 1 faster), with both throughputs for `flops` per iteration.
void print_speed(const RatioReporter& r, const char* label, const char* num, const char* den,
                 double flops) {
  const Result* n = r.find(num);
  const Result* d = r.find(den);
  if (n == nullptr || d == nullptr) {
    std::printf("  %-30s n/a (%s not run)\n", label, n == nullptr ? num : den);
    return;
  }
  const double speed = d->seconds_per_iter / n->seconds_per_iter;
  // Times in ms, or in us below a millisecond.
  const bool us = n->seconds_per_iter < 1e-3 && d->seconds_per_iter < 1e-3;
  const double scale = us ? 1e6 : 1e3;
  const char* unit = us ? "us" : "ms";
  if (flops > 0)
    std::printf("  %-30s %.3f of its speed  (%.1f vs %.1f GFLOP/s; %.1f vs %.1f %s)\n", label,
                speed, flops / n->seconds_per_iter / 1e9, flops / d->seconds_per_iter / 1e9,
                n->seconds_per_iter * scale, d->seconds_per_iter * scale, unit);
  else
    std::printf("  %-30s %.3f of its speed  (%.1f vs %.1f %s)\n", label, speed,
                n->seconds_per_iter * scale, d->seconds_per_iter * scale, unit);
}

}  // namespace
}  // namespace bp::bench

int main(int argc, char** argv) {
  // --backend and the other backend flags first: the remaining flags are
  // Benchmark's, which prints its own --help after the backend options.
  bp::init_from_args(argc, argv, {.exit_on_help = false});
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  bp::bench::register_benchmarks();

  // init_from_args loaded the backend and checked its device (exit 2 or 3).
  std::string device_backend;
  try {
    const bp::Device d = bp::default_device();
    std::printf("backend: %s\n", bp::to_string(d).c_str());
    device_backend = bp::bench::register_device_benchmarks();
  } catch (const bp::Error& e) {
    std::fprintf(stderr, "backplane-bench: %s\n", e.what());
    return 1;
  }
  bp::bench::RatioReporter reporter(benchmark::CreateDefaultDisplayReporter());
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::fflush(stdout);

  std::printf("\nRatios from this run (time per iteration, wall clock):\n");
  print_ratio(reporter, "tiny_add backplane/libtorch", "tiny_add/backplane", "tiny_add/libtorch",
              false);
  print_ratio(reporter, "dlpack round trip bp/libtorch", "dlpack_round_trip/backplane",
              "dlpack_round_trip/libtorch", false);
  print_ratio(reporter, "tiny a + 2.0 / a + b", "tiny_add_scalar/backplane", "tiny_add/backplane",
              false);
  print_ratio(reporter, "add_16M backplane/plain_loop", "add_16M/backplane", "add_16M/plain_loop",
              true);
  print_ratio(reporter, "add_16M fresh/into existing", "add_16M_fresh/backplane",
              "add_16M/backplane", true);
  for (const int64_t n : bp::bench::kMidSizes) {
    const std::string s = std::to_string(n);
    const double bytes = 3.0 * static_cast<double>(n) * 4;
    print_ratio(reporter, ("add " + s + " fresh/serial loop").c_str(),
                ("add_mid/fresh/" + s).c_str(), ("add_mid/serial_loop/" + s).c_str(), true, bytes);
    print_ratio(reporter, ("add " + s + " out/serial loop").c_str(), ("add_mid/out/" + s).c_str(),
                ("add_mid/serial_loop/" + s).c_str(), true, bytes);
  }
  for (const bp::bench::SquareSize& size : bp::bench::kSquareSizes) {
    const std::string n = size.name;
    print_ratio(reporter, ("strided_add_" + n + " / add_" + n).c_str(),
                ("strided_add_" + n + "/backplane").c_str(), ("add_" + n + "/backplane").c_str(),
                true, static_cast<double>(bp::bench::square_add_bytes(size.side)));
  }
  print_ratio(reporter, "column add_ aliased/separate", "column_add_/aliased",
              "column_add_/separate", false);
  print_ratio(reporter, "add_ 1M recorded/no_grad", "inplace_add_1M/recorded",
              "inplace_add_1M/no_grad", false);
  print_ratio(reporter, "add_(g, lr) changing/fixed lr", "add_alpha_1M/changing",
              "add_alpha_1M/fixed", false);
  print_ratio(reporter, "tiny_add_grad backplane/libtorch", "tiny_add_grad/backplane",
              "tiny_add_grad/libtorch", false);
  print_ratio(reporter, "mlp_step backplane/libtorch", "mlp_step/backplane", "mlp_step/libtorch",
              false);
  bp::bench::print_speed(reporter, "matmul n=64 vs oneDNN direct", "matmul_64/backplane",
                         "matmul_64/onednn", 2.0 * 64 * 64 * 64);
  bp::bench::print_speed(reporter, "matmul n=256 vs oneDNN direct", "matmul_256/backplane",
                         "matmul_256/onednn", 2.0 * 256 * 256 * 256);
  print_ratio(reporter, "sparse_mm 1% / dense matmul", "sparse_mm_1pct/backplane",
              "sparse_mm_dense/backplane", false);
  print_ratio(reporter, "sparse_mm 0.1% / dense matmul", "sparse_mm_0.1pct/backplane",
              "sparse_mm_dense/backplane", false);
  print_ratio(reporter, "sparse_mm 1% composite/kernel", "sparse_mm_1pct/composite",
              "sparse_mm_1pct/backplane", false);
  print_ratio(reporter, "sparse_mm 0.1% composite/kernel", "sparse_mm_0.1pct/composite",
              "sparse_mm_0.1pct/backplane", false);
  print_ratio(reporter, "adam_step fused/composite", "adam_step/backplane", "adam_step/composite",
              false);
  print_ratio(reporter, "sgd_step fused/composite", "sgd_step/backplane", "sgd_step/composite",
              false);
#ifdef BACKPLANE_BENCH_WITH_LIBTORCH
  print_ratio(reporter, "adam_step backplane/libtorch", "adam_step/backplane", "adam_step/libtorch",
              false);
  print_ratio(reporter, "sgd_step backplane/libtorch", "sgd_step/backplane", "sgd_step/libtorch",
              false);
  print_ratio(reporter, "sparse_mm 1% backplane/libtorch", "sparse_mm_1pct/backplane",
              "sparse_mm_1pct/libtorch", false);
  print_ratio(reporter, "sparse_mm 0.1% backplane/libtorch", "sparse_mm_0.1pct/backplane",
              "sparse_mm_0.1pct/libtorch", false);
  print_ratio(reporter, "coalesce 1% backplane/libtorch", "coalesce_1pct/backplane",
              "coalesce_1pct/libtorch", false);
  print_ratio(reporter, "sort 1M backplane/libtorch", "sort_1M/backplane", "sort_1M/libtorch",
              false);
  print_ratio(reporter, "add_16M backplane/libtorch", "add_16M/backplane", "add_16M/libtorch",
              true);
#endif
  {
    using bp::bench::print_speed;
    const double f = static_cast<double>(bp::bench::kConvFlops);
    print_speed(reporter, "conv2d_fwd vs oneDNN direct", "conv2d_fwd/backplane",
                "conv2d_fwd/onednn", f);
    print_speed(reporter, "conv2d_fwd vs oneDNN compute", "conv2d_fwd/backplane",
                "conv2d_fwd/onednn_compute", f);
    print_speed(reporter, "conv2d_fwd_bwd vs oneDNN", "conv2d_fwd_bwd/backplane",
                "conv2d_fwd_bwd/onednn", 3 * f);
    print_speed(reporter, "conv2d_fwd vs the composite", "conv2d_fwd/backplane",
                "conv2d_fwd/composite", f);
    print_speed(reporter, "conv2d_fwd_bwd vs the composite", "conv2d_fwd_bwd/backplane",
                "conv2d_fwd_bwd/composite", 3 * f);
    print_speed(reporter, "norm_pool vs the composite", "norm_pool/backplane",
                "norm_pool/composite", 0);
#ifdef BACKPLANE_BENCH_WITH_LIBTORCH
    print_speed(reporter, "conv2d_fwd vs libtorch", "conv2d_fwd/backplane", "conv2d_fwd/libtorch",
                f);
    print_speed(reporter, "conv2d_fwd_bwd vs libtorch", "conv2d_fwd_bwd/backplane",
                "conv2d_fwd_bwd/libtorch", 3 * f);
    print_speed(reporter, "resnet_block vs libtorch", "resnet_block/backplane",
                "resnet_block/libtorch", 0);
    print_speed(reporter, "norm_pool vs libtorch", "norm_pool/backplane", "norm_pool/libtorch", 0);
#endif
  }
  if (!device_backend.empty()) {
    // Bandwidth of the add against that of a device-to-device copy.
    const std::string add = "add_64M/" + device_backend, copy = "copy_64M/" + device_backend;
    const auto* a = reporter.find(add);
    const auto* c = reporter.find(copy);
    if (a && c) {
      const double add_bw = 3.0 * (64 << 20) * 4 / a->seconds_per_iter / 1e9;
      const double copy_bw = 2.0 * (64 << 20) * 4 / c->seconds_per_iter / 1e9;
      std::printf("  %-30s %.1f GB/s vs copy %.1f GB/s: %.0f%% of the copy bandwidth\n",
                  ("add_64M/" + device_backend).c_str(), add_bw, copy_bw, 100.0 * add_bw / copy_bw);
    }
    // Side by side with the default backend and host code (bench_accelerator.cpp).
    const std::string n = device_backend;
    const double copy_bytes = static_cast<double>(std::size_t{64} << 20);
    print_ratio(reporter, (n + " add_16M / cpu_onednn").c_str(), ("add_16M/" + n).c_str(),
                "add_16M/cpu_onednn", true);
    print_ratio(reporter, (n + " add_16M / plain_loop").c_str(), ("add_16M/" + n).c_str(),
                "add_16M/plain_loop", true);
    print_ratio(reporter, (n + " matmul_1024 / cpu_onednn").c_str(), ("matmul_1024/" + n).c_str(),
                "matmul_1024/cpu_onednn", false);
    print_ratio(reporter, (n + " tiny_add / cpu_onednn").c_str(), ("tiny_add/" + n).c_str(),
                "tiny_add/cpu_onednn", false);
    print_ratio(reporter, (n + " host_to_device / memcpy").c_str(),
                ("host_to_device_64M/" + n).c_str(), "memcpy_64M/host", true, copy_bytes);
    print_ratio(reporter, (n + " device_to_host / memcpy").c_str(),
                ("device_to_host_64M/" + n).c_str(), "memcpy_64M/host", true, copy_bytes);
  }
  benchmark::Shutdown();
  return 0;
}
