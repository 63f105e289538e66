// Benchmarks of a non-default backend against the default one (cpu_onednn)
// and plain host code, all in the same run: add on 16M float32 (vs
// cpu_onednn and vs the plain loop, add_16M/plain_loop), matmul 1024^2 (vs
// cpu_onednn), tiny_add (vs cpu_onednn's), and host<->device copies of
// 64 MiB (vs memcpy). Every timed loop waits for the device, so
// asynchronous backends are timed honestly.
#include <backplane/backplane.h>
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "bench_common.h"

namespace bp::bench {
namespace {

constexpr int64_t kMatmul = 1024;
constexpr std::size_t kCopyBytes = std::size_t{64} << 20;

void sync(Device d) { PluginLoader::instance().by_id(d.backend)->synchronize(d.index); }

void add_16M_on(benchmark::State& state, Device d) {
  const TensorOptions o(d);
  Tensor a = full({kLargeElems}, 1.0, o), b = full({kLargeElems}, 2.0, o),
         out = empty({kLargeElems}, o);
  add_out(out, a, b);
  sync(d);
  for (auto _ : state) {
    add_out(out, a, b);
    sync(d);
  }
  state.SetBytesProcessed(state.iterations() * kLargeAddBytes);
}

void matmul_1024_on(benchmark::State& state, Device d) {
  const TensorOptions o(d);
  Tensor a = full({kMatmul, kMatmul}, 0.5, o), b = full({kMatmul, kMatmul}, 0.25, o);
  Tensor c = matmul(a, b);
  sync(d);
  for (auto _ : state) {
    c = matmul(a, b);
    sync(d);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * kMatmul * kMatmul * kMatmul * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// The backend's own copies of 64 MiB, host memory to device and back.
void copy_on(benchmark::State& state, Device d, bool to_device) {
  Backend& b = *PluginLoader::instance().by_id(d.backend);
  Tensor t = empty({static_cast<int64_t>(kCopyBytes / sizeof(float))}, TensorOptions(d));
  std::vector<unsigned char> host(kCopyBytes, 1);
  void* mem = t.impl()->storage->data();
  const uint64_t offset = t.impl()->storage->offset();
  sync(d);
  for (auto _ : state) {
    if (to_device)
      b.copy_from_host(d.index, nullptr, mem, offset, host.data(), kCopyBytes);
    else
      b.copy_to_host(d.index, nullptr, host.data(), mem, offset, kCopyBytes);
    sync(d);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kCopyBytes));
}

// tiny_add on the default backend, for tiny_add/<backend> (bench_device.cpp).
void tiny_add_cpu(benchmark::State& state) {
  const TensorOptions o(device(kDefaultBackend));
  Tensor a = ones({1}, o), b = ones({1}, o);
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
}

void memcpy_64M(benchmark::State& state) {
  std::vector<unsigned char> a(kCopyBytes, 1), b(kCopyBytes, 2);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), kCopyBytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kCopyBytes));
}

}  // namespace

void register_accelerator_benchmarks(const std::string& name) {
  const Device d = default_device();
  const Device cpu = device(kDefaultBackend);
  benchmark::RegisterBenchmark(("add_16M/" + name).c_str(), add_16M_on, d)->UseRealTime();
  benchmark::RegisterBenchmark("add_16M/cpu_onednn", add_16M_on, cpu)->UseRealTime();
  benchmark::RegisterBenchmark(("matmul_1024/" + name).c_str(), matmul_1024_on, d)->UseRealTime();
  benchmark::RegisterBenchmark("matmul_1024/cpu_onednn", matmul_1024_on, cpu)->UseRealTime();
  benchmark::RegisterBenchmark(("host_to_device_64M/" + name).c_str(), copy_on, d, true)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("device_to_host_64M/" + name).c_str(), copy_on, d, false)
      ->UseRealTime();
  benchmark::RegisterBenchmark("tiny_add/cpu_onednn", tiny_add_cpu);
  benchmark::RegisterBenchmark("memcpy_64M/host", memcpy_64M)->UseRealTime();
}

}  // namespace bp::bench
