// One rank of the process-group tests (tests/CMakeLists.txt runs them on
// loopback with 2 and 4 processes):
//
//   backplane launch --nproc 4 -- distributed_worker collectives [--backend sim]
//   distributed_worker --spawn 2 killed     # starts the ranks itself (file://)
//   distributed_worker --dist nccl --backend cuda collectives   # a GPU per rank
//
// Scenarios: collectives (every call and dtype, against values computed
// here), mismatch (differing calls give the error on every rank, and the group
// goes on), late (a rank that does not come in time), killed (a rank that
// dies), init-errors (bad settings, one process). Each rank prints what it
// checked and exits 0 when every check passed.
#include <backplane/backplane.h>
#include <backplane/distributed.h>
#include <backplane/nn/parallel.h>
#include <backplane/optim/optimizer.h>
#include <backplane/options.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace dist = bp::distributed;
using bp::DType;
using bp::Tensor;
using namespace std::chrono_literals;

namespace {

int g_rank = -1;
int g_failures = 0;
std::string g_dist = "gloo";  // the process group's backend (--dist)

#define CHECK(cond, ...)                                                                        \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::cerr << "rank " << g_rank << ": FAILED " << #cond << " at line " << __LINE__ << ": " \
                << bp::detail::concat(__VA_ARGS__) << std::endl;                                \
      ++g_failures;                                                                             \
    }                                                                                           \
  } while (0)

// The message of the error `f` raises (empty when it raises none).
template <class E = std::exception, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return {};
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const std::vector<DType> kDTypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                    DType::Int8,    DType::UInt8,   DType::Int16,   DType::Int32,
                                    DType::Int64,   DType::Bool};

// Rank r's value at element i for `op` (small integers: exact in every dtype).
double value(dist::ReduceOp op, DType dt, int r, int64_t i) {
  if (dt == DType::Bool) return (r + i) % 2 != 0;
  if (op == dist::ReduceOp::Product) return 1 + (r + i) % 2;
  return 1 + (r + i) % 3;
}

Tensor make(const std::vector<double>& v, DType dt) {
  return bp::from_vector(v, {static_cast<int64_t>(v.size())}, bp::TensorOptions(dt));
}

std::vector<double> values_of(const Tensor& t) { return t.to(DType::Float64).to_vector<double>(); }

// The dtypes the test runs: those the group's backend carries (NCCL has no
// int16, refused by name) and the tensors' backend holds (cuda has no 16-bit
// or 8-bit kernels: those are listed once and left out).
std::vector<DType> group_dtypes() {
  static const std::vector<DType> v = [] {
    std::vector<DType> held;
    std::string lacking;
    for (DType dt : kDTypes) {
      if (g_dist == "nccl" && dt == DType::Int16) continue;
      try {
        bp::zeros({1}, bp::TensorOptions(dt)).to(DType::Float64);
        held.push_back(dt);
      } catch (const bp::NotImplementedError&) {
        lacking += std::string(lacking.empty() ? "" : ", ") + std::string(bp::name(dt));
      }
    }
    if (!lacking.empty())
      std::cout << "rank " << g_rank << ": the backend has no kernels for " << lacking
                << ": left out" << std::endl;
    return held;
  }();
  return v;
}

