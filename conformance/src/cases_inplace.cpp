// In-place operations: IP-1 (returns self, writes self's memory; the
// out-of-place twin leaves its inputs alone), IP-2 (zero_), IP-3 (writes
// through views and bases are seen by each other).
#include <backplane/conformance.h>

#include "case_util.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "inplace";

// Operands of the IP-1 cases and, below, results worked out by hand.
const std::vector<double> kSelf = {1, -2, 3, 4};
const std::vector<double> kOther = {4, 2, 1, 8};

struct InplaceOp {
  const char* name;
  Tensor& (*apply)(Tensor& self, const Tensor& other);
  std::vector<double> expected;  // self afterwards
};

const std::vector<InplaceOp>& inplace_ops() {
  static const std::vector<InplaceOp> ops = {
      {"add_", [](Tensor& s, const Tensor& o) -> Tensor& { return s.add_(o); }, {5, 0, 4, 12}},
      {"add_alpha",
       [](Tensor& s, const Tensor& o) -> Tensor& { return s.add_(o, 2); },
       {9, 2, 5, 20}},
      {"add_scalar",
       [](Tensor& s, const Tensor&) -> Tensor& { return s.add_(10); },
       {11, 8, 13, 14}},
      {"sub_", [](Tensor& s, const Tensor& o) -> Tensor& { return s.sub_(o); }, {-3, -4, 2, -4}},
      {"mul_", [](Tensor& s, const Tensor& o) -> Tensor& { return s.mul_(o); }, {4, -4, 3, 32}},
      {"mul_scalar", [](Tensor& s, const Tensor&) -> Tensor& { return s.mul_(3); }, {3, -6, 9, 12}},
      {"div_", [](Tensor& s, const Tensor& o) -> Tensor& { return s.div_(o); }, {0.25, -1, 3, 0.5}},
      {"relu_", [](Tensor& s, const Tensor&) -> Tensor& { return s.relu_(); }, {1, 0, 3, 4}},
      {"fill_", [](Tensor& s, const Tensor&) -> Tensor& { return s.fill_(7); }, {7, 7, 7, 7}},
      {"zero_", [](Tensor& s, const Tensor&) -> Tensor& { return s.zero_(); }, {0, 0, 0, 0}},
      {"copy_", [](Tensor& s, const Tensor& o) -> Tensor& { return s.copy_(o); }, {4, 2, 1, 8}},
      {"plus_assign", [](Tensor& s, const Tensor& o) -> Tensor& { return s += o; }, {5, 0, 4, 12}},
      {"minus_assign",
       [](Tensor& s, const Tensor& o) -> Tensor& { return s -= o; },
       {-3, -4, 2, -4}},
      {"times_assign",
       [](Tensor& s, const Tensor& o) -> Tensor& { return s *= o; },
       {4, -4, 3, 32}},
      {"divide_assign",
       [](Tensor& s, const Tensor& o) -> Tensor& { return s /= o; },
       {0.25, -1, 3, 0.5}},
  };
  return ops;
}

void check_inplace(const Context& ctx, const InplaceOp& op) {
  Tensor self = from_vector(kSelf, {4}, ctx.options());
  Tensor other = from_vector(kOther, {4}, ctx.options());
  Tensor alias = self;  // a second handle on the same tensor (IP-8)
  const Location memory = location(self);
  Tensor& result = op.apply(self, other);
  BP_EXPECT(&result == &self, op.name, " must return a reference to self");
  BP_EXPECT(result.is_same(alias), op.name, " must return self, not a new tensor");
  BP_EXPECT_EQ(location(self), memory, op.name, " must write into self's memory");
  BP_EXPECT_EQ(self.dtype(), DType::Float32);
  BP_EXPECT_SHAPE(self, {4});
  BP_EXPECT_VALUES(self, op.expected);
  BP_EXPECT_VALUES(other, kOther);
}

struct OutOfPlaceOp {
  const char* name;
  Tensor (*apply)(const Tensor& a, const Tensor& b);
  std::vector<double> expected;
};

