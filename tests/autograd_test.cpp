// The autograd engine on the default backend (cpu_onednn): the order nodes
// run in, several roots, leaf accumulation, retain_graph and the release of
// saved tensors, hooks, thread-local grad mode, and gradients through
// broadcasting and views of views (gradient dtypes and the recorded ops'
// backward functions: autograd_dtype_test.cpp). Expected gradients are
// derived by hand in the comments (or by plain host loops).
#include <backplane/backplane.h>
#include <backplane/debug.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "autograd_util.h"
#include "test_util.h"

namespace {

using bp::DType;
using bp::Tensor;
using namespace bp::testing;  // leaf, constant, values, Values, message_of

// --- order of execution ---------------------------------------------------------

TEST(AutogradEngine, DiamondRunsEachNodeOnceAfterAllItsConsumers) {
  // a = 2x; b = 3a; c = a*a; d = b + c. dd/da = 3 + 2a is only complete once
  // both b's and c's gradients have arrived, so a's hook must run after
  // theirs, once. dd/dx = 2 (3 + 4x).
  Tensor x = leaf({1, 2});
  Tensor a = x * 2, b = a * 3, c = a * a;
  std::vector<std::string> order;
  Tensor seen_at_a;
  a.register_hook([&](const Tensor& g) {
    order.push_back("a");
    seen_at_a = g.clone();
    return Tensor();
  });
  b.register_hook([&](const Tensor&) {
    order.push_back("b");
    return Tensor();
  });
  c.register_hook([&](const Tensor&) {
    order.push_back("c");
    return Tensor();
  });
  (b + c).sum().backward();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order.back(), "a");
  EXPECT_EQ(values(seen_at_a), (Values{3 + 2 * 2, 3 + 2 * 4}));
  EXPECT_EQ(values(x.grad()), (Values{2 * (3 + 4 * 1), 2 * (3 + 4 * 2)}));
}

TEST(AutogradEngine, LeafUsedTwiceAccumulatesOnceWithTheSum) {
  // y = 2x + 5x: the leaf's hook runs once, with 2 + 5.
  Tensor x = leaf({1, 2, 3});
  int calls = 0;
  Tensor seen;
  x.register_hook([&](const Tensor& g) {
    ++calls;
    seen = g.clone();
    return Tensor();
  });
  (x * 2 + x * 5).sum().backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(values(seen), (Values{7, 7, 7}));
  EXPECT_EQ(values(x.grad()), (Values{7, 7, 7}));

  // Both operands of one node are the same leaf: d(x*x)/dx = 2x.
  Tensor x2 = leaf({1, 2, 3});
  (x2 * x2).sum().backward();
  EXPECT_EQ(values(x2.grad()), (Values{2, 4, 6}));
}

TEST(AutogradEngine, SeveralRootsInOnePass) {
  // y1 = sum(3x), y2 = sum(x*x) share x: grads add, 3 + 2x; a shared
  // intermediate runs once.
  Tensor x = leaf({1, 2});
  Tensor h = x * 1;
  int calls = 0;
  h.register_hook([&](const Tensor&) {
    ++calls;
    return Tensor();
  });
  Tensor y1 = (h * 3).sum(), y2 = (h * h).sum();
  bp::backward({y1, y2});
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(values(x.grad()), (Values{5, 7}));

  // Explicit gradients, parallel to the roots; an undefined one means 1.
  Tensor z = leaf({1, 2});
  Tensor r1 = z * 2, r2 = (z * z).sum();
  bp::backward({r1, r2}, {constant({10, 100}, {2}), Tensor()});
  EXPECT_EQ(values(z.grad()), (Values{20 + 2, 200 + 4}));

  Tensor w = leaf({1});
  EXPECT_THROW(bp::backward({w * 2, w * 3}, {Tensor()}), bp::AutogradError);
  EXPECT_THROW(bp::backward({constant({1}, {1})}), bp::AutogradError);
}

TEST(AutogradEngine, NonLeafRetainedGradAccumulatesAcrossPasses) {
  Tensor x = leaf({1, 2});
  Tensor h = x * 3;
  h.retain_grad();
  Tensor s = (h * 2).sum();
  s.backward({}, /*retain_graph=*/true);
  s.backward();
  EXPECT_EQ(values(h.grad()), (Values{4, 4}));
  EXPECT_EQ(values(x.grad()), (Values{12, 12}));
}

// --- retain_graph and saved tensors ---------------------------------------------

