// Construction: factories (CR-1), *_like (CR-2), new_* (CR-3), arange
// (CR-4), linspace/logspace (CR-5) and tensors from and to host data
// (CR-7); random numbers (CR-6) are in cases_random.cpp. Expected values
// are written out by hand or computed on the host from the definition of
// each factory.
#include <backplane/conformance.h>

#include <cmath>

#include "case_checks.h"
#include "case_util.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "construction";

const DType kAllDTypes[] = {DType::Bool, DType::Int32, DType::Int64, DType::Float32,
                            DType::Float64};

// CR-1: the four factories, for every dtype, on the device under test.
void factories_values(const Context& ctx) {
  for (DType d : kAllDTypes) {
    const Scalar seven = d == DType::Bool ? Scalar(true) : Scalar(7);
    const double seven_d = d == DType::Bool ? 1 : 7;
    Tensor e = empty({2, 3}, ctx.options(d));
    Tensor z = zeros({2, 3}, ctx.options(d));
    Tensor o = ones({3}, ctx.options(d));
    Tensor f = full({2, 2}, seven, ctx.options(d));
    for (const Tensor* t : {&e, &z, &o, &f}) {
      BP_EXPECT_EQ(t->dtype(), d);
      BP_EXPECT_EQ(t->device(), ctx.device(), "for ", d);
      BP_EXPECT(!t->requires_grad(), "a factory must not require grad unless asked, for ", d);
      BP_EXPECT(t->is_contiguous(), "for ", d);
    }
    BP_EXPECT_SHAPE(e, {2, 3});
    BP_EXPECT_VALUES(z, std::vector<double>(6, 0.0));
    BP_EXPECT_VALUES(o, {1, 1, 1});
    BP_EXPECT_VALUES(f, std::vector<double>(4, seven_d));
  }
}

// CR-1: float32 when no dtype is given; the default backend when no device is.
void factories_defaults(const Context& ctx) {
  Tensor a = zeros({2}, TensorOptions().device(ctx.device()));
  BP_EXPECT_EQ(a.dtype(), DType::Float32);
  BP_EXPECT_EQ(ctx.options().dtype_, DType::Float32);
  Tensor b = ones({2});
  BP_EXPECT_EQ(b.dtype(), DType::Float32);
  BP_EXPECT_EQ(b.device(), default_device());
  Tensor c = full({0, 4}, 3.0, ctx.options());
  BP_EXPECT_SHAPE(c, {0, 4});
  BP_EXPECT_EQ(c.numel(), 0);
}

// CR-1: requires_grad for floating dtypes only; TypeError otherwise.
void factories_requires_grad(const Context& ctx) {
  for (DType d : {DType::Float32, DType::Float64}) {
    TensorOptions o = ctx.options(d).requires_grad();
    BP_EXPECT(empty({2}, o).requires_grad(), "for ", d);
    BP_EXPECT(zeros({2}, o).requires_grad(), "for ", d);
    BP_EXPECT(ones({2}, o).requires_grad(), "for ", d);
    Tensor f = full({2}, 1.5, o);
    BP_EXPECT(f.requires_grad(), "for ", d);
    BP_EXPECT_VALUES(f, {1.5, 1.5});
  }
  for (DType d : {DType::Int32, DType::Int64, DType::Bool}) {
    TensorOptions o = ctx.options(d).requires_grad();
    BP_EXPECT_THROWS(empty({2}, o), TypeError);
    BP_EXPECT_THROWS(zeros({2}, o), TypeError);
    BP_EXPECT_THROWS(ones({2}, o), TypeError);
    BP_EXPECT_THROWS(full({2}, 1, o), TypeError);
  }
}

// CR-2: shape, dtype, device and dense strides from t; fresh memory.
void check_like(const char* what, const Tensor& r, const Tensor& t,
                const std::vector<int64_t>& strides) {
  try {
    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
    BP_EXPECT_SHAPE(r, shape);
    BP_EXPECT_EQ(r.dtype(), t.dtype());
    BP_EXPECT_EQ(r.device(), t.device());
    BP_EXPECT_STRIDES(r, strides);
    BP_EXPECT(!r.shares_storage(t), "a *_like result must not share t's memory");
    BP_EXPECT(!r.requires_grad(), "a *_like result requires grad only when asked");
  } catch (const CaseFailure& e) {
    throw CaseFailure(std::string(what) + ": " + e.what());
  }
}

