// The CNN layers (NN-4): each against the reference backend on random
// inputs of several layouts, with gradients (DV-2); finite-difference
// gradient checks in float64 (AG-10); dropout's mask from the seed (NN-5);
// and the errors bad arguments give (NN-4). The values PyTorch gives are in
// cases_nn_torch.cpp, a backend's own nn kernels against the composites in
// cases_nn_override.cpp.
#include <backplane/conformance.h>
#include <backplane/conformance/op_case.h>
#include <backplane/debug.h>
#include <backplane/nn_ops.h>

#include <cmath>
#include <functional>

#include "case_checks.h"

namespace bp::conformance {

void add_nn_torch_cases(Suite& suite);
void add_nn_override_cases(Suite& suite);

namespace {

const std::vector<DType> kNnDtypes = {DType::Float32, DType::Float64};
const std::vector<Layout> kNnLayouts = {Layout::Contiguous, Layout::Strided, Layout::Empty};

// Outputs, then the gradient of sum(out0 * u) for each floating input
// (u fixed), so the differential comparison covers backward as well.
Outputs with_grads(const OpArgs& a, const std::function<Outputs(const std::vector<Tensor>&)>& f) {
  std::vector<Tensor> in;
  for (const Tensor& t : a.inputs) {
    Tensor d = t.detach();
    if (is_floating(d.dtype())) d.requires_grad_();
    in.push_back(d);
  }
  Outputs out = f(in);
  std::vector<double> uv(static_cast<std::size_t>(out[0].numel()));
  for (std::size_t i = 0; i < uv.size(); ++i) uv[i] = std::cos(0.7 * static_cast<double>(i));
  const Tensor u =
      from_vector(uv, out[0].sizes(), TensorOptions(DType::Float64).device(out[0].device()))
          .to(out[0].dtype());
  (out[0] * u).sum().backward();
  for (const Tensor& t : in)
    if (t.requires_grad()) out.push_back(t.grad().defined() ? t.grad() : zeros_like(t));
  for (Tensor& t : out) t = t.detach();
  return out;
}

// The NCHW input of a sample: batch 0 for the Empty layout, 1 on sample 1.
std::vector<int64_t> image(Rng& r, Layout layout, int64_t c, int64_t lo, int64_t hi) {
  const int64_t n = layout == Layout::Empty ? 0 : (r.sample_index() == 1 ? 1 : r.uniform_int(2, 3));
  return {n, c, r.uniform_int(lo, hi), r.uniform_int(lo, hi)};
}

// conv2d: dims = {stride, padding, dilation, groups}, by sample.
OpCaseSpec conv_case() {
  return {"nn.conv2d",
          {Op::Matmul, Op::Add, Op::Sum},
          kNnDtypes,
          [](Rng& r, Layout layout, DType) {
            static const int64_t params[3][4] = {{1, 1, 1, 1}, {2, 0, 1, 2}, {1, 2, 2, 3}};
            const int64_t* p = params[r.sample_index() % 3];
            const int64_t g = p[3], cg = r.uniform_int(1, 3), og = r.uniform_int(1, 3);
            const int64_t k = r.uniform_int(1, 3);
            Sample s;
            s.inputs = {{image(r, layout, cg * g, 5, 8)}, {{og * g, cg, k, k}}, {{og * g}}};
            s.dims = {p[0], p[1], p[2], g};
            s.terms = cg * k * k * 16;
            return s;
          },
          [](const OpArgs& a) {
            const auto& d = a.sample.dims;
            return with_grads(a, [&](const std::vector<Tensor>& x) {
              return Outputs{conv2d(x[0], x[1], x[2], d[0], d[1], d[2], d[3])};
            });
          },
          kNnLayouts,
          {"NN-4"}};
}

// conv_transpose2d: dims = {stride, padding, output_padding, dilation,
// groups}, by sample (the third with an output_padding only its dilation allows).
OpCaseSpec conv_transpose_case() {
  return {"nn.conv_transpose2d",
          {Op::Matmul, Op::Add, Op::Sum},
          kNnDtypes,
          [](Rng& r, Layout layout, DType) {
            static const int64_t params[3][5] = {{1, 0, 0, 1, 1}, {2, 1, 1, 1, 2}, {1, 1, 1, 2, 3}};
            const int64_t* p = params[r.sample_index() % 3];
            const int64_t g = p[4], cg = r.uniform_int(1, 3), og = r.uniform_int(1, 3);
            const int64_t k = r.uniform_int(1, 3);
            Sample s;
            s.inputs = {{image(r, layout, cg * g, 3, 5)}, {{cg * g, og, k, k}}, {{og * g}}};
            s.dims = {p[0], p[1], p[2], p[3], g};
            s.terms = cg * k * k * 16;
            return s;
          },
          [](const OpArgs& a) {
            const auto& d = a.sample.dims;
            return with_grads(a, [&](const std::vector<Tensor>& x) {
              return Outputs{conv_transpose2d(x[0], x[1], x[2], d[0], d[1], d[2], d[4], d[3])};
            });
          },
          kNnLayouts,
          {"NN-4"}};
}

OpCaseSpec pool_case(const char* name, std::function<Tensor(const Tensor&, int)> f) {
  return {name,
          {Op::Add, Op::Where, Op::Gt, Op::Scatter, Op::Matmul},
          kNnDtypes,
          [](Rng& r, Layout layout, DType) {
            Sample s;
            s.inputs = {{image(r, layout, r.uniform_int(1, 3), 4, 9)}};
            s.dims = {r.sample_index()};
            s.terms = 9;
            return s;
          },
          [f](const OpArgs& a) {
            return with_grads(a, [&](const std::vector<Tensor>& x) {
              return Outputs{f(x[0], static_cast<int>(a.sample.dims[0] % 3))};
            });
          },
          kNnLayouts,
          {"NN-4"}};
}

OpCaseSpec norm_case(const char* name, std::function<Outputs(const std::vector<Tensor>&)> f) {
  return {name,
          {Op::Sum, Op::Mul, Op::Sqrt, Op::Div},
          kNnDtypes,
          [](Rng& r, Layout layout, DType) {
            Sample s;
            const int64_t c = 2 * r.uniform_int(1, 3);
            std::vector<int64_t> x = image(r, layout, c, 2, 4);
            if (layout == Layout::Empty) x[0] = 2, x[2] = 0;  // no batch statistics without a batch
            s.inputs = {{x}, {{c}}, {{c}}, {{c}, std::nullopt, Domain::Positive, true}};
            s.inputs[0].varied = true;
            s.terms = 64;
            return s;
          },
          [f](const OpArgs& a) { return with_grads(a, f); },
          kNnLayouts,
          {"NN-4"}};
}

std::vector<double> class_indices(Rng& r, const std::vector<int64_t>& shape, int64_t classes) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = static_cast<double>(r.uniform_int(0, classes - 1));
  return v;
}

OpCaseSpec loss_case() {
  return {"nn.losses",
          {Op::LogSoftmax, Op::Gather, Op::Sum, Op::Exp, Op::Log},
          kNnDtypes,
          [](Rng& r, Layout layout, DType) {
            Sample s;
            const int64_t n = layout == Layout::Empty ? 0 : r.uniform_int(1, 6),
                          c = r.uniform_int(2, 5);
            s.inputs = {
                {{n, c}},
                {{n},
                 DType::Int64,
                 Domain::Any,
                 false,
                 [c](Rng& g, const std::vector<int64_t>& sh) { return class_indices(g, sh, c); }},
                {{n, c}},
                {{c}, std::nullopt, Domain::Positive}};
            s.terms = c * 4;
            return s;
          },
          [](const OpArgs& a) {
            return with_grads(a, [](const std::vector<Tensor>& x) {
              const Tensor w = x[3].detach();
              Outputs o{cross_entropy(x[0], x[1], w, 1, Reduction::None, 0.2)};
              if (x[0].size(0) > 0) {
                o[0] = o[0].sum() + cross_entropy(x[0], x[1], w, -100, Reduction::Mean, 0.1) +
                       nll_loss(log_softmax(x[0], 1), x[1]) + mse_loss(x[0], x[2]) +
                       binary_cross_entropy_with_logits(x[0] * 8, sigmoid(x[2]), Tensor(), w);
              }
              return o;
            });
          },
          kNnLayouts,
          {"NN-4"}};
}

OpCaseSpec embedding_case() {
  return {"nn.embedding",
          {Op::IndexSelect, Op::Where},
          kNnDtypes,
          [](Rng& r, Layout layout, DType) {
            Sample s;
            const int64_t rows = r.uniform_int(3, 6),
                          n = layout == Layout::Empty ? 0 : r.uniform_int(1, 5);
            s.inputs = {{{rows, r.uniform_int(1, 4)}},
                        {{n, 2},
                         DType::Int64,
                         Domain::Any,
                         false,
                         [rows](Rng& g, const std::vector<int64_t>& sh) {
                           return class_indices(g, sh, rows);
                         }}};
            s.terms = 4;
            return s;
          },
          [](const OpArgs& a) {
            return with_grads(a, [](const std::vector<Tensor>& x) {
              return Outputs{embedding(x[1], x[0], 1) + embedding(x[1], x[0]) * 0.5};
            });
          },
          kNnLayouts,
          {"NN-4"}};
}

}  // namespace

