// Autograd corners: integer and bool results stay out of the graph (AG-13),
// gradients where a formula would divide by zero or meet a NaN (AG-16),
// retain_grad() through an in-place op (AG-4), and threads recording on
// shared leaves (AG-15). Expected values are PyTorch 1.13's, as printed by
// conformance/fixtures/torch_reference.py (its case names are given beside
// each check).
#include <backplane/conformance.h>

#include <cmath>
#include <exception>
#include <limits>
#include <thread>

#include "autograd_cases.h"
#include "case_checks.h"

namespace bp::conformance {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The gradient of fn(x).sum() for a float32 leaf x, on the host.
std::vector<double> grad_of(const Context& ctx, const std::vector<double>& x_values,
                            const std::function<Tensor(const Tensor&)>& fn,
                            const std::vector<int64_t>& shape = {}) {
  Tensor x = shape.empty() ? leaf(ctx, x_values) : leaf(ctx, x_values, shape);
  fn(x).sum().backward();
  return x.grad().to_vector<double>();
}

// Equality that treats NaN as equal to NaN and compares infinities exactly.
void expect_same(const std::vector<double>& got, const std::vector<double>& want,
                 const char* what) {
  bool same = got.size() == want.size();
  for (std::size_t i = 0; same && i < got.size(); ++i)
    same = std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i];
  BP_EXPECT(same, what, ": expected ", detail::format(want), ", got ", detail::format(got));
}

void integer_results(const Context& ctx) {
  Tensor x = leaf(ctx, {1.5, 2.7});
  // g: casts to integer or bool, comparisons and argmax record nothing.
  for (DType d : {DType::Int64, DType::Int32, DType::Bool}) {
    Tensor i = x.to(d);
    BP_EXPECT(!i.requires_grad() && i.is_leaf() && i.grad_fn_name().empty(), "x.to(", d,
              ") must not join the graph");
  }
  BP_EXPECT_VALUES(x.to(DType::Int64), {1, 2});
  BP_EXPECT(!gt(x, 1).requires_grad());
  BP_EXPECT(!x.argmax().requires_grad());
  // An integer tensor takes values from one that requires grad, unrecorded.
  Tensor z = zeros({2}, ctx.options(DType::Int64));
  z.copy_(x);
  BP_EXPECT_VALUES(z, {1, 2});
  BP_EXPECT(!z.requires_grad() && z.grad_fn_name().empty());
  Tensor zb = zeros({3}, ctx.options(DType::Int64));
  zb.narrow(0, 0, 2).copy_(x);  // g.int_base_view_copy_float_rg
  BP_EXPECT_VALUES(zb, {1, 2, 0});
  BP_EXPECT(!zb.requires_grad());
  // Integer tensors cannot require grad at all.
  BP_EXPECT_THROWS(ones({2}, ctx.options(DType::Int64).requires_grad()), bp::TypeError);
  BP_EXPECT_THROWS(ones({2}, ctx.options(DType::Int64)).requires_grad_(), bp::TypeError);
  // A floating cast stays in the graph, and the gradient comes back in x's dtype.
  Tensor y = x.to(DType::Float64);
  BP_EXPECT_EQ(y.grad_fn_name(), std::string("ToCopyBackward0"));
  y.sum().backward();
  BP_EXPECT_EQ(x.grad().dtype(), DType::Float32);
  BP_EXPECT_VALUES(x.grad(), {1, 1});
}

void prod_with_zeros(const Context& ctx) {
  using V = std::vector<double>;
  auto all = [](const Tensor& t) { return prod(t); };
  BP_EXPECT_EQ(grad_of(ctx, {0, 2, 3}, all), (V{6, 0, 0}));  // h.prod[0,2,3]
  BP_EXPECT_EQ(grad_of(ctx, {0, 0, 3}, all), (V{0, 0, 0}));
  BP_EXPECT_EQ(grad_of(ctx, {2, 3, 4}, all), (V{12, 8, 6}));
  auto dim1 = [](const Tensor& t) { return prod(t, 1); };
  BP_EXPECT_EQ(grad_of(ctx, {0, 2, 3, 1, 2, 3}, dim1, {2, 3}), (V{6, 0, 0, 6, 3, 2}));
  BP_EXPECT_EQ(grad_of(ctx, {0, 0, 3, 1, 2, 0}, dim1, {2, 3}), (V{0, 0, 0, 0, 0, 2}));
  auto dim0 = [](const Tensor& t) { return prod(t, 0, /*keepdim=*/true); };
  BP_EXPECT_EQ(grad_of(ctx, {0, 2, 3, 4}, dim0, {2, 2}), (V{3, 4, 0, 2}));
}