TEST(AutogradEngine, SavedTensorsAreReleasedAfterBackward) {
  Tensor x = leaf({1, 2});
  Tensor s = (x.exp() * x).sum();
  s.backward();
  const std::string msg = message_of<bp::AutogradError>([&] { s.backward(); });
  EXPECT_NE(msg.find("retain_graph"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Backward"), std::string::npos) << "names the node: " << msg;

  // A graph whose nodes save nothing can run again (as in PyTorch).
  Tensor y = leaf({1, 2});
  Tensor t = (y + 1).sum();
  t.backward();
  t.backward();
  EXPECT_EQ(values(y.grad()), (Values{2, 2}));
}

TEST(AutogradEngine, RetainGraphKeepsEveryPassWorking) {
  // d(sum exp(x))/dx = exp(x), three times.
  Tensor x = leaf({0, 1});
  Tensor s = x.exp().sum();
  for (int i = 0; i < 3; ++i) s.backward({}, /*retain_graph=*/true);
  const Values g = values(x.grad());
  EXPECT_NEAR(g[0], 3 * std::exp(0.0), 1e-5);
  EXPECT_NEAR(g[1], 3 * std::exp(1.0), 1e-5);
}

TEST(AutogradEngine, GradientsAreNotRecorded) {
  Tensor x = leaf({1, 2});
  (x * x).sum().backward();
  EXPECT_FALSE(x.grad().requires_grad());
  EXPECT_TRUE(bp::GradMode::is_enabled()) << "backward restores grad mode";
}

// --- hooks ----------------------------------------------------------------------

TEST(AutogradHooks, NonLeafHookReplacesTheGradientDownstream) {
  // y = x*2, z = y*y: the hook sees dz/dy = 2y = 4x and replaces it by 1;
  // x then gets 1 * 2.
  Tensor x = leaf({1, 3});
  Tensor y = x * 2;
  Tensor seen;
  y.register_hook([&](const Tensor& g) {
    seen = g.clone();
    return bp::ones_like(g);
  });
  (y * y).sum().backward();
  EXPECT_EQ(values(seen), (Values{4, 12}));
  EXPECT_EQ(values(x.grad()), (Values{2, 2}));
}

TEST(AutogradHooks, PostAccumulateHookSeesTheAccumulatedGrad) {
  Tensor x = leaf({1});
  std::vector<double> seen;
  x.register_post_accumulate_grad_hook([&](const Tensor& g) {
    EXPECT_TRUE(g.is_same(x.grad()));
    seen.push_back(g.item<double>());
  });
  (x * 2).sum().backward();
  (x * 3).sum().backward();
  EXPECT_EQ(seen, (std::vector<double>{2, 5}));
  Tensor y = x * 2;
  EXPECT_NE(message_of<bp::AutogradError>([&] {
              y.register_post_accumulate_grad_hook([](const Tensor&) {});
            }).find("needs a leaf"),
            std::string::npos);
}

TEST(AutogradHooks, LeafGradientsAreAccumulatedAsSoonAsTheyAreComplete) {
  // out = (x*3) * w: w's gradient is complete once the last mul has run,
  // before backward goes on through x*3 (what lets DistributedDataParallel
  // reduce gradients while backward runs). Each pass has its own number.
  Tensor x = leaf({1, 2}), w = leaf({3, 4});
  std::vector<std::string> order;
  std::vector<uint64_t> passes;
  w.register_post_accumulate_grad_hook([&](const Tensor&) {
    order.push_back("w");
    passes.push_back(bp::autograd::current_pass());
  });
  Tensor h = x * 3;
  h.register_hook([&](const Tensor&) {
    order.push_back("h");
    return Tensor();
  });
  (h * w).sum().backward();
  EXPECT_EQ(order, (std::vector<std::string>{"w", "h"}));
  (x * w).sum().backward();
  ASSERT_EQ(passes.size(), 2u);
  EXPECT_NE(passes[0], 0u);
  EXPECT_NE(passes[0], passes[1]);
  EXPECT_EQ(bp::autograd::current_pass(), 0u);
}

TEST(AutogradHooks, QueuedCallbacksRunOnceTheWholePassHasFinished) {
  Tensor a = leaf({1}), b = leaf({1});
  std::vector<std::string> order;
  auto note = [&](const char* what) { order.push_back(what); };
  a.register_post_accumulate_grad_hook([&](const Tensor&) {
    note("a");
    bp::autograd::queue_callback([&] {
      note("callback");
      // Every leaf has its gradient when the callback runs.
      EXPECT_TRUE(a.grad().defined() && b.grad().defined());
      bp::autograd::queue_callback([&] { note("queued by the callback"); });
    });
  });
  b.register_post_accumulate_grad_hook([&](const Tensor&) { note("b"); });
  (a * 2 + (b * 3) * 4).sum().backward();
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[2], "callback");
  EXPECT_EQ(order[3], "queued by the callback");
  // Outside a backward pass there is nothing to queue on.
  EXPECT_NE(message_of<bp::AutogradError>([] {
              bp::autograd::queue_callback([] {});
            }).find("no backward pass is running"),
            std::string::npos);
}

TEST(AutogradHooks, LeafHookSeesEachPassNotTheAccumulatedGrad) {
  Tensor x = leaf({1});
  std::vector<double> seen;
  x.register_hook([&](const Tensor& g) {
    seen.push_back(g.item<double>());
    return Tensor();
  });
  (x * 2).sum().backward();
  (x * 3).sum().backward();
  EXPECT_EQ(seen, (std::vector<double>{2, 3}));
  EXPECT_EQ(values(x.grad()), (Values{5}));
}

TEST(AutogradHooks, HookOnATensorThatDoesNotRequireGradIsRefused) {
  Tensor c = constant({1}, {1});
  EXPECT_THROW(c.register_hook([](const Tensor& g) { return g; }), bp::AutogradError);
}

// --- grad mode --------------------------------------------------------------------

TEST(AutogradGradMode, IsThreadLocal) {
  Tensor x = leaf({1});
  bool other_enabled = false;
  {
    bp::NoGradGuard guard;
    std::thread t([&] { other_enabled = bp::GradMode::is_enabled(); });
    t.join();
    EXPECT_FALSE((x * 2).requires_grad());
  }
  EXPECT_TRUE(other_enabled) << "a new thread starts with grad mode on";

  bool other_recorded = true;
  std::thread t([&] {
    bp::NoGradGuard guard;
    other_recorded = (x * 2).requires_grad();
  });
  t.join();
  EXPECT_FALSE(other_recorded);
  EXPECT_TRUE((x * 2).requires_grad()) << "another thread's guard does not reach this one";
}

TEST(AutogradGradMode, GuardsNestAndRestore) {
  {
    bp::NoGradGuard off;
    {
      bp::EnableGradGuard on;
      EXPECT_TRUE(bp::GradMode::is_enabled());
      {
        bp::NoGradGuard off_again;
        EXPECT_FALSE(bp::GradMode::is_enabled());
      }
      EXPECT_TRUE(bp::GradMode::is_enabled());
    }
    EXPECT_FALSE(bp::GradMode::is_enabled());
  }
  EXPECT_TRUE(bp::GradMode::is_enabled());
}

// --- broadcasting and views ---------------------------------------------------------

TEST(AutogradShapes, BroadcastGradientsSumToEachInputShape) {
  // a [2, 1, 3] * b [4, 1] -> [2, 4, 3]; d/da[i][0][k] = sum_j b[j],
  // d/db[j][0] = sum_{i,k} a[i][0][k].
  const Values av = {1, 2, 3, 4, 5, 6}, bv = {1, 10, 100, 1000};
  Tensor a = leaf(av, {2, 1, 3}), b = leaf(bv, {4, 1});
  (a * b).sum().backward();
  double sum_b = 0, sum_a = 0;
  for (double v : bv) sum_b += v;
  for (double v : av) sum_a += v;
  EXPECT_EQ(bp::DimVector(a.grad().sizes()), bp::DimVector({2, 1, 3}));
  EXPECT_EQ(bp::DimVector(b.grad().sizes()), bp::DimVector({4, 1}));
  EXPECT_EQ(values(a.grad()), Values(6, sum_b));
  EXPECT_EQ(values(b.grad()), Values(4, sum_a));
}

TEST(AutogradShapes, ViewsOfViewsReachTheBaseElementsTheyCover) {
  // x [4, 4] = 0..15; v = x.t().narrow(0, 1, 2).select(1, 3): v[i] =
  // x.t()[1 + i][3] = x[3][1 + i], i.e. flat positions 13, 14.
  Values xv(16);
  for (int i = 0; i < 16; ++i) xv[i] = i;
  Tensor x = leaf(xv, {4, 4});
  Tensor v = x.t().narrow(0, 1, 2).select(1, 3);
  EXPECT_EQ(values(v), (Values{13, 14}));
  (v * constant({5, 7}, {2})).sum().backward();
  Values expected(16, 0);
  expected[13] = 5;
  expected[14] = 7;
  EXPECT_EQ(values(x.grad()), expected);
}

TEST(AutogradShapes, OverlappingWindowsSumTheirGradients) {
  // as_strided windows [s, s+2], 0 <= s <= 3: element k gets one per window
  // that contains it. Summing overlapping elements takes scatter_add.
  Tensor y = leaf({1, 2, 3, 4, 5, 6});
  try {
    y.as_strided({4, 3}, {1, 1}).sum().backward();
  } catch (const bp::NotImplementedError& e) {
    GTEST_SKIP() << "the backend lacks a kernel this gradient needs: " << e.what();
  }
  Values counts(6, 0);
  for (int s = 0; s < 4; ++s)
    for (int k = s; k < s + 3; ++k) counts[k] += 1;
  EXPECT_EQ(values(y.grad()), counts);
}

TEST(AutogradShapes, WritesThroughTwoViewsOfANonLeaf) {
  // b = a*1; b[0:2] *= 3; b[1:3] *= 5: b = [3a0, 15a1, 5a2, a3].
  Tensor a = leaf({1, 1, 1, 1});
  Tensor b = a * 1;
  b.narrow(0, 0, 2).mul_(3);
  b.narrow(0, 1, 2).mul_(5);
  EXPECT_EQ(values(b), (Values{3, 15, 5, 1}));
  b.sum().backward();
  EXPECT_EQ(values(a.grad()), (Values{3, 15, 5, 1}));
}

TEST(AutogradShapes, ViewTakenBeforeAWriteToItsBaseFollowsTheNewHistory) {
  // row views y before y *= 3; row then holds 3 x[0], so d(sum row)/dx is 3
  // on row 0 and 0 elsewhere.
  Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  Tensor y = x * 1;
  Tensor row = y.select(0, 0);
  y.mul_(3);
  EXPECT_EQ(values(row), (Values{3, 6}));
  row.sum().backward();
  EXPECT_EQ(values(x.grad()), (Values{3, 3, 0, 0}));
}

// add_ and sub_ write a non-leaf in place and record their node on it (no
// copy of the old values): the gradient reaches both inputs, a broadcast
// operand's is summed, a retained grad moves to the new history, and a
// view taken before the write follows it.
TEST(AutogradInPlace, AddAndSubOnANonLeafRecordInPlace) {
  Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  Tensor b = leaf({10, 20}, {2});
  Tensor y = x * 2;
  y.retain_grad();
  Tensor row = y.select(0, 1);
  const void* memory = y.data_ptr();
  y.add_(b, 3);
  y.sub_(x);
  EXPECT_EQ(y.data_ptr(), memory);
  EXPECT_EQ(y.grad_fn_name(), "SubBackward0");
  EXPECT_EQ(values(y), (Values{31, 62, 33, 64}));
  EXPECT_EQ(values(row), (Values{33, 64}));
  (y * y).sum().backward();
  // d/dx of sum((2x + 3b - x)^2) = 2 y; d/db = 3 * 2y summed over rows.
  EXPECT_EQ(values(x.grad()), (Values{62, 124, 66, 128}));
  EXPECT_EQ(values(b.grad()), (Values{6 * (31 + 33), 6 * (62 + 64)}));
  EXPECT_EQ(values(y.grad()), (Values{62, 124, 66, 128}));
}

// --- accumulating a leaf's first gradient ---------------------------------------------

bool copied(const std::vector<bp::debug::ReachedKernel>& kernels) {
  for (const auto& k : kernels)
    if (k.op == "copy") return true;
  return false;
}

TEST(AutogradAccumulate, AFreshGradientBecomesTheGradWithoutACopy) {
  Tensor w = leaf({1, 2, 3});
  Tensor y = w * 3;
  bp::debug::KernelRecording rec;
  y.backward(bp::full({3}, 2.0));
  EXPECT_FALSE(copied(rec.kernels()));
  EXPECT_EQ(values(w.grad()), (Values{6, 6, 6}));
}

TEST(AutogradAccumulate, AGradientHeldElsewhereIsCopied) {
  // The caller keeps the gradient it passed: changing it later leaves the
  // leaf's grad as it was.
  Tensor w = leaf({1, 2, 3});
  Tensor g = bp::full({3}, 2.0);
  w.backward(g);
  g.add_(1);
  EXPECT_EQ(values(w.grad()), (Values{2, 2, 2}));
  // One gradient reaching two leaves (an addition passes it on to both):
  // the leaves' grads do not share memory.
  Tensor a = leaf({1, 2}), b = leaf({3, 4});
  (a + b).backward(bp::full({2}, 1.0));
  a.grad().add_(5);
  EXPECT_EQ(values(a.grad()), (Values{6, 6}));
  EXPECT_EQ(values(b.grad()), (Values{1, 1}));
  // The same, the shared gradient made inside the pass (mul's), and through
  // a transpose on one side.
  Tensor c = leaf({1, 2}), d = leaf({3, 4});
  ((c + d) * 2).sum().backward();
  c.grad().add_(5);
  EXPECT_EQ(values(c.grad()), (Values{7, 7}));
  EXPECT_EQ(values(d.grad()), (Values{2, 2}));
  Tensor W = leaf({1, 2, 3, 4}, {2, 2}), M = leaf({0, 0, 0, 0}, {2, 2});
  ((W.t() + M) * 3).sum().backward();
  W.grad().add_(1);
  EXPECT_EQ(values(W.grad()), (Values{4, 4, 4, 4}));
  EXPECT_EQ(values(M.grad()), (Values{3, 3, 3, 3}));
  // A hook's result that requires grad is not taken as the gradient itself.
  Tensor h = leaf({1, 2});
  h.register_hook([](const Tensor& g) { return g.detach().requires_grad_(); });
  (h * 2).sum().backward();
  EXPECT_FALSE(h.grad().requires_grad());
}

TEST(AutogradAccumulate, ATransposedMatrixGetsItsGradientInItsOwnLayout) {
  // y = x W^T (Linear): W's gradient G^T x arrives row by row, without a
  // transposing copy; M^T B: M's gradient B G^T likewise.
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor W = leaf({1, -1, 2, 0.5}, {2, 2});
  const bp::TensorOptions f32(DType::Float32);
  Tensor G = bp::from_vector(Values{1, 0, 2, 1, 0, 3}, {3, 2}, f32);
  Tensor y = bp::matmul(x, W.t());
  {
    bp::debug::KernelRecording rec;
    y.backward(G);
    EXPECT_FALSE(copied(rec.kernels()));
  }
  // G^T x = [[1*1+2*3+0*5, 1*2+2*4+0*6], [0*1+1*3+3*5, 0*2+1*4+3*6]]
  EXPECT_TRUE(W.grad().is_contiguous());
  EXPECT_EQ(values(W.grad()), (Values{7, 10, 18, 22}));
  // x's gradient G W = [[1, -1], [2*1+1*2, -2+0.5], [0+3*2, 0+1.5]]
  EXPECT_EQ(values(x.grad()), (Values{1, -1, 4, -1.5, 6, 1.5}));
  Tensor M = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor B = bp::from_vector(Values{1, 0, 0, 1}, {2, 2}, f32);
  bp::matmul(M.t(), B).backward(bp::from_vector(Values{1, 2, 3, 4, 5, 6}, {3, 2}, f32));
  // M's gradient: B G^T = G^T (B is the identity) = [[1, 3, 5], [2, 4, 6]]
  EXPECT_TRUE(M.grad().is_contiguous());
  EXPECT_EQ(values(M.grad()), (Values{1, 3, 5, 2, 4, 6}));
}

// --- gradcheck itself -----------------------------------------------------------------

TEST(AutogradGradcheck, CatchesAWrongGradient) {
  // A hook that doubles the gradient makes the analytic result twice the
  // numerical one.
  Tensor x = bp::from_vector(Values{0.5, -0.25}, {2}, bp::TensorOptions(DType::Float64));
  x.requires_grad_();
  auto wrong = [](const std::vector<Tensor>& in) {
    Tensor y = in[0] * 1;
    // The numerical pass runs under no-grad, where there is nothing to hook.
    if (y.requires_grad()) y.register_hook([](const Tensor& g) { return g * 2; });
    return y;
  };
  const bp::GradcheckResult bad = bp::gradcheck(wrong, {x});
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.message.find("input 0"), std::string::npos) << bad.message;
  const bp::GradcheckResult good =
      bp::gradcheck([](const std::vector<Tensor>& in) { return in[0].exp(); }, {x});
  EXPECT_TRUE(good.ok) << good.message;
  EXPECT_THROW(bp::gradcheck([](const std::vector<Tensor>& in) { return in[0]; },
                             {leaf({1}, DType::Float32)}),
               bp::TypeError);
}

// --- depth ----------------------------------------------------------------------------

TEST(AutogradEngine, LongChainsDoNotRecurse) {
  // 2000 additions of 1: the gradient stays 1.
  Tensor x = leaf({0});
  Tensor y = x;
  for (int i = 0; i < 2000; ++i) y = y + 1;
  y.sum().backward();
  EXPECT_EQ(values(x.grad()), (Values{1}));
}

}  // namespace
