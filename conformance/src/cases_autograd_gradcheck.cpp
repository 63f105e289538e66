// Finite-difference gradient checks (AG-10): every differentiable op, in
// float64, on small random inputs from the case's seed, once with dense
// inputs and once with non-contiguous ones (transposed in memory, or every
// other element of a longer buffer). Inputs keep away from the points where
// an op is not differentiable (0 for abs and relu, ties for max/min, the
// bounds of clamp), so the central differences are meaningful.
#include <backplane/conformance.h>
#include <backplane/conformance/op_case.h>

#include <functional>
#include <numeric>
#include <sstream>

#include "autograd_cases.h"

namespace bp::conformance {

namespace {

using In = std::vector<Tensor>;
using Fn = std::function<Tensor(const In&)>;

enum class Values {
  Real,      // ±[0.1, 1): away from 0
  NonZero,   // ±[0.5, 1.5): divisors, factors of a product
  Positive,  // [0.5, 2): log, sqrt, pow bases
  Distinct,  // in [-1, 1], pairwise at least 0.8/n apart: max/min without ties
};

struct GradInput {
  std::vector<int64_t> shape;
  Values values = Values::Real;
};

struct GradcheckSpec {
  const char* name;
  std::vector<GradInput> inputs;
  Fn fn;
  std::vector<std::string> ids = {"AG-10"};
};

// In-place ops on a non-leaf copy of the input (AG-9): y = x * 1, then f_(y).
GradcheckSpec inplace(const char* name, std::vector<GradInput> inputs,
                      std::function<void(Tensor& y, const In& x)> f) {
  return {name,
          std::move(inputs),
          [f](const In& x) {
            Tensor y = x[0] * 1;
            f(y, x);
            return y;
          },
          {"AG-9", "AG-10"}};
}

std::vector<double> draw(Rng& rng, Values kind, int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  if (kind == Values::Distinct) {
    std::vector<int64_t> perm(static_cast<std::size_t>(n));
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng.uniform_int(0, i)]);
    for (int64_t i = 0; i < n; ++i)
      v[i] =
          -1 + 2 * (static_cast<double>(perm[i]) + rng.uniform(0.2, 0.8)) / static_cast<double>(n);
    return v;
  }
  for (double& x : v) {
    const double sign = rng.chance(0.5) ? -1 : 1;
    switch (kind) {
      case Values::Real:
        x = sign * rng.uniform(0.1, 1);
        break;
      case Values::NonZero:
        x = sign * rng.uniform(0.5, 1.5);
        break;
      default:
        x = rng.uniform(0.5, 2);
        break;
    }
  }
  return v;
}

// A float64 leaf holding `v` (row-major). Non-contiguous: for rank >= 2 the
// last two dims are swapped in memory (a transposed buffer), for rank 1 the
// elements sit at every other position of a buffer twice as long.
Tensor make_input(const Context& ctx, const std::vector<double>& v,
                  const std::vector<int64_t>& shape, bool strided) {
  const TensorOptions f64 = ctx.options(DType::Float64);
  Tensor x;
  if (!strided || shape.empty()) {
    x = from_vector(v, IntArrayRef(shape), f64);
  } else if (shape.size() == 1) {
    std::vector<double> buf(2 * v.size(), 7.0);
    for (std::size_t i = 0; i < v.size(); ++i) buf[2 * i] = v[i];
    x = from_vector(buf, {2 * shape[0]}, f64).slice(0, 0, None, 2).detach();
  } else {
    const std::size_t r = shape.size();
    const int64_t rows = shape[r - 2], cols = shape[r - 1], plane = rows * cols;
    std::vector<int64_t> swapped = shape;
    std::swap(swapped[r - 2], swapped[r - 1]);
    std::vector<double> buf(v.size());
    for (std::size_t p = 0; p < v.size() / static_cast<std::size_t>(plane); ++p)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          buf[p * plane + j * rows + i] = v[p * plane + i * cols + j];
    x = from_vector(buf, IntArrayRef(swapped), f64).transpose(-1, -2).detach();
  }
  x.requires_grad_();
  return x;
}

Tensor index(const Tensor& like, std::vector<int64_t> v, std::vector<int64_t> shape) {
  return from_vector(v, IntArrayRef(shape), TensorOptions(DType::Int64).device(like.device()));
}