void extrema_nan_and_ties(const Context& ctx) {
  using V = std::vector<double>;
  auto mx = [](const Tensor& t) { return t.max(); };
  auto mn = [](const Tensor& t) { return t.min(); };
  expect_same(grad_of(ctx, {1, kNaN, 0}, mx), V{0, 1, 0}, "i.max[1,nan,0]");
  expect_same(grad_of(ctx, {1, kNaN, 0}, mn), V{0, 1, 0}, "i.min[1,nan,0]");
  expect_same(grad_of(ctx, {1, kNaN, kNaN}, mx), V{0, 0.5, 0.5}, "i.max[1,nan,nan]");
  expect_same(grad_of(ctx, {1, 3, 3}, mx), V{0, 0.5, 0.5}, "i.max[1,3,3]");
  expect_same(grad_of(ctx, {1, 1, 3}, mn), V{0.5, 0.5, 0}, "i.min[1,1,3]");
  // Over one dim, the gradient follows the returned index: the first
  // occurrence of the extremum, NaN counting as both.
  auto mx0 = [](const Tensor& t) { return max(t, 0).first; };
  expect_same(grad_of(ctx, {1, 3, 3, 1, 3, 2}, mx0, {3, 2}), V{0, 1, 1, 0, 0, 0},
              "i.max_dim0[[1,3],[3,1],[3,2]]");
  expect_same(grad_of(ctx, {1, kNaN, kNaN, 1, 3, 2}, mx0, {3, 2}), V{0, 1, 1, 0, 0, 0},
              "i.max_dim0_nan");
  // maximum/minimum split ties, and send NaN's gradient to both sides.
  Tensor a = leaf(ctx, {1, 2}), b = leaf(ctx, {1, 3});
  maximum(a, b).sum().backward();
  expect_same(a.grad().to_vector<double>(), V{0.5, 0}, "i.maximum.a_grad");
  expect_same(b.grad().to_vector<double>(), V{0.5, 1}, "i.maximum.b_grad");
  Tensor an = leaf(ctx, {kNaN, 1}), bn = leaf(ctx, {1, kNaN});
  maximum(an, bn).sum().backward();
  expect_same(an.grad().to_vector<double>(), V{1, 1}, "i.maximum_nan.a_grad");
  expect_same(bn.grad().to_vector<double>(), V{1, 1}, "i.maximum_nan.b_grad");
}

void kinks_and_poles(const Context& ctx) {
  using V = std::vector<double>;
  expect_same(grad_of(ctx, {0, 1, 2}, [](const Tensor& t) { return t.pow(0); }), V{0, 0, 0},
              "i.pow(0)[0,1,2]");
  expect_same(grad_of(ctx, {0, 1, 2}, [](const Tensor& t) { return t.pow(1); }), V{1, 1, 1},
              "i.pow(1)[0,1,2]");
  expect_same(grad_of(ctx, {0, 1, 2}, [](const Tensor& t) { return t.pow(2); }), V{0, 2, 4},
              "i.pow(2)[0,1,2]");
  expect_same(grad_of(ctx, {0, 1, 4}, [](const Tensor& t) { return t.pow(0.5); }),
              V{kInf, 0.5, 0.25}, "i.pow(0.5)[0,1,4]");
  expect_same(grad_of(ctx, {0, 1, 2}, [](const Tensor& t) { return t.pow(-1); }),
              V{-kInf, -1, -0.25}, "i.pow(-1)[0,1,2]");
  expect_same(grad_of(ctx, {-2, -1, 0}, [](const Tensor& t) { return t.pow(3); }), V{12, 3, 0},
              "i.pow(3)[-2,-1,0]");
  // A tensor exponent: d/de x^e at x = 0, e = 0 is 0, not 0 * log 0.
  Tensor x = leaf(ctx, {0, 2}), e = leaf(ctx, {0, 3});
  pow(x, e).sum().backward();
  expect_same(x.grad().to_vector<double>(), V{0, 12}, "i.pow_tensor_exponent.x_grad");
  BP_EXPECT_CLOSE(e.grad(), 1e-6, 1e-6, {0, 8 * std::log(2.0)});
  expect_same(grad_of(ctx, {-1, 0, 1}, [](const Tensor& t) { return t.relu(); }), V{0, 0, 1},
              "i.relu[-1,0,1]");
  expect_same(grad_of(ctx, {-1, 0, 1}, [](const Tensor& t) { return t.abs(); }), V{-1, 0, 1},
              "i.abs[-1,0,1]");
  expect_same(grad_of(ctx, {0, 1, 4}, [](const Tensor& t) { return t.sqrt(); }), V{kInf, 0.5, 0.25},
              "i.sqrt[0,1,4]");
  expect_same(grad_of(ctx, {0, 1, 2}, [](const Tensor& t) { return t.clamp(0, 2); }), V{1, 1, 1},
              "i.clamp(0,2)[0,1,2]");
  expect_same(grad_of(ctx, {-1, 3}, [](const Tensor& t) { return t.clamp(0, 2); }), V{0, 0},
              "i.clamp(0,2)[-1,3]");
}