void check_all_like(const Tensor& t, const std::vector<int64_t>& strides) {
  check_like("empty_like", empty_like(t), t, strides);
  Tensor z = zeros_like(t), o = ones_like(t), f = full_like(t, 7);
  check_like("zeros_like", z, t, strides);
  check_like("ones_like", o, t, strides);
  check_like("full_like", f, t, strides);
  BP_EXPECT_VALUES(z, std::vector<double>(t.numel(), 0.0));
  BP_EXPECT_VALUES(o, std::vector<double>(t.numel(), 1.0));
  BP_EXPECT_VALUES(f, std::vector<double>(t.numel(), 7.0));
  Tensor r = rand_like(t);
  check_like("rand_like", r, t, strides);
  for (double v : r.to_vector<double>()) BP_EXPECT(v >= 0 && v < 1, "rand_like gave ", v);
  check_like("randn_like", randn_like(t), t, strides);
}

// A transposed tensor is dense: the *_like results keep its strides.
void like_dense_transposed(const Context& ctx) {
  Tensor t = iota(ctx, {3, 4}, DType::Float64).t();  // [4, 3], strides [1, 4]
  check_all_like(t, {1, 4});
  Tensor p = iota(ctx, {2, 3, 4}).permute({2, 0, 1});  // [4, 2, 3], strides [1, 12, 4]
  check_all_like(p, {1, 12, 4});
}

// A stepped slice has gaps and an expanded tensor overlaps: contiguous results.
void like_not_dense(const Context& ctx) {
  Tensor s = iota(ctx, {4, 6}).index({Slice(), Slice(None, None, 2)});  // strides [6, 2]
  check_all_like(s, {3, 1});
  Tensor e = iota(ctx, {4, 1}).expand({4, 3});  // strides [1, 0]
  check_all_like(e, {3, 1});
}

// CR-2: requires_grad never comes from t; options override dtype, and the
// device stays t's when the options name none.
void like_options_and_grad(const Context& ctx) {
  Tensor g = full({2, 2}, 1.0, ctx.options().requires_grad());
  BP_EXPECT(!zeros_like(g).requires_grad(), "zeros_like(t) must not take t's requires_grad");
  BP_EXPECT(!empty_like(g).requires_grad());
  BP_EXPECT(!rand_like(g).requires_grad());
  BP_EXPECT(ones_like(g, ctx.options().requires_grad()).requires_grad(), "asked for requires_grad");
  Tensor i = full({2, 3}, 1, ctx.options(DType::Int32));
  Tensor f = zeros_like(i, TensorOptions(DType::Float64));
  BP_EXPECT_EQ(f.dtype(), DType::Float64);
  BP_EXPECT_EQ(f.device(), i.device(), "the device comes from t when the options name none");
  BP_EXPECT_SHAPE(f, {2, 3});
  BP_EXPECT_THROWS(zeros_like(i, TensorOptions(DType::Int32).requires_grad()), TypeError);
}

// CR-3: new_* take dtype and device from self unless given.
void new_factories(const Context& ctx) {
  Tensor self = full({5}, 3, ctx.options(DType::Int32));
  Tensor e = self.new_empty({2, 3});
  Tensor z = self.new_zeros({2});
  Tensor o = self.new_ones({1, 2});
  Tensor f = self.new_full({3}, 9);
  for (const Tensor* t : {&e, &z, &o, &f}) {
    BP_EXPECT_EQ(t->dtype(), DType::Int32);
    BP_EXPECT_EQ(t->device(), ctx.device());
    BP_EXPECT(!t->shares_storage(self));
  }
  BP_EXPECT_SHAPE(e, {2, 3});
  BP_EXPECT_VALUES(z, {0, 0});
  BP_EXPECT_VALUES(o, {1, 1});
  BP_EXPECT_VALUES(f, {9, 9, 9});
  Tensor g = self.new_full({2}, 2.5, TensorOptions(DType::Float64));
  BP_EXPECT_EQ(g.dtype(), DType::Float64, "a dtype given overrides self's");
  BP_EXPECT_EQ(g.device(), ctx.device(), "the device stays self's when not given");
  BP_EXPECT_VALUES(g, {2.5, 2.5});
}