// --- gradient checks -----------------------------------------------------------
Tensor random64(const Context& ctx, Rng& r, std::vector<int64_t> shape, bool transposed) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = r.uniform(-1, 1);
  if (!transposed || shape.size() < 2)
    return from_vector(v, IntArrayRef(shape), ctx.options(DType::Float64));
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  return from_vector(v, IntArrayRef(shape), ctx.options(DType::Float64)).transpose(-1, -2);
}

namespace {

struct NnGrad {
  const char* name;
  std::vector<std::vector<int64_t>> shapes;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
};

void gradchecks(const Context& ctx) {
  const Tensor target = from_vector(std::vector<int64_t>{2, 0, 1}, {3}, ctx.options(DType::Int64));
  const std::vector<NnGrad> specs = {
      {"conv2d",
       {{2, 2, 5, 4}, {3, 2, 3, 2}, {3}},
       [](const auto& x) { return conv2d(x[0], x[1], x[2], 1, 1); }},
      {"conv2d groups, stride, dilation",
       {{1, 4, 6, 7}, {2, 2, 2, 3}},
       [](const auto& x) {
         return conv2d(x[0], x[1], Tensor(), {2, 1}, {1, 0}, {1, 2}, 2);
       }},
      {"conv_transpose2d",
       {{1, 4, 3, 4}, {4, 1, 2, 3}, {2}},
       [](const auto& x) {
         return conv_transpose2d(x[0], x[1], x[2], {2, 1}, {1, 0}, {1, 0}, 2, {1, 2});
       }},
      {"max_pool2d",
       {{1, 2, 5, 5}},
       [](const auto& x) { return max_pool2d(x[0], 3, 2, 1, 1, true); }},
      {"avg_pool2d",
       {{1, 2, 5, 5}},
       [](const auto& x) { return avg_pool2d(x[0], 3, 2, 1, true, false); }},
      {"adaptive_avg_pool2d",
       {{1, 2, 5, 7}},
       [](const auto& x) {
         return adaptive_avg_pool2d(x[0], {2, 3});
       }},
      {"batch_norm",
       {{3, 2, 2, 2}, {2}, {2}},
       [](const auto& x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true); }},
      {"group_norm",
       {{2, 4, 3, 1}, {4}, {4}},
       [](const auto& x) { return group_norm(x[0], 2, x[1], x[2]); }},
      {"cross_entropy",
       {{3, 4}},
       [target](const auto& x) {
         return cross_entropy(x[0], target, Tensor(), 1, Reduction::Mean, 0.1);
       }},
      {"gelu", {{3, 4}}, [](const auto& x) { return gelu(x[0] * 3) + gelu(x[0], true); }},
      {"binary_cross_entropy_with_logits",
       {{3, 4}, {3, 4}},
       [](const auto& x) { return binary_cross_entropy_with_logits(x[0] * 4, sigmoid(x[1])); }},
  };
  Rng r(ctx.case_seed("nn.gradcheck"));
  for (const NnGrad& s : specs)
    for (bool transposed : {false, true}) {
      std::vector<Tensor> in;
      for (const auto& shape : s.shapes) {
        Tensor t = random64(ctx, r, shape, transposed).detach();
        in.push_back(t.requires_grad_());
      }
      const GradcheckResult res = gradcheck(s.fn, in);
      BP_EXPECT(res.ok, s.name, transposed ? " (transposed inputs)" : "", ": ", res.message);
    }
}

