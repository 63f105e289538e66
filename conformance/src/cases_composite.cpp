// Composite ops a backend may override (DV-6): silu and layer_norm give the
// values their definitions give, through the composite and through the
// backend's fused kernel where it registers one ("core::<name>"), and an
// override agrees with the composite on random inputs of several layouts.
// Their gradients are checked with the other gradchecks (AG-10).
#include <backplane/conformance.h>
#include <backplane/sparse/coo.h>

#include <cmath>

#include "case_checks.h"
#include "case_util.h"
#include "model_fixture.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "op";

// The suite's expect_close with the dtype's tolerance.
void expect_close(const Tensor& t, const std::vector<double>& expected, DType d, const char* what) {
  const bool f32 = d == DType::Float32;
  conformance::expect_close(t, expected, f32 ? 1e-5 : 1e-12, f32 ? 1e-6 : 1e-13, what, __FILE__,
                            __LINE__);
}

// Runs `f` twice: as a program would (the backend's override where there is
// one; no gradient is recorded) and with the composite forced.
template <class F>
void both_paths(F&& f) {
  {
    NoGradGuard no_grad;
    f("the backend's path");
  }
  CompositeOnlyGuard composite;
  f("the composite");
}

std::vector<double> host_silu(const std::vector<double>& x) {
  std::vector<double> y;
  for (double v : x) y.push_back(v / (1 + std::exp(-v)));
  return y;
}

// Layer norm of `rows` rows of `n` on the host, with optional weight and bias.
std::vector<double> host_layer_norm(const std::vector<double>& x, int64_t n,
                                    const std::vector<double>& w, const std::vector<double>& b,
                                    double eps) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / static_cast<std::size_t>(n); ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += x[r * n + i];
    mean /= n;
    for (int64_t i = 0; i < n; ++i) var += (x[r * n + i] - mean) * (x[r * n + i] - mean);
    var /= n;
    for (int64_t i = 0; i < n; ++i) {
      double v = (x[r * n + i] - mean) / std::sqrt(var + eps);
      if (!w.empty()) v *= w[i];
      if (!b.empty()) v += b[i];
      y[r * n + i] = v;
    }
  }
  return y;
}

// DV-6: silu(x) = x * sigmoid(x), saturating at both ends; integers refused.
void silu_values(const Context& ctx) {
  const std::vector<double> x = {-30, -3, -1, -0.5, 0, 0.25, 1, 3, 30};
  for (DType d : {DType::Float32, DType::Float64}) {
    const Tensor t = from_vector(x, {3, 3}, ctx.options(DType::Float64)).to(d);
    both_paths([&](const char* path) {
      const Tensor y = silu(t);
      BP_EXPECT_EQ(y.dtype(), d, path);
      BP_EXPECT_SHAPE(y, {3, 3});
      expect_close(y, host_silu(x), d, path);
      expect_close(silu(t.t()), host_silu({-30, -0.5, 1, -3, 0, 3, -1, 0.25, 30}), d, path);
    });
  }
  BP_EXPECT_THROWS(silu(ones({2}, ctx.options(DType::Int64))), NotImplementedError);
}

// DV-6: layer_norm over the trailing dims, biased variance, eps inside the
// root, weight and bias optional; shapes that do not match are refused.
void layer_norm_values(const Context& ctx) {
  std::vector<double> x;
  for (int i = 0; i < 24; ++i) x.push_back(std::sin(1.3 * i) * (1 + i % 5));
  const std::vector<double> w = {0.5, -1, 2, 1.5}, b = {0.1, 0, -0.3, 2};
  for (DType d : {DType::Float32, DType::Float64}) {
    const TensorOptions o = ctx.options(d);
    const Tensor t = from_vector(x, {2, 3, 4}, ctx.options(DType::Float64)).to(d);
    const Tensor tw = from_vector(w, {4}, ctx.options(DType::Float64)).to(d);
    const Tensor tb = from_vector(b, {4}, ctx.options(DType::Float64)).to(d);
    both_paths([&](const char* path) {
      expect_close(layer_norm(t, {4}, tw, tb), host_layer_norm(x, 4, w, b, 1e-5), d, path);
      expect_close(layer_norm(t, {4}), host_layer_norm(x, 4, {}, {}, 1e-5), d, path);
      expect_close(layer_norm(t, {3, 4}, Tensor(), Tensor(), 0.1),
                   host_layer_norm(x, 12, {}, {}, 0.1), d, path);
    });
    BP_EXPECT_THROWS(layer_norm(t, {3}), ValueError);
    BP_EXPECT_THROWS(layer_norm(t, {4}, ones({3}, o)), ValueError);
    BP_EXPECT_THROWS(layer_norm(t, {2, 3, 4, 1}), ValueError);
  }
  BP_EXPECT_THROWS(layer_norm(ones({2, 4}, ctx.options(DType::Int32)), {4}), NotImplementedError);
}

