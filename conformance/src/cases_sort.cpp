// Sorting and running sums (SO-1..SO-3). Differential cases against the
// reference backend on random lines full of ties (so that a sort which is
// not stable shows), and fixed cases whose values follow from the rules
// alone, since the reference runs the same new kernels: the order's corners
// (NaN, infinities, -0.0, bool, ties in both directions), cumsum's dtypes
// and wrapping, unique_consecutive with and without a dim, the gradients,
// and the errors.
#include <backplane/conformance.h>
#include <backplane/conformance/op_case.h>

#include <cmath>
#include <limits>
#include <vector>

#include "case_checks.h"

namespace bp::conformance {

namespace {

using namespace samples;

constexpr const char* kCategory = "op";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor int64s(const Context& ctx, const std::vector<int64_t>& v,
              const std::vector<int64_t>& shape) {
  return from_vector(v, IntArrayRef(shape), ctx.options(DType::Int64));
}

// SO-1: NaN above every number, -0.0 equal to 0.0, equal elements in their
// order in both directions; the values follow the positions.
void sort_order(const Context& ctx) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    const Tensor x = from_vector(std::vector<double>{2, kNaN, -1, 0.0, -0.0, 2, -kInf, kNaN, kInf},
                                 {9}, ctx.options(dt));
    BP_EXPECT_VALUES(argsort(x), {6, 2, 3, 4, 0, 5, 8, 1, 7});
    BP_EXPECT_VALUES(argsort(x, 0, true), {1, 7, 8, 0, 5, 3, 4, 2, 6});
    const auto [v, i] = sort(x, -1, true);
    BP_EXPECT_VALUES(i, {1, 7, 8, 0, 5, 3, 4, 2, 6});
    const std::vector<double> got = v.to_vector<double>();
    BP_EXPECT(std::isnan(got[0]) && std::isnan(got[1]),
              "NaN first when descending: ", detail::format(got));
    BP_EXPECT_EQ(std::vector<double>(got.begin() + 2, got.end()),
                 (std::vector<double>{kInf, 2, 2, 0, 0, -1, -kInf}));
  }
  const Tensor b =
      from_vector(std::vector<bool>{true, false, true, false}, {4}, ctx.options(DType::Bool));
  BP_EXPECT_VALUES(argsort(b), {1, 3, 0, 2});
  BP_EXPECT_VALUES(argsort(b, 0, true), {0, 2, 1, 3});
  // Along either dim of a matrix, and of its transpose (strided lines).
  const Tensor m = int64s(ctx, {3, 1, 2, 1, 1, 0}, {2, 3});
  BP_EXPECT_VALUES(argsort(m, 1), {1, 2, 0, 2, 0, 1});
  BP_EXPECT_VALUES(argsort(m, 0), {1, 0, 1, 0, 1, 0});
  BP_EXPECT_VALUES(argsort(m.t(), 0), {1, 2, 2, 0, 0, 1});
  const auto [v, i] = m.sort(1, true);
  BP_EXPECT_VALUES(v, {3, 2, 1, 1, 1, 0});
  BP_EXPECT_VALUES(i, {0, 2, 1, 0, 1, 2});
  // 0-d and empty.
  const Tensor s = scalar_tensor(5.0, ctx.options());
  BP_EXPECT_SHAPE(argsort(s), {});
  BP_EXPECT_EQ(argsort(s).item<int64_t>(), 0);
  BP_EXPECT_SHAPE(sort(zeros({2, 0}, ctx.options()), 1).second, {2, 0});
  BP_EXPECT_THROWS(argsort(m, 2), IndexError);
}

