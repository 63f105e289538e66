// bp::optim::Optimizer: groups, per-parameter state, zero_grad and state dicts.
#include <backplane/error.h>
#include <backplane/optim/optimizer.h>

#include <set>

#include "../internal.h"

namespace bp::optim {

double& ParamGroup::operator[](const std::string& name) { return options[name]; }

double ParamGroup::operator[](const std::string& name) const {
  auto it = options.find(name);
  BP_CHECK_INDEX(it != options.end(), "[optim] the group has no option '", name, "'");
  return it->second;
}

Optimizer::Optimizer(std::string name, std::vector<ParamGroup> groups,
                     std::map<std::string, double> defaults)
    : name_(std::move(name)), defaults_(std::move(defaults)) {
  BP_CHECK(!groups.empty() && !(groups.size() == 1 && groups[0].params.empty()), "[", name_,
           "] optimizer got an empty parameter list");
  // The groups are added by the derived constructor, once check_group works.
  groups_.reserve(groups.size());
  pending_ = std::move(groups);
}

void Optimizer::add_pending() {
  std::vector<ParamGroup> groups = std::move(pending_);
  pending_.clear();
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  for (const auto& [key, value] : group.options)
    BP_CHECK(defaults_.count(key), "[", name_, "] unknown option '", key, "' in a parameter group");
  for (const auto& [key, value] : defaults_) group.options.emplace(key, value);
  check_group(group);
  std::set<const TensorImpl*> seen;
  for (const auto& g : groups_)
    for (const auto& p : g.params) seen.insert(p.impl());
  for (const auto& p : group.params) {
    BP_CHECK(p.defined(), "[", name_, "] a parameter is an undefined tensor");
    BP_CHECK_T(AutogradError, p.is_leaf(), "[", name_, "] can't optimize a non-leaf Tensor");
    BP_CHECK(seen.insert(p.impl()).second, "[", name_,
             "] some parameters appear in more than one parameter group");
  }
  groups_.push_back(std::move(group));
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& g : groups_)
    for (Tensor& p : g.params) detail::clear_grad(p, set_to_none);
}

ParamState& Optimizer::state(const Tensor& param) {
  auto& entry = state_[param.impl()];
  entry.param = param;  // keeps the key's tensor alive
  return entry.state;
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  int64_t index = 0;
  for (const auto& g : groups_) {
    OptimizerState::Group og{g.options, {}};
    for (const auto& p : g.params) {
      auto it = state_.find(p.impl());
      if (it != state_.end() &&
          !(it->second.state.tensors.empty() && it->second.state.numbers.empty())) {
        ParamState copy;
        copy.numbers = it->second.state.numbers;
        for (const auto& [k, t] : it->second.state.tensors) copy.tensors[k] = t.detach().clone();
        out.state[index] = std::move(copy);
      }
      og.params.push_back(index++);
    }
    out.param_groups.push_back(std::move(og));
  }
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& in) {
  BP_CHECK(in.param_groups.size() == groups_.size(), "[", name_,
           ".load_state_dict] loaded state dict has ", in.param_groups.size(),
           " parameter groups; the optimizer has ", groups_.size());
  std::map<int64_t, const Tensor*> by_index;
  for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
    const auto& mine = groups_[gi];
    const auto& theirs = in.param_groups[gi];
    BP_CHECK(
        mine.params.size() == theirs.params.size(), "[", name_,
        ".load_state_dict] loaded state dict contains a parameter group that doesn't match the "
        "size of optimizer's group (group ",
        gi, ": ", theirs.params.size(), " against ", mine.params.size(), ")");
    for (const auto& [key, value] : theirs.options)
      BP_CHECK(defaults_.count(key), "[", name_, ".load_state_dict] unknown option '", key, "'");
    for (std::size_t i = 0; i < mine.params.size(); ++i)
      by_index[theirs.params[i]] = &mine.params[i];
  }
  // Check everything, convert onto each parameter's device, then commit.
  std::map<const TensorImpl*, Entry> next;
  for (const auto& [index, ps] : in.state) {
    auto it = by_index.find(index);
    BP_CHECK(it != by_index.end(), "[", name_, ".load_state_dict] state for parameter ", index,
             " which no group lists");
    const Tensor& p = *it->second;
    Entry e;
    e.param = p;
    e.state.numbers = ps.numbers;
    for (const auto& [k, t] : ps.tensors) {
      BP_CHECK(t.defined() && DimVector(t.sizes()) == DimVector(p.sizes()), "[", name_,
               ".load_state_dict] state '", k, "' of parameter ", index, " has shape ",
               t.defined() ? detail::concat(t.sizes()) : std::string("(undefined)"),
               ", the parameter's is ", p.sizes());
      e.state.tensors[k] = t.detach().to(p.device(), p.dtype()).clone();
    }
    next[p.impl()] = std::move(e);
  }
  for (std::size_t gi = 0; gi < groups_.size(); ++gi)
    for (const auto& [key, value] : in.param_groups[gi].options) groups_[gi].options[key] = value;
  state_ = std::move(next);
}

}  // namespace bp::optim
