// backplane-bench-dist: collectives and data-parallel steps, run on the ranks
// that `backplane launch` starts, with the baselines measured in the same run:
//
//   backplane launch --nproc 2 -- backplane-bench-dist [--benchmark_filter=...]
//
// allreduce/{gloo,backplane,backplane_unchecked}/<MB>: a float32 sum of 4 to
// 256 MB on every rank: Gloo's allreduce called directly (its own context,
// same transport), bp::distributed::all_reduce (with the call's fingerprint
// exchanged first), and the same without that check (check_calls = false).
// ddp_step/{single,ddp}: a step (forward, backward, SGD) of an MLP with 1.6M
// parameters on 64 samples per rank, in one process without a group, and in
// DistributedDataParallel over every rank (weak scaling: 1.0 is free).
// Every rank runs the same fixed iteration counts (a collective needs every
// rank); rank 0 prints the results and the ratios.
#include <backplane/backplane.h>
#include <backplane/distributed.h>
#include <backplane/nn/parallel.h>
#include <backplane/optim/optimizer.h>
#include <benchmark/benchmark.h>
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace dist = bp::distributed;
using bp::Tensor;

namespace {

std::shared_ptr<dist::ProcessGroup> g_checked, g_unchecked;
std::shared_ptr<gloo::Context> g_gloo;
int g_rank = 0, g_world = 1;

constexpr int64_t kMB = int64_t{1} << 20;

int64_t iterations_for(int64_t mb) { return mb <= 4 ? 20 : mb <= 16 ? 10 : mb <= 64 ? 4 : 2; }

void allreduce_gloo(benchmark::State& state) {
  const int64_t n = state.range(0) * kMB / 4;
  std::vector<float> buf(static_cast<std::size_t>(n), 1.0f);
  for (auto _ : state) {
    gloo::AllreduceOptions opts(g_gloo);
    opts.setOutput(buf.data(), buf.size());
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    gloo::allreduce(opts);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * kMB);
}

void allreduce_backplane(benchmark::State& state, dist::ProcessGroup* pg) {
  Tensor t = bp::ones({state.range(0) * kMB / 4});
  for (auto _ : state) pg->all_reduce(t);
  state.SetBytesProcessed(state.iterations() * state.range(0) * kMB);
}

std::shared_ptr<bp::nn::Module> mlp() {
  auto m = std::make_shared<bp::nn::Sequential>();
  m->push_back(std::make_shared<bp::nn::Linear>(512, 1024));
  m->push_back(std::make_shared<bp::nn::ReLU>());
  m->push_back(std::make_shared<bp::nn::Linear>(1024, 1024));
  m->push_back(std::make_shared<bp::nn::ReLU>());
  m->push_back(std::make_shared<bp::nn::Linear>(1024, 10));
  return m;
}

void ddp_step(benchmark::State& state, bool ddp) {
  bp::manual_seed(0);
  auto model = mlp();
  std::shared_ptr<bp::nn::Module> net = model;
  if (ddp) net = std::make_shared<bp::nn::DistributedDataParallel>(model);
  bp::optim::SGD opt(model->parameters(), {.lr = 0.01});
  Tensor x = bp::randn({64, 512}), y = bp::randn({64, 10});
  for (auto _ : state) {
    opt.zero_grad();
    bp::mse_loss(net->forward(x), y).backward();
    opt.step();
  }
}

// Keeps rank 0's runs for the ratios; the other ranks report nothing.
class Reporter : public benchmark::ConsoleReporter {
 public:
  // With --benchmark_repetitions, the median stands for the benchmark.
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      std::string name = r.benchmark_name();
      const bool median = name.size() > 7 && name.compare(name.size() - 7, 7, "_median") == 0;
      if (median) name.resize(name.size() - 7);
      if (median || !medians.count(name)) seconds[name] = r.GetAdjustedRealTime();
      if (median) medians.insert(name);
    }
  }
  std::set<std::string> medians;
  std::map<std::string, double> seconds;
};
class Silent : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  bp::init_from_args(argc, argv);
  try {
    dist::init_process_group();
    g_rank = dist::get_rank();
    g_world = dist::get_world_size();
    dist::GroupOptions o;
    o.check_calls = false;
    g_unchecked = dist::new_process_group(o);
    // Gloo's own context, through its file store, for the baseline.
    const std::string dir = "/tmp/bp-bench-dist-" + std::string(std::getenv("MASTER_PORT"));
    if (g_rank == 0) {
      std::filesystem::remove_all(dir);  // a crashed run's keys
      std::filesystem::create_directories(dir);
    }
    dist::barrier();
    gloo::rendezvous::FileStore store(dir);
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(g_rank, g_world);
    ctx->connectFullMesh(store, dev);
    g_gloo = ctx;
    dist::barrier();
    if (g_rank == 0) std::filesystem::remove_all(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "backplane-bench-dist: %s (run it with `backplane launch --nproc N --`)\n",
                 e.what());
    return 2;
  }
  for (int64_t mb : {4, 16, 64, 256}) {
    const int64_t it = iterations_for(mb);
    benchmark::RegisterBenchmark("allreduce/gloo", allreduce_gloo)
        ->Arg(mb)
        ->Iterations(it)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("allreduce/backplane", allreduce_backplane, &dist::default_group())
        ->Arg(mb)
        ->Iterations(it)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("allreduce/backplane_unchecked", allreduce_backplane,
                                 g_unchecked.get())
        ->Arg(mb)
        ->Iterations(it)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("ddp_step/single", ddp_step, false)
      ->Iterations(10)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("ddp_step/ddp", ddp_step, true)
      ->Iterations(10)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);

  Reporter report;
  Silent silent;
  if (g_rank == 0)
    benchmark::RunSpecifiedBenchmarks(&report);
  else
    benchmark::RunSpecifiedBenchmarks(&silent);
  if (g_rank == 0) {
    std::printf("\nRatios on %d ranks (time of the baseline / time of Backplane; 1.0 = as fast):\n",
                g_world);
    for (int64_t mb : {4, 16, 64, 256}) {
      const std::string s = "/" + std::to_string(mb) +
                            "/iterations:" + std::to_string(iterations_for(mb)) + "/real_time";
      const auto& t = report.seconds;
      auto g = t.find("allreduce/gloo" + s), b = t.find("allreduce/backplane" + s),
           u = t.find("allreduce/backplane_unchecked" + s);
      if (g != t.end() && b != t.end())
        std::printf("  allreduce %3lld MB: gloo / backplane %.2f", static_cast<long long>(mb),
                    g->second / b->second);
      if (g != t.end() && u != t.end())
        std::printf(", gloo / unchecked %.2f", g->second / u->second);
      if (g != t.end() && b != t.end()) std::printf("\n");
    }
    auto one = report.seconds.find("ddp_step/single/iterations:10/real_time");
    auto many = report.seconds.find("ddp_step/ddp/iterations:10/real_time");
    if (one != report.seconds.end() && many != report.seconds.end())
      std::printf("  ddp step: single process / ddp on %d ranks %.2f\n", g_world,
                  one->second / many->second);
  }
  g_unchecked.reset();
  dist::destroy_process_group();
  return 0;
}