// SO-2: running sums; bool and integers give int64 (and wrap there),
// `dtype` converts first.
void cumsum_values(const Context& ctx) {
  const Tensor m =
      from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}, ctx.options(DType::Float32));
  BP_EXPECT_VALUES(cumsum(m, 0), {1, 2, 4, 6});
  BP_EXPECT_VALUES(cumsum(m, 1), {1, 3, 3, 7});
  BP_EXPECT_VALUES(cumsum(m.t(), -1), {1, 4, 2, 6});
  const Tensor i8 = from_vector(std::vector<double>{100, 100, 100}, {3}, ctx.options(DType::Int8));
  BP_EXPECT_EQ(cumsum(i8, 0).dtype(), DType::Int64);
  BP_EXPECT_VALUES(cumsum(i8, 0), {100, 200, 300});
  const Tensor b =
      from_vector(std::vector<bool>{true, false, true, true}, {4}, ctx.options(DType::Bool));
  BP_EXPECT_EQ(cumsum(b, 0).dtype(), DType::Int64);
  BP_EXPECT_VALUES(cumsum(b, 0), {1, 1, 2, 3});
  const int64_t big = std::numeric_limits<int64_t>::max();
  BP_EXPECT_EQ(cumsum(int64s(ctx, {big, 1}, {2}), 0).to_vector<int64_t>(),
               (std::vector<int64_t>{big, std::numeric_limits<int64_t>::min()}));
  const Tensor as_double = cumsum(int64s(ctx, {1, 2}, {2}), 0, DType::Float64);
  BP_EXPECT_EQ(as_double.dtype(), DType::Float64);
  BP_EXPECT_VALUES(as_double, {1, 3});
  const Tensor as_int32 = cumsum(int64s(ctx, {2147483647, 1}, {2}), 0, DType::Int32);
  BP_EXPECT_EQ(as_int32.dtype(), DType::Int32);
  BP_EXPECT_VALUES(as_int32, {2147483647, -2147483648.0});  // the sums wrap in int32
  BP_EXPECT_EQ(cumsum(scalar_tensor(4.0, ctx.options()), 0).item<double>(), 4.0);
  BP_EXPECT_SHAPE(cumsum(zeros({0, 3}, ctx.options()), 0), {0, 3});
}

// SO-3: runs of equal elements, flattened or as slices along a dim.
void unique_consecutive_values(const Context& ctx) {
  const auto [out, inverse, counts] =
      unique_consecutive(int64s(ctx, {1, 1, 2, 2, 3, 1, 1, 2}, {2, 4}), true, true);
  BP_EXPECT_VALUES(out, {1, 2, 3, 1, 2});
  BP_EXPECT_SHAPE(inverse, {2, 4});
  BP_EXPECT_VALUES(inverse, {0, 0, 1, 1, 2, 3, 3, 4});
  BP_EXPECT_VALUES(counts, {2, 2, 1, 2, 1});
  const Tensor cols = int64s(ctx, {0, 0, 1, 1, 2, 2, 3, 4}, {2, 4});
  const auto [o1, i1, c1] = unique_consecutive(cols, true, true, 1);
  BP_EXPECT_SHAPE(o1, {2, 3});
  BP_EXPECT_VALUES(o1, {0, 1, 1, 2, 3, 4});
  BP_EXPECT_VALUES(i1, {0, 0, 1, 2});
  BP_EXPECT_VALUES(c1, {2, 1, 1});
  // NaN equals nothing, so each NaN is a run of its own; -0.0 equals 0.0.
  const auto [o2, i2, c2] = unique_consecutive(
      from_vector(std::vector<double>{kNaN, kNaN, -0.0, 0.0}, {4}, ctx.options()), false, true);
  BP_EXPECT_SHAPE(o2, {3});
  BP_EXPECT(!i2.defined(), "inverse was not asked for");
  BP_EXPECT_VALUES(c2, {1, 1, 2});
  const auto [o3, i3, c3] = unique_consecutive(zeros({0}, ctx.options()), true, true);
  BP_EXPECT_SHAPE(o3, {0});
  BP_EXPECT_SHAPE(c3, {0});
  BP_EXPECT_THROWS(unique_consecutive(scalar_tensor(1.0, ctx.options()), false, false, 0),
                   IndexError);
  BP_EXPECT_THROWS(unique_consecutive(zeros({3, 0}, ctx.options()), false, false, 0), ValueError);
  BP_EXPECT_THROWS(unique_consecutive(zeros({0, 0}, ctx.options()), false, false, 0), ValueError);
  BP_EXPECT_SHAPE(std::get<0>(unique_consecutive(zeros({0, 3}, ctx.options()), false, false, 0)),
                  {0, 3});
}

