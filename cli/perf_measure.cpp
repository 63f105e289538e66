// Timing for `backplane perf`: repetitions of n calls closed by one
// synchronisation of the device, whose own cost (measured on an idle device)
// is taken off, so that an asynchronous backend is timed by when its work
// finishes, not by when the host has queued it; the device's ceilings; and
// the framework's share of a tiny op.
#include <backplane/debug.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "perf.h"

namespace bp::cli::perf {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The q-quantile of sorted `v` (linear interpolation).
double quantile(const std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Seconds of n calls: by the device's clock between two events around them
// when the backend has one (ABI 2.4), else by the host's around the calls
// and the synchronisation after them (less `sync_s`, its own cost).
struct Repeater {
  Device device;
  const std::function<void()>& run;
  double sync_s;
  bool events = PluginLoader::instance().by_id(device.backend)->has_event_timing();
  Event start{device}, end{device};

  double operator()(int64_t n) {
    if (events) {
      start.record();
      for (int64_t i = 0; i < n; ++i) run();
      end.record();
      return *end.elapsed_since(start);
    }
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < n; ++i) run();
    synchronize(device);
    return std::max(since(t0) - sync_s, 0.0);
  }
};

}  // namespace

double sync_seconds(Device device) {
  synchronize(device);
  std::vector<double> t;
  for (int i = 0; i < 64; ++i) {
    const auto t0 = Clock::now();
    synchronize(device);
    t.push_back(since(t0));
  }
  return median_of(t);
}

Timing measure(Device device, const std::function<void()>& run, const TimingOptions& o,
               double sync_s) {
  Repeater repetition{device, run, sync_s};
  repetition(1);  // warm-up: allocations, primitive caches, first-call set-up
  // Calls per repetition: enough for a millisecond (or a tenth of the budget).
  const double target = std::min(1e-3 + 10 * sync_s, std::max(o.min_seconds / 10, 1e-4));
  int64_t n = 1;
  const auto start = Clock::now();
  for (;;) {
    const double t = repetition(n);
    if (t >= target || n >= (int64_t{1} << 24) || since(start) > o.max_seconds / 4) break;
    n *= std::clamp<int64_t>(static_cast<int64_t>(target / std::max(t, 1e-9) * 1.2), 2, 100);
  }
  std::vector<double> per_call;
  const auto t0 = Clock::now();
  // At least 5 repetitions, or 3 when they are slow (past max_seconds).
  while ((per_call.size() < 3 ||
          ((per_call.size() < 5 || since(t0) < o.min_seconds) && since(t0) < o.max_seconds)) &&
         per_call.size() < 2000)
    per_call.push_back(repetition(n) / static_cast<double>(n));
  std::sort(per_call.begin(), per_call.end());
  Timing r;
  r.device_clock = repetition.events;
  r.seconds = quantile(per_call, 0.5);
  r.spread = r.seconds > 0 ? (quantile(per_call, 0.75) - quantile(per_call, 0.25)) / r.seconds : 0;
  r.repetitions = static_cast<int>(per_call.size());
  r.calls = n;
  return r;
}

Ceilings measure_ceilings(Device device, DType dtype, const TimingOptions& o, double sync_s) {
  Ceilings c;
  {
    const int64_t n = (int64_t{64} << 20) / static_cast<int64_t>(itemsize(dtype));  // 64 MiB
    Tensor src = full({n}, 1, TensorOptions(dtype).device(device)),
           dst = empty({n}, TensorOptions(dtype).device(device));
    const Timing t = measure(
        device, [&] { dst.copy_(src); }, o, sync_s);
    c.copy_gbs = 2.0 * n * static_cast<double>(itemsize(dtype)) / t.seconds / 1e9;
  }
  if (!is_floating(dtype) ||
      !KernelRegistry::instance().lookup(Op::Matmul, device.backend, dtype).fn)
    return c;
  for (int64_t s : {256, 512, 1024, 2048}) {
    Tensor a = full({s, s}, 0.5, TensorOptions(dtype).device(device)),
           b = full({s, s}, 0.5, TensorOptions(dtype).device(device));
    const Timing t = measure(
        device, [&] { (void)matmul(a, b); }, o, sync_s);
    const double gflops = 2.0 * s * s * s / t.seconds / 1e9;
    if (gflops > c.matmul_gflops) {
      c.matmul_gflops = gflops;
      c.matmul_shape = std::to_string(s) + "x" + std::to_string(s) + "x" + std::to_string(s);
    }
    if (t.seconds > 0.05) break;  // a slow device: the next size (8x the work) would take long
  }
  return c;
}

Overhead dispatch_overhead(Device device, const TimingOptions& o, double sync_s) {
  Overhead r;
  for (Op op : {Op::Fill, Op::Mul})
    if (!KernelRegistry::instance().lookup(op, device.backend, DType::Float32).fn)
      throw NotImplementedError("the backend has no float32 " + std::string(op_name(op)) +
                                " kernel");
  const TensorOptions f32 = TensorOptions(DType::Float32).device(device);
  Tensor a = full({4}, 1.5, f32), b = full({4}, 2, f32), out = empty({4}, f32);
  r.core_seconds = measure(
                       device, [&] { (void)mul(a, b); }, o, sync_s)
                       .seconds;
  // 64 kernel calls per run: the descriptors are made once per run.
  constexpr int64_t kBatch = 64;
  r.direct_seconds = measure(
                         device,
                         [&] {
                           debug::call_kernel_directly(Op::Mul, {a, b}, out, kBatch);
                         },
                         o, sync_s)
                         .seconds /
                     kBatch;
  return r;
}

}  // namespace bp::cli::perf
