// Autograd graph rules: who requires grad and who is a leaf (AG-1), the
// implicit and explicit root gradient (AG-2), accumulation and clearing
// (AG-3), non-leaf grads and retain_grad (AG-4), a second pass (AG-5),
// no-grad mode (AG-6), broadcasting and views (AG-11) and tensor hooks
// (AG-12). Every expected gradient is worked out by hand in the comments.
#include <backplane/conformance.h>

#include <thread>

#include "autograd_cases.h"
#include "case_checks.h"

namespace bp::conformance {

namespace {

void requires_grad_and_leaves(const Context& ctx) {
  // Only floating tensors may require grad; the refusal changes nothing.
  for (DType d : {DType::Int64, DType::Int32, DType::Bool}) {
    Tensor i = from_vector(std::vector<double>{1, 0, 1}, {3}, ctx.options(d));
    BP_EXPECT_THROWS(i.requires_grad_(), bp::TypeError);
    BP_EXPECT(!i.requires_grad(), "a refused requires_grad_() must leave the flag off");
  }
  for (DType d : {DType::Float32, DType::Float64}) {
    Tensor x = leaf(ctx, {1, 2, 3}, {3}, d);
    BP_EXPECT(x.requires_grad());
    BP_EXPECT(x.is_leaf(), "a tensor the user made is a leaf");
    BP_EXPECT_EQ(x.grad_fn_name(), std::string());
    BP_EXPECT(!x.grad().defined(), "a leaf has no grad before any backward");
  }
  Tensor z = zeros({2}, ctx.options().requires_grad());
  BP_EXPECT(z.requires_grad() && z.is_leaf(), "a factory with requires_grad makes a leaf");

  // A differentiable op with one input requiring grad records itself.
  Tensor x = leaf(ctx, {1, 2, 3});
  Tensor w = host_tensor(ctx, {4, 5, 6}, {3});
  Tensor y = x * w;
  BP_EXPECT(y.requires_grad(), "x * w with x requiring grad must require grad");
  BP_EXPECT(!y.is_leaf(), "an op result is not a leaf");
  BP_EXPECT_EQ(y.grad_fn_name(), std::string("MulBackward0"));
  BP_EXPECT_EQ((w * x).grad_fn_name(), std::string("MulBackward0"));
  BP_EXPECT_EQ((x + w).grad_fn_name(), std::string("AddBackward0"));
  BP_EXPECT_EQ(y.sum().grad_fn_name(), std::string("SumBackward0"));
  BP_EXPECT_EQ(y.sum({0}).grad_fn_name(), std::string("SumBackward1"));
  BP_EXPECT_EQ(y.mean().grad_fn_name(), std::string("MeanBackward0"));
  BP_EXPECT_EQ(y.view({3, 1}).t().grad_fn_name(), std::string("TBackward0"));

  // Nothing requires grad: nothing is recorded.
  Tensor v = w * w;
  BP_EXPECT(!v.requires_grad() && v.is_leaf());
  BP_EXPECT_EQ(v.grad_fn_name(), std::string());

  // Only leaves may change the flag.
  BP_EXPECT_THROWS(y.requires_grad_(false), bp::AutogradError);
  BP_EXPECT(y.requires_grad() && !y.is_leaf(), "a refused requires_grad_(false) changes nothing");
  x.requires_grad_(false);
  BP_EXPECT(!x.requires_grad() && x.is_leaf());
}

void root_gradient(const Context& ctx) {
  // d(sum x^2)/dx = 2x, with the implicit gradient 1 of a 0-d result.
  Tensor x = leaf(ctx, {2, 3, 4});
  (x * x).sum().backward();
  BP_EXPECT_VALUES(x.grad(), {4, 6, 8});

  // A one-element result of rank 1 takes the implicit gradient too.
  Tensor x1 = leaf(ctx, {2, 3, 4});
  Tensor s1 = (x1 * x1).sum({0}, /*keepdim=*/true);
  BP_EXPECT_SHAPE(s1, {1});
  s1.backward();
  BP_EXPECT_VALUES(x1.grad(), {4, 6, 8});

  // Three elements: a gradient is required, of exactly the result's shape.
  Tensor x3 = leaf(ctx, {2, 3, 4});
  Tensor y = x3 * x3;
  const std::string msg = BP_ERROR_MESSAGE(bp::AutogradError, y.backward());
  BP_EXPECT_MENTIONS(msg, "backward");
  BP_EXPECT_THROWS(y.backward(ones({2}, ctx.options())), bp::AutogradError);
  BP_EXPECT_THROWS(y.backward(ones({1, 3}, ctx.options())), bp::AutogradError);
  BP_EXPECT(!x3.grad().defined(), "a refused backward must not touch the leaves' grads");

  // backward(g): g * dy/dx = [1, 2, 3] * 2 * [2, 3, 4].
  y.backward(host_tensor(ctx, {1, 2, 3}, {3}));
  BP_EXPECT_VALUES(x3.grad(), {4, 12, 24});
}

void accumulate_and_clear(const Context& ctx) {
  Tensor x = leaf(ctx, {1, 2});
  (x * 3).sum().backward();
  BP_EXPECT_VALUES(x.grad(), {3, 3});
  (x * 3).sum().backward();
  // A second backward adds to the grad.
  BP_EXPECT_VALUES(x.grad(), {6, 6});

  x.grad().zero_();
  BP_EXPECT_VALUES(x.grad(), {0, 0});
  (x * 3).sum().backward();
  // After zero_() the grad starts from 0.
  BP_EXPECT_VALUES(x.grad(), {3, 3});

  x.set_grad(Tensor());
  BP_EXPECT(!x.grad().defined(), "set_grad(Tensor()) clears the grad (set to none)");
  (x * 5).sum().backward();
  // After set to none the next backward starts fresh.
  BP_EXPECT_VALUES(x.grad(), {5, 5});
}

void non_leaf_grad(const Context& ctx) {
  {
    // Without retain_grad: undefined, with a warning that says what to do.
    Tensor a = leaf(ctx, {1, 2, 3});
    Tensor b = a * 2;
    (b * b).sum().backward();
    WarningCapture warnings;
    BP_EXPECT(!b.grad().defined(), "a non-leaf's grad is not kept without retain_grad()");
    BP_EXPECT_EQ(warnings.messages().size(), std::size_t{1}, "reading it must warn once");
    BP_EXPECT_MENTIONS(warnings.messages()[0], "retain_grad");
    warnings.clear();
    (void)a.grad();
    BP_EXPECT(warnings.messages().empty(), "reading a leaf's grad does not warn");
  }
  {
    // retain_grad: d(sum b^2)/db = 2b = 4a; d/da = 2 * 2b = 8a.
    Tensor a = leaf(ctx, {1, 2, 3});
    Tensor b = a * 2;
    BP_EXPECT(!b.retains_grad());
    b.retain_grad();
    BP_EXPECT(b.retains_grad());
    (b * b).sum().backward();
    WarningCapture warnings;
    BP_EXPECT_VALUES(b.grad(), {4, 8, 12});
    BP_EXPECT_VALUES(a.grad(), {8, 16, 24});
    BP_EXPECT(warnings.messages().empty(), "a retained grad is read without a warning");
  }
  {
    // Only passes through b fill b's retained grad.
    Tensor a = leaf(ctx, {1, 2, 3});
    Tensor b = a.clone();
    b.retain_grad();
    (a * 2).sum().backward();
    BP_EXPECT(!b.grad().defined(), "a pass that does not reach b leaves b.grad undefined");
    BP_EXPECT_VALUES(a.grad(), {2, 2, 2});
    (b * 3).sum().backward();
    BP_EXPECT_VALUES(b.grad(), {3, 3, 3});
    BP_EXPECT_VALUES(a.grad(), {5, 5, 5});
  }
}

void second_backward(const Context& ctx) {
  Tensor x = leaf(ctx, {1, 2, 3});
  Tensor s = (x * x).sum();
  s.backward();
  BP_EXPECT_VALUES(x.grad(), {2, 4, 6});
  const std::string msg = BP_ERROR_MESSAGE(bp::AutogradError, s.backward());
  BP_EXPECT_MENTIONS(msg, "retain_graph");
  // The refused pass must not change the grad.
  BP_EXPECT_VALUES(x.grad(), {2, 4, 6});

  // Kept by the first pass: the second works and accumulates 2x again.
  Tensor x2 = leaf(ctx, {1, 2, 3});
  Tensor s2 = (x2 * x2).sum();
  s2.backward(Tensor(), /*retain_graph=*/true);
  s2.backward();
  BP_EXPECT_VALUES(x2.grad(), {4, 8, 12});
  // The second pass did not keep it.
  BP_EXPECT_THROWS(s2.backward(), bp::AutogradError);
}

void no_grad_mode(const Context& ctx) {
  Tensor x = leaf(ctx, {1, 2, 3});
  BP_EXPECT(GradMode::is_enabled(), "grad mode is on by default");
  {
    NoGradGuard guard;
    BP_EXPECT(!GradMode::is_enabled());
    Tensor y = x * 2;
    BP_EXPECT(!y.requires_grad(), "under NoGradGuard results do not require grad");
    BP_EXPECT(y.is_leaf());
    BP_EXPECT_EQ(y.grad_fn_name(), std::string());
    // A view is not recorded either: it has no history, though it reports
    // requires_grad through its base, as in PyTorch (AG-14).
    Tensor v = x.narrow(0, 0, 2);
    BP_EXPECT(v.is_leaf() && v.grad_fn_name().empty(), "views are not recorded either");
    BP_EXPECT(v.requires_grad(), "a view requires grad when its base does");
    BP_EXPECT_VALUES(y, {2, 4, 6});
    {
      EnableGradGuard enable;
      BP_EXPECT((x * 2).requires_grad(), "EnableGradGuard re-enables recording");
    }
    BP_EXPECT(!GradMode::is_enabled(), "the inner guard restores no-grad on exit");

    // Grad mode is per thread: a thread started here records.
    bool thread_enabled = false, thread_records = false;
    std::thread t([&] {
      thread_enabled = GradMode::is_enabled();
      thread_records = (x * 2).requires_grad();
    });
    t.join();
    BP_EXPECT(thread_enabled && thread_records, "another thread is not under this guard");
  }
  BP_EXPECT(GradMode::is_enabled(), "the guard restores grad mode on exit");
  Tensor z = x * 2;
  BP_EXPECT(z.requires_grad() && z.grad_fn_name() == "MulBackward0");

  // A guard in another thread does not reach this one.
  std::thread t([&] {
    NoGradGuard guard;
    (void)(x * 2);
  });
  t.join();
  BP_EXPECT(GradMode::is_enabled());
  BP_EXPECT((x * 2).requires_grad());
}

void broadcast_gradients(const Context& ctx) {
  // (a + b) with a [3, 1], b [1, 4] and gradient G[i][j] = 4i + j:
  // a.grad[i] = sum_j G[i][j], b.grad[j] = sum_i G[i][j].
  Tensor a = leaf(ctx, {1, 2, 3}, {3, 1});
  Tensor b = leaf(ctx, {10, 20, 30, 40}, {1, 4});
  std::vector<double> g(12), ga(3, 0), gb(4, 0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      g[i * 4 + j] = 4 * i + j;
      ga[i] += g[i * 4 + j];
      gb[j] += g[i * 4 + j];
    }
  Tensor c = a + b;
  BP_EXPECT_SHAPE(c, {3, 4});
  c.backward(host_tensor(ctx, g, {3, 4}));
  BP_EXPECT_SHAPE(a.grad(), {3, 1});
  BP_EXPECT_SHAPE(b.grad(), {1, 4});
  BP_EXPECT_VALUES(a.grad(), ga);
  BP_EXPECT_VALUES(b.grad(), gb);

  // a * b summed: a.grad = sum(b) = 100 per row, b.grad = sum(a) = 6.
  Tensor a2 = leaf(ctx, {1, 2, 3}, {3, 1});
  Tensor b2 = leaf(ctx, {10, 20, 30, 40}, {1, 4});
  (a2 * b2).sum().backward();
  BP_EXPECT_VALUES(a2.grad(), {100, 100, 100});
  BP_EXPECT_VALUES(b2.grad(), {6, 6, 6, 6});

  // A 0-d operand against [2, 2]: the gradient is the sum of the other.
  Tensor s = leaf(ctx, {3}, {});
  Tensor m = host_tensor(ctx, {1, 2, 3, 4}, {2, 2});
  (s * m).sum().backward();
  BP_EXPECT_SHAPE(s.grad(), {});
  BP_EXPECT_VALUES(s.grad(), {10});
}

void view_gradients(const Context& ctx) {
  // narrow(0, 2, 3) of [6]: only elements 2..4 get the weights.
  Tensor x = leaf(ctx, {1, 2, 3, 4, 5, 6});
  (x.narrow(0, 2, 3) * host_tensor(ctx, {7, 8, 9}, {3})).sum().backward();
  BP_EXPECT_VALUES(x.grad(), {0, 0, 7, 8, 9, 0});

  // A view of a view: x [2, 3] -> t() [3, 2] -> select(1, 1) = x[1][:].
  Tensor x2 = leaf(ctx, {1, 2, 3, 4, 5, 6}, {2, 3});
  x2.t().select(1, 1).backward(host_tensor(ctx, {1, 2, 3}, {3}));
  BP_EXPECT_VALUES(x2.grad(), {0, 0, 0, 1, 2, 3});

  // expand [3, 1] -> [3, 4]: each element is used 4 times.
  Tensor x3 = leaf(ctx, {1, 2, 3}, {3, 1});
  x3.expand({3, 4}).sum().backward();
  BP_EXPECT_VALUES(x3.grad(), {4, 4, 4});

  // A stepped slice: elements 0, 2, 4.
  Tensor x4 = leaf(ctx, {1, 2, 3, 4, 5});
  x4.slice(0, 0, None, 2).backward(host_tensor(ctx, {1, 2, 3}, {3}));
  BP_EXPECT_VALUES(x4.grad(), {1, 0, 2, 0, 3});
}

void hooks(const Context& ctx) {
  // On a leaf, a hook's result replaces the gradient accumulated.
  Tensor x = leaf(ctx, {1, 2, 3});
  x.register_hook([](const Tensor& g) { return g * 2; });
  (x * x).sum().backward();
  // The hook doubles d(sum x^2)/dx = 2x.
  BP_EXPECT_VALUES(x.grad(), {4, 8, 12});

  // On a non-leaf, the hook sees d(sum(y * w))/dy = w and replaces it by w + 1,
  // which then flows back through y = 3x.
  Tensor x2 = leaf(ctx, {1, 2, 3});
  Tensor y = x2 * 3;
  Tensor seen;
  y.register_hook([&seen](const Tensor& g) {
    seen = g.clone();
    return g + 1;
  });
  (y * host_tensor(ctx, {1, 2, 3}, {3})).sum().backward();
  BP_EXPECT(seen.defined(), "the hook of a non-leaf on the path must be called");
  BP_EXPECT_VALUES(seen, {1, 2, 3});
  // dy/dx = 3 times the replaced gradient w + 1.
  BP_EXPECT_VALUES(x2.grad(), {6, 9, 12});

  // A hook that returns nothing observes only; hooks run in order.
  Tensor x3 = leaf(ctx, {1, 2});
  int calls = 0;
  x3.register_hook([&calls](const Tensor&) {
    ++calls;
    return Tensor();
  });
  x3.register_hook([](const Tensor& g) { return g * 10; });
  x3.register_hook([](const Tensor& g) { return g + 1; });
  (x3 * 2).sum().backward();
  BP_EXPECT_EQ(calls, 1);
  // The hooks turn the gradient 2 into 2 * 10 + 1.
  BP_EXPECT_VALUES(x3.grad(), {21, 21});
}

}  // namespace

void add_autograd_cases(Suite& suite) {
  auto add = [&suite](const char* name, std::vector<std::string> ids, void (*fn)(const Context&)) {
    suite.add({std::string("autograd.") + name, std::move(ids), kAutogradCategory, fn});
  };
  add("requires_grad_and_leaves", {"AG-1"}, requires_grad_and_leaves);
  add("root_gradient", {"AG-2"}, root_gradient);
  add("accumulate_and_clear", {"AG-3"}, accumulate_and_clear);
  add("non_leaf_grad", {"AG-4"}, non_leaf_grad);
  add("second_backward", {"AG-5"}, second_backward);
  add("no_grad_mode", {"AG-6"}, no_grad_mode);
  add("broadcast_gradients", {"AG-11"}, broadcast_gradients);
  add("view_gradients", {"AG-11"}, view_gradients);
  add("hooks", {"AG-12"}, hooks);
  add_autograd_inplace_cases(suite);
  add_autograd_gradcheck_cases(suite);
  add_autograd_view_cases(suite);
  add_autograd_corner_cases(suite);
}

}  // namespace bp::conformance