// SO-1, SO-2: the gradients: sort's goes back to where each value came
// from, cumsum's is the sum of the output's gradient from each position on.
void sort_cumsum_grad(const Context& ctx) {
  const Tensor w = from_vector(std::vector<double>{1, 10, 100}, {3}, ctx.options(DType::Float64));
  Tensor x = from_vector(std::vector<double>{3, 1, 2}, {3}, ctx.options(DType::Float64));
  x.requires_grad_();
  sort(x).first.mul(w).sum().backward();
  BP_EXPECT_VALUES(x.grad(), {100, 1, 10});
  Tensor y = from_vector(std::vector<double>{3, 1, 2}, {3}, ctx.options(DType::Float64));
  y.requires_grad_();
  cumsum(y, 0).mul(w).sum().backward();
  BP_EXPECT_VALUES(y.grad(), {111, 110, 100});
  // An infinite or a huge gradient at the start spoils none of the ones
  // after it.
  Tensor z = from_vector(std::vector<double>{1, 2, 3}, {3}, ctx.options(DType::Float32));
  z.requires_grad_();
  cumsum(z, 0).backward(
      from_vector(std::vector<double>{kInf, 1, 1}, {3}, ctx.options(DType::Float32)));
  BP_EXPECT_VALUES(z.grad(), {kInf, 2, 1});
  Tensor h = from_vector(std::vector<double>{1, 2, 3}, {3}, ctx.options(DType::Float32));
  h.requires_grad_();
  cumsum(h, 0).backward(
      from_vector(std::vector<double>{1e8, 1, 1}, {3}, ctx.options(DType::Float32)));
  BP_EXPECT_VALUES(h.grad(), {1e8, 2, 1});
  BP_EXPECT(!argsort(y).requires_grad(), "argsort's positions record nothing");
}

}  // namespace

void add_sort_cases(Suite& suite) {
  suite.add({"sort.order", {"SO-1"}, kCategory, sort_order});
  suite.add({"cumsum.values", {"SO-2"}, kCategory, cumsum_values});
  suite.add({"unique_consecutive.values", {"SO-3"}, kCategory, unique_consecutive_values});
  suite.add({"sort.grad", {"SO-1", "SO-2", "AG-10"}, kCategory, sort_cumsum_grad});

  // Against the reference: lines of few distinct values, so ties abound.
  OpCaseSpec sort_case{"sort",
                       {Op::Argsort, Op::Gather},
                       kOpDtypesAll,
                       along_dim(Domain::Few),
                       [](const OpArgs& a) {
                         const auto [v, i] = sort(a[0], a.dim());
                         const auto [dv, di] = sort(a[0], a.dim(), true);
                         return Outputs{v, i, dv, di};
                       },
                       kLayoutsNoZeroD};
  sort_case.spec = {"SO-1"};
  add_op_case(suite, std::move(sort_case));
  OpCaseSpec cumsum_case{"cumsum",
                         {Op::Cumsum},
                         kOpDtypesAll,
                         along_dim(),
                         [](const OpArgs& a) { return Outputs{cumsum(a[0], a.dim())}; },
                         kLayoutsNoZeroD};
  cumsum_case.spec = {"SO-2"};
  add_op_case(suite, std::move(cumsum_case));
  OpCaseSpec unique_case{"unique_consecutive",
                         {Op::Ne, Op::Sum, Op::Gt, Op::Cumsum, Op::Scatter, Op::IndexSelect},
                         kOpDtypesAll,
                         unary(Domain::Few),
                         [](const OpArgs& a) {
                           const auto [o, i, c] = unique_consecutive(a[0], true, true);
                           return Outputs{o, i, c};
                         },
                         // Flattening copies a strided view unless its strides
                         // allow a flat view: dense inputs only, so that every
                         // seed reaches the same kernels.
                         {Layout::Contiguous, Layout::ZeroD, Layout::Empty}};
  unique_case.spec = {"SO-3"};
  add_op_case(suite, std::move(unique_case));
  OpCaseSpec unique_dim_case{"unique_consecutive.dim",
                             {Op::Ne, Op::Sum, Op::Gt, Op::Cumsum, Op::Scatter, Op::IndexSelect},
                             kOpDtypesAll,
                             along_dim(Domain::Few),
                             [](const OpArgs& a) {
                               const auto [o, i, c] = unique_consecutive(a[0], true, true, a.dim());
                               return Outputs{o, i, c};
                             },
                             // Empty inputs take the flattened case's path.
                             {Layout::Contiguous, Layout::Strided}};
  unique_dim_case.spec = {"SO-3"};
  add_op_case(suite, std::move(unique_dim_case));
}

}  // namespace bp::conformance
