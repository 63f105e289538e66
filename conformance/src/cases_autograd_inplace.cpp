// Autograd and in-place writes: refused on leaves that require grad and their
// views (AG-7), saved tensors checked by version (AG-8), in-place ops on
// non-leaves recorded, through views too (AG-9); clone, detach, detach_,
// data (CP-1..CP-5); and the optimizer step that combines them.
#include <backplane/conformance.h>

#include <cmath>

#include "autograd_cases.h"
#include "case_checks.h"
#include "case_util.h"

namespace bp::conformance {

namespace {

void inplace_on_leaves(const Context& ctx) {
  Tensor x = leaf(ctx, {1, 2, 3});
  const std::string msg = BP_ERROR_MESSAGE(bp::AutogradError, x.add_(1));
  BP_EXPECT_MENTIONS(msg, "add_", "leaf");
  BP_EXPECT_THROWS(x.zero_(), bp::AutogradError);
  BP_EXPECT_THROWS(x.mul_(host_tensor(ctx, {2, 2, 2}, {3})), bp::AutogradError);
  BP_EXPECT_THROWS(x.copy_(host_tensor(ctx, {0, 0, 0}, {3})), bp::AutogradError);
  BP_EXPECT_THROWS(x.relu_(), bp::AutogradError);
  // Refused in-place ops must leave the leaf unchanged.
  BP_EXPECT_VALUES(x, {1, 2, 3});

  // A view of such a leaf is refused too: it writes the leaf's memory.
  Tensor v = x.narrow(0, 1, 2);
  const std::string vmsg = BP_ERROR_MESSAGE(bp::AutogradError, v.mul_(2));
  BP_EXPECT_MENTIONS(vmsg, "view");
  BP_EXPECT_THROWS(x[0].fill_(5), bp::AutogradError);
  BP_EXPECT_VALUES(x, {1, 2, 3});

  // Both are allowed without recording, and the leaf stays a leaf.
  {
    NoGradGuard guard;
    x.add_(1);
    v.mul_(2);
  }
  BP_EXPECT_VALUES(x, {2, 6, 8});
  BP_EXPECT(x.is_leaf() && x.requires_grad() && x.grad_fn_name().empty());
  (x * x).sum().backward();
  // The graph uses the values written under no-grad.
  BP_EXPECT_VALUES(x.grad(), {4, 12, 16});
}

void saved_tensor_versions(const Context& ctx) {
  // x * x saves x (version 0); x.add_(1) makes it version 1.
  Tensor a = leaf(ctx, {1, 2, 3});
  Tensor x = a * 1;
  Tensor y = x * x;
  x.add_(1);
  const std::string msg = BP_ERROR_MESSAGE(bp::AutogradError, y.sum().backward());
  BP_EXPECT_MENTIONS(msg, "MulBackward0", "version 0", "version 1");

  // A write through a view bumps the shared counter just as well.
  Tensor a2 = leaf(ctx, {1, 2, 3});
  Tensor x2 = a2 * 1;
  Tensor y2 = x2.exp();  // saves its own result
  y2.narrow(0, 0, 1).zero_();
  BP_EXPECT_THROWS(y2.sum().backward(), bp::AutogradError);

  // x * 2 saves only the constant: modifying x afterwards is harmless, and
  // the gradient is still 2 (from y = x * 2 and x = a * 1).
  Tensor a3 = leaf(ctx, {1, 2, 3});
  Tensor x3 = a3 * 1;
  Tensor y3 = x3 * 2;
  x3.zero_();
  y3.backward(ones({3}, ctx.options()));
  BP_EXPECT_VALUES(a3.grad(), {2, 2, 2});
}

void inplace_on_non_leaves(const Context& ctx) {
  // y = relu(3x) in place: the gradient is 3 where 3x > 0, else 0.
  Tensor x = leaf(ctx, {-1, 2, -3, 4});
  Tensor y = x * 3;
  Tensor& r = y.relu_();
  BP_EXPECT(&r == &y, "relu_ returns self");
  BP_EXPECT_VALUES(y, {0, 6, 0, 12});
  BP_EXPECT_EQ(y.grad_fn_name(), std::string("ReluBackward0"));
  y.sum().backward();
  BP_EXPECT_VALUES(x.grad(), {0, 3, 0, 3});

  // In place through a view of a non-leaf rewrites the base's history:
  // b = [a0, 10 a1, 10 a2, a3], so d(sum b)/da = [1, 10, 10, 1].
  Tensor a = leaf(ctx, {1, 2, 3, 4});
  Tensor b = a * 1;
  b.index({Slice(1, 3)}).mul_(10);
  BP_EXPECT_VALUES(b, {1, 20, 30, 4});
  BP_EXPECT(!b.is_leaf() && b.requires_grad());
  b.sum().backward();
  BP_EXPECT_VALUES(a.grad(), {1, 10, 10, 1});

  // y = exp(2a) + a, built in place: dy/da = 2 exp(2a) + 1.
  const std::vector<double> av = {0.5, -1, 0.25};
  Tensor a2 = leaf(ctx, av);
  Tensor y2 = a2 * 2;
  y2.exp_();
  y2.add_(a2);
  y2.sum().backward();
  BP_EXPECT_CLOSE(a2.grad(), 1e-5, 1e-6,
                  host_map(av, [](double v) { return 2 * std::exp(2 * v) + 1; }));

  // A tensor outside the graph joins it when an operand requires grad.
  Tensor t = host_tensor(ctx, {1, 1, 1}, {3});
  Tensor w = leaf(ctx, {1, 2, 3});
  t.mul_(w);
  BP_EXPECT(t.requires_grad() && !t.is_leaf(), "t *= w with w requiring grad records");
  t.backward(host_tensor(ctx, {1, 2, 3}, {3}));
  // D(t * w)/dw = t = 1.
  BP_EXPECT_VALUES(w.grad(), {1, 2, 3});
}

void clone_in_graph(const Context& ctx) {
  Tensor a = leaf(ctx, {1, 2, 3});
  Tensor b = a.clone();
  BP_EXPECT(b.requires_grad() && !b.is_leaf());
  BP_EXPECT_EQ(b.grad_fn_name(), std::string("CloneBackward0"));
  (b * b).sum().backward();
  // The gradient reaches the clone's source.
  BP_EXPECT_VALUES(a.grad(), {2, 4, 6});
  {
    WarningCapture warnings;
    BP_EXPECT(!b.grad().defined(), "a clone is a non-leaf: no grad without retain_grad()");
  }

  // A clone of a transposed view: the gradient lands in the source's layout.
  Tensor m = leaf(ctx, {1, 2, 3, 4, 5, 6}, {2, 3});
  m.t().clone().backward(host_tensor(ctx, {10, 40, 20, 50, 30, 60}, {3, 2}));
  BP_EXPECT_VALUES(m.grad(), {10, 20, 30, 40, 50, 60});

  // Only a used in the loss: b's retained grad stays undefined.
  Tensor a2 = leaf(ctx, {1, 2, 3});
  Tensor b2 = a2.clone();
  b2.retain_grad();
  (a2 * 2).sum().backward();
  BP_EXPECT(!b2.grad().defined());
}

void detach_shares_memory_and_version(const Context& ctx) {
  Tensor x = leaf(ctx, {1, 2, 3});
  Tensor d = x.detach();
  BP_EXPECT_EQ(location(d), location(x), "detach() keeps the memory");
  BP_EXPECT(!d.requires_grad() && d.is_leaf() && d.grad_fn_name().empty());
  const uint32_t v0 = x.version();
  d.add_(1);  // allowed: d does not require grad
  BP_EXPECT_EQ(x.version(), v0 + 1, "detach() shares the version counter");
  BP_EXPECT_VALUES(x, {2, 3, 4});

  // Detaching a non-leaf gives a leaf too.
  Tensor y = x * 2;
  Tensor dy = y.detach();
  BP_EXPECT(!dy.requires_grad() && dy.is_leaf());
  BP_EXPECT(y.requires_grad() && !y.is_leaf(), "detach() leaves the original in the graph");

  // The shared counter lets autograd see writes made through the detached alias.
  Tensor x2 = leaf(ctx, {1, 2, 3});
  Tensor y2 = x2 * x2;
  x2.detach().mul_(2);
  const std::string msg = BP_ERROR_MESSAGE(bp::AutogradError, y2.sum().backward());
  BP_EXPECT_MENTIONS(msg, "MulBackward0");
}

void detach_in_place(const Context& ctx) {
  Tensor x = leaf(ctx, {1, 2, 3});
  Tensor y = x * 2;
  Tensor& r = y.detach_();
  BP_EXPECT(&r == &y && r.is_same(y), "detach_() returns self");
  BP_EXPECT(!y.requires_grad() && y.is_leaf() && y.grad_fn_name().empty());
  BP_EXPECT_VALUES(y, {2, 4, 6});

  x.detach_();
  BP_EXPECT(!x.requires_grad() && x.is_leaf(), "a leaf detached in place stops requiring grad");

  Tensor x2 = leaf(ctx, {1, 2, 3});
  Tensor v = (x2 * 2).narrow(0, 0, 2);
  const std::string msg = BP_ERROR_MESSAGE(bp::AutogradError, v.detach_());
  BP_EXPECT_MENTIONS(msg, "detach()");
  BP_EXPECT(v.requires_grad() && !v.is_leaf(), "a refused detach_() changes nothing");
}

void data_hides_writes(const Context& ctx) {
  Tensor x = leaf(ctx, {1, 2, 3});
  Tensor d = x.data();
  BP_EXPECT_EQ(location(d), location(x), "data() keeps the memory");
  BP_EXPECT(!d.requires_grad() && d.is_leaf());
  const uint32_t v0 = x.version();
  d.zero_();
  BP_EXPECT_EQ(x.version(), v0, "data() has a version counter of its own");
  // But the same memory.
  BP_EXPECT_VALUES(x, {0, 0, 0});

  // The documented hazard: y = x * x saved x = [1, 2, 3]; doubling it
  // through data() goes unnoticed and backward uses 2 * x_new = [4, 8, 12]
  // instead of 2 * x_old = [2, 4, 6].
  Tensor x2 = leaf(ctx, {1, 2, 3});
  Tensor y2 = x2 * x2;
  x2.data().mul_(2);
  y2.backward(ones({3}, ctx.options()));
  BP_EXPECT_VALUES(x2.grad(), {4, 8, 12});
}

void copies_outside_graph(const Context& ctx) {
  Tensor x = leaf(ctx, {1, 2, 3});
  for (int order = 0; order < 2; ++order) {
    Tensor c = order == 0 ? x.clone().detach() : x.detach().clone();
    const char* what = order == 0 ? "clone().detach()" : "detach().clone()";
    BP_EXPECT(!c.shares_storage(x) && location(c) != location(x), what, ": new memory");
    BP_EXPECT(!c.requires_grad() && c.is_leaf() && c.grad_fn_name().empty(), what);
    BP_EXPECT_VALUES(c, {1, 2, 3});
    const uint32_t v0 = x.version();
    c.add_(1);
    BP_EXPECT_VALUES(x, {1, 2, 3});  // writes to the copy do not reach x
    BP_EXPECT_EQ(x.version(), v0, what, ": nor x's version");
  }
}

void sgd_step(const Context& ctx) {
  // loss = sum(p^2), grad 2p; p -= 0.25 * grad gives p * 0.5 each step
  // (exact in binary floating point).
  Tensor p = leaf(ctx, {1, -2, 4});
  const double lr = 0.25;
  BP_EXPECT_THROWS(p.sub_(p.detach() * lr), bp::AutogradError);
  for (int step = 0; step < 2; ++step) {
    (p * p).sum().backward();
    {
      NoGradGuard guard;
      p -= p.grad() * lr;
    }
    p.grad().zero_();
  }
  BP_EXPECT_VALUES(p, {0.25, -0.5, 1});
  BP_EXPECT(p.is_leaf() && p.requires_grad(), "the step keeps p a leaf that requires grad");
  BP_EXPECT_VALUES(p.grad(), {0, 0, 0});
  (p * p).sum().backward();
  // The next pass starts from the zeroed grad.
  BP_EXPECT_VALUES(p.grad(), {0.5, -1, 2});
}

}  // namespace

void add_autograd_inplace_cases(Suite& suite) {
  auto add = [&suite](const char* name, std::vector<std::string> ids, void (*fn)(const Context&)) {
    suite.add({std::string("autograd.") + name, std::move(ids), kAutogradCategory, fn});
  };
  add("inplace_on_leaves", {"AG-7"}, inplace_on_leaves);
  add("saved_tensor_versions", {"AG-8", "IP-7"}, saved_tensor_versions);
  add("inplace_on_non_leaves", {"AG-9"}, inplace_on_non_leaves);
  add("clone_in_graph", {"CP-1", "AG-4"}, clone_in_graph);
  add("detach", {"CP-2", "AG-8"}, detach_shares_memory_and_version);
  add("detach_", {"CP-3"}, detach_in_place);
  add("data", {"CP-4"}, data_hides_writes);
  add("copies_outside_graph", {"CP-5"}, copies_outside_graph);
  add("sgd_step", {"AG-3", "AG-6", "AG-7"}, sgd_step);
}

}  // namespace bp::conformance
