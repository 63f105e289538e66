// A backend's own nn kernels against the core's composites (DV-6, NN-4):
// conv2d, the pools and batch_norm, whose overrides run whether or not a
// gradient is recorded, forward and backward, on contiguous and transposed
// inputs in float32 and float64. Each case is skipped (not passed) when the
// backend has no such kernel, or when its kernels declined every call.
#include <backplane/conformance.h>
#include <backplane/debug.h>
#include <backplane/named_ops.h>
#include <backplane/nn_ops.h>

#include <cmath>
#include <limits>
#include <optional>

#include "case_checks.h"

namespace bp::conformance {

Tensor random64(const Context& ctx, Rng& r, std::vector<int64_t> shape, bool transposed);

namespace {

bool has_any(const Context& ctx, std::initializer_list<const char*> names) {
  for (DType dt : {DType::Float32, DType::Float64})
    for (const char* n : names)
      if (has_override(n, zeros({1}, ctx.options(dt)))) return true;
  return false;
}

// Runs f with the backend's kernels (composite false) or the composites
// only; counts in `ran` the runs in which one of `names` ran.
template <class F>
auto run_kernels(bool composite, std::initializer_list<const char*> names, int& ran, F&& f) {
  std::optional<CompositeOnlyGuard> guard;
  if (composite) guard.emplace();
  debug::KernelRecording rec;
  auto out = f();
  bool reached = false;
  for (const auto& k : rec.kernels())
    for (const char* n : names) reached = reached || k.op == n;
  BP_EXPECT(!composite || !reached, "a kernel ran while only the composites were to run");
  if (!composite && reached) ++ran;
  return out;
}

// Equal up to tol, NaN where the other has NaN.
bool close_nan(const Tensor& a, const Tensor& b, double tol) {
  if (!a.sizes().equals(b.sizes())) return false;
  const Tensor na = ne(a, a), nb = ne(b, b);
  if (!equal(na, nb)) return false;
  const Tensor z = zeros_like(a);
  return allclose(where(na, z, a), where(nb, z, b), tol, tol);
}

// Fixed weights for a loss sum(y * u) whose gradient differs per element.
Tensor weights_like(const Tensor& y) {
  std::vector<double> v(static_cast<std::size_t>(y.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.7 * static_cast<double>(i));
  return from_vector(v, y.sizes(), TensorOptions(DType::Float64).device(y.device())).to(y.dtype());
}

double tol_of(DType dt) { return dt == DType::Float32 ? 1e-4 : 1e-10; }

// --- conv2d ---------------------------------------------------------------------
void conv_override(const Context& ctx) {
  const auto names = {"core::conv2d", "core::conv2d_backward"};
  if (!has_any(ctx, names)) BP_SKIP("the backend has no conv2d kernel of its own");
  Rng r(ctx.case_seed("nn.conv2d.override"));
  struct P {
    std::vector<int64_t> x, w;
    Size2 s, p, d;
    int64_t g;
  };
  const std::vector<P> ps = {{{2, 8, 9, 9}, {16, 8, 3, 3}, 1, 1, 1, 1},
                             {{1, 6, 12, 10}, {9, 2, 3, 1}, {2, 1}, {0, 2}, {1, 2}, 3},
                             {{3, 4, 7, 7}, {4, 1, 5, 5}, 2, 2, 1, 4}};
  int ran = 0;
  for (DType dt : {DType::Float32, DType::Float64})
    for (const P& p : ps)
      for (bool transposed : {false, true}) {
        const Tensor x = random64(ctx, r, p.x, transposed).to(dt),
                     w = random64(ctx, r, p.w, false).to(dt);
        const Tensor b = random64(ctx, r, {p.w[0]}, false).to(dt);
        // mask: which of the input (1) and the weight (2) require grad; the
        // backward kernel computes only those.
        const int mask =
            1 + static_cast<int>(&p - ps.data() + transposed) % 3;  // 1, 2, 3 over the configs
        auto run = [&](bool composite) {
          return run_kernels(composite, names, ran, [&] {
            Tensor xx = x.detach(), ww = w.detach();
            if (mask & 1) xx.requires_grad_();
            if (mask & 2) ww.requires_grad_();
            Tensor y = conv2d(xx, ww, b, p.s, p.p, p.d, p.g);
            (y * y).sum().backward();
            return std::vector<Tensor>{y.detach(), mask & 1 ? xx.grad() : y.detach(),
                                       mask & 2 ? ww.grad() : y.detach()};
          });
        };
        const auto k = run(false), c = run(true);
        const char* what[3] = {"output", "input gradient", "weight gradient"};
        for (std::size_t i = 0; i < 3; ++i)
          BP_EXPECT(allclose(k[i], c[i], tol_of(dt), tol_of(dt)), "conv2d ", what[i], " for ",
                    name(dt), " input ", x.sizes(), transposed ? " (transposed)" : "",
                    " with mask ", mask, ": the backend's kernel and the composite differ");
      }
  if (ran == 0)
    BP_SKIP("the backend's conv2d kernels declined every call (the composite ran each time)");
}

// --- pooling --------------------------------------------------------------------
struct PoolConfig {
  std::vector<int64_t> x;
  Size2 k, s, p, d;
  bool ceil, include_pad;
};

const std::vector<PoolConfig> kPools = {{{2, 3, 9, 9}, 3, 2, 1, 1, false, true},
                                        {{1, 4, 10, 7}, {3, 2}, {2, 1}, {1, 0}, {2, 1}, true, true},
                                        {{2, 2, 8, 8}, 2, 2, 0, 1, false, false},
                                        {{3, 2, 7, 6}, 3, 2, 1, 1, true, false},
                                        {{1, 3, 11, 11}, {2, 4}, {3, 3}, {1, 2}, 1, true, true}};

void pool_override(const Context& ctx) {
  const auto names = {"core::max_pool2d", "core::avg_pool2d", "core::avg_pool2d_backward"};
  if (!has_any(ctx, names)) BP_SKIP("the backend has no pooling kernel of its own");
  Rng r(ctx.case_seed("nn.pool.override"));
  int ran = 0;
  for (DType dt : {DType::Float32, DType::Float64})
    for (const PoolConfig& p : kPools)
      for (bool transposed : {false, true}) {
        Tensor x = random64(ctx, r, p.x, transposed).to(dt);
        // Ties (two equal maxima) and a NaN in one plane: the first maximum
        // in window order takes a window, a NaN takes any window it is in.
        x.select(0, 0).select(0, 0).fill_(0.5);
        if (&p == &kPools[1])
          x.select(0, 0).select(0, 1).select(0, 2).select(0, 3).fill_(std::nan(""));
        auto run = [&](bool composite) {
          return run_kernels(composite, names, ran, [&] {
            Tensor xm = x.detach().requires_grad_(), xa = x.detach().requires_grad_();
            auto [ym, idx] = max_pool2d_with_indices(xm, p.k, p.s, p.p, p.d, p.ceil);
            Tensor ya = avg_pool2d(xa, p.k, p.s, p.p, p.ceil, p.include_pad);
            (ym * weights_like(ym)).sum().backward();
            (ya * weights_like(ya)).sum().backward();
            return std::vector<Tensor>{ym.detach(), idx, xm.grad(), ya.detach(), xa.grad()};
          });
        };
        const auto k = run(false), c = run(true);
        const char* what[5] = {"max_pool2d output", "max_pool2d indices",
                               "max_pool2d input gradient", "avg_pool2d output",
                               "avg_pool2d input gradient"};
        for (std::size_t i = 0; i < 5; ++i) {
          const bool same = i == 1 ? equal(k[i], c[i]) : close_nan(k[i], c[i], tol_of(dt));
          BP_EXPECT(same, what[i], " for ", name(dt), " input ", x.sizes(),
                    transposed ? " (transposed)" : "", " config ", &p - kPools.data() + 1,
                    p.ceil ? " (ceil_mode" : " (floor mode",
                    p.include_pad ? ", count_include_pad)" : ")",
                    ": the backend's kernel and the composite differ");
        }
      }
  if (ran == 0)
    BP_SKIP("the backend's pooling kernels declined every call (the composite ran each time)");
}

// --- batch_norm -------------------------------------------------------------------
void batch_norm_override(const Context& ctx) {
  const auto names = {"core::batch_norm", "core::batch_norm_inference",
                      "core::batch_norm_backward"};
  if (!has_any(ctx, names)) BP_SKIP("the backend has no batch_norm kernel of its own");
  Rng r(ctx.case_seed("nn.batch_norm.override"));
  const std::vector<std::vector<int64_t>> shapes = {
      {4, 3}, {3, 5, 7}, {2, 6, 5, 4}, {2, 3, 3, 2, 4}};
  int ran = 0;
  for (DType dt : {DType::Float32, DType::Float64})
    for (std::size_t si = 0; si < shapes.size(); ++si)
      for (bool transposed : {false, true}) {
        const std::vector<int64_t>& shape = shapes[si];
        const int64_t ch = shape[1];
        // Scaled in place: an out-of-place op would give a contiguous x.
        Tensor x = random64(ctx, r, shape, transposed).to(dt);
        x.mul_(3).add_(0.5);
        // With transposed inputs, an expanded (stride 0) weight too.
        const Tensor w = transposed ? random64(ctx, r, {1}, false).to(dt).expand({ch})
                                    : random64(ctx, r, {ch}, false).to(dt);
        const Tensor b = random64(ctx, r, {ch}, false).to(dt);
        const Tensor rm0 = random64(ctx, r, {ch}, false).to(dt),
                     rv0 = random64(ctx, r, {ch}, false).abs().add(0.5).to(dt);
        // Which of x (1), weight (2), bias (4) require grad; with weight and
        // bias given on even configs, absent on odd ones.
        const int mask = 1 + static_cast<int>(si * 2 + transposed) % 7;
        const bool affine = si % 2 == 0;
        auto run = [&](bool composite) {
          return run_kernels(composite, names, ran, [&] {
            Tensor xx = x.detach(), ww = affine ? w.detach() : Tensor(),
                   bb = affine ? b.detach() : Tensor();
            if (mask & 1) xx.requires_grad_();
            if (affine && (mask & 2)) ww.requires_grad_();
            if (affine && (mask & 4)) bb.requires_grad_();
            Tensor rm = rm0.clone(), rv = rv0.clone();
            Tensor y = batch_norm(xx, rm, rv, ww, bb, true, 0.1, 1e-5);
            if (y.requires_grad()) (y * weights_like(y)).sum().backward();
            Tensor ye;
            {
              NoGradGuard no_grad;
              ye = batch_norm(x, rm, rv, affine ? w : Tensor(), affine ? b : Tensor(), false, 0.1,
                              1e-5);
            }
            auto grad = [&](const Tensor& t) {
              return t.defined() && t.grad().defined() ? t.grad() : zeros({1}, ctx.options(dt));
            };
            return std::vector<Tensor>{y.detach(), rm, rv, ye, grad(xx), grad(ww), grad(bb)};
          });
        };
        const auto k = run(false), c = run(true);
        const char* what[7] = {"training output",   "running_mean",   "running_var",
                               "evaluation output", "input gradient", "weight gradient",
                               "bias gradient"};
        const double tol = dt == DType::Float32 ? 1e-3 : 1e-10;
        for (std::size_t i = 0; i < 7; ++i)
          BP_EXPECT(allclose(k[i], c[i], tol, tol), "batch_norm ", what[i], " for ", name(dt),
                    " input ", x.sizes(), transposed ? " (transposed)" : "",
                    affine ? " with weight and bias" : "", " grad mask ", mask,
                    ": the backend's kernel and the composite differ");
      }
  if (ran == 0)
    BP_SKIP("the backend's batch_norm kernels declined every call (the composite ran each time)");
}

}  // namespace

void add_nn_override_cases(Suite& suite) {
  suite.add({"nn.conv2d.override", {"DV-6", "NN-4"}, "nn", conv_override});
  suite.add({"nn.pool.override", {"DV-6", "NN-4"}, "nn", pool_override});
  suite.add({"nn.batch_norm.override", {"DV-6", "NN-4"}, "nn", batch_norm_override});
}

}  // namespace bp::conformance