// --- dropout (NN-5) --------------------------------------------------------------
void dropout_mask(const Context& ctx) {
  const Tensor x = ones({64, 64}, ctx.options(DType::Float32));
  manual_seed(1234);
  const Tensor y = dropout(x, 0.25);
  manual_seed(1234);
  const Tensor again = dropout(x, 0.25);
  BP_EXPECT(equal(y, again), "the same seed gave another dropout mask");
  manual_seed(1234);
  const Tensor ref = dropout(ones({64, 64}, ctx.reference_options(DType::Float32)), 0.25);
  BP_EXPECT(equal(y.to(ctx.reference_device()), ref),
            "the mask differs from the reference backend's for one seed");
  const std::vector<float> v = y.to_vector<float>();
  int64_t kept = 0;
  for (float e : v) {
    BP_EXPECT(e == 0.0f || std::fabs(e - 1.0f / 0.75f) < 1e-6f, "a dropout output is ", e,
              ", neither 0 nor 1/(1-p)");
    kept += e != 0.0f;
  }
  BP_EXPECT(kept > 2900 && kept < 3250, kept, " of 4096 elements kept with p = 0.25");
  BP_EXPECT(dropout(x, 0.25, false).is_same(x), "dropout outside training must return its input");
  BP_EXPECT(equal(dropout(x, 1.0), zeros_like(x)), "dropout with p = 1 must give zeros");
  Tensor z = x.clone();
  manual_seed(1234);
  dropout_(z, 0.25);
  BP_EXPECT(equal(z, y), "dropout_ must write dropout's result in place");
  BP_EXPECT_THROWS(dropout(x, 1.5), ValueError);
}