void check_all_reduce(int n) {
  using R = dist::ReduceOp;
  const int64_t len = 37;
  if (g_dist == "nccl") {
    Tensor t = bp::empty({2}, bp::TensorOptions(DType::Int16));  // no kernel needed
    const std::string e = error_of([&] { dist::all_reduce(t); });
    CHECK(contains(e, "NCCL has no int16"), e);
    std::cout << "rank " << g_rank << ": " << e << std::endl;
  }
  for (DType dt : group_dtypes()) {
    for (R op : {R::Sum, R::Avg, R::Product, R::Min, R::Max}) {
      if (op == R::Avg && !bp::is_floating(dt)) {
        Tensor t = make(std::vector<double>(len, 1), dt);
        const std::string e = error_of([&] { dist::all_reduce(t, op); });
        CHECK(contains(e, "avg needs a floating dtype"), "avg on ", bp::name(dt), ": ", e);
        continue;
      }
      std::vector<double> mine(len), want(len);
      for (int64_t i = 0; i < len; ++i) {
        mine[i] = value(op, dt, g_rank, i);
        double acc = value(op, dt, 0, i);
        for (int r = 1; r < n; ++r) {
          const double x = value(op, dt, r, i);
          if (op == R::Sum || op == R::Avg) acc = dt == DType::Bool ? std::max(acc, x) : acc + x;
          if (op == R::Product) acc = dt == DType::Bool ? std::min(acc, x) : acc * x;
          if (op == R::Min) acc = std::min(acc, x);
          if (op == R::Max) acc = std::max(acc, x);
        }
        want[i] = op == R::Avg ? acc / n : acc;
      }
      Tensor t = make(mine, dt);
      const uint32_t v0 = t.version();
      dist::all_reduce(t, op);
      const auto got = values_of(t);
      const double tol = dt == DType::BFloat16 ? 0.02 : dt == DType::Float16 ? 0.002 : 1e-12;
      for (int64_t i = 0; i < len; ++i)
        CHECK(std::abs(got[i] - want[i]) <= tol * std::abs(want[i]), bp::name(dt), ' ',
              dist::to_string(op), " element ", i, ": ", got[i], " != ", want[i]);
      CHECK(t.version() > v0, "all_reduce did not bump the version");
    }
  }
  std::cout << "rank " << g_rank << ": all_reduce: sum, avg, product, min, max on "
            << group_dtypes().size() << " dtypes" << std::endl;
}

void check_other_collectives(int n) {
  for (DType dt : group_dtypes()) {
    const auto base = [&](int r, int64_t i) {
      return dt == DType::Bool ? (r + i) % 2 : r * 10 + i;
    };
    // broadcast from every root
    for (int root = 0; root < n; ++root) {
      std::vector<double> v(5);
      for (int64_t i = 0; i < 5; ++i) v[i] = base(g_rank, i);
      Tensor t = make(v, dt);
      dist::broadcast(t, root);
      const auto got = values_of(t);
      for (int64_t i = 0; i < 5; ++i) CHECK(got[i] == base(root, i), "broadcast ", bp::name(dt));
    }
    // all_gather, both forms
    std::vector<double> v(3);
    for (int64_t i = 0; i < 3; ++i) v[i] = base(g_rank, i);
    std::vector<Tensor> outs;
    for (int r = 0; r < n; ++r) outs.push_back(bp::zeros({3}, bp::TensorOptions(dt)));
    dist::all_gather(outs, make(v, dt));
    Tensor flat = bp::zeros({3 * n}, bp::TensorOptions(dt));
    dist::all_gather_into_tensor(flat, make(v, dt));
    const auto f = values_of(flat);
    for (int r = 0; r < n; ++r) {
      const auto got = values_of(outs[r]);
      for (int64_t i = 0; i < 3; ++i) {
        CHECK(got[i] == base(r, i), "all_gather ", bp::name(dt), " rank ", r);
        CHECK(f[r * 3 + i] == base(r, i), "all_gather_into_tensor ", bp::name(dt));
      }
    }
    if (dt == DType::Bool) continue;
    // reduce_scatter, both forms: chunk r holds r + rank
    std::vector<Tensor> ins;
    std::vector<double> whole;
    for (int r = 0; r < n; ++r) {
      ins.push_back(make({double(r + g_rank), double(r + g_rank + 1)}, dt));
      whole.push_back(r + g_rank);
      whole.push_back(r + g_rank + 1);
    }
    Tensor out = bp::zeros({2}, bp::TensorOptions(dt));
    Tensor out2 = bp::zeros({2}, bp::TensorOptions(dt));
    dist::reduce_scatter(out, ins);
    dist::reduce_scatter_tensor(out2, make(whole, dt));
    const double s = n * g_rank + n * (n - 1) / 2.0;  // sum over ranks q of (rank + q)
    for (const Tensor& o : {out, out2}) {
      const auto got = values_of(o);
      CHECK(got[0] == s && got[1] == s + n, "reduce_scatter ", bp::name(dt), ": ", got[0], ", ",
            got[1], " != ", s, ", ", s + n);
    }
  }
  std::cout << "rank " << g_rank << ": broadcast, all_gather, reduce_scatter on every dtype"
            << std::endl;
}