const std::vector<OutOfPlaceOp>& out_of_place_ops() {
  static const std::vector<OutOfPlaceOp> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, {5, 0, 4, 12}},
      {"add_alpha", [](const Tensor& a, const Tensor& b) { return add(a, b, 2); }, {9, 2, 5, 20}},
      {"add_scalar", [](const Tensor& a, const Tensor&) { return a + 10; }, {11, 8, 13, 14}},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, {-3, -4, 2, -4}},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, {4, -4, 3, 32}},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, {0.25, -1, 3, 0.5}},
      {"relu", [](const Tensor& a, const Tensor&) { return relu(a); }, {1, 0, 3, 4}},
  };
  return ops;
}

void check_out_of_place(const Context& ctx, const OutOfPlaceOp& op) {
  Tensor a = from_vector(kSelf, {4}, ctx.options());
  Tensor b = from_vector(kOther, {4}, ctx.options());
  const Location a_memory = location(a);
  const Location b_memory = location(b);
  Tensor c = op.apply(a, b);
  BP_EXPECT(!c.is_same(a) && !c.is_same(b), op.name, " must return a new tensor");
  BP_EXPECT(!c.shares_storage(a) && !c.shares_storage(b), op.name, " must allocate new memory");
  BP_EXPECT_EQ(location(a), a_memory);
  BP_EXPECT_EQ(location(b), b_memory);
  BP_EXPECT_VALUES(c, op.expected);
  BP_EXPECT_VALUES(a, kSelf);
  BP_EXPECT_VALUES(b, kOther);
}

// A 2x3 tensor of `dtype` with no zero element, and its host values.
std::pair<Tensor, std::vector<double>> nonzero_sample(const Context& ctx, DType dtype,
                                                      const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  // Bool is built with full(): every backend has a fill, and from_vector's
  // conversion to bool is not what these cases check.
  if (dtype == DType::Bool)
    return {full(IntArrayRef(shape), true, ctx.options(dtype)), std::vector<double>(n, 1.0)};
  std::vector<double> host(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) host[i] = (i % 2 ? -1.0 : 1.0) * static_cast<double>(i + 1);
  return {from_vector(host, IntArrayRef(shape), ctx.options(dtype)), host};
}

void check_zero_contiguous(const Context& ctx, DType dtype) {
  auto [x, host] = nonzero_sample(ctx, dtype, {2, 3});
  BP_EXPECT_VALUES(x, host);  // the starting point, so a zero result means something
  const Location memory = location(x);
  auto allocs_before = allocation_count(ctx);
  Tensor& result = x.zero_();
  auto allocs_after = allocation_count(ctx);
  BP_EXPECT(&result == &x, "zero_() must return self");
  BP_EXPECT_EQ(location(x), memory, "zero_() must not move the tensor");
  if (allocs_before && allocs_after)
    BP_EXPECT_EQ(*allocs_after, *allocs_before, "zero_() must not allocate");
  BP_EXPECT_EQ(x.dtype(), dtype);
  BP_EXPECT_SHAPE(x, {2, 3});
  BP_EXPECT_VALUES(x, std::vector<double>(6, 0.0));
}

// x[:, 1].zero_() on a 3x3: a non-contiguous column (stride 3).
void check_zero_column(const Context& ctx, DType dtype) {
  auto [x, host] = nonzero_sample(ctx, dtype, {3, 3});
  Tensor column = x.index({Slice(), 1});
  BP_EXPECT(!column.is_contiguous(), "x[:, 1] of a 3x3 should not be contiguous");
  BP_EXPECT_STRIDES(column, {3});
  const Location memory = location(x);
  auto allocs_before = allocation_count(ctx);
  Tensor& result = column.zero_();
  auto allocs_after = allocation_count(ctx);
  BP_EXPECT(&result == &column, "zero_() must return self");
  if (allocs_before && allocs_after)
    BP_EXPECT_EQ(*allocs_after, *allocs_before, "zero_() on a view must not allocate");
  BP_EXPECT_EQ(location(x), memory);
  BP_EXPECT_VALUES(column, {0, 0, 0});
  std::vector<double> expected = host;
  expected[1] = expected[4] = expected[7] = 0;
  BP_EXPECT_VALUES(x, expected);
}