void run_gradcheck(const Context& ctx, const GradcheckSpec& spec) {
  Rng rng(ctx.case_seed(std::string("autograd.gradcheck.") + spec.name));
  std::vector<std::vector<double>> values;
  for (const GradInput& in : spec.inputs) {
    int64_t n = 1;
    for (int64_t s : in.shape) n *= s;
    values.push_back(draw(rng, in.values, n));
  }
  for (bool strided : {false, true}) {
    In inputs;
    std::ostringstream described;
    for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
      inputs.push_back(make_input(ctx, values[i], spec.inputs[i].shape, strided));
      described << (i ? ", " : "") << inputs.back().sizes() << " strides "
                << inputs.back().strides();
    }
    const GradcheckResult r = gradcheck(spec.fn, inputs);
    BP_EXPECT(r.ok, spec.name, " with ", strided ? "non-contiguous" : "contiguous", " inputs (",
              described.str(), "): ", r.message);
  }
}

const std::vector<GradcheckSpec>& specs() {
  using V = Values;
  static const std::vector<GradcheckSpec> s = {
      // --- elementwise, with broadcasting
      {"add", {{{2, 3}}, {{2, 3}}}, [](const In& x) { return x[0] + x[1]; }},
      {"add_alpha_broadcast", {{{2, 3}}, {{3}}}, [](const In& x) { return add(x[0], x[1], -1.5); }},
      {"sub", {{{2, 3}}, {{2, 3}}}, [](const In& x) { return sub(x[0], x[1], 0.5); }},
      {"mul", {{{2, 3}}, {{2, 3}}}, [](const In& x) { return x[0] * x[1]; }},
      {"mul_broadcast", {{{2, 1, 3}}, {{4, 1}}}, [](const In& x) { return x[0] * x[1]; }},
      {"mul_scalar", {{{2, 3}}}, [](const In& x) { return x[0] * 1.5; }},
      {"div", {{{2, 3}}, {{2, 3}, V::NonZero}}, [](const In& x) { return x[0] / x[1]; }},
      {"div_broadcast", {{{3}}, {{2, 1}, V::NonZero}}, [](const In& x) { return x[0] / x[1]; }},
      {"neg", {{{2, 3}}}, [](const In& x) { return -x[0]; }},
      {"abs", {{{2, 3}}}, [](const In& x) { return abs(x[0]); }},
      {"exp", {{{2, 3}}}, [](const In& x) { return exp(x[0]); }},
      {"log", {{{2, 3}, V::Positive}}, [](const In& x) { return log(x[0]); }},
      {"sqrt", {{{2, 3}, V::Positive}}, [](const In& x) { return sqrt(x[0]); }},
      {"sigmoid", {{{2, 3}}}, [](const In& x) { return sigmoid(x[0]); }},
      {"tanh", {{{2, 3}}}, [](const In& x) { return tanh(x[0]); }},
      {"erf", {{{2, 3}}}, [](const In& x) { return erf(x[0]); }},
      // --- composite ops a backend may override (DV-6): the gradient is the composite's
      {"silu", {{{2, 3}}}, [](const In& x) { return silu(x[0]); }, {"AG-10", "DV-6"}},
      {"layer_norm", {{{2, 3, 4}}, {{4}}, {{4}}},
       [](const In& x) { return layer_norm(x[0], {4}, x[1], x[2]); }, {"AG-10", "DV-6"}},
      {"layer_norm_two_dims", {{{2, 3, 4}}},
       [](const In& x) { return layer_norm(x[0], {3, 4}, Tensor(), Tensor(), 0.01); },
       {"AG-10", "DV-6"}},
      {"relu", {{{2, 3}}}, [](const In& x) { return relu(x[0]); }},
      {"clamp", {{{3, 4}}}, [](const In& x) { return clamp(x[0], -0.55, 0.45); }},
      {"clamp_min", {{{3, 4}}}, [](const In& x) { return clamp(x[0], 0.35, std::nullopt); }},
      {"maximum", {{{2, 3}, V::Distinct}, {{2, 3}, V::Distinct}},
       [](const In& x) { return maximum(x[0], x[1]); }},
      {"minimum_broadcast", {{{2, 3}, V::Distinct}, {{3}, V::Distinct}},
       [](const In& x) { return minimum(x[0], x[1]); }},
      {"pow_scalar", {{{2, 3}, V::Positive}}, [](const In& x) { return pow(x[0], 2.5); }},
      {"pow_negative_scalar", {{{2, 3}, V::Positive}}, [](const In& x) { return pow(x[0], -1.5); }},
      {"pow_tensor", {{{2, 3}, V::Positive}, {{2, 3}}},
       [](const In& x) { return pow(x[0], x[1]); }},
      // --- reductions
      {"sum", {{{2, 3, 4}}}, [](const In& x) { return x[0].sum(); }},
      {"sum_dim", {{{2, 3, 4}}}, [](const In& x) { return x[0].sum({1}); }},
      {"sum_dims_keepdim", {{{2, 3, 4}}}, [](const In& x) { return x[0].sum({0, -1}, true); }},
      {"mean", {{{2, 3, 4}}}, [](const In& x) { return x[0].mean(); }},
      {"mean_dims", {{{2, 3, 4}}}, [](const In& x) { return x[0].mean({1, 2}); }},
      {"mean_dim_keepdim", {{{2, 3, 4}}}, [](const In& x) { return x[0].mean({0}, true); }},
      {"prod", {{{2, 3}, V::NonZero}}, [](const In& x) { return prod(x[0]); }},
      {"prod_dim", {{{2, 3}, V::NonZero}}, [](const In& x) { return prod(x[0], 1); }},
      {"prod_dim_keepdim", {{{3, 2}, V::NonZero}}, [](const In& x) { return prod(x[0], 0, true); }},
      {"max", {{{3, 4}, V::Distinct}}, [](const In& x) { return max(x[0]); }},
      {"min", {{{3, 4}, V::Distinct}}, [](const In& x) { return min(x[0]); }},
      {"max_dim", {{{3, 4}, V::Distinct}}, [](const In& x) { return max(x[0], 1).first; }},
      {"min_dim_keepdim", {{{3, 4}, V::Distinct}},
       [](const In& x) { return min(x[0], 0, true).first; }},
      {"softmax", {{{3, 4}}}, [](const In& x) { return softmax(x[0], 1); }},
      {"softmax_dim0", {{{3, 4}}}, [](const In& x) { return softmax(x[0], 0); }},
      {"log_softmax", {{{3, 4}}}, [](const In& x) { return log_softmax(x[0], 1); }},
      {"log_softmax_3d", {{{2, 3, 4}}}, [](const In& x) { return log_softmax(x[0], -1); }},
      {"sort", {{{3, 4}, V::Distinct}}, [](const In& x) { return sort(x[0], 1).first; }},
      {"sort_dim0_descending", {{{3, 4}, V::Distinct}},
       [](const In& x) { return sort(x[0], 0, true).first; }},
      {"cumsum", {{{3, 4}}}, [](const In& x) { return cumsum(x[0], 1); }},
      {"cumsum_dim0", {{{3, 4}}}, [](const In& x) { return cumsum(x[0], 0); }},
      // --- matrix products
      {"matmul", {{{2, 3}}, {{3, 4}}}, [](const In& x) { return matmul(x[0], x[1]); }},
      {"matmul_vector_matrix", {{{3}}, {{3, 4}}}, [](const In& x) { return matmul(x[0], x[1]); }},
      {"matmul_matrix_vector", {{{2, 3}}, {{3}}}, [](const In& x) { return matmul(x[0], x[1]); }},
      {"matmul_dot", {{{3}}, {{3}}}, [](const In& x) { return matmul(x[0], x[1]); }},
      {"matmul_batched_broadcast", {{{2, 2, 3}}, {{3, 4}}},
       [](const In& x) { return matmul(x[0], x[1]); }},
      {"matmul_batched_both", {{{2, 1, 2, 3}}, {{3, 3, 2}}},
       [](const In& x) { return matmul(x[0], x[1]); }},
      {"bmm", {{{2, 2, 3}}, {{2, 3, 4}}}, [](const In& x) { return bmm(x[0], x[1]); }},
      // --- views
      {"view", {{{2, 3}}}, [](const In& x) { return x[0].view({2, 1, 3}); }},
      {"reshape", {{{2, 3}}}, [](const In& x) { return x[0].reshape({3, 2}); }},
      {"flatten", {{{2, 3, 4}}}, [](const In& x) { return x[0].flatten(1); }},
      {"transpose", {{{2, 3, 4}}}, [](const In& x) { return x[0].transpose(0, 2); }},
      {"t", {{{2, 3}}}, [](const In& x) { return x[0].t(); }},
      {"permute", {{{2, 3, 4}}}, [](const In& x) { return x[0].permute({2, 0, 1}); }},
      {"narrow", {{{3, 4}}}, [](const In& x) { return x[0].narrow(1, 1, 2); }},
      {"select", {{{3, 4}}}, [](const In& x) { return x[0].select(0, 1); }},
      {"select_negative", {{{3, 4}}}, [](const In& x) { return x[0].select(1, -1); }},
      {"slice_step", {{{3, 5}}}, [](const In& x) { return x[0].slice(1, 0, None, 2); }},
      {"index", {{{4, 3}}}, [](const In& x) { return x[0].index({Slice(1, None, 2), 1}); }},
      {"expand", {{{3, 1}}}, [](const In& x) { return x[0].expand({2, 3, 4}); }},
      {"squeeze", {{{3, 1, 2}}}, [](const In& x) { return x[0].squeeze(); }},
      {"squeeze_dim", {{{3, 1, 2}}}, [](const In& x) { return x[0].squeeze(1); }},
      {"unsqueeze", {{{2, 3}}}, [](const In& x) { return x[0].unsqueeze(1); }},
      {"diagonal", {{{3, 3}}}, [](const In& x) { return x[0].diagonal(); }},
      {"diagonal_offset", {{{3, 4}}}, [](const In& x) { return x[0].diagonal(1); }},
      {"diagonal_3d", {{{3, 2, 3}}}, [](const In& x) { return x[0].diagonal(-1, 0, 2); }},
      // Overlapping windows: each element is read by up to three of them.
      {"as_strided_overlapping", {{{6}}},
       [](const In& x) { return x[0].as_strided({4, 3}, {1, 1}); }},
      {"as_strided_offset", {{{3, 4}}},
       [](const In& x) { return x[0].as_strided({2, 2, 3}, {4, 1, 1}, 1); }},
      {"unfold_overlapping", {{{2, 5}}}, [](const In& x) { return x[0].unfold(1, 3, 1); }},
      {"unfold_step", {{{4, 3}}}, [](const In& x) { return x[0].unfold(0, 2, 2); }},
      // --- indexing by tensors
      {"gather", {{{3, 4}}},
       [](const In& x) { return x[0].gather(1, index(x[0], {0, 3, 1, 1, 2, 0}, {3, 2})); }},
      {"gather_dim0", {{{3, 4}}},
       [](const In& x) { return x[0].gather(0, index(x[0], {2, 0, 1, 2, 0, 0, 1, 1}, {2, 4})); }},
      // Every target of a column is distinct, so the result does not depend
      // on which duplicate wins.
      {"scatter", {{{3, 4}}, {{2, 4}}},
       [](const In& x) {
         return scatter(x[0], 0, index(x[0], {0, 1, 2, 0, 2, 0, 1, 1}, {2, 4}), x[1]);
       }},
      {"index_select", {{{4, 3}}},
       [](const In& x) { return x[0].index_select(0, index(x[0], {3, 0, 3}, {3})); }},
      {"index_select_dim1", {{{4, 3}}},
       [](const In& x) { return x[0].index_select(1, index(x[0], {2, 0}, {2})); }},
      {"where", {{{2, 3}}, {{3}}},
       [](const In& x) {
         const Tensor cond = from_vector(std::vector<bool>{true, false, false, true, true, false},
                                         {2, 3}, TensorOptions(DType::Bool).device(x[0].device()));
         return where(cond, x[0], x[1]);
       }},
      // --- copies
      {"clone", {{{2, 3}}}, [](const In& x) { return x[0].clone(); }},
      {"contiguous", {{{2, 3}}}, [](const In& x) { return x[0].contiguous(); }},
      {"to_same_dtype", {{{2, 3}}}, [](const In& x) { return x[0].to(DType::Float64); }},
      {"copy_into_clone", {{{2, 3}}, {{2, 3}}},
       [](const In& x) {
         Tensor d = x[1].clone();
         d.copy_(x[0]);
         return d;
       }},
      // Broadcast into one row of a clone: a gets that row's gradient, b
      // the others'.
      {"copy_into_row", {{{3}}, {{2, 3}}},
       [](const In& x) {
         Tensor d = x[1].clone();
         d.narrow(0, 1, 1).copy_(x[0]);
         return d;
       }},
      // --- a composition: a linear layer, relu, log_softmax
      {"mlp", {{{4, 3}}, {{3, 5}}, {{5}}},
       [](const In& x) { return log_softmax(relu(matmul(x[0], x[1]) + x[2]), 1); }},
      // --- in-place ops on non-leaves
      inplace("inplace_add", {{{2, 3}}, {{3}}}, [](Tensor& y, const In& x) { y.add_(x[1], 2); }),
      inplace("inplace_sub", {{{2, 3}}, {{2, 3}}}, [](Tensor& y, const In& x) { y.sub_(x[1]); }),
      inplace("inplace_mul", {{{2, 3}}, {{2, 3}}}, [](Tensor& y, const In& x) { y.mul_(x[1]); }),
      inplace("inplace_div", {{{2, 3}}, {{2, 3}, V::NonZero}},
              [](Tensor& y, const In& x) { y.div_(x[1]); }),
      inplace("inplace_neg", {{{2, 3}}}, [](Tensor& y, const In&) { y.neg_(); }),
      inplace("inplace_abs", {{{2, 3}}}, [](Tensor& y, const In&) { y.abs_(); }),
      inplace("inplace_exp", {{{2, 3}}}, [](Tensor& y, const In&) { y.exp_(); }),
      inplace("inplace_log", {{{2, 3}, V::Positive}}, [](Tensor& y, const In&) { y.log_(); }),
      inplace("inplace_sqrt", {{{2, 3}, V::Positive}}, [](Tensor& y, const In&) { y.sqrt_(); }),
      inplace("inplace_sigmoid", {{{2, 3}}}, [](Tensor& y, const In&) { y.sigmoid_(); }),
      inplace("inplace_tanh", {{{2, 3}}}, [](Tensor& y, const In&) { y.tanh_(); }),
      inplace("inplace_relu", {{{2, 3}}}, [](Tensor& y, const In&) { y.relu_(); }),
      inplace("inplace_clamp", {{{3, 4}}}, [](Tensor& y, const In&) { y.clamp_(-0.55, 0.45); }),
      inplace("inplace_pow", {{{2, 3}, V::Positive}}, [](Tensor& y, const In&) { y.pow_(2.5); }),
      inplace("inplace_scatter", {{{3, 4}}, {{2, 4}}},
              [](Tensor& y, const In& x) {
                y.scatter_(0, index(x[0], {0, 1, 2, 0, 2, 0, 1, 1}, {2, 4}), x[1]);
              }),
      // Two writes through views: the second view is taken after the first
      // write rewrote the base's history.
      inplace("inplace_through_views", {{{2, 3}}, {{2, 2}}},
              [](Tensor& y, const In& x) {
                y.narrow(1, 1, 2).mul_(x[1]);
                y.t().select(0, 0).exp_();
              }),
      // A view taken before the base is written in place sees the new
      // values, and its gradient must follow them.
      {"inplace_base_then_view", {{{2, 3}}},
       [](const In& x) {
         Tensor y = x[0] * 1;
         Tensor row = y.select(0, 0);
         y.mul_(x[0]);
         return row * 3;
       },
       {"AG-9", "AG-10", "AG-11"}},
  };
  return s;
}

}  // namespace

void add_autograd_gradcheck_cases(Suite& suite) {
  for (const GradcheckSpec& spec : specs()) {
    const GradcheckSpec* p = &spec;
    suite.add({std::string("autograd.gradcheck.") + spec.name, spec.ids, kAutogradCategory,
               [p](const Context& ctx) { run_gradcheck(ctx, *p); }});
  }
}

}  // namespace bp::conformance