void check_point_to_point(int n) {
  if (n < 2) {
    const std::string e = error_of([&] { dist::send(bp::ones({1}), 0); });
    CHECK(contains(e, "cannot send to itself"), e);
    std::cout << "rank 0: alone, a send to itself is refused" << std::endl;
    return;
  }
  // A ring: even ranks send first, odd ranks receive first (calls run in order).
  const int next = (g_rank + 1) % n, prev = (g_rank + n - 1) % n;
  Tensor out = make({double(g_rank), double(g_rank) * 2}, DType::Int64);
  Tensor in = bp::zeros({2}, bp::TensorOptions(DType::Int64));
  if (g_rank % 2 == 0) {
    dist::send(out, next, 7);
    dist::recv(in, prev, 7);
  } else {
    dist::recv(in, prev, 7);
    dist::send(out, next, 7);
  }
  const auto got = values_of(in);
  CHECK(got[0] == prev && got[1] == prev * 2, "recv from ", prev, ": ", got[0], ", ", got[1]);
  // Asynchronous both ways at once (every rank sends first): no deadlock.
  Tensor in2 = bp::zeros({3}, bp::TensorOptions(DType::Float32));
  dist::Work s = dist::send(bp::full({3}, double(g_rank)), next, 0, {.async_op = true});
  dist::Work r = dist::recv(in2, prev, 0, {.async_op = true});
  s.wait();
  r.wait();
  CHECK(values_of(in2)[2] == prev, "irecv from ", prev, ": ", values_of(in2)[2]);
  std::cout << "rank " << g_rank << ": send and recv around a ring, in order and asynchronously"
            << std::endl;
}

void check_layouts_and_async(int n) {
  // A non-contiguous tensor (a transposed view): written back through it.
  Tensor m = bp::arange(0, 6, 1, bp::TensorOptions(DType::Float32)).reshape({2, 3});
  Tensor mt = m.t();
  dist::all_reduce(mt);
  const auto got = values_of(m.flatten());
  for (int64_t i = 0; i < 6; ++i) CHECK(got[i] == i * n, "transposed all_reduce element ", i);
  // No elements.
  Tensor e = bp::zeros({0}, bp::TensorOptions(DType::Float32));
  dist::all_reduce(e);
  // Several calls in flight, then waited for.
  std::vector<Tensor> ts;
  std::vector<dist::Work> works;
  for (int k = 0; k < 8; ++k) {
    ts.push_back(bp::full({1000}, k, bp::TensorOptions(DType::Float32)));
    works.push_back(dist::all_reduce(ts.back(), dist::ReduceOp::Sum, {.async_op = true}));
  }
  for (auto& w : works) w.wait();
  for (int k = 0; k < 8; ++k) {
    CHECK(works[k].is_completed() && works[k].is_success(), "work ", k);
    CHECK(values_of(ts[k])[999] == k * n, "async all_reduce ", k);
  }
  dist::barrier();
  std::cout << "rank " << g_rank << ": transposed and empty tensors, 8 async calls, barrier"
            << std::endl;
}

int collectives(int n) {
  check_all_reduce(n);
  check_other_collectives(n);
  check_point_to_point(n);
  check_layouts_and_async(n);
  return 0;
}

