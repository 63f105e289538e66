// SGD with momentum, dampening, Nesterov, weight decay and maximize
// (PyTorch 1.13's _single_tensor_sgd); with momentum, a backend's fused
// core::sgd_step runs in place of the composite where it has one.
#include <backplane/autograd.h>
#include <backplane/error.h>
#include <backplane/named_ops.h>
#include <backplane/ops.h>
#include <backplane/optim/optimizer.h>

#include "../internal.h"

namespace bp::optim {

namespace {
std::map<std::string, double> sgd_defaults(const SGDOptions& o) {
  return {{"lr", o.lr},
          {"momentum", o.momentum},
          {"dampening", o.dampening},
          {"weight_decay", o.weight_decay},
          {"nesterov", o.nesterov ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(std::vector<ParamGroup>{ParamGroup{std::move(params), {}}}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer("SGD", std::move(groups), sgd_defaults(options)) {
  add_pending();
}

void SGD::check_group(const ParamGroup& g) const {
  BP_CHECK(g["lr"] >= 0, "[SGD] Invalid learning rate: ", g["lr"]);
  BP_CHECK(g["momentum"] >= 0, "[SGD] Invalid momentum value: ", g["momentum"]);
  BP_CHECK(g["weight_decay"] >= 0, "[SGD] Invalid weight_decay value: ", g["weight_decay"]);
  BP_CHECK(g["nesterov"] == 0 || (g["momentum"] > 0 && g["dampening"] == 0),
           "[SGD] Nesterov momentum requires a momentum and zero dampening");
}

void SGD::step() {
  NoGradGuard no_grad;
  for (ParamGroup& g : param_groups()) {
    const double lr = g["lr"], momentum = g["momentum"], dampening = g["dampening"],
                 weight_decay = g["weight_decay"];
    const bool nesterov = g["nesterov"] != 0, maximize = g["maximize"] != 0;
    for (Tensor& p : g.params) {
      Tensor d = p.grad();
      if (!d.defined()) continue;
      // The fused kernel negates for maximize itself, unless weight decay
      // (added after the negation) is applied here first.
      bool negate = maximize;
      if (weight_decay != 0) {
        if (negate) d = -d;
        negate = false;
        d = d.add(p, weight_decay);
      }
      if (momentum != 0) {
        ParamState& st = state(p);
        auto it = st.tensors.find("momentum_buffer");
        const bool first = it == st.tensors.end();
        // A buffer for the kernel to write is made only where there is one
        // (run_kernel_override looks the kernel up again either way).
        Tensor buf = !first                              ? it->second
                     : has_override("core::sgd_step", d) ? empty_like(p)
                                                         : Tensor();
        if (buf.defined() &&
            detail::run_kernel_override(
                "core::sgd_step", {d}, {p, buf},
                {lr, momentum, dampening, int64_t{nesterov}, int64_t{negate}, int64_t{first}})) {
          if (first) st.tensors.emplace("momentum_buffer", buf);
          continue;
        }
        if (negate) d = -d;
        if (first) {
          it = st.tensors.emplace("momentum_buffer", d.detach().clone()).first;
        } else {
          it->second.mul_(momentum).add_(d, 1 - dampening);
        }
        d = nesterov ? d.add(it->second, momentum) : it->second;
      } else if (negate) {
        d = -d;
      }
      p.add_(d, -lr);
    }
  }
}

}  // namespace bp::optim
