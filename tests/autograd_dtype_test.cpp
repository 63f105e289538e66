// Gradients of recorded ops on the default backend (cpu_onednn): each
// gradient in its leaf's dtype, add and sub with alpha, broadcast and mixed
// dtypes, and the unary ops' backward functions from the input or result
// they saved. Expected gradients are derived by hand in the comments.
#include <backplane/backplane.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

#include "autograd_util.h"

namespace {

using bp::DType;
using bp::Tensor;
using namespace bp::testing;  // leaf, constant, values, Values

// --- dtypes -----------------------------------------------------------------------

TEST(AutogradDtypes, GradientsTakeTheirLeafsDtype) {
  // a (float32) * b (float64) is float64; each grad has its leaf's dtype:
  // d/da = b, d/db = a.
  Tensor a = leaf({1, 2}, DType::Float32);
  Tensor b = leaf({3, 4}, DType::Float64);
  Tensor c = a * b;
  EXPECT_EQ(c.dtype(), DType::Float64);
  c.sum().backward();
  EXPECT_EQ(a.grad().dtype(), DType::Float32);
  EXPECT_EQ(b.grad().dtype(), DType::Float64);
  EXPECT_EQ(values(a.grad()), (Values{3, 4}));
  EXPECT_EQ(values(b.grad()), (Values{1, 2}));

  // Through an explicit conversion, and with a root gradient of another dtype.
  Tensor x = leaf({1, 2}, DType::Float32);
  Tensor y = x.to(DType::Float64) * 2;
  EXPECT_EQ(y.grad_fn_name(), "MulBackward0");
  y.backward(bp::from_vector(Values{1, 3}, {2}, bp::TensorOptions(DType::Float32)));
  EXPECT_EQ(x.grad().dtype(), DType::Float32);
  EXPECT_EQ(values(x.grad()), (Values{2, 6}));
}

TEST(AutogradDtypes, AddAndSubGradientsCarryAlphaShapeAndDtype) {
  // add(a, b, alpha) = a + alpha * b: d/da = 1, d/db = alpha; sub: -alpha.
  // Same shapes, mixed dtypes (the result is float64; each gradient comes
  // back in its leaf's dtype).
  Tensor a = leaf({1, 2, 3, 4, 5, 6}, {2, 3}, DType::Float32);
  Tensor b = leaf({1, 1, 1, 1, 1, 1}, {2, 3}, DType::Float64);
  Tensor c = bp::add(a, b, 3);
  EXPECT_EQ(c.grad_fn_name(), "AddBackward0");
  c.backward(bp::from_vector(Values{1, 2, 3, 4, 5, 6}, {2, 3}, bp::TensorOptions(DType::Float64)));
  EXPECT_EQ(a.grad().dtype(), DType::Float32);
  EXPECT_EQ(b.grad().dtype(), DType::Float64);
  EXPECT_EQ(values(a.grad()), (Values{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(values(b.grad()), (Values{3, 6, 9, 12, 15, 18}));

  // Broadcast: b [3] against a [2, 3]; b's gradient sums over the rows.
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = leaf({7, 8, 9});
  Tensor z = bp::sub(x, y, 2);
  EXPECT_EQ(z.grad_fn_name(), "SubBackward0");
  z.sum().backward();
  EXPECT_EQ(values(x.grad()), Values(6, 1));
  EXPECT_EQ(bp::DimVector(y.grad().sizes()), bp::DimVector({3}));
  EXPECT_EQ(values(y.grad()), Values(3, -4));

  // Only the first operand needs a gradient, and it is the one broadcast:
  // p [3] against q [2, 3] sums its gradient over q's rows.
  Tensor p = leaf({1, 2, 3});
  Tensor q = constant({1, 2, 3, 4, 5, 6}, {2, 3});
  bp::add(p, q, 5).sum().backward();
  EXPECT_EQ(bp::DimVector(p.grad().sizes()), bp::DimVector({3}));
  EXPECT_EQ(values(p.grad()), Values(3, 2));
}

TEST(AutogradDtypes, UnaryGradientsUseTheSavedInputOrResult) {
  // relu saves its result: d/dx = 1 where y > 0 (0 at x = 0, as in PyTorch).
  Tensor x = leaf({-1, 0, 2});
  Tensor y = x.relu();
  EXPECT_EQ(y.grad_fn_name(), "ReluBackward0");
  y.backward(bp::from_vector(Values{5, 6, 7}, {3}));
  EXPECT_EQ(values(x.grad()), (Values{0, 0, 7}));

  // log saves its input: d/dx = 1 / x; sqrt its result: d/dx = 1 / (2 y)
  // (from the input, 1 / (2 x) would give 0.125 at 4).
  Tensor u = leaf({1, 2, 4});
  u.log().sum().backward();
  EXPECT_EQ(values(u.grad()), (Values{1, 0.5, 0.25}));
  Tensor v = leaf({4});
  v.sqrt().sum().backward();
  EXPECT_EQ(values(v.grad()), (Values{0.25}));

  // clamp with one bound: the gradient passes where that bound holds, the
  // bound itself included; the other side is open.
  Tensor lo = leaf({-1, 0, 3});
  EXPECT_EQ(lo.clamp(0, std::nullopt).grad_fn_name(), "ClampBackward1");
  lo.clamp(0, std::nullopt).sum().backward();
  EXPECT_EQ(values(lo.grad()), (Values{0, 1, 1}));
  Tensor hi = leaf({-1, 1, 3});
  hi.clamp(std::nullopt, 1).sum().backward();
  EXPECT_EQ(values(hi.grad()), (Values{1, 1, 0}));

  // exp of a float64 leaf: the gradient (e^x) in float64, from the result.
  Tensor d = leaf({0, 1}, DType::Float64);
  d.exp().sum().backward();
  EXPECT_EQ(d.grad().dtype(), DType::Float64);
  const Values g = values(d.grad());
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], 1.0);
  EXPECT_NEAR(g[1], std::exp(1.0), 1e-12);
}

}  // namespace