// --- errors (NN-4) ------------------------------------------------------------------
void bad_arguments(const Context& ctx) {
  const Tensor x = ones({2, 3, 5, 5}, ctx.options(DType::Float32));
  const Tensor w = ones({4, 2, 3, 3}, ctx.options(DType::Float32));
  const auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const ValueError& e) {
      return e.what();
    }
    return "(no ValueError)";
  };
  const uint32_t version = x.version();
  BP_EXPECT_MENTIONS(message([&] { conv2d(x, w); }), "conv2d", "[4, 2, 3, 3]", "[2, 3, 5, 5]",
                     "channels");
  const Tensor big = ones({4, 3, 7, 7}, ctx.options(DType::Float32));
  BP_EXPECT_MENTIONS(message([&] { conv2d(x, big); }), "conv2d", "(5 x 5)", "(7 x 7)");
  BP_EXPECT_MENTIONS(
      message([&] { conv2d(x, big.narrow(2, 0, 3).narrow(3, 0, 3), Tensor(), 1, -1); }), "conv2d",
      "negative padding");
  // conv_transpose2d's weight is [in, out/groups, kh, kw]: w expects 4 input channels.
  BP_EXPECT_MENTIONS(message([&] { conv_transpose2d(x, w); }), "conv_transpose2d", "[4, 2, 3, 3]",
                     "[2, 3, 5, 5]", "channels");
  const Tensor wt = ones({3, 2, 3, 3}, ctx.options(DType::Float32));
  BP_EXPECT_MENTIONS(message([&] { conv_transpose2d(x, wt, Tensor(), 1, 0, 1); }),
                     "conv_transpose2d", "output_padding (1, 1)", "stride (1, 1)",
                     "dilation (1, 1)");
  BP_EXPECT_MENTIONS(message([&] { conv_transpose2d(x, wt, Tensor(), 1, 4); }), "conv_transpose2d",
                     "[2, 3, 5, 5]", "(-1 x -1)", "too small");
  BP_EXPECT_MENTIONS(message([&] { conv_transpose2d(x, wt, Tensor(), 1, -1); }), "conv_transpose2d",
                     "negative padding");
  BP_EXPECT_MENTIONS(message([&] { conv_transpose2d(x.narrow(3, 0, 0), wt); }), "conv_transpose2d",
                     "[2, 3, 5, 0]", "no elements per channel");
  BP_EXPECT_MENTIONS(message([&] { max_pool2d(x, 2, 2, 2); }), "max_pool2d", "half");
  BP_EXPECT_MENTIONS(
      message([&] {
        batch_norm(ones({1, 3}, ctx.options()), Tensor(), Tensor(), Tensor(), Tensor(), true);
      }),
      "batch_norm", "more than 1 value");
  BP_EXPECT_MENTIONS(message([&] { group_norm(x, 2); }), "group_norm", "num_groups=2");
  const Tensor t = from_vector(std::vector<int64_t>{0, 7}, {2}, ctx.options(DType::Int64));
  BP_EXPECT_THROWS(cross_entropy(ones({2, 3}, ctx.options()), t), IndexError);
  BP_EXPECT_EQ(x.version(), version, "a failed call changed its input");
  BP_EXPECT(equal(x, ones_like(x)), "a failed call changed its input's values");
}

}  // namespace

