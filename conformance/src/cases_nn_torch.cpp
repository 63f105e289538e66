// The CNN layers against PyTorch 1.13 (NN-4): fixed float64 inputs, the
// outputs and gradients PyTorch gives for them (nn_fixtures.inc, written by
// conformance/fixtures/nn_reference.py, which says how the inputs are made),
// on the device under test, through the backend's kernels and through the
// composites.
#include <backplane/conformance.h>
#include <backplane/nn_ops.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "case_checks.h"

namespace bp::conformance {

namespace {

struct Fixture {
  const char* name;
  std::vector<std::vector<double>> outputs;
  std::vector<std::vector<double>> grads;
};

const std::vector<Fixture>& fixtures() {
  static const std::vector<Fixture> f = {
#include "nn_fixtures.inc"
  };
  return f;
}

const Fixture& fixture(const std::string& name) {
  for (const Fixture& f : fixtures())
    if (name == f.name) return f;
  throw InternalError("no fixture named " + name);
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// v[i] = 1.5 sin(0.37 i + phase), squared + 0.5 when positive: as the script makes them.
Tensor vals(const Context& ctx, const std::vector<int64_t>& shape, double phase,
            bool positive = false) {
  std::vector<double> v(static_cast<std::size_t>(numel_of(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double x = 1.5 * std::sin(0.37 * static_cast<double>(i) + phase);
    v[i] = positive ? x * x + 0.5 : x;
  }
  return from_vector(v, IntArrayRef(shape), ctx.options(DType::Float64));
}

Tensor weights_like(const Tensor& out) {
  std::vector<double> u(static_cast<std::size_t>(out.numel()));
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = std::sin(0.11 * static_cast<double>(i) + 0.5);
  return from_vector(u, out.sizes(), TensorOptions(DType::Float64).device(out.device()));
}

Tensor ints(const Context& ctx, const std::vector<int64_t>& v, const std::vector<int64_t>& shape) {
  return from_vector(v, IntArrayRef(shape), ctx.options(DType::Int64));
}

struct In {
  Tensor t;
  bool grad;
};

struct TorchCase {
  const char* name;
  std::function<std::vector<In>(const Context&)> inputs;
  std::function<std::vector<Tensor>(const Context&, const std::vector<Tensor>&)> run;
  // Also run in float32 (the dtype the backends' own kernels, e.g. oneDNN's
  // and cuDNN's convolutions, take), against the same values within float32's
  // precision; not for cases that make float64 tensors of their own.
  bool float32 = true;
};

void check(const Context& ctx, const TorchCase& c) {
  const Fixture& f = fixture(c.name);
  for (int pass = 0; pass < 3; ++pass) {
    const bool composite = pass == 1, f32 = pass == 2;
    if (f32 && !c.float32) break;
    std::optional<CompositeOnlyGuard> guard;
    if (composite) guard.emplace();
    const char* path = composite ? "the composite"
                       : f32     ? "the backend's path in float32"
                                 : "the backend's path";
    const double rtol = f32 ? 2e-4 : 1e-9, atol = f32 ? 2e-4 : 1e-10;
    std::vector<In> in = c.inputs(ctx);
    std::vector<Tensor> args, leaves;
    for (In& i : in) {
      if (f32 && i.t.dtype() == DType::Float64) i.t = i.t.to(DType::Float32);
      if (i.grad) {
        i.t.requires_grad_();
        leaves.push_back(i.t);
      }
      args.push_back(i.t);
    }
    const std::vector<Tensor> outs = c.run(ctx, args);
    BP_EXPECT_EQ(outs.size(), f.outputs.size(), c.name, " outputs, ", path);
    for (std::size_t k = 0; k < outs.size(); ++k)
      expect_close(outs[k].detach().to(DType::Float64), f.outputs[k], rtol, atol,
                   (std::string(c.name) + " output " + std::to_string(k) + ", " + path).c_str(),
                   __FILE__, __LINE__);
    (outs[0] * weights_like(outs[0]).to(outs[0].dtype())).sum().backward();
    BP_EXPECT_EQ(leaves.size(), f.grads.size(), c.name, " gradients");
    for (std::size_t k = 0; k < leaves.size(); ++k) {
      const Tensor g = leaves[k].grad();
      BP_EXPECT(g.defined(), c.name, ": input ", k, " got no gradient (", path, ")");
      expect_close(g, f.grads[k], rtol, atol,
                   (std::string(c.name) + " gradient " + std::to_string(k) + ", " + path).c_str(),
                   __FILE__, __LINE__);
    }
  }
}

const std::vector<TorchCase>& cases() {
  using V = std::vector<Tensor>;
  using I = std::vector<In>;
  static const std::vector<TorchCase> c = {
      {"conv2d.basic",
       [](const Context& x) {
         return I{{vals(x, {2, 3, 5, 5}, 0), true},
                  {vals(x, {4, 3, 3, 3}, 1), true},
                  {vals(x, {4}, 2), true}};
       },
       [](const Context&, const V& a) { return V{conv2d(a[0], a[1], a[2], 1, 1)}; }},
      {"conv2d.groups_dilation",
       [](const Context& x) {
         return I{{vals(x, {1, 4, 7, 6}, 0.3), true}, {vals(x, {6, 2, 3, 2}, 1.1), true}};
       },
       [](const Context&, const V& a) {
         return V{conv2d(a[0], a[1], Tensor(), {2, 1}, {1, 2}, {2, 1}, 2)};
       }},
      {"conv2d.nonfinite_padding",  // padding is zeros that multiply: 0 * inf is NaN
       [](const Context& x) {
         const double inf = std::numeric_limits<double>::infinity();
         Tensor w = vals(x, {3, 2, 2, 3}, 0.5), s = ones({2, 3, 5, 3}, x.options(DType::Float64));
         w.select(0, 1).select(0, 0).select(0, 1).select(0, 2).fill_(inf);
         s.select(0, 1).select(0, 2).select(0, 0).select(0, 1).fill_(inf);
         return I{{vals(x, {2, 2, 4, 3}, 0.1), true}, {w, true}, {s, false}};
       },
       [](const Context&, const V& a) { return V{conv2d(a[0], a[1], Tensor(), 1, 1) * a[2]}; }},
      {"conv2d.unbatched_stride",
       [](const Context& x) {
         return I{{vals(x, {2, 6, 6}, 0.7), true},
                  {vals(x, {3, 2, 2, 2}, 0.2), true},
                  {vals(x, {3}, 0.9), true}};
       },
       [](const Context&, const V& a) { return V{conv2d(a[0], a[1], a[2], 2)}; }},
      {"conv_transpose2d.basic",
       [](const Context& x) {
         return I{{vals(x, {2, 3, 4, 4}, 0.2), true},
                  {vals(x, {3, 2, 3, 3}, 0.9), true},
                  {vals(x, {2}, 1.3), true}};
       },
       [](const Context&, const V& a) { return V{conv_transpose2d(a[0], a[1], a[2], 2, 1, 1)}; }},
      {"conv_transpose2d.groups_dilation",
       [](const Context& x) {
         return I{{vals(x, {1, 4, 3, 5}, 0.5), true}, {vals(x, {4, 3, 2, 3}, 1.7), true}};
       },
       [](const Context&, const V& a) {
         return V{conv_transpose2d(a[0], a[1], Tensor(), {1, 2}, {0, 1}, {1, 1}, 2, {2, 1})};
       }},
      {"conv_transpose2d.unbatched",
       [](const Context& x) {
         return I{{vals(x, {3, 2, 2}, 0.4), true},
                  {vals(x, {3, 1, 2, 2}, 0.6), true},
                  {vals(x, {1}, 0.8), true}};
       },
       [](const Context&, const V& a) { return V{conv_transpose2d(a[0], a[1], a[2])}; }},
      {"max_pool2d.ceil_padding",
       [](const Context& x) {
         return I{{vals(x, {1, 2, 5, 6}, 0.4), true}};
       },
       [](const Context&, const V& a) {
         auto [y, i] = max_pool2d_with_indices(a[0], 3, 2, 1, 1, true);
         return V{y, i};
       }},
      {"max_pool2d.dilation",
       [](const Context& x) {
         return I{{vals(x, {2, 1, 6, 6}, 0.8), true}};
       },
       [](const Context&, const V& a) {
         auto [y, i] = max_pool2d_with_indices(a[0], 2, 1, 0, 2, false);
         return V{y, i};
       }},
      {"avg_pool2d.exclude_pad",
       [](const Context& x) {
         return I{{vals(x, {1, 2, 5, 5}, 0.6), true}};
       },
       [](const Context&, const V& a) { return V{avg_pool2d(a[0], 3, 2, 1, true, false)}; }},
      {"avg_pool2d.include_pad",
       [](const Context& x) {
         return I{{vals(x, {1, 2, 5, 5}, 0.6), true}};
       },
       [](const Context&, const V& a) { return V{avg_pool2d(a[0], 3, 2, 1, true, true)}; }},
      {"adaptive_avg_pool2d",
       [](const Context& x) {
         return I{{vals(x, {1, 2, 7, 5}, 1.3), true}};
       },
       [](const Context&, const V& a) {
         return V{adaptive_avg_pool2d(a[0], {3, 2})};
       }},
      {"batch_norm.training",
       [](const Context& x) {
         return I{{vals(x, {3, 2, 2, 2}, 0.5), true},
                  {vals(x, {2}, 0.3), true},
                  {vals(x, {2}, 0.9), true}};
       },
       [](const Context& x, const V& a) {
         Tensor rm = vals(x, {2}, 0.1), rv = vals(x, {2}, 0.2, true);
         Tensor y = batch_norm(a[0], rm, rv, a[1], a[2], true, 0.2, 1e-5);
         return V{y, rm, rv};
       },
       false},
      {"batch_norm.eval",
       [](const Context& x) {
         return I{{vals(x, {3, 2, 2, 2}, 0.5), true},
                  {vals(x, {2}, 0.3), true},
                  {vals(x, {2}, 0.9), true}};
       },
       [](const Context& x, const V& a) {
         return V{batch_norm(a[0], vals(x, {2}, 0.1), vals(x, {2}, 0.2, true), a[1], a[2], false)};
       },
       false},
      {"group_norm",
       [](const Context& x) {
         return I{{vals(x, {2, 6, 2, 3}, 0.2), true},
                  {vals(x, {6}, 0.4), true},
                  {vals(x, {6}, 0.8), true}};
       },
       [](const Context&, const V& a) { return V{group_norm(a[0], 3, a[1], a[2], 1e-5)}; }},
      {"cross_entropy.weight_ignore_smoothing",
       [](const Context& x) {
         return I{{vals(x, {4, 5}, 0.1), true}, {vals(x, {5}, 0.5, true), false}};
       },
       [](const Context& x, const V& a) {
         return V{cross_entropy(a[0], ints(x, {1, 0, 4, 2}, {4}), a[1], 2, Reduction::Mean, 0.1)};
       }},
      {"cross_entropy.spatial_none",
       [](const Context& x) {
         return I{{vals(x, {2, 3, 2, 2}, 0.7), true}};
       },
       [](const Context& x, const V& a) {
         return V{cross_entropy(a[0], ints(x, {0, 2, 1, 1, 2, 0, 0, 1}, {2, 2, 2}), Tensor(), -100,
                                Reduction::None)};
       }},
      {"nll_loss.sum",
       [](const Context& x) {
         return I{{vals(x, {4, 5}, 0.2), true}};
       },
       [](const Context& x, const V& a) {
         return V{nll_loss(a[0], ints(x, {1, 0, 4, 2}, {4}), Tensor(), -100, Reduction::Sum)};
       }},
      {"mse_loss",
       [](const Context& x) {
         return I{{vals(x, {3, 4}, 0.1), true}, {vals(x, {3, 4}, 1.0), true}};
       },
       [](const Context&, const V& a) { return V{mse_loss(a[0], a[1])}; }},
      {"binary_cross_entropy_with_logits",
       [](const Context& x) {
         return I{{vals(x, {3, 4}, 0.3) * 20, true},
                  {vals(x, {3, 4}, 1.2, true) / 3, false},
                  {vals(x, {4}, 0.2, true), false}};
       },
       [](const Context&, const V& a) {
         return V{binary_cross_entropy_with_logits(a[0], a[1].clamp(0, 1), Tensor(), a[2],
                                                   Reduction::None)};
       }},
      {"gelu",
       [](const Context& x) {
         return I{{vals(x, {3, 5}, 0.3) * 2, true}};
       },
       [](const Context&, const V& a) { return V{gelu(a[0])}; }},
      {"gelu.tanh",
       [](const Context& x) {
         return I{{vals(x, {3, 5}, 0.3) * 2, true}};
       },
       [](const Context&, const V& a) { return V{gelu(a[0], true)}; }},
      {"cross_entropy.ignored_row_of_neg_inf",
       [](const Context& x) {
         Tensor logits = vals(x, {3, 4}, 0.4);
         logits.select(0, 0).select(0, 1).fill_(-std::numeric_limits<double>::infinity());
         return I{{logits, true}};
       },
       [](const Context& x, const V& a) {
         return V{
             cross_entropy(a[0], ints(x, {-100, 2, 0}, {3}), Tensor(), -100, Reduction::Mean, 0.1)};
       }},
      {"embedding.padding_idx",
       [](const Context& x) {
         return I{{vals(x, {4, 3}, 0.5), true}};
       },
       [](const Context& x, const V& a) {
         return V{embedding(ints(x, {0, 1, 3, 1, 2, 0}, {3, 2}), a[0], 1)};
       }},
      // F.softmax(x, dim, dtype=float64) of a float32 x: computed in float64.
      {"softmax.dtype",
       [](const Context& x) {
         return I{{vals(x, {3, 5}, 0.2).to(DType::Float32), true}};
       },
       [](const Context&, const V& a) {
         Tensor y = softmax(a[0], 1, DType::Float64);
         BP_EXPECT_EQ(y.dtype(), DType::Float64);
         return V{y};
       },
       false},
      {"log_softmax.dtype",
       [](const Context& x) {
         return I{{vals(x, {3, 5}, 0.6).to(DType::Float32), true}};
       },
       [](const Context&, const V& a) {
         Tensor y = log_softmax(a[0], 0, DType::Float64);
         BP_EXPECT_EQ(y.dtype(), DType::Float64);
         return V{y};
       },
       false},
      // A deliberate difference (docs/nn.md): mse_loss refuses shapes that
      // only broadcast, which PyTorch computes with a warning; expanding both
      // operands gives PyTorch's value and gradients.
      {"mse_loss.broadcast",
       [](const Context& x) {
         return I{{vals(x, {3, 1}, 0.4), true}, {vals(x, {3}, 1.1), true}};
       },
       [](const Context&, const V& a) {
         BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, mse_loss(a[0], a[1])), "[mse_loss]",
                            "they must be the same");
         return V{mse_loss(a[0].expand({3, 3}), a[1].expand({3, 3}))};
       }},
  };
  return c;
}

}  // namespace

void add_nn_torch_cases(Suite& suite) {
  for (const TorchCase& c : cases()) {
    const TorchCase* p = &c;
    suite.add({std::string("nn.torch.") + c.name, {"NN-4"}, "nn", [p](const Context& ctx) {
                 check(ctx, *p);
               }});
  }
}

}  // namespace bp::conformance
