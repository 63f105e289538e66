// Views and autograd (AG-14): gradients through chains of views of
// self-overlapping tensors, views whose requires_grad follows their base's
// rewritten history, and in-place ops on views made under no-grad or of
// leaves. Expected values are PyTorch 1.13's, as printed by
// conformance/fixtures/torch_reference.py (the case names there are given
// beside each check).
#include <backplane/conformance.h>

#include "autograd_cases.h"
#include "case_checks.h"

namespace bp::conformance {

namespace {

// x.grad after fn(x).sum().backward() for a float32 leaf x.
std::vector<double> grad_of(const Context& ctx, const std::vector<double>& x_values,
                            const std::function<Tensor(const Tensor&)>& fn) {
  Tensor x = leaf(ctx, x_values);
  fn(x).sum().backward();
  return x.grad().to_vector<double>();
}

std::vector<double> ones_vec(std::size_t n) { return std::vector<double>(n, 1.0); }

void overlapping_view_chains(const Context& ctx) {
  using V = std::vector<double>;
  // a, b, c: a view of an expanded or unfolded source is not multiplied by
  // the number of times the source repeats an element.
  BP_EXPECT_EQ(grad_of(ctx, ones_vec(3),
                       [](const Tensor& x) {
                         return x.expand({2, 3}).select(0, 0);
                       }),
               (V{1, 1, 1}));
  BP_EXPECT_EQ(grad_of(ctx, ones_vec(2),
                       [](const Tensor& x) {
                         return x.unsqueeze(0).expand({4, 2}).narrow(0, 0, 1);
                       }),
               (V{1, 1}));
  BP_EXPECT_EQ(
      grad_of(ctx, ones_vec(5), [](const Tensor& x) { return x.unfold(0, 3, 1).select(0, 0); }),
      (V{1, 1, 1, 0, 0}));
  const V iota5{0, 1, 2, 3, 4};
  // c2.unfold_slice, c2.unfold_diagonal, c2.unfold_unfold
  BP_EXPECT_EQ(
      grad_of(ctx, iota5, [](const Tensor& x) { return x.unfold(0, 3, 1).slice(0, 1, None); }),
      (V{0, 1, 2, 2, 1}));
  BP_EXPECT_EQ(grad_of(ctx, iota5, [](const Tensor& x) { return x.unfold(0, 3, 1).diagonal(); }),
               (V{1, 0, 1, 0, 1}));
  BP_EXPECT_EQ(
      grad_of(ctx, iota5, [](const Tensor& x) { return x.unfold(0, 3, 1).unfold(0, 2, 1); }),
      (V{1, 3, 4, 3, 1}));
  // c2.expand_t_select: every element once through an expanded transpose.
  BP_EXPECT_EQ(grad_of(ctx, iota5,
                       [](const Tensor& x) {
                         return x.expand({3, 5}).t().select(1, 2);
                       }),
               (V{1, 1, 1, 1, 1}));
  // c2.unfold_transpose_diagonal_offset1
  BP_EXPECT_EQ(
      grad_of(ctx, iota5,
              [](const Tensor& x) { return x.unfold(0, 3, 1).transpose(0, 1).diagonal(1); }),
      (V{0, 1, 0, 1, 0}));
  // c2.as_strided_overlap_of_x: as_strided counts storage positions.
  BP_EXPECT_EQ(grad_of(ctx, iota5,
                       [](const Tensor& x) {
                         return x.as_strided({3, 3}, {1, 1});
                       }),
               (V{1, 2, 3, 2, 1}));
  // c2.as_strided_on_expand_2x2_s11_o0: as_strided on an expanded source
  // addresses the source's storage (x's five elements).
  BP_EXPECT_EQ(grad_of(ctx, iota5,
                       [](const Tensor& x) {
                         return x.expand({2, 5}).as_strided({2, 2}, {1, 1}, 0);
                       }),
               (V{1, 2, 1, 0, 0}));
}

void view_follows_base_history(const Context& ctx) {
  // d: copying a tensor that requires grad into a view of a plain base.
  Tensor base = zeros({3}, ctx.options());
  Tensor w = base.narrow(0, 1, 2);  // taken before the copy
  Tensor v = base.narrow(0, 0, 2);
  BP_EXPECT(!w.requires_grad());
  Tensor x = leaf(ctx, {1, 2});
  v.copy_(x);
  BP_EXPECT(v.requires_grad(), "a view requires grad once its base does");
  BP_EXPECT(!v.is_leaf());
  BP_EXPECT(base.requires_grad() && !base.is_leaf());
  BP_EXPECT_EQ(base.grad_fn_name(), std::string("CopySlices"));
  BP_EXPECT(w.requires_grad(), "a view taken before the copy follows its base too");
  BP_EXPECT_EQ(w.grad_fn_name(), std::string("AsStridedBackward0"));
  BP_EXPECT_VALUES(base, {1, 2, 0});
  (v * 3).sum().backward(Tensor(), /*retain_graph=*/true);
  BP_EXPECT_VALUES(x.grad(), {3, 3});  // d.x_grad_after_v*3
  (w * 1).sum().backward();
  BP_EXPECT_VALUES(x.grad(), {3, 4});  // d.x_grad_after_w*1_accumulated

  // m.7: an in-place op through a view of a non-leaf rewrites the base.
  Tensor a = leaf(ctx, {1, 1, 1});
  Tensor b = a * 1;
  Tensor view = b.narrow(0, 0, 2);
  view.mul_(host_tensor(ctx, {2, 3}, {2}));
  BP_EXPECT_EQ(view.grad_fn_name(), std::string("AsStridedBackward0"));
  BP_EXPECT_EQ(b.grad_fn_name(), std::string("CopySlices"));
  (b * host_tensor(ctx, {1, 10, 100}, {3})).sum().backward();
  BP_EXPECT_VALUES(a.grad(), {2, 30, 100});
}

void inplace_on_special_views(const Context& ctx) {
  // e: a view made under no-grad, modified in place with grad mode on, is
  // refused whatever the base, and nothing changes.
  {
    Tensor x = leaf(ctx, {1, 1, 1});
    Tensor v;
    {
      NoGradGuard g;
      v = x.narrow(0, 0, 2);
    }
    BP_EXPECT(v.requires_grad() && v.is_leaf() && v.grad_fn_name().empty());  // e.i
    const std::string msg = BP_ERROR_MESSAGE(bp::AutogradError, v.mul_(2));
    BP_EXPECT_MENTIONS(msg, "no_grad", "mul_");
    BP_EXPECT_THROWS(v.zero_(), bp::AutogradError);  // e.iv
    BP_EXPECT_VALUES(x, {1, 1, 1});
    BP_EXPECT_EQ(x.version(), 0u);
  }
  {
    Tensor base = zeros({3}, ctx.options());
    Tensor v;
    {
      NoGradGuard g;
      v = base.narrow(0, 0, 2);
    }
    Tensor y = leaf(ctx, {1, 1});
    BP_EXPECT_THROWS(v.copy_(y), bp::AutogradError);  // e.iii
    BP_EXPECT_VALUES(base, {0, 0, 0});
    BP_EXPECT(!base.requires_grad());
    // Both inside the no-grad block is allowed and not tracked.
    {
      NoGradGuard g;
      v.copy_(y);
    }
    BP_EXPECT_VALUES(base, {1, 1, 0});
    BP_EXPECT(!base.requires_grad());
  }
  // f: every kind of view of a leaf that requires grad is refused in place.
  {
    Tensor x = leaf(ctx, {1, 1, 1});
    BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(bp::AutogradError, x.slice(0, 0, 2).mul_(2)), "view",
                       "leaf");
    BP_EXPECT_THROWS(x.narrow(0, 0, 2).zero_(), bp::AutogradError);
    BP_EXPECT_THROWS(x[0].fill_(5), bp::AutogradError);
    BP_EXPECT_THROWS(x.view({3}).add_(1), bp::AutogradError);
    BP_EXPECT_VALUES(x, {1, 1, 1});
    BP_EXPECT_EQ(x.version(), 0u);
    // A detached alias may write (f.x.detach()[0].fill_(5)): it is outside
    // the graph, and the shared version counter records the write.
    x.detach()[0].fill_(5);
    BP_EXPECT_VALUES(x, {5, 1, 1});
    BP_EXPECT_EQ(x.version(), 1u);
  }
}

}  // namespace

void add_autograd_view_cases(Suite& suite) {
  auto add = [&suite](const char* name, std::vector<std::string> ids, void (*fn)(const Context&)) {
    suite.add({std::string("autograd.") + name, std::move(ids), kAutogradCategory, fn});
  };
  add("overlapping_view_chains", {"AG-14", "AG-11"}, overlapping_view_chains);
  add("view_follows_base_history", {"AG-14", "AG-9"}, view_follows_base_history);
  add("inplace_on_special_views", {"AG-14", "AG-7", "IP-10"}, inplace_on_special_views);
}

}  // namespace bp::conformance