void add_nn_cases(Suite& suite) {
  add_op_case(suite, conv_case());
  add_op_case(suite, conv_transpose_case());
  add_op_case(suite, pool_case("nn.max_pool2d", [](const Tensor& x, int v) {
                return max_pool2d(x, 2 + v % 2, std::nullopt, v % 2, 1, v == 1);
              }));
  add_op_case(suite, pool_case("nn.avg_pool2d", [](const Tensor& x, int v) {
                return avg_pool2d(x, 3, 2, 1, v == 1, v != 2);
              }));
  add_op_case(suite, pool_case("nn.adaptive_avg_pool2d", [](const Tensor& x, int v) {
                return adaptive_avg_pool2d(x, {v + 1, 3});
              }));
  add_op_case(suite, norm_case("nn.batch_norm", [](const std::vector<Tensor>& x) {
                const Tensor rm = zeros_like(x[3]).detach(), rv = x[3].detach().clone();
                Tensor y = batch_norm(x[0], rm, rv, x[1], x[2], true, 0.3);
                return Outputs{y, rm, rv, batch_norm(x[0], rm, rv, x[1], x[2], false)};
              }));
  add_op_case(suite, norm_case("nn.group_norm", [](const std::vector<Tensor>& x) {
                return Outputs{group_norm(x[0], 2, x[1], x[2]) + layer_norm(x[0], {x[0].size(-1)})};
              }));
  add_op_case(suite, {"nn.gelu",
                      {Op::Erf, Op::Tanh, Op::Mul},
                      kNnDtypes,
                      samples::unary(),
                      [](const OpArgs& a) {
                        return with_grads(a, [](const std::vector<Tensor>& x) {
                          return Outputs{gelu(x[0]) + gelu(x[0], true)};
                        });
                      },
                      {Layout::Contiguous, Layout::Strided, Layout::ZeroD, Layout::Empty},
                      {"NN-4"}});
  add_op_case(suite, loss_case());
  add_op_case(suite, embedding_case());
  suite.add({"nn.gradcheck", {"AG-10", "NN-4"}, "nn", gradchecks});
  suite.add({"nn.dropout", {"NN-5"}, "nn", dropout_mask});
  suite.add({"nn.bad_arguments", {"NN-4"}, "nn", bad_arguments});
  add_nn_torch_cases(suite);
  add_nn_override_cases(suite);
}

}  // namespace bp::conformance
