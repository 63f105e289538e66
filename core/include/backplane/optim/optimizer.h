// bp::optim: optimisers with PyTorch 1.13's update rules (NN-3), parameter
// groups, zero_grad (set_to_none by default, as PyTorch 2) and state dicts.
//
// A group's hyperparameters are named numbers, as PyTorch's group dicts
// ("lr", "momentum", ...; a flag is 0 or 1); a group given without one
// takes the optimiser's default. step() runs under no-grad and updates each
// parameter in place (its version counter moves).
#pragma once

#include <backplane/tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bp::optim {

struct ParamGroup {
  std::vector<Tensor> params;
  std::map<std::string, double> options;  // overrides of the defaults
  double& operator[](const std::string& name);
  double operator[](const std::string& name) const;
};

// One parameter's state: tensors (momentum_buffer, exp_avg, ...) and numbers (step).
struct ParamState {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, double> numbers;
};

// What state_dict() gives and load_state_dict() takes: parameters are
// numbered over the groups in order, as PyTorch's.
struct OptimizerState {
  struct Group {
    std::map<std::string, double> options;
    std::vector<int64_t> params;
  };
  std::vector<Group> param_groups;
  std::map<int64_t, ParamState> state;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient.
  virtual void step() = 0;
  // Every parameter's gradient set to none, or zeroed in place.
  void zero_grad(bool set_to_none = true);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  // Adds a group, completing its options from the defaults; a parameter
  // already in another group is refused.
  void add_param_group(ParamGroup group);
  const std::map<std::string, double>& defaults() const { return defaults_; }
  const std::string& name() const { return name_; }

  // The state of a parameter (empty until its first step).
  ParamState& state(const Tensor& param);

  // Copies: the tensors in the result are detached clones.
  OptimizerState state_dict() const;
  // Refuses (changing nothing) a state whose groups or parameter counts
  // differ from this optimiser's, or whose tensors' shapes differ from their
  // parameters'; tensors are moved to each parameter's device.
  void load_state_dict(const OptimizerState& state);

 protected:
  Optimizer(std::string name, std::vector<ParamGroup> groups,
            std::map<std::string, double> defaults);
  // Called for each group added, with its options complete.
  virtual void check_group(const ParamGroup& group) const = 0;
  // Adds the constructor's groups; called by the derived constructor (a
  // virtual check_group cannot run in the base's).
  void add_pending();

 private:
  struct Entry {
    Tensor param;  // keeps the key alive
    ParamState state;
  };
  std::string name_;
  std::map<std::string, double> defaults_;
  std::vector<ParamGroup> groups_;
  std::vector<ParamGroup> pending_;
  std::map<const TensorImpl*, Entry> state_;
};

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
};

// g = grad (negated when maximize) + weight_decay * p; with momentum,
// buf = g on the first step, then momentum * buf + (1 - dampening) * g, and
// g = nesterov ? g + momentum * buf : buf; p -= lr * g.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  SGD(std::vector<ParamGroup> groups, SGDOptions options);
  void step() override;

 protected:
  void check_group(const ParamGroup& group) const override;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // Adam: added to the gradient (default 0); AdamW: decoupled (default 1e-2).
  std::optional<double> weight_decay = std::nullopt;
  bool amsgrad = false;
  bool maximize = false;
};

// Adam (Kingma and Ba) as PyTorch's: m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2,
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps); amsgrad uses
// the running maximum of v. Adam adds weight_decay * p to g.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options);
  Adam(std::vector<ParamGroup> groups, AdamOptions options);
  void step() override;

 protected:
  Adam(std::string name, std::vector<ParamGroup> groups, AdamOptions options, double default_decay);
  void check_group(const ParamGroup& group) const override;
  void update(bool decoupled_weight_decay);
};

// AdamW (Loshchilov and Hutter): p *= 1 - lr * weight_decay, then Adam's
// step without weight decay in the gradient. Its default weight_decay is 1e-2.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options = {});
  AdamW(std::vector<ParamGroup> groups, AdamOptions options = {});
  void step() override;
};

}  // namespace bp::optim