// CR-3: new_tensor copies data (dtype from self), gives a leaf without grad.
void new_tensor_copies(const Context& ctx) {
  Tensor self = zeros({1}, ctx.options(DType::Float32));
  Tensor data = from_vector(std::vector<double>{1.5, -2, 3}, {3}, ctx.options(DType::Float64));
  Tensor n = self.new_tensor(data);
  BP_EXPECT_EQ(n.dtype(), DType::Float32, "dtype comes from self, not from data");
  BP_EXPECT_EQ(n.device(), ctx.device());
  BP_EXPECT(!n.shares_storage(data) && !n.is_view(), "new_tensor must copy");
  BP_EXPECT(!n.requires_grad());
  BP_EXPECT_VALUES(n, {1.5, -2, 3});
  data.fill_(0);
  BP_EXPECT_VALUES(n, {1.5, -2, 3});  // the source changed, the copy did not
  BP_EXPECT(n.is_leaf());
  // Data from a graph: the copy is still a leaf outside it.
  Tensor g = full({2}, 4.0, ctx.options().requires_grad()) * 2;
  Tensor ng = self.new_tensor(g);
  BP_EXPECT(!ng.requires_grad(), "new_tensor never requires grad");
  BP_EXPECT(ng.is_leaf() && ng.grad_fn_name().empty(), "new_tensor gives a leaf");
  BP_EXPECT_VALUES(ng, {8, 8});
  // A non-contiguous source is copied in row-major order.
  Tensor t = iota(ctx, {2, 3}, DType::Int64).t();
  Tensor m = self.new_tensor(t, TensorOptions(DType::Int64));
  BP_EXPECT_EQ(m.dtype(), DType::Int64);
  BP_EXPECT_SHAPE(m, {3, 2});
  BP_EXPECT_VALUES(m, {0, 3, 1, 4, 2, 5});
}

// CR-4: dtype inference (on the default device: options would fix the dtype).
void arange_dtypes(const Context&) {
  Tensor a = arange(5);
  BP_EXPECT_EQ(a.dtype(), DType::Int64);
  BP_EXPECT_VALUES(a, {0, 1, 2, 3, 4});
  Tensor b = arange(2, 11, 3);
  BP_EXPECT_EQ(b.dtype(), DType::Int64);
  BP_EXPECT_VALUES(b, {2, 5, 8});
  Tensor c = arange(1, 2.5, 0.5);
  BP_EXPECT_EQ(c.dtype(), DType::Float32, "any floating argument gives float32");
  BP_EXPECT_VALUES(c, {1, 1.5, 2});
  BP_EXPECT_EQ(arange(0.0, 3, 1).dtype(), DType::Float32);
  Tensor tenth = arange(0, 1, 0.1);
  BP_EXPECT_EQ(tenth.numel(), 10, "ceil((1 - 0) / 0.1) = 10");
  std::vector<double> expected;
  for (int i = 0; i < 10; ++i) expected.push_back(static_cast<float>(i * 0.1));
  BP_EXPECT_CLOSE(tenth, 1e-6, 1e-7, expected);
}

// CR-4: counts and values on the device under test.
void arange_values(const Context& ctx) {
  TensorOptions i64 = ctx.options(DType::Int64), f64 = ctx.options(DType::Float64);
  BP_EXPECT_VALUES(arange(0, 10, 3, i64), {0, 3, 6, 9});
  BP_EXPECT_VALUES(arange(-3, 3, 2, i64), {-3, -1, 1});
  BP_EXPECT_VALUES(arange(10, 0, -3, i64), {10, 7, 4, 1});
  BP_EXPECT_VALUES(arange(1, 2.5, 0.5, f64), {1, 1.5, 2});
  Tensor t = arange(0, 1, 0.3, f64);
  BP_EXPECT_EQ(t.device(), ctx.device());
  BP_EXPECT_CLOSE(t, 1e-12, 1e-12, {0, 0.3, 0.6, 0.9});
  Tensor e = arange(5, 5, 1, i64);
  BP_EXPECT_SHAPE(e, {0});
  BP_EXPECT_EQ(arange(2.0, 2.0, 0.5, f64).numel(), 0);
}

// CR-4: a zero step and a step against the direction of end - start.
void arange_errors(const Context& ctx) {
  TensorOptions f32 = ctx.options();
  BP_EXPECT_THROWS(arange(0, 5, 0), ValueError);
  BP_EXPECT_THROWS(arange(0.0, 1.0, 0.0, f32), ValueError);
  BP_EXPECT_THROWS(arange(0, 5, -1), ValueError);
  BP_EXPECT_THROWS(arange(5, 0), ValueError);
  BP_EXPECT_THROWS(arange(1.0, 0.0, 0.25, f32), ValueError);
}

