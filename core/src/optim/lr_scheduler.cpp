// StepLR and CosineAnnealingLR.
#include <backplane/error.h>
#include <backplane/optim/lr_scheduler.h>

#include <cmath>
#include <numbers>

namespace bp::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const auto& g : optimizer_.param_groups()) base_lrs_.push_back(g["lr"]);
}

void LRScheduler::apply() {
  auto& groups = optimizer_.param_groups();
  for (std::size_t i = 0; i < groups.size() && i < base_lrs_.size(); ++i)
    groups[i]["lr"] = lr_at(base_lrs_[i], last_epoch_);
}

void LRScheduler::step() {
  ++last_epoch_;
  apply();
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> out;
  for (const auto& g : optimizer_.param_groups()) out.push_back(g["lr"]);
  return out;
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  BP_CHECK(step_size > 0, "[StepLR] step_size must be positive, got ", step_size);
  apply();
}

double StepLR::lr_at(double base_lr, int64_t epoch) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  BP_CHECK(T_max > 0, "[CosineAnnealingLR] T_max must be positive, got ", T_max);
  apply();
}

double CosineAnnealingLR::lr_at(double base_lr, int64_t epoch) const {
  const double phase = std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_);
  return eta_min_ + (base_lr - eta_min_) * (1 + std::cos(phase)) / 2;
}

}  // namespace bp::optim