int mismatch(int n) {
  // A different element count on rank 1, a different call on rank 2.
  Tensor t = bp::ones({g_rank == 1 ? 4 : 8});
  std::string e = error_of<dist::DistributedError>([&] {
    if (g_rank == 2)
      dist::broadcast(t, 0);
    else
      dist::all_reduce(t);
  });
  std::cout << "rank " << g_rank << ": " << e << std::endl;
  CHECK(contains(e, "the ranks' calls differ"), e);
  CHECK(contains(e, "all_reduce(sum) of 8 float32"), e);
  CHECK(contains(e, "rank 1 called all_reduce(sum) of 4 float32"), e);
  if (n > 2) CHECK(contains(e, "rank 2 called broadcast from rank 0 of 8 float32"), e);
  // The group goes on: a matching call works.
  Tensor ok = bp::ones({3});
  dist::all_reduce(ok);
  CHECK(values_of(ok)[0] == n, "all_reduce after a mismatch");
  // A call refused by one rank's own checks: the others hear why.
  Tensor ints = bp::ones({2}, bp::TensorOptions(DType::Int32));
  e = error_of(
      [&] { dist::all_reduce(ints, g_rank == 1 ? dist::ReduceOp::Avg : dist::ReduceOp::Sum); });
  std::cout << "rank " << g_rank << ": " << e << std::endl;
  if (g_rank == 1)
    CHECK(contains(e, "avg needs a floating dtype"), e);
  else
    CHECK(contains(e, "refused by the rank's own checks") && contains(e, "avg needs"), e);
  // A send and a receive that differ: both sides say so.
  if (g_rank < 2) {
    Tensor s = bp::ones({g_rank == 0 ? 4 : 5});
    e = error_of<dist::DistributedError>([&] {
      if (g_rank == 0)
        dist::send(s, 1);
      else
        dist::recv(s, 0);
    });
    std::cout << "rank " << g_rank << ": " << e << std::endl;
    CHECK(contains(e, "a send and its receive differ") && contains(e, "send to rank 1 of 4") &&
              contains(e, "recv from rank 0 of 5"),
          e);
  }
  // A receive refused by its own rank's checks: the sender hears why.
  if (g_rank < 2) {
    e = error_of([&] {
      if (g_rank == 0)
        dist::send(bp::ones({2}), 1);
      else
        dist::recv(Tensor(), 0);
    });
    std::cout << "rank " << g_rank << ": " << e << std::endl;
    if (g_rank == 0)
      CHECK(contains(e, "rank 1 called recv #1, refused by the rank's own checks"), e);
    else
      CHECK(contains(e, "undefined tensor"), e);
  }
  Tensor last = bp::ones({2});
  dist::all_reduce(last);
  CHECK(values_of(last)[1] == n && !dist::default_group().is_broken(), "the group after it all");
  return 0;
}

// Rank 1 comes late; the others' call times out with an error, not a hang.
int late(int) {
  Tensor t = bp::ones({4});
  const auto start = std::chrono::steady_clock::now();
  if (g_rank == 1) std::this_thread::sleep_for(3s);
  std::string e = error_of<dist::DistributedError>(
      [&] { dist::all_reduce(t, dist::ReduceOp::Sum, {.timeout = 1000ms}); });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "rank " << g_rank << " after " << s << " s: " << e << std::endl;
  CHECK(!e.empty(), "no error for a late rank");
  CHECK(s < 20, "the error came after ", s, " s");
  CHECK(dist::default_group().is_broken(), "the group is not marked unusable");
  e = error_of<dist::DistributedError>([&] { dist::barrier(); });
  CHECK(contains(e, "unusable"), e);
  return 0;
}

// Rank 1 dies after the first call; the others' next call fails in time.
int killed(int) {
  Tensor t = bp::ones({1024});
  dist::all_reduce(t);
  if (g_rank == 1) raise(SIGKILL);
  const auto start = std::chrono::steady_clock::now();
  std::string e = error_of<dist::DistributedError>(
      [&] { dist::all_reduce(t, dist::ReduceOp::Sum, {.timeout = 5000ms}); });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "rank " << g_rank << " after " << s << " s: " << e << std::endl;
  CHECK(contains(e, "the group cannot be used any more"), e);
  CHECK(s < 20, "the error came after ", s, " s");
  return 0;
}

// DistributedDataParallel: n ranks on shares of each batch end with the
// parameters of one process on the whole batch (computed here too, on a
// replica), also with gradient accumulation under no_sync, with one bucket
// and with many.
double max_difference(bp::nn::Module& a, bp::nn::Module& b) {
  const auto pa = a.parameters(), pb = b.parameters();
  double worst = 0;
  for (std::size_t k = 0; k < pa.size(); ++k) {
    const auto x = values_of(pa[k]), y = values_of(pb[k]);
    for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  }
  return worst;
}