// CR-5: closed interval, exact ends, steps 1 and 0.
void linspace_values(const Context& ctx) {
  TensorOptions f64 = ctx.options(DType::Float64);
  BP_EXPECT_VALUES(linspace(0, 1, 5, f64), {0, 0.25, 0.5, 0.75, 1});
  BP_EXPECT_VALUES(linspace(1, -1, 5, f64), {1, 0.5, 0, -0.5, -1});
  std::vector<double> v = linspace(0.1, 0.7, 7, f64).to_vector<double>();
  BP_EXPECT_EQ(v.size(), 7u);
  BP_EXPECT_EQ(v.front(), 0.1, "the start is exact");
  BP_EXPECT_EQ(v.back(), 0.7, "the end is exact");
  for (int i = 0; i < 7; ++i)
    BP_EXPECT(std::fabs(v[i] - 0.1 * (i + 1)) < 1e-12, "element ", i, " is ", v[i]);
  BP_EXPECT_VALUES(linspace(2, 5, 1, f64), {2});
  Tensor empty_steps = linspace(2, 5, 0, f64);
  BP_EXPECT_SHAPE(empty_steps, {0});
  Tensor f = linspace(0, 1, 3, TensorOptions().device(ctx.device()));
  BP_EXPECT_EQ(f.dtype(), DType::Float32);
  BP_EXPECT_EQ(f.device(), ctx.device());
  BP_EXPECT_VALUES(f, {0, 0.5, 1});
}

// CR-5: logspace = base ** linspace.
void logspace_values(const Context& ctx) {
  TensorOptions f64 = ctx.options(DType::Float64);
  BP_EXPECT_CLOSE(logspace(0, 3, 4, 10.0, f64), 1e-12, 0, {1, 10, 100, 1000});
  BP_EXPECT_CLOSE(logspace(0, 4, 5, 2.0, f64), 1e-12, 0, {1, 2, 4, 8, 16});
  BP_EXPECT_CLOSE(logspace(-1, 1, 3, 2.0, f64), 1e-12, 0, {0.5, 1, 2});
  BP_EXPECT_CLOSE(logspace(2, 7, 1, 10.0, f64), 1e-12, 0, {100});
  BP_EXPECT_EQ(logspace(0, 1, 0, 10.0, f64).numel(), 0);
}

// CR-7: nested initializer lists with dtype inference.
void from_initializer_lists(const Context&) {
  Tensor a = tensor({1, 2, 3});
  BP_EXPECT_EQ(a.dtype(), DType::Int64);
  BP_EXPECT_SHAPE(a, {3});
  BP_EXPECT_VALUES(a, {1, 2, 3});
  Tensor b = tensor({{1.5, 2.0}, {3.0, -4.0}});
  BP_EXPECT_EQ(b.dtype(), DType::Float32);
  BP_EXPECT_SHAPE(b, {2, 2});
  BP_EXPECT_VALUES(b, {1.5, 2, 3, -4});
  Tensor c = tensor({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}, {{9, 10}, {11, 12}}});
  BP_EXPECT_EQ(c.dtype(), DType::Int64);
  BP_EXPECT_SHAPE(c, {3, 2, 2});
  BP_EXPECT_VALUES(c, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor d = tensor({true, false, true});
  BP_EXPECT_EQ(d.dtype(), DType::Bool);
  BP_EXPECT_VALUES(d, {1, 0, 1});
  BP_EXPECT_EQ(tensor({1, 2}, DType::Float64).dtype(), DType::Float64);
  BP_EXPECT_THROWS((tensor({{1, 2}, {3}})), ValueError);
}