// DV-6: where the backend overrides a composite, the override agrees with
// the composite on random inputs: contiguous, transposed and offset views.
void overrides_match_composite(const Context& ctx) {
  Rng rng(ctx.case_seed("composite.overrides_match"));
  int checked = 0;
  for (DType d : {DType::Float32, DType::Float64}) {
    const TensorOptions o = ctx.options(d);
    auto random = [&](std::vector<int64_t> shape) {
      int64_t n = 1;
      for (int64_t s : shape) n *= s;
      std::vector<double> v(static_cast<std::size_t>(n));
      for (double& e : v) e = rng.uniform(-4, 4);
      return from_vector(v, IntArrayRef(shape), ctx.options(DType::Float64)).to(d);
    };
    const double rtol = d == DType::Float32 ? 1e-5 : 1e-12,
                 atol = d == DType::Float32 ? 1e-5 : 1e-12;
    auto agree = [&](const char* what, const std::function<Tensor()>& f) {
      Tensor fused, composite;
      {
        NoGradGuard no_grad;
        fused = f();
      }
      {
        CompositeOnlyGuard only;
        composite = f();
      }
      BP_EXPECT(allclose(fused, composite, rtol, atol), what, " (", d, "): the override gives ",
                fused.to_string(), ", the composite ", composite.to_string());
      ++checked;
    };
    const Tensor probe = ones({1}, o);
    if (has_override("core::silu", probe)) {
      for (auto shape : {std::vector<int64_t>{7}, {33, 65}, {2, 3, 5}}) {
        const Tensor x = random(shape);
        agree("silu", [&] { return silu(x); });
        if (x.dim() >= 2)
          agree("silu of a transposed view", [&] { return silu(x.transpose(0, 1)); });
      }
      const Tensor big = random({300, 300});  // past the fast paths' thresholds
      agree("silu of a large tensor", [&] { return silu(big); });
      agree("silu of an offset view", [&] { return silu(big.narrow(0, 7, 100)); });
    }
    if (has_override("core::gelu", probe)) {
      for (bool approx : {false, true}) {
        for (auto shape : {std::vector<int64_t>{7}, {33, 65}}) {
          const Tensor x = random(shape);
          agree(approx ? "gelu (tanh)" : "gelu", [&] { return gelu(x, approx); });
          if (x.dim() >= 2)
            agree("gelu of a transposed view", [&] { return gelu(x.transpose(0, 1), approx); });
        }
        const Tensor big = random({300, 300});  // past the fast paths' thresholds
        agree(approx ? "gelu (tanh) of a large tensor" : "gelu of a large tensor",
              [&] { return gelu(big, approx); });
        agree("gelu of an offset view", [&] { return gelu(big.narrow(0, 7, 100), approx); });
      }
    }
    if (has_override("core::layer_norm", probe)) {
      for (auto shape : {std::vector<int64_t>{4, 8}, {2, 3, 16}, {1, 64}}) {
        const Tensor x = random(shape);
        const int64_t n = shape.back();
        const Tensor w = random({n}), b = random({n});
        agree("layer_norm", [&] { return layer_norm(x, {n}, w, b); });
        // A layout the kernel may decline (then the composite runs): the values are the same.
        agree("layer_norm of a transposed input", [&] {
          return layer_norm(x.transpose(0, -1).contiguous().transpose(0, -1), {n}, w, b);
        });
      }
      {
        const Tensor big = random({256, 256}), w = random({256}),
                     b = random({256});  // past fast-path thresholds
        agree("layer_norm of a large tensor", [&] { return layer_norm(big, {256}, w, b); });
      }
      const Tensor x = random({2, 3, 5});
      const Tensor w = random({3, 5}), b = random({3, 5});
      agree("layer_norm over two dims", [&] { return layer_norm(x, {3, 5}, w, b, 0.01); });
    }
    if (has_override("core::sparse_mm", probe)) {
      // Random coordinates in a 37 x 29, duplicates included (the core
      // coalesces before the kernel), some rows empty; a dense of 29 x m.
      for (int64_t m : {1, 16, 67}) {
        const int64_t nnz = 150;
        std::vector<int64_t> idx(2 * nnz);
        for (int64_t j = 0; j < nnz; ++j) {
          idx[static_cast<std::size_t>(j)] = static_cast<int64_t>(rng.uniform(0, 30));
          idx[static_cast<std::size_t>(nnz + j)] = static_cast<int64_t>(rng.uniform(0, 29));
        }
        const SparseTensor s = sparse_coo_tensor(
            from_vector(idx, {2, nnz}, ctx.options(DType::Int64)), random({nnz}), {37, 29});
        const Tensor dense = random({29, m});
        agree("sparse_mm", [&] { return mm(s, dense); });
        agree("sparse_mm of a transposed dense", [&] { return mm(s, dense.t().contiguous().t()); });
      }
      const SparseTensor none =
          sparse_coo_tensor(zeros({2, 0}, ctx.options(DType::Int64)), random({0}), {5, 4});
      agree("sparse_mm with no stored element", [&] { return mm(none, random({4, 3})); });
    }
  }
  for (DType d : {DType::Float32, DType::Float64}) checked += check_fused_updates(ctx, d);
  if (checked == 0) BP_SKIP("the backend overrides no composite op");
}

}  // namespace

void add_composite_cases(Suite& suite) {
  suite.add({"composite.silu", {"DV-6"}, kCategory, silu_values});
  suite.add({"composite.layer_norm", {"DV-6"}, kCategory, layer_norm_values});
  suite.add({"composite.overrides_match", {"DV-6"}, kCategory, overrides_match_composite});
}

}  // namespace bp::conformance
