// DistributedDataParallel: gradient buckets all-reduced while backward runs.
#include <backplane/autograd.h>
#include <backplane/nn/parallel.h>
#include <backplane/ops.h>

#include <optional>

namespace bp::nn {

namespace dist = bp::distributed;
using bp::detail::concat;

struct DistributedDataParallel::State {
  struct Bucket {
    Tensor flat;  // the gradients, one after the other
    std::vector<std::size_t> params;
    std::vector<int64_t> offsets;  // of each parameter in `flat`
    std::size_t pending = 0;       // gradients not there yet in this pass
    std::optional<dist::Work> work;
  };

  dist::ProcessGroup* pg = nullptr;
  std::vector<Tensor> params;
  std::vector<std::size_t> bucket_of;
  std::vector<std::size_t> index_in_bucket;
  std::vector<Bucket> buckets;
  std::vector<bool> ready;
  bool sync = true;
  bool find_unused = false;
  bool in_pass = false;
  uint64_t pass = 0;           // autograd's number of the pass being reduced
  std::size_t reductions = 0;  // bucket all-reduces started, in all
  std::size_t next = 0;        // the next bucket to start (they start in order)
  std::size_t early = 0;       // started before the pass ended
  std::size_t last_early = 0;

  Tensor slice(std::size_t p) const {
    const Bucket& b = buckets[bucket_of[p]];
    return b.flat.narrow(0, b.offsets[index_in_bucket[p]], params[p].numel());
  }

  void begin_pass(const std::weak_ptr<State>& self) {
    // A pass that ended by an error left its callback unrun: its buckets
    // may still be in flight, and must land before the memory is reused.
    for (Bucket& b : buckets)
      if (b.work) {
        try {
          b.work->wait();
        } catch (const std::exception&) {  // reported by the pass that started it
        }
      }
    in_pass = true;
    pass = autograd::current_pass();
    next = early = 0;
    std::fill(ready.begin(), ready.end(), false);
    for (Bucket& b : buckets) {
      b.pending = b.params.size();
      b.work.reset();
    }
    autograd::queue_callback([self] {
      if (auto s = self.lock()) s->end_pass();
    });
  }

  // A parameter's gradient is accumulated: into its bucket; full buckets
  // start in order (every rank reduces the same buckets in the same order).
  void on_grad(std::size_t p, const std::weak_ptr<State>& self) {
    if (!sync) return;
    if (!in_pass || pass != autograd::current_pass()) begin_pass(self);
    if (ready[p]) return;
    ready[p] = true;
    slice(p).copy_(params[p].grad().reshape({-1}));
    --buckets[bucket_of[p]].pending;
    while (next < buckets.size() && buckets[next].pending == 0) start(next++), ++early;
  }

  void start(std::size_t i) {
    Bucket& b = buckets[i];
    ++reductions;
    b.work = pg->all_reduce(b.flat, dist::ReduceOp::Avg, {.async_op = true});
  }