// Passes its input on; when armed, backward through it raises (after the
// layers above it have their gradients, some buckets started).
bool g_tripwire_armed = false;
class Tripwire : public bp::nn::Module {
 public:
  Tripwire() : Module("Tripwire") {}
  Tensor forward(const Tensor& x) override {
    if (g_tripwire_armed && x.requires_grad())
      const_cast<Tensor&>(x).register_hook(
          [](const Tensor&) -> Tensor { throw std::runtime_error("tripwire"); });
    return x;
  }
};

std::shared_ptr<bp::nn::Module> small_model() {
  auto m = std::make_shared<bp::nn::Sequential>();
  m->push_back(std::make_shared<bp::nn::Linear>(8, 32));
  m->push_back(std::make_shared<bp::nn::ReLU>());
  m->push_back(std::make_shared<Tripwire>());
  m->push_back(std::make_shared<bp::nn::Linear>(32, 16));
  m->push_back(std::make_shared<bp::nn::ReLU>());
  m->push_back(std::make_shared<bp::nn::Linear>(16, 4));
  return m;
}

void ddp_case(int n, double bucket_mb, bool accumulate, int failing_step = -1) {
  const int64_t batch = 24;       // divisible by 2, 3 and 4
  bp::manual_seed(100 + g_rank);  // replicas start different: DDP copies rank 0's
  auto model = small_model();
  bp::nn::DDPOptions o;
  o.bucket_cap_mb = o.first_bucket_mb = bucket_mb;
  auto ddp = std::make_shared<bp::nn::DistributedDataParallel>(model, o);
  auto reference = small_model();
  reference->load_state_dict(model->state_dict());
  bp::optim::SGD opt(ddp->parameters(), {.lr = 0.1, .momentum = 0.9});
  bp::optim::SGD ref_opt(reference->parameters(), {.lr = 0.1, .momentum = 0.9});
  bp::manual_seed(7);  // the same data on every rank
  const int64_t share = batch / n, from = g_rank * share;
  for (int step = 0; step < 4; ++step) {
    const int micro = accumulate ? 2 : 1;
    opt.zero_grad();
    ref_opt.zero_grad();
    if (step == failing_step) {
      // Backward raises half-way on every rank: the step is dropped here
      // and in the reference, and the next pass must average as usual.
      Tensor x = bp::randn({batch, 8}), y = bp::randn({batch, 4});
      g_tripwire_armed = true;
      const std::string e = error_of([&] {
        bp::mse_loss(ddp->forward(x.narrow(0, from, share)), y.narrow(0, from, share)).backward();
      });
      g_tripwire_armed = false;
      CHECK(contains(e, "tripwire"), e);
      continue;
    }
    for (int m = 0; m < micro; ++m) {
      Tensor x = bp::randn({batch, 8}), y = bp::randn({batch, 4});
      auto mine = [&] {
        bp::mse_loss(ddp->forward(x.narrow(0, from, share)), y.narrow(0, from, share)).backward();
      };
      if (m + 1 < micro) {
        const std::size_t before = ddp->bucket_reductions();
        {
          auto guard = ddp->no_sync();
          mine();
        }
        CHECK(ddp->bucket_reductions() == before, "a bucket was reduced under no_sync");
      } else {
        mine();
      }
      bp::mse_loss(reference->forward(x), y).backward();
    }
    opt.step();
    ref_opt.step();
  }
  const double diff = max_difference(*model, *reference);
  std::cout << "rank " << g_rank << ": ddp with " << ddp->bucket_sizes().size() << " buckets"
            << (accumulate ? " and no_sync" : "")
            << (failing_step >= 0 ? " and a failed backward" : "")
            << ": max difference from one process " << diff << ", buckets started during backward "
            << ddp->buckets_started_early() << std::endl;
  CHECK(diff < 1e-5, "DDP differs from one process by ", diff);
  if (ddp->bucket_sizes().size() > 1)
    CHECK(ddp->buckets_started_early() > 1, "no bucket started before backward ended");
  CHECK(ddp->named_parameters().keys()[0] == "module.0.weight", ddp->named_parameters().keys()[0]);
}

