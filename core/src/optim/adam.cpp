// Adam and AdamW (PyTorch 1.13's _single_tensor_adam / _single_tensor_adamw);
// without amsgrad, a backend's fused core::adam_step runs in place of the
// composite where it has one.
#include <backplane/autograd.h>
#include <backplane/error.h>
#include <backplane/ops.h>
#include <backplane/optim/optimizer.h>

#include <cmath>

#include "../internal.h"

namespace bp::optim {

namespace {
std::map<std::string, double> adam_defaults(const AdamOptions& o, double default_decay) {
  return {{"lr", o.lr},
          {"beta1", o.beta1},
          {"beta2", o.beta2},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay.value_or(default_decay)},
          {"amsgrad", o.amsgrad ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}
}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(std::vector<ParamGroup>{ParamGroup{std::move(params), {}}}, options) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options)
    : Adam("Adam", std::move(groups), options, 0.0) {}

Adam::Adam(std::string name, std::vector<ParamGroup> groups, AdamOptions options,
           double default_decay)
    : Optimizer(std::move(name), std::move(groups), adam_defaults(options, default_decay)) {
  add_pending();
}

void Adam::check_group(const ParamGroup& g) const {
  BP_CHECK(g["lr"] >= 0, "[", name(), "] Invalid learning rate: ", g["lr"]);
  BP_CHECK(g["eps"] >= 0, "[", name(), "] Invalid epsilon value: ", g["eps"]);
  BP_CHECK(g["beta1"] >= 0 && g["beta1"] < 1, "[", name(),
           "] Invalid beta parameter at index 0: ", g["beta1"]);
  BP_CHECK(g["beta2"] >= 0 && g["beta2"] < 1, "[", name(),
           "] Invalid beta parameter at index 1: ", g["beta2"]);
  BP_CHECK(g["weight_decay"] >= 0, "[", name(),
           "] Invalid weight_decay value: ", g["weight_decay"]);
}

void Adam::step() { update(false); }

void Adam::update(bool decoupled) {
  NoGradGuard no_grad;
  // Checked for every parameter before any changes, so a refused step changes nothing.
  for (ParamGroup& g : param_groups()) {
    if (g["amsgrad"] == 0) continue;
    for (Tensor& p : g.params) {
      const ParamState& st = state(p);
      BP_CHECK(!p.grad().defined() || st.tensors.empty() || st.tensors.count("max_exp_avg_sq"), "[",
               name(),
               "] amsgrad was turned on after the first step: the state has no max_exp_avg_sq");
    }
  }
  for (ParamGroup& g : param_groups()) {
    const double lr = g["lr"], beta1 = g["beta1"], beta2 = g["beta2"], eps = g["eps"],
                 weight_decay = g["weight_decay"];
    const bool amsgrad = g["amsgrad"] != 0, maximize = g["maximize"] != 0;
    for (Tensor& p : g.params) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      ParamState& st = state(p);
      if (st.tensors.empty()) {
        st.numbers["step"] = 0;
        st.tensors["exp_avg"] = zeros_like(p);
        st.tensors["exp_avg_sq"] = zeros_like(p);
        if (amsgrad) st.tensors["max_exp_avg_sq"] = zeros_like(p);
      }
      const double step = ++st.numbers["step"];
      // The fused kernel negates for maximize itself, unless L2 weight
      // decay (added after the negation) is applied here first.
      bool negate = maximize;
      if (weight_decay != 0) {
        if (decoupled) {
          p.mul_(1 - lr * weight_decay);
        } else {
          if (negate) grad = -grad;
          negate = false;
          grad = grad.add(p, weight_decay);
        }
      }
      Tensor& exp_avg = st.tensors["exp_avg"];
      Tensor& exp_avg_sq = st.tensors["exp_avg_sq"];
      if (!amsgrad && detail::run_kernel_override(
                          "core::adam_step", {grad}, {p, exp_avg, exp_avg_sq},
                          {lr, beta1, beta2, eps, static_cast<int64_t>(step), int64_t{negate}}))
        continue;
      if (negate) grad = -grad;
      exp_avg.mul_(beta1).add_(grad, 1 - beta1);
      exp_avg_sq.mul_(beta2).add_(grad * grad, 1 - beta2);
      const double bias_correction1 = 1 - std::pow(beta1, step);
      const double bias_correction2_sqrt = std::sqrt(1 - std::pow(beta2, step));
      Tensor second = exp_avg_sq;
      if (amsgrad) {
        Tensor& max_sq = st.tensors.at("max_exp_avg_sq");
        max_sq.copy_(maximum(max_sq, exp_avg_sq));
        second = max_sq;
      }
      const Tensor denom = second.sqrt() / bias_correction2_sqrt + eps;
      p.add_(exp_avg / denom, -lr / bias_correction1);
    }
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamOptions options)
    : AdamW(std::vector<ParamGroup>{ParamGroup{std::move(params), {}}}, options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamOptions options)
    : Adam("AdamW", std::move(groups), options, 1e-2) {}

void AdamW::step() { update(true); }

}  // namespace bp::optim