  void end_pass() {
    struct Reset {
      State* s;
      ~Reset() { s->in_pass = false; }
    } reset{this};
    // A parameter this pass did not reach goes in with the gradient it has
    // (accumulated under no_sync), else as zeros: every rank reduces every
    // bucket, and the replicas stay the same.
    std::vector<float> used(params.size());
    for (std::size_t p = 0; p < params.size(); ++p) {
      used[p] = ready[p] ? 1.0f : 0.0f;
      if (ready[p]) continue;
      const Tensor g = params[p].grad();
      if (g.defined())
        slice(p).copy_(g.reshape({-1}));
      else
        slice(p).zero_();
    }
    for (; next < buckets.size(); ++next) start(next);
    last_early = early;
    // Every bucket lands before anything is read or raised.
    std::exception_ptr error;
    for (Bucket& b : buckets) {
      try {
        b.work->wait();
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
    // With find_unused_parameters, a parameter no rank reached keeps no
    // gradient (as in PyTorch), so the optimiser leaves it alone.
    if (find_unused) {
      Tensor mask =
          from_vector(used, {static_cast<int64_t>(used.size())}, TensorOptions(DType::Float32));
      pg->all_reduce(mask, dist::ReduceOp::Max);
      used = mask.to_vector<float>();
    }
    for (std::size_t p = 0; p < params.size(); ++p) {
      Tensor g = params[p].grad();
      if (find_unused && used[p] == 0.0f) continue;
      const Tensor avg = slice(p).view(params[p].sizes());
      if (g.defined())
        g.copy_(avg);
      else
        params[p].set_grad(avg.clone());
    }
  }
};

namespace {

// Rank r's count of parameters, of their elements, and a digest of their
// shapes and dtypes.
std::vector<int64_t> describe(const std::vector<Tensor>& params) {
  int64_t elements = 0;
  uint64_t digest = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { digest = (digest ^ v) * 1099511628211ull; };
  for (const Tensor& p : params) {
    elements += p.numel();
    mix(static_cast<uint64_t>(p.dtype()));
    for (int64_t s : p.sizes()) mix(static_cast<uint64_t>(s));
  }
  return {static_cast<int64_t>(params.size()), elements, static_cast<int64_t>(digest)};
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module, DDPOptions options)
    : Module("DistributedDataParallel"),
      module_(std::move(module)),
      options_(std::move(options)),
      state_(std::make_shared<State>()) {
  BP_CHECK(module_, "[DistributedDataParallel] no module to wrap");
  BP_CHECK(options_.bucket_cap_mb > 0 && options_.first_bucket_mb > 0,
           "[DistributedDataParallel] bucket sizes must be positive");
  register_module("module", module_);
  State& s = *state_;
  s.pg = options_.group ? options_.group.get() : &dist::default_group();
  s.find_unused = options_.find_unused_parameters;
  for (const Tensor& p : module_->parameters())
    if (p.requires_grad()) s.params.push_back(p);

  // The replicas must match before anything is copied between them.
  const int n = s.pg->size();
  Tensor mine = from_vector(describe(s.params), {3}, TensorOptions(DType::Int64));
  Tensor all = zeros({3 * n}, TensorOptions(DType::Int64));
  s.pg->all_gather_into_tensor(all, mine);
  const auto d = all.to_vector<int64_t>();
  for (int r = 1; r < n; ++r)
    BP_CHECK(d[3 * r] == d[0] && d[3 * r + 1] == d[1] && d[3 * r + 2] == d[2],
             "[DistributedDataParallel] the replicas differ: rank 0's module has ", d[0],
             " parameters of ", d[1], " elements, rank ", r, "'s has ", d[3 * r], " of ",
             d[3 * r + 1],
             d[3 * r + 2] != d[2] && d[3 * r] == d[0] ? " (other shapes or dtypes)" : "");
  {
    NoGradGuard no_grad;
    for (const Tensor& p : module_->parameters()) s.pg->broadcast(p, 0);
    for (const Tensor& b : module_->buffers()) s.pg->broadcast(b, 0);
  }

  // Buckets over the parameters in reverse order, by dtype and device.
  const double mb = 1 << 20;
  State::Bucket cur;
  int64_t bytes = 0;
  auto close = [&] {
    if (cur.params.empty()) return;
    const int64_t count = cur.offsets.back() + s.params[cur.params.back()].numel();
    const Tensor& first = s.params[cur.params.front()];
    cur.flat = zeros({count}, TensorOptions(first.dtype()).device(first.device()));
    s.buckets.push_back(std::move(cur));
    cur = State::Bucket();
    bytes = 0;
  };
  s.bucket_of.resize(s.params.size());
  s.index_in_bucket.resize(s.params.size());
  s.ready.resize(s.params.size());
  for (std::size_t k = s.params.size(); k-- > 0;) {
    const Tensor& p = s.params[k];
    if (!cur.params.empty()) {
      const Tensor& q = s.params[cur.params.front()];
      if (q.dtype() != p.dtype() || q.device() != p.device()) close();
    }
    cur.offsets.push_back(
        cur.params.empty() ? 0 : cur.offsets.back() + s.params[cur.params.back()].numel());
    s.bucket_of[k] = s.buckets.size();
    s.index_in_bucket[k] = cur.params.size();
    cur.params.push_back(k);
    bytes += p.numel() * static_cast<int64_t>(p.itemsize());
    const double cap = (s.buckets.empty() ? options_.first_bucket_mb : options_.bucket_cap_mb) * mb;
    if (static_cast<double>(bytes) >= cap) close();
  }
  close();

  std::weak_ptr<State> weak = state_;
  for (std::size_t k = 0; k < s.params.size(); ++k)
    s.params[k].register_post_accumulate_grad_hook([weak, k](const Tensor&) {
      if (auto st = weak.lock()) st->on_grad(k, weak);
    });
}

DistributedDataParallel::~DistributedDataParallel() = default;

Tensor DistributedDataParallel::forward(const Tensor& input) {
  if (options_.broadcast_buffers && is_training() && state_->pg->size() > 1) {
    NoGradGuard no_grad;
    for (const Tensor& b : module_->buffers()) state_->pg->broadcast(b, 0);
  }
  return module_->forward(input);
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp)
    : ddp_(ddp), prev_(ddp.state_->sync) {
  ddp.state_->sync = false;
}
DistributedDataParallel::NoSync::~NoSync() { ddp_.state_->sync = prev_; }

std::vector<std::size_t> DistributedDataParallel::bucket_sizes() const {
  std::vector<std::size_t> out;
  for (const auto& b : state_->buckets) out.push_back(b.params.size());
  return out;
}

std::size_t DistributedDataParallel::buckets_started_early() const { return state_->last_early; }
std::size_t DistributedDataParallel::bucket_reductions() const { return state_->reductions; }

}  // namespace bp::nn