// A module with a layer its forward never uses.
class Branchy : public bp::nn::Module {
 public:
  Branchy() : Module("Branchy") {
    used = register_module("used", std::make_shared<bp::nn::Linear>(4, 2));
    unused = register_module("unused", std::make_shared<bp::nn::Linear>(4, 2));
  }
  Tensor forward(const Tensor& x) override { return used->forward(x); }
  std::shared_ptr<bp::nn::Linear> used, unused;
};

void ddp_unused(bool find_unused) {
  auto m = std::make_shared<Branchy>();
  bp::nn::DDPOptions o;
  o.find_unused_parameters = find_unused;
  bp::nn::DistributedDataParallel d(m, o);
  bp::manual_seed(3);
  Tensor x = bp::randn({4, 4});
  d.forward(x).sum().backward();
  const Tensor g = m->unused->weight.grad();
  if (find_unused)
    CHECK(!g.defined(), "an unused parameter got a gradient with find_unused_parameters");
  else
    CHECK(g.defined() && values_of(g.flatten())[0] == 0,
          "an unused parameter's gradient is not zeros");
  CHECK(m->used->weight.grad().defined(), "a used parameter has no gradient");
}

int ddp(int n) {
  ddp_case(n, 25, false);        // one bucket
  ddp_case(n, 0.001, false);     // a bucket per parameter or so
  ddp_case(n, 0.001, true);      // accumulation
  ddp_case(n, 0.001, false, 1);  // a backward that raises half-way
  ddp_unused(true);
  ddp_unused(false);
  // Replicas that differ are refused on every rank, naming both.
  if (n < 2) return 0;
  auto m = std::make_shared<bp::nn::Linear>(4, g_rank == 1 ? 3 : 2);
  const std::string e = error_of([&] { bp::nn::DistributedDataParallel d(m); });
  CHECK(contains(e, "the replicas differ: rank 0's module has 2 parameters of"), e);
  return 0;
}

int init_errors() {
  dist::GroupOptions o;
  o.init_method = "carrier-pigeon://";
  o.rank = 0;
  o.world_size = 1;
  std::string e = error_of([&] { dist::init_process_group(o); });
  CHECK(contains(e, "unknown init_method 'carrier-pigeon://'"), e);
  o.init_method = "env://";
  o.rank = 3;
  o.world_size = 2;
  e = error_of([&] { dist::init_process_group(o); });
  CHECK(contains(e, "rank 3 is out of range for a world of 2"), e);
  o.rank = -1;
  ::unsetenv("RANK");
  e = error_of([&] { dist::init_process_group(o); });
  CHECK(contains(e, "RANK is not set") && contains(e, "backplane launch"), e);
  o.backend = "mpi";
  e = error_of([&] { dist::init_process_group(o); });
  CHECK(contains(e, "unknown backend 'mpi'"), e);
  CHECK(!dist::is_initialized(), "initialised after errors");
  e = error_of([&] { dist::all_reduce(bp::ones({1})); });
  CHECK(contains(e, "not initialised"), e);
  // A group of one over a fresh file store works.
  char dir[] = "/tmp/bp-dist-XXXXXX";
  CHECK(::mkdtemp(dir) != nullptr, "mkdtemp");
  dist::GroupOptions one;
  one.init_method = std::string("file://") + dir + "/store";
  one.rank = 0;
  one.world_size = 1;
  dist::init_process_group(one);
  Tensor t = bp::full({3}, 2.0);
  dist::all_reduce(t, dist::ReduceOp::Avg);
  CHECK(values_of(t)[0] == 2.0, "a world of one");
  dist::destroy_process_group();
  // nccl: without NCCL, the CUDA runtime or a device, init says which is
  // missing; with them, host tensors are refused by name.
  one.backend = "nccl";
  one.init_method = std::string("file://") + dir + "/nccl";
  std::string nccl;
  try {
    dist::init_process_group(one);
    nccl = error_of([&] { dist::all_reduce(bp::ones({2})); });
    CHECK(contains(nccl, "the nccl backend carries CUDA tensors"), nccl);
    dist::destroy_process_group();
  } catch (const dist::DistributedError& err) {
    nccl = err.what();
    CHECK(contains(nccl, "the nccl backend") &&
              (contains(nccl, "needs a CUDA device") || contains(nccl, "was not found")),
          nccl);
  }
  std::cout << "nccl: " << nccl << std::endl;
  std::filesystem::remove_all(dir);
  std::cout << "init errors: unknown method, rank out of range, RANK unset, unknown backend, "
               "uninitialised group; a world of one"
            << std::endl;
  return 0;
}

