// Ops on any strided input (VW-4) and on empty and 0-d tensors (VW-6).
// Strided inputs are views whose values are known on the host from their
// hand-written layout over an iota base; every expected result is a host
// loop over those values, and the op on a contiguous copy must give it too.
#include <backplane/conformance.h>

#include <cmath>

#include "case_checks.h"
#include "case_util.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "view";

struct Input {
  std::string name;
  Tensor t;
  std::vector<double> host;  // t's values, row-major
};

// A view over iota(base_shape) and the values its layout reads.
Input strided(const Context& ctx, std::string name, const std::vector<int64_t>& base_shape,
              Tensor (*make)(const Tensor&), const std::vector<int64_t>& sizes,
              const std::vector<int64_t>& strides, int64_t offset) {
  Tensor base = iota(ctx, base_shape, DType::Float64);
  return {std::move(name), make(base), gather(host_iota(base.numel()), sizes, strides, offset)};
}

// Five [3, 4] float64 inputs: transposed, stepped with an offset, expanded
// along either dim (zero strides), and a contiguous block at an offset.
std::vector<Input> inputs_3x4(const Context& ctx) {
  return {
      strided(
          ctx, "transposed", {4, 3}, [](const Tensor& b) { return b.t(); }, {3, 4}, {1, 3}, 0),
      strided(
          ctx, "stepped", {7, 9},
          [](const Tensor& b) {
            return b.index({Slice(1, None, 2), Slice(1, None, 2)});
          },
          {3, 4}, {18, 2}, 10),
      strided(
          ctx, "expanded_rows", {1, 4},
          [](const Tensor& b) {
            return b.expand({3, 4});
          },
          {3, 4}, {0, 1}, 0),
      strided(
          ctx, "expanded_cols", {3, 1},
          [](const Tensor& b) {
            return b.expand({3, 4});
          },
          {3, 4}, {1, 0}, 0),
      strided(
          ctx, "offset", {5, 4}, [](const Tensor& b) { return b.narrow(0, 2, 3); }, {3, 4}, {4, 1},
          8),
  };
}

// Checks `op` on the strided inputs and on their contiguous copies.
template <class Op>
void check_both(const std::string& what, Op op, const std::vector<const Input*>& in,
                const std::vector<double>& expected, double rtol = 0) {
  std::vector<Tensor> strided_in, contiguous_in;
  for (const Input* i : in) {
    strided_in.push_back(i->t);
    contiguous_in.push_back(i->t.clone(MemoryFormat::Contiguous));
  }
  try {
    Tensor r = op(strided_in);
    BP_EXPECT_CLOSE(r, rtol, 0, expected);
    BP_EXPECT_CLOSE(op(contiguous_in), rtol, 0, expected);
    for (const Input* i : in) BP_EXPECT_VALUES(i->t, i->host);  // inputs untouched
  } catch (const CaseFailure& e) {
    throw CaseFailure(what + ": " + e.what());
  }
}

void strided_binary(const Context& ctx, bool multiply) {
  auto in = inputs_3x4(ctx);
  for (std::size_t i = 0; i < in.size(); ++i) {
    const Input &a = in[i], &b = in[(i + 1) % in.size()];
    std::vector<double> expected(12);
    for (int k = 0; k < 12; ++k)
      expected[k] = multiply ? a.host[k] * b.host[k] : a.host[k] + b.host[k];
    check_both(
        a.name + (multiply ? " * " : " + ") + b.name,
        [multiply](const std::vector<Tensor>& t) { return multiply ? t[0] * t[1] : t[0] + t[1]; },
        {&a, &b}, expected);
  }
}
void strided_add(const Context& ctx) { strided_binary(ctx, false); }
void strided_mul(const Context& ctx) { strided_binary(ctx, true); }

void strided_exp(const Context& ctx) {
  for (const Input& a : inputs_3x4(ctx)) {
    std::vector<double> expected;
    for (double v : a.host) expected.push_back(std::exp(v / 16));
    check_both(
        "exp(" + a.name + " / 16)", [](const std::vector<Tensor>& t) { return (t[0] / 16).exp(); },
        {&a}, expected, 1e-12);
  }
}

void strided_sum_dim(const Context& ctx) {
  for (const Input& a : inputs_3x4(ctx)) {
    std::vector<double> rows(3, 0.0), cols(4, 0.0);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) {
        rows[i] += a.host[i * 4 + j];
        cols[j] += a.host[i * 4 + j];
      }
    check_both(
        a.name + ".sum({0})", [](const std::vector<Tensor>& t) { return t[0].sum({0}); }, {&a},
        cols);
    check_both(
        a.name + ".sum({1}, keepdim)",
        [](const std::vector<Tensor>& t) {
          Tensor r = t[0].sum({1}, true);
          BP_EXPECT_SHAPE(r, {3, 1});
          return r;
        },
        {&a}, rows);
  }
}

