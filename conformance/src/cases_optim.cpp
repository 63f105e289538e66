// Optimisers on the device under test (NN-3): SGD, Adam and AdamW with
// their options, three steps against PyTorch 1.13 (model_fixture.h); groups,
// zero_grad, state dicts that resume a run exactly, schedules and gradient
// clipping.
#include <backplane/autograd.h>
#include <backplane/conformance.h>
#include <backplane/nn.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "case_checks.h"
#include "model_fixture.h"

namespace bp::conformance {

namespace {

using model::part;
using model::vals;

constexpr const char* kCategory = "model";
using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

struct Named {
  const char* name;
  MakeOptimizer make;
};

const std::vector<Named>& optimizers() {
  using namespace optim;
  auto sgd = [](SGDOptions o) {
    return [o](std::vector<Tensor> p) { return std::make_unique<SGD>(std::move(p), o); };
  };
  auto adam = [](AdamOptions o) {
    return [o](std::vector<Tensor> p) { return std::make_unique<Adam>(std::move(p), o); };
  };
  auto adamw = [](AdamOptions o) {
    return [o](std::vector<Tensor> p) { return std::make_unique<AdamW>(std::move(p), o); };
  };
  static const std::vector<Named> all = {
      {"sgd", sgd({.lr = 0.1})},
      {"sgd.momentum", sgd({.lr = 0.1, .momentum = 0.9, .dampening = 0.2, .weight_decay = 0.01})},
      {"sgd.nesterov", sgd({.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true})},
      {"sgd.maximize", sgd({.lr = 0.05, .momentum = 0.5, .maximize = true})},
      {"adam", adam({.lr = 0.01})},
      {"adam.decay",
       adam({.lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1})},
      {"adam.amsgrad", adam({.lr = 0.02, .amsgrad = true, .maximize = true})},
      {"adamw", adamw({.lr = 0.01})},  // AdamW's own default weight decay, 1e-2
      {"adamw.amsgrad", adamw({.lr = 0.01, .weight_decay = 0.05, .amsgrad = true})},
      {"adam.maximize", adam({.lr = 0.01, .maximize = true})},
      {"adamw.maximize", adamw({.lr = 0.01, .maximize = true})},
      {"sgd.maximize.decay",
       sgd({.lr = 0.05, .momentum = 0.5, .weight_decay = 0.1, .maximize = true})},
      {"adam.maximize.decay", adam({.lr = 0.01, .weight_decay = 0.1, .maximize = true})},
  };
  return all;
}

struct Params {
  Tensor p0, p1;
};

Params params(const Context& ctx, DType dt) {
  return {vals(ctx.device(), dt, {3, 4}, 0.2, 1.0).requires_grad_(),
          vals(ctx.device(), dt, {5}, 0.7, 1.0).requires_grad_()};
}

// The gradients of step s, as the script sets them.
void set_grads(const Context& ctx, Params& p, DType dt, int s) {
  p.p0.set_grad(vals(ctx.device(), dt, {3, 4}, 1.1 + s, 0.5));
  p.p1.set_grad(vals(ctx.device(), dt, {5}, 2.3 + s, 0.5));
}

void steps_case(const Context& ctx, const Named& named, DType dt) {
  const double tol = model::tolerance(dt);
  Params p = params(ctx, dt);
  auto opt = named.make({p.p0, p.p1});
  const std::string fixture = std::string("optim.") + named.name;
  for (int s = 0; s < 3; ++s) {
    set_grads(ctx, p, dt, s);
    const uint32_t version = p.p0.version();
    opt->step();
    BP_EXPECT(p.p0.version() != version,
              "step() updates the parameter in place (its version moves)");
    BP_EXPECT(p.p0.is_leaf() && p.p0.requires_grad(),
              "a stepped parameter stays a leaf requiring grad");
    if (s == 0) {
      expect_close(p.p0, part(fixture, 0), tol, tol, "p0 after one step", __FILE__, __LINE__);
      expect_close(p.p1, part(fixture, 1), tol, tol, "p1 after one step", __FILE__, __LINE__);
    }
  }
  expect_close(p.p0, part(fixture, 2), tol, tol, "p0 after three steps", __FILE__, __LINE__);
  expect_close(p.p1, part(fixture, 3), tol, tol, "p1 after three steps", __FILE__, __LINE__);
}

// One step, a state dict into a second optimiser on copies, two more steps
// on each: the same parameters, exactly.
void resume_case(const Context& ctx, const Named& named) {
  const DType dt = DType::Float32;
  Params a = params(ctx, dt);
  auto first = named.make({a.p0, a.p1});
  set_grads(ctx, a, dt, 0);
  first->step();
  Params b{a.p0.detach().clone().requires_grad_(), a.p1.detach().clone().requires_grad_()};
  auto second = named.make({b.p0, b.p1});
  second->load_state_dict(first->state_dict());
  for (int s = 1; s < 3; ++s) {
    set_grads(ctx, a, dt, s);
    set_grads(ctx, b, dt, s);
    first->step();
    second->step();
  }
  BP_EXPECT(equal(a.p0, b.p0) && equal(a.p1, b.p1),
            "an optimiser loaded from a state dict continues as the original");
}

void refusals_case(const Context& ctx) {
  Params p = params(ctx, DType::Float32);
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, optim::SGD({p.p0}, {.lr = -1})),
                     "Invalid learning rate");
  BP_EXPECT_MENTIONS(
      BP_ERROR_MESSAGE(ValueError, optim::SGD({p.p0}, {.lr = 0.1, .nesterov = true})),
      "Nesterov momentum requires a momentum and zero dampening");
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, optim::Adam({p.p0}, {.beta2 = 1.0})),
                     "Invalid beta parameter at index 1");
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, optim::SGD({p.p0, p.p0}, {.lr = 0.1})),
                     "more than one parameter group");
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(AutogradError, optim::SGD({p.p0 * 2}, {.lr = 0.1})),
                     "non-leaf");

  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, optim::SGD(std::vector<Tensor>{}, {.lr = 0.1})),
                     "empty parameter list");

  // A state whose last tensor's shape differs from its parameter's is
  // refused, changing nothing: not the first parameter's state, not the options.
  optim::Adam adam({p.p0, p.p1}, {});
  set_grads(ctx, p, DType::Float32, 0);
  adam.step();
  auto state = adam.state_dict();
  Params q = params(ctx, DType::Float32);
  Tensor wrong = zeros({6}, ctx.options()).requires_grad_();
  optim::Adam other({q.p0, wrong}, {.lr = 0.5});
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, other.load_state_dict(state)), "exp_avg",
                     "shape");
  BP_EXPECT(other.state_dict().state.empty(), "a refused state dict changed the optimiser's state");
  BP_EXPECT_EQ(other.param_groups()[0]["lr"], 0.5, "a refused state dict changed the options");
  optim::Adam fewer({q.p0}, {});
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, fewer.load_state_dict(state)), "doesn't match");
}

