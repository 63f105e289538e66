// Device benchmarks for a non-default backend (--backend cuda, ...), named
// after it: add_64M/<backend> against copy_64M/<backend> (a device-to-device
// copy of the same bytes, the bandwidth ceiling), tiny_add/<backend> (the
// host-side cost of submitting one op) and alloc_cached/<backend> (an
// allocation the backend's cache should serve). Each timed loop waits for
// the device, so asynchronous backends are measured honestly.
#include <backplane/backplane.h>
#include <benchmark/benchmark.h>

#include <string>

#include "bench_common.h"

namespace bp::bench {
namespace {

constexpr int64_t kDeviceElems = int64_t{64} << 20;  // 256 MiB per float32 operand

void sync(Device d) { PluginLoader::instance().by_id(d.backend)->synchronize(d.index); }

void add_64M(benchmark::State& state) {
  const Device d = default_device();
  Tensor a = full({kDeviceElems}, 1.0), b = full({kDeviceElems}, 2.0), out = empty({kDeviceElems});
  add_out(out, a, b);
  sync(d);
  for (auto _ : state) {
    add_out(out, a, b);
    sync(d);
  }
  state.SetBytesProcessed(state.iterations() * 3 * kDeviceElems * int64_t{sizeof(float)});
}

// Reads and writes 2 x 256 MiB: compared per byte with add's 3 x 256 MiB.
void copy_64M(benchmark::State& state) {
  const Device d = default_device();
  Backend& b = *PluginLoader::instance().by_id(d.backend);
  Tensor src = full({kDeviceElems}, 1.0), dst = empty({kDeviceElems});
  const std::size_t n = kDeviceElems * sizeof(float);
  sync(d);
  for (auto _ : state) {
    b.copy_on_device(nullptr, d.index, dst.impl()->storage->data(), dst.impl()->storage->offset(),
                     d.index, src.impl()->storage->data(), src.impl()->storage->offset(), n);
    sync(d);
  }
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(n));
}

void tiny_add_device(benchmark::State& state) {
  Tensor a = ones({1}), b = ones({1});
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  sync(default_device());
}

void alloc_cached(benchmark::State& state) {
  const Device d = default_device();
  Backend& b = *PluginLoader::instance().by_id(d.backend);
  b.deallocate(d.index, b.allocate(d.index, 1 << 20), 1 << 20, nullptr);  // warm the cache
  for (auto _ : state) {
    void* p = b.allocate(d.index, 1 << 20);
    benchmark::DoNotOptimize(p);
    b.deallocate(d.index, p, 1 << 20, nullptr);
  }
}

}  // namespace

std::string register_device_benchmarks() {
  Backend& b = *PluginLoader::instance().by_id(default_device().backend);
  if (b.name() == kDefaultBackend) return {};
  const std::string n = b.name();
  benchmark::RegisterBenchmark(("add_64M/" + n).c_str(), add_64M)->UseRealTime();
  benchmark::RegisterBenchmark(("copy_64M/" + n).c_str(), copy_64M)->UseRealTime();
  benchmark::RegisterBenchmark(("tiny_add/" + n).c_str(), tiny_add_device);
  benchmark::RegisterBenchmark(("alloc_cached/" + n).c_str(), alloc_cached);
  register_accelerator_benchmarks(n);
  return n;
}

}  // namespace bp::bench