void strided_matmul(const Context& ctx) {
  // [4, 2] right-hand sides: transposed, expanded, stepped with an offset.
  std::vector<Input> rhs = {
      strided(
          ctx, "transposed", {2, 4}, [](const Tensor& b) { return b.t(); }, {4, 2}, {1, 4}, 0),
      strided(
          ctx, "expanded", {4, 1},
          [](const Tensor& b) {
            return b.expand({4, 2});
          },
          {4, 2}, {1, 0}, 0),
      strided(
          ctx, "stepped", {9, 5},
          [](const Tensor& b) {
            return b.index({Slice(1, None, 2), Slice(1, 5, 2)});
          },
          {4, 2}, {10, 2}, 6),
  };
  auto lhs = inputs_3x4(ctx);
  for (const Input& a : lhs)
    for (const Input& b : rhs) {
      std::vector<double> expected(6, 0.0);
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j)
          for (int k = 0; k < 4; ++k) expected[i * 2 + j] += a.host[i * 4 + k] * b.host[k * 2 + j];
      check_both(
          a.name + " @ " + b.name, [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); },
          {&a, &b}, expected, 1e-12);
    }
}

void strided_where(const Context& ctx) {
  // A transposed condition and an expanded one.
  const std::vector<bool> pattern = {true,  false, false, true,  true, false,
                                     false, true,  true,  false, true, true};
  Tensor cond_t = from_vector(pattern, {4, 3}, ctx.options(DType::Bool)).t();
  std::vector<double> cond_t_host;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) cond_t_host.push_back(pattern[j * 3 + i]);
  Tensor cond_e =
      from_vector(std::vector<bool>{false, true, true, false}, {1, 4}, ctx.options(DType::Bool))
          .expand({3, 4});
  std::vector<double> cond_e_host;
  for (int i = 0; i < 12; ++i) cond_e_host.push_back(i % 4 == 1 || i % 4 == 2);
  auto in = inputs_3x4(ctx);
  for (const auto& [cond, host] : {std::pair{cond_t, cond_t_host}, std::pair{cond_e, cond_e_host}})
    for (std::size_t i = 0; i < in.size(); ++i) {
      const Input &a = in[i], &b = in[(i + 2) % in.size()];
      Input c{"cond", cond, host};
      std::vector<double> expected(12);
      for (int k = 0; k < 12; ++k) expected[k] = host[k] ? a.host[k] : b.host[k];
      check_both(
          "where(cond, " + a.name + ", " + b.name + ")",
          [](const std::vector<Tensor>& t) { return where(t[0], t[1], t[2]); }, {&c, &a, &b},
          expected);
    }
}

void strided_gather(const Context& ctx) {
  // idx = [[3, 1], [0, 1], [2, 0]] as the transpose of a [2, 3], and [[0, 3]] expanded.
  Tensor idx_t =
      from_vector(std::vector<int64_t>{3, 0, 2, 1, 1, 0}, {2, 3}, ctx.options(DType::Int64)).t();
  const std::vector<double> idx_t_host = {3, 1, 0, 1, 2, 0};
  Tensor idx_e =
      from_vector(std::vector<int64_t>{0, 3}, {1, 2}, ctx.options(DType::Int64)).expand({3, 2});
  const std::vector<double> idx_e_host = {0, 3, 0, 3, 0, 3};
  for (const Input& a : inputs_3x4(ctx))
    for (const auto& [idx, host] : {std::pair{idx_t, idx_t_host}, std::pair{idx_e, idx_e_host}}) {
      Input index{"index", idx, host};
      std::vector<double> expected(6);
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j)
          expected[i * 2 + j] = a.host[i * 4 + static_cast<int>(host[i * 2 + j])];
      check_both(
          "gather(" + a.name + ", 1, index)",
          [](const std::vector<Tensor>& t) { return t[0].gather(1, t[1]); }, {&a, &index},
          expected);
    }
}

// VW-6: tensors with a zero-size dim go through every op.
void empty_tensors(const Context& ctx) {
  Tensor e = zeros({0, 3}, ctx.options());
  BP_EXPECT_SHAPE(e + ones({3}, ctx.options()), {0, 3});
  BP_EXPECT_SHAPE(e * 2, {0, 3});
  BP_EXPECT_SHAPE(relu(e), {0, 3});
  BP_EXPECT_SHAPE(e.t(), {3, 0});
  Tensor c = e.clone();
  BP_EXPECT_SHAPE(c, {0, 3});
  BP_EXPECT(!c.shares_storage(e));
  Tensor& r = c.copy_(ones({3}, ctx.options()));
  BP_EXPECT(&r == &c);
  Tensor s = e.sum();
  BP_EXPECT_SHAPE(s, {});
  BP_EXPECT_VALUES(s, {0});  // the empty sum is 0
  BP_EXPECT_VALUES(zeros({0}, ctx.options(DType::Int64)).sum(), {0});
  Tensor s0 = e.sum({0});
  BP_EXPECT_SHAPE(s0, {3});
  BP_EXPECT_VALUES(s0, {0, 0, 0});
  BP_EXPECT_SHAPE(e.sum({1}), {0});
  BP_EXPECT_SHAPE(e.reshape({3, 0}), {3, 0});
  BP_EXPECT_EQ(e.to_vector<double>().size(), 0u);
}

