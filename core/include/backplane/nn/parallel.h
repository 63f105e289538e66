#pragma once
// Data-parallel training (PyTorch's DistributedDataParallel), in the library
// Backplane::distributed. Every rank holds a replica of the model and works
// on its share of each batch; backward averages the gradients over the ranks.
//
//   bp::distributed::init_process_group();
//   auto ddp = std::make_shared<bp::nn::DistributedDataParallel>(model);
//   bp::optim::SGD opt(ddp->parameters(), {.lr = 0.1});
//   loss_fn(ddp->forward(my_share_of_x), my_share_of_y).backward();  // averaged
//   opt.step();
//
// Construction checks that the replicas have the same parameters (count,
// shapes, dtypes) and copies rank 0's parameters and buffers to the others.
// Gradients go into buckets of about bucket_cap_mb, in the reverse order of
// the parameters (roughly the order backward produces them); a bucket whose
// gradients are all there is all-reduced at once, on the group's thread,
// while backward goes on; the pass ends by waiting for every bucket and
// writing the averages into each parameter's grad.

#include <backplane/distributed.h>
#include <backplane/nn/module.h>

#include <memory>
#include <vector>

namespace bp::nn {

struct DDPOptions {
  // The ranks' group; the default group when null (which must then outlive
  // this module).
  std::shared_ptr<distributed::ProcessGroup> group;
  double bucket_cap_mb = 25;      // PyTorch's
  double first_bucket_mb = 1;     // the first bucket is small, to start early
  bool broadcast_buffers = true;  // rank 0's buffers to all before each training forward
  // Parameters that no rank's backward reached keep no gradient (one more
  // small all-reduce per step). Off: they get the average of what the
  // ranks hold (zeros where none), as every other parameter.
  bool find_unused_parameters = false;
};

class DistributedDataParallel : public Module {
 public:
  explicit DistributedDataParallel(std::shared_ptr<Module> module, DDPOptions options = {});
  ~DistributedDataParallel() override;

  Tensor forward(const Tensor& input) override;
  // The wrapped module (also the child "module": parameters are named
  // "module.<name>", as PyTorch names them).
  const std::shared_ptr<Module>& module() const { return module_; }

  // Gradient accumulation: while the guard lives, backward keeps gradients
  // local (no communication); the first backward after it averages all
  // that was accumulated.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  // How many parameters each bucket holds, in the order they are reduced.
  std::vector<std::size_t> bucket_sizes() const;
  // Of the last backward pass: the buckets whose all-reduce started before
  // the pass ended (overlapping the rest of backward).
  std::size_t buckets_started_early() const;
  // Bucket all-reduces started since construction (none under no_sync).
  std::size_t bucket_reductions() const;

  struct State;

 private:
  std::shared_ptr<Module> module_;
  DDPOptions options_;
  std::shared_ptr<State> state_;
};

}  // namespace bp::nn