// Starts `n` ranks of this program with a fresh file:// store, waits for
// them (at most 120 s) and says how each ended. Rank 1 of `killed` is
// expected to die by SIGKILL.
int spawn(int n, char** argv, const std::string& scenario) {
  char dir[] = "/tmp/bp-dist-XXXXXX";
  if (!::mkdtemp(dir)) return 2;
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("BP_TEST_INIT", (std::string("file://") + dir + "/store").c_str(), 1);
      ::execv("/proc/self/exe", argv);
      _exit(127);
    }
    pids.push_back(pid);
  }
  // Every rank ends within 120 s, or the rest are killed and it fails.
  std::vector<int> statuses(n, -1);
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  for (int left = n; left > 0;) {
    for (int r = 0; r < n; ++r) {
      if (statuses[r] != -1) continue;
      int status = 0;
      if (::waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        statuses[r] = status;
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      std::cout << "[spawn] ranks still running after 120 s: killed" << std::endl;
      for (int r = 0; r < n; ++r)
        if (statuses[r] == -1) ::kill(pids[r], SIGKILL);
    }
    std::this_thread::sleep_for(10ms);
  }
  int bad = 0;
  for (int r = 0; r < n; ++r) {
    const int status = statuses[r];
    const bool expected_kill = scenario == "killed" && r == 1;
    const bool ok = expected_kill ? (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
                                  : (WIFEXITED(status) && WEXITSTATUS(status) == 0);
    std::cout << "[spawn] rank " << r << (ok ? " ended as expected" : " FAILED") << std::endl;
    bad += !ok;
  }
  std::filesystem::remove_all(dir);
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> all(argv, argv + argc);
  bp::init_from_args(argc, argv);  // --backend
  std::string scenario;
  int spawn_n = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--spawn" && i + 1 < argc)
      spawn_n = std::atoi(argv[++i]);
    else if (a == "--dist" && i + 1 < argc)
      g_dist = argv[++i];
    else
      scenario = a;
  }
  if (scenario.empty()) {
    std::cerr << "usage: distributed_worker [--spawn N] [--dist gloo|nccl] "
                 "collectives|mismatch|late|killed|ddp|init-errors [--backend B]\n";
    return 2;
  }
  if (spawn_n > 0) {
    // The children get the same arguments but --spawn.
    std::vector<char*> child;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (std::string(all[i]) == "--spawn") {
        ++i;
        continue;
      }
      child.push_back(all[i]);
    }
    child.push_back(nullptr);
    return spawn(spawn_n, child.data(), scenario);
  }
  try {
    if (scenario == "init-errors") {
      g_rank = 0;
      init_errors();
    } else {
      dist::GroupOptions o;
      if (const char* init = std::getenv("BP_TEST_INIT")) o.init_method = init;
      o.backend = g_dist;
      o.timeout = 30s;
      dist::init_process_group(o);
      g_rank = dist::get_rank();
      const int n = dist::get_world_size();
      if (scenario == "collectives")
        collectives(n);
      else if (scenario == "mismatch")
        mismatch(n);
      else if (scenario == "late")
        late(n);
      else if (scenario == "killed")
        killed(n);
      else if (scenario == "ddp")
        ddp(n);
      else {
        std::cerr << "unknown scenario " << scenario << "\n";
        return 2;
      }
      dist::destroy_process_group();
    }
  } catch (const std::exception& e) {
    std::cerr << "rank " << g_rank << ": unexpected error: " << e.what() << std::endl;
    return 1;
  }
  if (g_failures)
    std::cerr << "rank " << g_rank << ": " << g_failures << " checks failed\n";
  else
    std::cout << "rank " << g_rank << ": " << scenario << ": all checks passed" << std::endl;
  return g_failures ? 1 : 0;
}