// CR-7: from_vector with a shape, item() and to_vector() on the device.
void from_vector_and_back(const Context& ctx) {
  BP_EXPECT_EQ(from_vector(std::vector<int64_t>{1, 2}).dtype(), DType::Int64);
  BP_EXPECT_EQ(from_vector(std::vector<float>{1, 2}).dtype(), DType::Float32);
  BP_EXPECT_EQ(from_vector(std::vector<bool>{true}).dtype(), DType::Bool);
  Tensor m =
      from_vector(std::vector<int64_t>{1, -2, 3, 4, 5, 6}, {2, 3}, ctx.options(DType::Int64));
  BP_EXPECT_SHAPE(m, {2, 3});
  BP_EXPECT_EQ(m.device(), ctx.device());
  BP_EXPECT_EQ(m.to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 3, 4, 5, 6}));
  BP_EXPECT_EQ(m.to_vector<bool>(), (std::vector<bool>{true, true, true, true, true, true}));
  // Floating values into an integer dtype truncate toward zero.
  Tensor t = from_vector(std::vector<double>{1.7, -1.7}, {2}, ctx.options(DType::Int32));
  BP_EXPECT_VALUES(t, {1, -1});
  BP_EXPECT_THROWS(from_vector(std::vector<double>{1, 2, 3}, {2, 2}, ctx.options()), ValueError);
  Tensor one = from_vector(std::vector<double>{2.5}, {1, 1}, ctx.options(DType::Float64));
  BP_EXPECT_EQ(one.item<double>(), 2.5);
  BP_EXPECT(one.item().is_floating());
  Tensor i = full({1}, 42, ctx.options(DType::Int64));
  BP_EXPECT_EQ(i.item<int64_t>(), 42);
  BP_EXPECT_EQ(i.item().kind(), DType::Int64);
  BP_EXPECT(full({}, true, ctx.options(DType::Bool)).item().is_bool());
  BP_EXPECT_THROWS(m.item<double>(), ValueError);
}

// CR-7: 0-d tensors have shape [] and broadcast with anything.
void zero_dim(const Context& ctx) {
  Tensor s = scalar_tensor(2.5, ctx.options());
  BP_EXPECT_EQ(s.dim(), 0);
  BP_EXPECT_SHAPE(s, {});
  BP_EXPECT_EQ(s.numel(), 1);
  BP_EXPECT_EQ(s.item<double>(), 2.5);
  BP_EXPECT_EQ(s.to_vector<double>().size(), 1u);
  Tensor m = iota(ctx, {2, 3});
  Tensor a = s + m, b = m * s, c = s + s;
  BP_EXPECT_SHAPE(a, {2, 3});
  BP_EXPECT_VALUES(a, {2.5, 3.5, 4.5, 5.5, 6.5, 7.5});
  BP_EXPECT_SHAPE(b, {2, 3});
  BP_EXPECT_VALUES(b, {0, 2.5, 5, 7.5, 10, 12.5});
  BP_EXPECT_SHAPE(c, {});
  BP_EXPECT_VALUES(c, {5});
  BP_EXPECT_SHAPE(s + zeros({0}, ctx.options()), {0});
  BP_EXPECT_SHAPE(s + iota(ctx, {2, 1, 2}), {2, 1, 2});
  // An integer 0-d does not decide the dtype of a float operand.
  Tensor k = scalar_tensor(2, ctx.options(DType::Int64));
  BP_EXPECT_EQ(k.dtype(), DType::Int64);
  Tensor r = k + m;
  BP_EXPECT_EQ(r.dtype(), DType::Float32);
  BP_EXPECT_VALUES(r, {2, 3, 4, 5, 6, 7});
  BP_EXPECT_SHAPE(s.expand({2, 2}), {2, 2});
}

}  // namespace

void add_construction_cases(Suite& suite) {
  auto add = [&suite](const char* name, const char* id, void (*fn)(const Context&)) {
    suite.add({std::string("construction.") + name, {id}, kCategory, fn});
  };
  add("factories.values", "CR-1", factories_values);
  add("factories.defaults", "CR-1", factories_defaults);
  add("factories.requires_grad", "CR-1", factories_requires_grad);
  add("like.dense_keeps_strides", "CR-2", like_dense_transposed);
  add("like.not_dense_contiguous", "CR-2", like_not_dense);
  add("like.options_and_grad", "CR-2", like_options_and_grad);
  add("new.dtype_device_from_self", "CR-3", new_factories);
  add("new_tensor.copies", "CR-3", new_tensor_copies);
  add("arange.dtypes", "CR-4", arange_dtypes);
  add("arange.values", "CR-4", arange_values);
  add("arange.errors", "CR-4", arange_errors);
  add("linspace", "CR-5", linspace_values);
  add("logspace", "CR-5", logspace_values);
  add("host.initializer_lists", "CR-7", from_initializer_lists);
  add("host.from_vector_item", "CR-7", from_vector_and_back);
  add("host.zero_dim", "CR-7", zero_dim);
}

}  // namespace bp::conformance