void groups_case(const Context& ctx) {
  Params p = params(ctx, DType::Float32);
  const Tensor p1_before = p.p1.detach().clone();
  optim::SGD sgd({optim::ParamGroup{{p.p0}, {}}, optim::ParamGroup{{p.p1}, {{"lr", 0.0}}}},
                 {.lr = 0.5});
  BP_EXPECT_EQ(sgd.param_groups()[0]["lr"], 0.5);
  BP_EXPECT_EQ(sgd.param_groups()[1]["momentum"], 0.0,
               "a group takes the defaults it does not set");
  set_grads(ctx, p, DType::Float32, 0);
  sgd.step();
  BP_EXPECT(equal(p.p1, p1_before), "a group with lr 0 does not move");
  sgd.zero_grad(/*set_to_none=*/false);
  BP_EXPECT_VALUES(p.p1.grad(), {0.0, 0.0, 0.0, 0.0, 0.0});
  sgd.zero_grad();
  BP_EXPECT(!p.p0.grad().defined() && !p.p1.grad().defined(), "zero_grad() sets gradients to none");
  sgd.step();  // no gradients: nothing to do
  BP_EXPECT(equal(p.p1, p1_before));
}

void schedule_case(const Context& ctx) {
  auto lrs = [&](auto make) {
    optim::SGD sgd({zeros({1}, ctx.options()).requires_grad_()}, {.lr = 0.5});
    auto sched = make(sgd);
    std::vector<double> out;
    for (int e = 0; e < 8; ++e) {
      out.push_back(sgd.param_groups()[0]["lr"]);
      sgd.step();
      sched.step();
    }
    return from_vector(out, {8}, TensorOptions(DType::Float64).device(ctx.device()));
  };
  expect_close(lrs([](optim::Optimizer& o) { return optim::StepLR(o, 3, 0.5); }),
               part("sched.step", 0), 1e-12, 1e-12, "StepLR", __FILE__, __LINE__);
  expect_close(lrs([](optim::Optimizer& o) { return optim::CosineAnnealingLR(o, 5, 0.01); }),
               part("sched.cosine", 0), 1e-12, 1e-12, "CosineAnnealingLR", __FILE__, __LINE__);
}