void retain_grad_through_inplace(const Context& ctx) {
  // j.1: y.grad is the gradient of the latest y.
  Tensor x = leaf(ctx, {1, 1});
  Tensor y = x * 1;
  y.retain_grad();
  y.mul_(3);
  y.sum().backward();
  BP_EXPECT_VALUES(y.grad(), {1, 1});
  BP_EXPECT_VALUES(x.grad(), {3, 3});
  // j.2: uses of the old value still reach x, but not y.grad.
  Tensor x2 = leaf(ctx, {1, 1});
  Tensor y2 = x2 * 1;
  y2.retain_grad();
  Tensor z2 = y2 * 2;
  y2.mul_(3);
  (z2 + y2).sum().backward();
  BP_EXPECT_VALUES(y2.grad(), {1, 1});
  BP_EXPECT_VALUES(x2.grad(), {5, 5});
  // j.3: a retained view whose base is then modified in place.
  Tensor x3 = leaf(ctx, {1, 1, 1});
  Tensor b3 = x3 * 1;
  Tensor v3 = b3.narrow(0, 0, 2);
  v3.retain_grad();
  b3.mul_(host_tensor(ctx, {2, 3, 4}, {3}));
  (v3 * host_tensor(ctx, {10, 100}, {2})).sum().backward();
  BP_EXPECT_VALUES(v3.grad(), {10, 100});
  BP_EXPECT_VALUES(x3.grad(), {20, 300, 0});
}

void threads_share_leaves(const Context& ctx) {
  // Two threads record and run backward on the same fresh leaves at once;
  // every contribution must land exactly once (AG-15).
  constexpr int kLeaves = 20000;
  std::vector<Tensor> leaves;
  leaves.reserve(kLeaves);
  for (int i = 0; i < kLeaves; ++i) leaves.push_back(leaf(ctx, {1, 2}));
  std::exception_ptr errors[2];
  auto work = [&](int t) {
    try {
      const Tensor k = host_tensor(ctx, {double(t + 1), double(t + 1)}, {2});
      for (int n = 0; n < kLeaves; ++n) {
        const Tensor& x = leaves[t == 0 ? n : kLeaves - 1 - n];
        (x * k).sum().backward();
      }
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::thread t0(work, 0), t1(work, 1);
  t0.join();
  t1.join();
  // A thread's error is the case's (a missing kernel reads as unsupported).
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  for (int i = 0; i < kLeaves; ++i) {
    const Tensor g = leaves[i].grad();
    BP_EXPECT(g.defined(), "leaf ", i, " got no gradient");
    const std::vector<double> v = g.to_vector<double>();
    BP_EXPECT(v[0] == 3 && v[1] == 3, "leaf ", i, " has gradient ", detail::format(v),
              ", expected [3, 3] (1 from one thread, 2 from the other)");
  }
}

}  // namespace

void add_autograd_corner_cases(Suite& suite) {
  auto add = [&suite](const char* name, std::vector<std::string> ids, void (*fn)(const Context&)) {
    suite.add({std::string("autograd.") + name, std::move(ids), kAutogradCategory, fn});
  };
  add("integer_results", {"AG-13", "AG-1"}, integer_results);
  add("prod_with_zeros", {"AG-16"}, prod_with_zeros);
  add("extrema_nan_and_ties", {"AG-16"}, extrema_nan_and_ties);
  add("kinks_and_poles", {"AG-16"}, kinks_and_poles);
  add("retain_grad_through_inplace", {"AG-4", "AG-9"}, retain_grad_through_inplace);
  // 80000 backward passes on two threads: unguarded, since a guard read per
  // free would make it a test of the device's synchronisation latency.
  Case threads{"autograd.threads_share_leaves", {"AG-15"}, kAutogradCategory, threads_share_leaves};
  threads.unguarded = true;
  suite.add(std::move(threads));
}

}  // namespace bp::conformance