// x[::2] of 7 elements: a stepped, non-contiguous 1-D view.
void zero_stepped(const Context& ctx) {
  Tensor x = iota(ctx, {7}, DType::Float64);
  x.index({Slice(None, None, 2)}).zero_();
  BP_EXPECT_VALUES(x, {0, 1, 0, 3, 0, 5, 0});
}

void zero_0d(const Context& ctx) {
  for (DType dtype : {DType::Float32, DType::Int64, DType::Bool}) {
    Tensor x = full({}, dtype == DType::Bool ? Scalar(true) : Scalar(5), ctx.options(dtype));
    BP_EXPECT_EQ(x.dim(), 0, "for ", dtype);
    Tensor& result = x.zero_();
    BP_EXPECT(&result == &x, "zero_() must return self, for ", dtype);
    BP_EXPECT_SHAPE(x, {});
    BP_EXPECT_EQ(x.item<double>(), 0.0, "for ", dtype);
  }
}

void zero_empty(const Context& ctx) {
  for (DType dtype : {DType::Float32, DType::Int32, DType::Bool}) {
    Tensor x = empty({0, 3}, ctx.options(dtype));
    Tensor& result = x.zero_();
    BP_EXPECT(&result == &x, "zero_() must return self, for ", dtype);
    BP_EXPECT_SHAPE(x, {0, 3});
    BP_EXPECT_EQ(x.numel(), 0);
    BP_EXPECT_EQ(x.dtype(), dtype);
  }
}

// zero_() and fill_(0) agree, on a whole tensor and on a column.
void check_zero_equals_fill(const Context& ctx, DType dtype) {
  auto [a, host] = nonzero_sample(ctx, dtype, {3, 3});
  auto [b, host_b] = nonzero_sample(ctx, dtype, {3, 3});
  a.index({Slice(), 2}).zero_();
  b.index({Slice(), 2}).fill_(0);
  BP_EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>(), "column: zero_() vs fill_(0)");
  a.zero_();
  b.fill_(dtype == DType::Bool ? Scalar(false) : Scalar(0));
  BP_EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>(), "whole: zero_() vs fill_(0)");
  BP_EXPECT_VALUES(b, std::vector<double>(9, 0.0));
}

// zeros() allocates new memory each time; zero_() reuses self's.
void zeros_allocates(const Context& ctx) {
  auto allocs_before = allocation_count(ctx);
  Tensor a = zeros({4}, ctx.options());
  Tensor b = zeros({4}, ctx.options());
  auto allocs_after = allocation_count(ctx);
  BP_EXPECT(!a.shares_storage(b), "two zeros() calls must not share memory");
  BP_EXPECT(location(a) != location(b));
  if (allocs_before && allocs_after)
    BP_EXPECT(*allocs_after >= *allocs_before + 2, "two zeros() calls made ",
              *allocs_after - *allocs_before, " allocations, expected at least 2");
  BP_EXPECT_VALUES(a, {0, 0, 0, 0});
}

// The example of IP-3, verbatim.
void view_write_seen_by_base(const Context& ctx) {
  Tensor b = arange(9, ctx.options(DType::Int64)).view({3, 3});
  b.index({Slice(1, None), Slice(1, None)}).zero_();
  BP_EXPECT_VALUES(b, {0, 1, 2, 3, 0, 0, 6, 0, 0});
}

void base_write_seen_by_views(const Context& ctx) {
  Tensor b = iota(ctx, {3, 3}, DType::Int64);
  Tensor row = b[1];
  Tensor column = b.index({Slice(), 2});
  Tensor corner = b.index({Slice(1, None), Slice(1, None)});
  b.mul_(10);
  BP_EXPECT_VALUES(row, {30, 40, 50});
  BP_EXPECT_VALUES(column, {20, 50, 80});
  BP_EXPECT_VALUES(corner, {40, 50, 70, 80});
  b.zero_();
  BP_EXPECT_VALUES(row, {0, 0, 0});
  BP_EXPECT_VALUES(column, {0, 0, 0});
  BP_EXPECT_VALUES(corner, {0, 0, 0, 0});
}

