// `backplane perf`: the cases (perf_cases.cpp), their timing and the
// device's ceilings (perf_measure.cpp), and the command (cmd_perf.cpp).
#pragma once

#include <backplane/backplane.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace bp::cli::perf {

// What limits an op: memory traffic (figures in GB/s, set against the
// device's copy bandwidth) or arithmetic (GFLOP/s, against its best matmul).
enum class Bound { Memory, Compute };

// One case prepared on a device: `run` enqueues one call of the op (as a
// user writes it: out-of-place, the result allocated). `bytes` is what the
// op must move at least (each operand read once, each result written once),
// `flops` its arithmetic: exact for matmul and conv2d, nominal for the
// others (one per element for elementwise ops and reductions, four for
// softmax, six for batch_norm, one per window tap for pooling; 0 for copies,
// fills and gathers), which places them on the roofline chart.
struct Workload {
  std::function<void()> run;
  double bytes = 0;
  double flops = 0;
};

struct Case {
  std::string name;  // "add/contiguous/16M": op, layout, size
  std::string op;    // "add"
  Bound bound = Bound::Memory;
  std::vector<Op> needs;  // the primitive kernels it reaches, at the case's dtype
  std::string named;      // a named op it uses when the backend has one ("core::conv2d")
  bool floating_only = false;
  std::function<Workload(Device, DType)> prepare;
};

const std::vector<Case>& cases();
// The primitive ops (bp_op) no case reaches: none, which a test holds to.
std::vector<Op> ops_without_a_case();

// Why `backend` cannot run `c` at `dtype` ("no matmul kernel for int32"), or "".
std::string cannot_run(const Case& c, const Backend& backend, DType dtype);
// "oneDNN's core::conv2d" style note: "kernel" when the backend registers
// c.named for dtype, "composite" when it does not, "" for a case with none.
std::string path_of(const Case& c, const Backend& backend, DType dtype);

struct TimingOptions {
  double min_seconds = 0.2;  // per case and backend, after the warm-up
  double max_seconds = 3;    // stop repeating after this even when unstable
};

struct Timing {
  double seconds = 0;  // median time of one call
  double spread = 0;   // interquartile range of the repetitions / median
  int repetitions = 0;
  int64_t calls = 0;          // calls per repetition
  bool device_clock = false;  // timed by the device's clock (events), not the host's
};

// The median cost of synchronising `device` when it is idle.
double sync_seconds(Device device);

// Times `run` on `device`: one warm-up call, then repetitions of n calls (n
// grown until a repetition takes a millisecond or more) until min_seconds
// have passed and at least 5 repetitions ran. A repetition is timed by the
// device's clock between two events around the calls when the backend has
// one (ABI 2.4's event_elapsed), else by the host's clock around the calls
// and one synchronisation, less `sync_s` (the synchronisation's own cost).
Timing measure(Device device, const std::function<void()>& run, const TimingOptions& o,
               double sync_s);

// The device's own limits, measured now: the bandwidth of a device-to-device
// copy of 64 MiB (bytes read + written per second) and the best GFLOP/s of
// its matmul over a few square sizes.
struct Ceilings {
  double copy_gbs = 0;
  double matmul_gflops = 0;
  std::string matmul_shape;  // the size that gave it: "2048x2048x2048"
};
Ceilings measure_ceilings(Device device, DType dtype, const TimingOptions& o, double sync_s);

// The framework's share of a tiny op: a 4-element mul through the whole
// core path (checks, output allocation, dispatch) against the same kernel
// called through the ABI alone with ready-made descriptors.
struct Overhead {
  double core_seconds = 0;
  double direct_seconds = 0;
};
Overhead dispatch_overhead(Device device, const TimingOptions& o, double sync_s);

}  // namespace bp::cli::perf
