// Learning-rate schedulers (torch.optim.lr_scheduler): each sets the lr of
// every group of its optimiser from the group's lr when the scheduler was
// made (its base lr) and the epoch count. Made at epoch 0; step() moves to
// the next epoch, to be called after the optimiser's step().
#pragma once

#include <backplane/optim/optimizer.h>

#include <cstdint>
#include <vector>

namespace bp::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  void step();
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // The lr of each group after the latest step.
  std::vector<double> get_last_lr() const;

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  // Sets each group's lr for the current epoch (called by the derived
  // constructor, then by step()).
  void apply();
  virtual double lr_at(double base_lr, int64_t epoch) const = 0;

 private:
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = 0;
};

// base_lr * gamma^(epoch / step_size) (integer division).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
// (the closed form of PyTorch's schedule).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

}  // namespace bp::optim