// VW-6: matmul with k = 0 is all zeros; max/min of nothing have no value.
void empty_matmul_and_reductions(const Context& ctx) {
  Tensor m = matmul(empty({2, 0}, ctx.options()), empty({0, 3}, ctx.options()));
  BP_EXPECT_SHAPE(m, {2, 3});
  BP_EXPECT_VALUES(m, std::vector<double>(6, 0.0));
  BP_EXPECT_SHAPE(matmul(empty({0, 3}, ctx.options()), ones({3, 2}, ctx.options())), {0, 2});
  Tensor e = zeros({0, 3}, ctx.options());
  BP_EXPECT_THROWS(e.max(), IndexError);
  BP_EXPECT_THROWS(e.min(), IndexError);
  BP_EXPECT_THROWS(e.argmax(), IndexError);
  BP_EXPECT_THROWS(e.argmax(0), IndexError);  // reduces the empty dim
  Tensor a = e.argmax(1);                     // reduces a non-empty dim of nothing
  BP_EXPECT_SHAPE(a, {0});
  BP_EXPECT_EQ(a.dtype(), DType::Int64);
  BP_EXPECT_VALUES(iota(ctx, {2, 3}).argmax(1), {2, 2});
}

// VW-6: 0-d tensors go through elementwise ops, reductions and copies.
void zero_dim_ops(const Context& ctx) {
  Tensor s = scalar_tensor(3.0, ctx.options()), t = scalar_tensor(-2.0, ctx.options());
  for (const auto& [what, r, v] :
       std::vector<std::tuple<const char*, Tensor, double>>{{"s + t", s + t, 1},
                                                            {"s * t", s * t, -6},
                                                            {"relu(t)", relu(t), 0},
                                                            {"s.sum()", s.sum(), 3},
                                                            {"s.sum({0})", s.sum({0}), 3},
                                                            {"s.mean()", s.mean(), 3},
                                                            {"s.max()", s.max(), 3},
                                                            {"t.argmax()", t.argmax(), 0},
                                                            {"s.argmax(0)", s.argmax(0), 0},
                                                            {"s.clone()", s.clone(), 3}}) {
    BP_EXPECT_EQ(r.dim(), 0, what, " must be 0-d");
    BP_EXPECT_EQ(r.item<double>(), v, what);
  }
  BP_EXPECT(!s.clone().shares_storage(s));
  Tensor c = s.clone();
  c.copy_(t);
  BP_EXPECT_EQ(c.item<double>(), -2.0);
  BP_EXPECT_EQ(s.item<double>(), 3.0);
  s.add_(t);
  BP_EXPECT_EQ(s.item<double>(), 1.0);
  BP_EXPECT_SHAPE(s.unsqueeze(0), {1});
  BP_EXPECT_SHAPE(s.expand({2, 2}), {2, 2});
  BP_EXPECT_THROWS(matmul(s, t), ValueError);
  // A 0-d view writes through to its base.
  Tensor m = iota(ctx, {2, 3});
  Tensor e = m[1][2];
  BP_EXPECT_SHAPE(e, {});
  e.mul_(10);
  BP_EXPECT_VALUES(m, {0, 1, 2, 3, 4, 50});
}

}  // namespace

void add_view_op_cases(Suite& suite) {
  auto add = [&suite](const char* name, void (*fn)(const Context&), const char* id) {
    suite.add({std::string("view.") + name, {id}, kCategory, fn});
  };
  add("strided_inputs.add", strided_add, "VW-4");
  add("strided_inputs.mul", strided_mul, "VW-4");
  add("strided_inputs.exp", strided_exp, "VW-4");
  add("strided_inputs.sum_dim", strided_sum_dim, "VW-4");
  add("strided_inputs.matmul", strided_matmul, "VW-4");
  add("strided_inputs.where", strided_where, "VW-4");
  add("strided_inputs.gather", strided_gather, "VW-4");
  add("empty.elementwise_sum_copy", empty_tensors, "VW-6");
  add("empty.matmul_and_reductions", empty_matmul_and_reductions, "VW-6");
  add("zero_dim.ops", zero_dim_ops, "VW-6");
}

}  // namespace bp::conformance