void view_write_seen_by_other_views(const Context& ctx) {
  Tensor b = iota(ctx, {3, 3});
  Tensor row0 = b[0];
  Tensor column0 = b.index({Slice(), 0});
  row0.fill_(7);
  BP_EXPECT_VALUES(column0, {7, 3, 6});
  column0.fill_(-1);
  BP_EXPECT_VALUES(row0, {-1, 7, 7});
  BP_EXPECT_VALUES(b, {-1, 7, 7, -1, 4, 5, -1, 7, 8});
}

// += and *= through a stepped view, with scalar and tensor operands.
void compound_through_view(const Context& ctx) {
  Tensor b = iota(ctx, {3, 3});
  Tensor corners = b.index({Slice(None, None, 2), Slice(None, None, 2)});
  Tensor& r = (corners += 100);
  BP_EXPECT(&r == &corners, "+= must return self");
  BP_EXPECT_VALUES(b, {100, 1, 102, 3, 4, 5, 106, 7, 108});
  corners *= 2;
  BP_EXPECT_VALUES(b, {200, 1, 204, 3, 4, 5, 212, 7, 216});
  Tensor row1 = b[1];
  row1 *= from_vector(std::vector<double>{1, 2, 3}, {3}, ctx.options());
  row1 += from_vector(std::vector<double>{10, 10, 10}, {3}, ctx.options());
  BP_EXPECT_VALUES(b, {200, 1, 204, 13, 18, 25, 212, 7, 216});
  BP_EXPECT_VALUES(corners, {200, 204, 212, 216});
}

std::string dtype_name(DType d) { return std::string(name(d)); }

}  // namespace

void add_inplace_cases(Suite& suite) {
  for (const auto& op : inplace_ops())
    suite.add({std::string("inplace.") + op.name + ".writes_self",
               {"IP-1"},
               kCategory,
               [&op](const Context& ctx) { check_inplace(ctx, op); }});
  for (const auto& op : out_of_place_ops())
    suite.add({std::string("inplace.") + op.name + ".out_of_place_leaves_inputs",
               {"IP-1"},
               kCategory,
               [&op](const Context& ctx) { check_out_of_place(ctx, op); }});

  const DType all[] = {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool};
  for (DType d : all)
    suite.add({"inplace.zero_.contiguous." + dtype_name(d),
               {"IP-1", "IP-2"},
               kCategory,
               [d](const Context& ctx) { check_zero_contiguous(ctx, d); }});
  for (DType d : all)
    suite.add({"inplace.zero_.column." + dtype_name(d),
               {"IP-2", "IP-3"},
               kCategory,
               [d](const Context& ctx) { check_zero_column(ctx, d); }});
  for (DType d : all)
    suite.add({"inplace.zero_.equals_fill_0." + dtype_name(d),
               {"IP-2"},
               kCategory,
               [d](const Context& ctx) { check_zero_equals_fill(ctx, d); }});
  suite.add({"inplace.zero_.stepped_slice", {"IP-2"}, kCategory, zero_stepped});
  suite.add({"inplace.zero_.0d", {"IP-2"}, kCategory, zero_0d});
  suite.add({"inplace.zero_.empty", {"IP-2"}, kCategory, zero_empty});
  suite.add({"inplace.zeros_allocates", {"IP-2"}, kCategory, zeros_allocates});

  suite.add({"inplace.view_write_seen_by_base", {"IP-3"}, kCategory, view_write_seen_by_base});
  suite.add({"inplace.base_write_seen_by_views", {"IP-3"}, kCategory, base_write_seen_by_views});
  suite.add({"inplace.view_write_seen_by_other_views",
             {"IP-3"},
             kCategory,
             view_write_seen_by_other_views});
  suite.add({"inplace.compound_through_view", {"IP-1", "IP-3"}, kCategory, compound_through_view});
}

}  // namespace bp::conformance