void clip_case(const Context& ctx, const char* name, double norm) {
  Tensor p0 = zeros({3, 4}, ctx.options()).requires_grad_();
  Tensor p1 = zeros({5}, ctx.options()).requires_grad_();
  p0.set_grad(vals(ctx.device(), DType::Float32, {3, 4}, 1.1, 2.0));
  p1.set_grad(vals(ctx.device(), DType::Float32, {5}, 2.3, 2.0));
  const Tensor total = nn::utils::clip_grad_norm_({p0, p1}, 1.5, norm);
  const std::string f = std::string("clip.") + name;
  expect_close(total, part(f, 0), 1e-5, 1e-6, "total norm", __FILE__, __LINE__);
  expect_close(p0.grad(), part(f, 1), 1e-5, 1e-6, "clipped p0.grad", __FILE__, __LINE__);
  expect_close(p1.grad(), part(f, 2), 1e-5, 1e-6, "clipped p1.grad", __FILE__, __LINE__);
}

}  // namespace

int check_fused_updates(const Context& ctx, DType dt) {
  const Tensor probe = ones({1}, ctx.options(dt));
  if (!has_override("core::sgd_step", probe) && !has_override("core::adam_step", probe)) return 0;
  int checked = 0;
  const double rtol = dt == DType::Float32 ? 2e-5 : 1e-12,
               atol = dt == DType::Float32 ? 1e-6 : 1e-13;
  const std::vector<std::string> fusable = {
      "sgd.momentum", "sgd.nesterov",  "sgd.maximize", "sgd.maximize.decay", "adam",
      "adam.decay",   "adam.maximize", "adamw",        "adamw.maximize",     "adam.maximize.decay"};
  const std::vector<std::vector<int64_t>> shapes = {{300, 300}, {5}, {6, 4}};
  auto make = [&] {
    std::vector<Tensor> ps;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      Tensor t = vals(ctx.device(), dt, shapes[i], 0.2 + static_cast<double>(i), 1.0);
      ps.push_back((i == 2 ? t.t() : t).detach().requires_grad_());
    }
    return ps;
  };
  for (const Named& n : optimizers()) {
    if (std::find(fusable.begin(), fusable.end(), n.name) == fusable.end()) continue;
    ++checked;
    std::vector<Tensor> fused = make(), composite = make();
    auto of = n.make(fused), oc = n.make(composite);
    for (int s = 0; s < 3; ++s) {
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        const std::vector<int64_t> shape(fused[i].sizes().begin(), fused[i].sizes().end());
        const Tensor g = vals(ctx.device(), dt, shape, 1.1 + s + static_cast<double>(i), 0.5);
        fused[i].set_grad(g.clone());
        composite[i].set_grad(g.clone());
      }
      of->step();
      CompositeOnlyGuard only;
      oc->step();
    }
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      BP_EXPECT(allclose(fused[i], composite[i], rtol, atol), n.name, " (", dt, "): parameter ", i,
                " after three steps differs from the composite's by ",
                (fused[i] - composite[i]).abs().max().item<double>());
      for (const auto& [key, t] : oc->state(composite[i]).tensors)
        BP_EXPECT(allclose(of->state(fused[i]).tensors.at(key), t, rtol, atol), n.name, " (", dt,
                  "): state '", key, "' of parameter ", i, " differs from the composite's");
    }
  }
  return checked;
}

void add_optim_cases(Suite& suite) {
  const std::vector<std::string> ids = {"NN-3"};
  for (const Named& n : optimizers()) {
    for (DType dt : {DType::Float32, DType::Float64})
      suite.add({std::string("model.optim.") + n.name + "." + std::string(name(dt)), ids, kCategory,
                 [&n, dt](const Context& ctx) { steps_case(ctx, n, dt); }});
    suite.add({std::string("model.optim.") + n.name + ".resume", ids, kCategory,
               [&n](const Context& ctx) { resume_case(ctx, n); }});
  }
  suite.add({"model.optim.refusals", ids, kCategory, refusals_case});
  suite.add({"model.optim.groups", ids, kCategory, groups_case});
  suite.add({"model.optim.schedules", ids, kCategory, schedule_case});
  const struct {
    const char* name;
    double norm;
  } clips[] = {{"2", 2.0}, {"3", 3.0}, {"inf", std::numeric_limits<double>::infinity()}};
  for (const auto& c : clips)
    suite.add({std::string("model.clip_grad_norm.") + c.name, ids, kCategory,
               [c](const Context& ctx) { clip_case(ctx, c.name, c.norm); }});
}

}  // namespace bp::conformance
