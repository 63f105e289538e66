// Differential op cases (DV-2) of the elementwise math, comparison, logical,
// reduction, softmax, indexing and random-number ops. One entry per op (see
// cases_ops.cpp for the format).
#include <algorithm>
#include <numeric>

#include "random_inputs.h"

namespace bp::conformance {

namespace {

using namespace samples;

const std::vector<DType>& kAll = kOpDtypesAll;
const std::vector<DType>& kNumeric = kOpDtypesNumeric;
const std::vector<DType>& kFloat = kOpDtypesFloat;
// Ops that compute in floating point also take integers (giving float32).
const std::vector<DType> kMath = {DType::Int64, DType::Float32, DType::Float64, DType::Float16,
                                  DType::BFloat16};
const std::vector<Layout> kNonEmpty = {Layout::Contiguous, Layout::Strided};

samples::Fn pow_sample() {
  return [](Rng& rng, Layout layout, DType d) {
    // Floats: positive bases, any exponent. Integers: small exponents, since
    // a negative one is an error and big ones overflow.
    Sample s =
        broadcasting(is_floating(d) ? std::vector{Domain::Positive, Domain::Any}
                                    : std::vector{Domain::Any, Domain::Small})(rng, layout, d);
    return s;
  };
}

samples::Fn where_sample() {
  return [](Rng& rng, Layout layout, DType d) {
    Sample s = broadcasting({Domain::Any, Domain::Any, Domain::Any})(rng, layout, d);
    s.inputs[0].dtype = DType::Bool;
    return s;
  };
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

InputSpec plain(std::vector<int64_t> shape) {
  InputSpec in;
  in.shape = std::move(shape);
  return in;
}

// An index input (int64) with values from `fn`.
InputSpec index_input(std::vector<int64_t> shape,
                      std::function<std::vector<double>(Rng&, const std::vector<int64_t>&)> fn) {
  InputSpec in;
  in.shape = std::move(shape);
  in.dtype = DType::Int64;
  in.values = std::move(fn);
  return in;
}

// Indices in [0, bound).
auto below(int64_t bound) {
  return [bound](Rng& rng, const std::vector<int64_t>& shape) {
    std::vector<double> v(static_cast<std::size_t>(numel_of(shape)));
    for (double& x : v) x = static_cast<double>(rng.uniform_int(0, bound - 1));
    return v;
  };
}

// Input [S], dim d, and an index of the same rank whose other dims are at
// most S's (gather's and scatter's rule); along d it has `along` entries.
struct IndexedShape {
  std::vector<int64_t> input, index;
  int64_t dim = 0;
};
IndexedShape indexed_shape(Rng& rng, Layout layout, bool at_most_input_along_dim) {
  IndexedShape r;
  r.input = random_shape(rng, 1, 3, 60);
  const auto rank = static_cast<int64_t>(r.input.size());
  r.dim = rng.uniform_int(0, rank - 1);
  for (int64_t k = 0; k < rank; ++k) {
    const int64_t s = r.input[static_cast<std::size_t>(k)];
    r.index.push_back(k == r.dim && !at_most_input_along_dim ? rng.uniform_int(1, 5)
                                                             : rng.uniform_int(1, s));
  }
  if (layout == Layout::Empty) r.index[static_cast<std::size_t>(rng.uniform_int(0, rank - 1))] = 0;
  return r;
}

samples::Fn gather_sample() {
  return [](Rng& rng, Layout layout, DType) {
    IndexedShape is = indexed_shape(rng, layout, false);
    Sample s;
    s.dims = {is.dim};
    s.inputs.push_back(plain(is.input));
    s.inputs.push_back(index_input(is.index, below(is.input[static_cast<std::size_t>(is.dim)])));
    return s;
  };
}

// Distinct indices along the dim, so that the result does not depend on
// which of two writes to one element lands last.
samples::Fn scatter_sample() {
  return [](Rng& rng, Layout layout, DType) {
    IndexedShape is = indexed_shape(rng, layout, true);
    const auto d = static_cast<std::size_t>(is.dim);
    const int64_t bound = is.input[d];
    auto distinct = [d, bound](Rng& rng, const std::vector<int64_t>& shape) {
      std::vector<double> v(static_cast<std::size_t>(numel_of(shape)));
      int64_t inner = 1;
      for (std::size_t k = d + 1; k < shape.size(); ++k) inner *= shape[k];
      const int64_t along = shape[d], outer = v.empty() ? 0 : numel_of(shape) / (along * inner);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          std::vector<int64_t> perm(static_cast<std::size_t>(bound));
          std::iota(perm.begin(), perm.end(), 0);
          for (int64_t k = bound - 1; k > 0; --k)
            std::swap(perm[static_cast<std::size_t>(k)],
                      perm[static_cast<std::size_t>(rng.uniform_int(0, k))]);
          for (int64_t a = 0; a < along; ++a)
            v[static_cast<std::size_t>((o * along + a) * inner + i)] =
                static_cast<double>(perm[static_cast<std::size_t>(a)]);
        }
      return v;
    };
    Sample s;
    s.dims = {is.dim};
    s.inputs.push_back(plain(is.input));
    s.inputs.push_back(index_input(is.index, distinct));
    s.inputs.push_back(plain(is.index));
    return s;
  };
}

samples::Fn index_select_sample() {
  return [](Rng& rng, Layout layout, DType) {
    std::vector<int64_t> input = random_shape(rng, 1, 3, 60);
    const auto rank = static_cast<int64_t>(input.size());
    const int64_t dim = rng.uniform_int(0, rank - 1);
    const int64_t length = layout == Layout::Empty ? 0 : rng.uniform_int(1, 6);
    Sample s;
    s.dims = {dim};
    s.inputs.push_back(plain(input));
    s.inputs.push_back(index_input({length}, below(input[static_cast<std::size_t>(dim)])));
    return s;
  };
}

Scalar value_of(DType d, double v) {
  if (d == DType::Bool) return Scalar(v != 0);
  if (is_integral(d)) return Scalar(static_cast<int64_t>(v));
  return Scalar(v);
}

OpCaseSpec unary_op(std::string name, Op op, std::vector<DType> dtypes, Tensor (*fn)(const Tensor&),
                    Domain domain = Domain::Any) {
  return {std::move(name), {op}, std::move(dtypes), unary(domain), [fn](const OpArgs& a) {
            return Outputs{fn(a[0])};
          }};
}

OpCaseSpec binary_op(std::string name, Op op, std::vector<DType> dtypes,
                     Tensor (*fn)(const Tensor&, const Tensor&), Domain domain = Domain::Any) {
  return {std::move(name),
          {op},
          std::move(dtypes),
          broadcasting({domain, domain}),
          [fn](const OpArgs& a) { return Outputs{fn(a[0], a[1])}; }};
}

// A comparison, against a tensor and against a scalar.
OpCaseSpec compare_op(std::string name, Op op, Tensor (*with_tensor)(const Tensor&, const Tensor&),
                      Tensor (*with_scalar)(const Tensor&, const Scalar&)) {
  return {
      std::move(name), {op}, kAll, broadcasting({Domain::Few, Domain::Few}), [=](const OpArgs& a) {
        return Outputs{with_tensor(a[0], a[1]), with_scalar(a[0], value_of(a.dtype, 1))};
      }};
}

// max or min: over everything, and over one dim with indices.
void add_extremum(Suite& suite, std::string name, Op op, Tensor (*all)(const Tensor&),
                  std::pair<Tensor, Tensor> (*along)(const Tensor&, int64_t, bool)) {
  // No value for an empty tensor (no identity): no empty layout.
  add_op_case(suite, {name,
                      {op},
                      kAll,
                      reduce_all(),
                      [all](const OpArgs& a) { return Outputs{all(a[0])}; },
                      kLayoutsNoEmpty});
  OpCaseSpec dim{name + ".dim", {op}, kAll, along_dim(), [along](const OpArgs& a) {
                   auto [v, i] = along(a[0], a.dim(), false);
                   auto [vk, ik] = along(a[0], a.dim(), true);
                   return Outputs{v, i, vk, ik};
                 }};
  dim.layouts = kNonEmpty;
  add_op_case(suite, std::move(dim));
}

void add_arg_extremum(Suite& suite, std::string name, Op op,
                      Tensor (*fn)(const Tensor&, std::optional<int64_t>, bool)) {
  OpCaseSpec spec{name, {op}, kAll, along_dim(), [fn](const OpArgs& a) {
                    return Outputs{fn(a[0], a.dim(), false), fn(a[0], a.dim(), true)};
                  }};
  spec.layouts = kNonEmpty;
  add_op_case(suite, std::move(spec));
  // Over everything the core flattens the input, which copies a strided
  // view unless its strides happen to allow a flat view: dense and 0-d
  // inputs only, so that every seed reaches the same kernels.
  add_op_case(suite, {name + ".all",
                      {op},
                      kAll,
                      reduce_all(),
                      [fn](const OpArgs& a) { return Outputs{fn(a[0], std::nullopt, false)}; },
                      {Layout::Contiguous, Layout::ZeroD}});
}

}  // namespace

void add_more_op_cases(Suite& suite) {
  add_op_case(suite, unary_op("neg", Op::Neg, kNumeric, neg));
  add_op_case(suite, unary_op("abs", Op::Abs, kNumeric, abs));
  add_op_case(suite, unary_op("exp", Op::Exp, kMath, exp));
  add_op_case(suite, unary_op("log", Op::Log, kMath, log, Domain::Positive));
  add_op_case(suite, unary_op("sqrt", Op::Sqrt, kMath, sqrt, Domain::Positive));
  add_op_case(suite, unary_op("sigmoid", Op::Sigmoid, kMath, sigmoid));
  add_op_case(suite, unary_op("erf", Op::Erf, kMath, erf));
  add_op_case(suite, unary_op("tanh", Op::Tanh, kMath, tanh));
  add_op_case(suite, unary_op("logical_not", Op::LogicalNot, kAll, logical_not, Domain::Few));
  add_op_case(suite, {"clamp", {Op::Clamp}, kNumeric, unary(), [](const OpArgs& a) {
                        const Scalar lo = value_of(a.dtype, is_floating(a.dtype) ? -0.5 : -3);
                        const Scalar hi = value_of(a.dtype, is_floating(a.dtype) ? 1.25 : 4);
                        return Outputs{clamp(a[0], lo, hi), clamp(a[0], lo, std::nullopt),
                                       clamp(a[0], std::nullopt, hi)};
                      }});

  add_op_case(suite, binary_op("maximum", Op::Maximum, kAll, maximum));
  add_op_case(suite, binary_op("minimum", Op::Minimum, kAll, minimum));
  add_op_case(suite, {"pow", {Op::Pow}, kNumeric, pow_sample(), [](const OpArgs& a) {
                        return Outputs{pow(a[0], a[1]), pow(a[0], value_of(a.dtype, 2))};
                      }});
  add_op_case(suite, compare_op("eq", Op::Eq, eq, eq));
  add_op_case(suite, compare_op("ne", Op::Ne, ne, ne));
  add_op_case(suite, compare_op("lt", Op::Lt, lt, lt));
  add_op_case(suite, compare_op("le", Op::Le, le, le));
  add_op_case(suite, compare_op("gt", Op::Gt, gt, gt));
  add_op_case(suite, compare_op("ge", Op::Ge, ge, ge));
  add_op_case(suite, binary_op("logical_and", Op::LogicalAnd, kAll, logical_and, Domain::Few));
  add_op_case(suite, binary_op("logical_or", Op::LogicalOr, kAll, logical_or, Domain::Few));
  add_op_case(suite, {"where", {Op::Where}, kAll, where_sample(), [](const OpArgs& a) {
                        return Outputs{where(a[0], a[1], a[2])};
                      }});

  add_op_case(suite,
              {"prod", {Op::Prod}, kAll, reduce_all(Domain::NearOne, 24), [](const OpArgs& a) {
                 return Outputs{prod(a[0])};
               }});
  add_op_case(suite, {"prod.dim",
                      {Op::Prod},
                      kAll,
                      reduce_dims(Domain::NearOne, true, 48),
                      [](const OpArgs& a) {
                        return Outputs{prod(a[0], a.dim(), false), prod(a[0], a.dim(), true)};
                      },
                      kLayoutsNoZeroD});
  add_extremum(suite, "max", Op::Max, max, max);
  add_extremum(suite, "min", Op::Min, min, min);
  add_arg_extremum(suite, "argmax", Op::Argmax, argmax);
  add_arg_extremum(suite, "argmin", Op::Argmin, argmin);
  add_op_case(suite, {"mean", {Op::Sum, Op::Div}, kFloat, reduce_all(), [](const OpArgs& a) {
                        return Outputs{mean(a[0])};
                      }});
  add_op_case(suite, {"mean.dims",
                      {Op::Sum, Op::Div},
                      kFloat,
                      reduce_dims(),
                      [](const OpArgs& a) {
                        IntArrayRef dims(a.sample.dims);
                        return Outputs{mean(a[0], dims, false), mean(a[0], dims, true)};
                      },
                      kLayoutsNoZeroD});
  add_op_case(suite, {"softmax",
                      {Op::Softmax},
                      kFloat,
                      along_dim(),
                      [](const OpArgs& a) { return Outputs{softmax(a[0], a.dim())}; },
                      kLayoutsNoZeroD});
  add_op_case(suite, {"log_softmax",
                      {Op::LogSoftmax},
                      kFloat,
                      along_dim(),
                      [](const OpArgs& a) { return Outputs{log_softmax(a[0], a.dim())}; },
                      kLayoutsNoZeroD});
  add_op_case(suite, {"bmm",
                      {Op::Matmul},
                      kFloat,
                      samples::bmm(),
                      [](const OpArgs& a) { return Outputs{bmm(a[0], a[1])}; },
                      kLayoutsNoZeroD});

  add_op_case(suite, {"gather",
                      {Op::Gather},
                      kAll,
                      gather_sample(),
                      [](const OpArgs& a) { return Outputs{gather(a[0], a.dim(), a[1])}; },
                      kLayoutsNoZeroD});
  add_op_case(suite, {"scatter",
                      {Op::Scatter},
                      kAll,
                      scatter_sample(),
                      [](const OpArgs& a) {
                        return Outputs{scatter(a[0], a.dim(), a[1], a[2]),
                                       scatter(a[0], a.dim(), a[1], value_of(a.dtype, 1))};
                      },
                      kLayoutsNoZeroD});
  add_op_case(suite, {"index_select",
                      {Op::IndexSelect},
                      kAll,
                      index_select_sample(),
                      [](const OpArgs& a) { return Outputs{index_select(a[0], a.dim(), a[1])}; },
                      kLayoutsNoZeroD});

  // CR-6: the stream is counter based, so every backend draws the same numbers.
  OpCaseSpec random{"rand", {Op::Random}, kFloat, factory(), [](const OpArgs& a) {
                      manual_seed(20240601);
                      Tensor u = rand(IntArrayRef(a.sample.shape), a.options);
                      Tensor n = randn(IntArrayRef(a.sample.shape), a.options);
                      return Outputs{u, n};
                    }};
  random.spec = {"CR-6"};
  random.layouts = {Layout::Contiguous, Layout::ZeroD, Layout::Empty};
  add_op_case(suite, std::move(random));
}

}  // namespace bp::conformance
