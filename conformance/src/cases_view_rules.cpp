// View rules beyond the basic view ops of cases_view.cpp: diagonal,
// as_strided and unfold (VW-1), contiguity (VW-2), bases (VW-3), and errors
// and clamping of dims, indices and slices (VW-5). Strided inputs (VW-4)
// and empty and 0-d tensors (VW-6) are in cases_view_ops.cpp.
#include <backplane/conformance.h>

#include "case_checks.h"
#include "case_util.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "view";

struct Layout {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
};

// `base` is contiguous at offset 0 and holds host_iota(numel): storage
// position p holds p. Checks the view's layout and the values it reads.
void check_layout(const std::string& what, const Tensor& view, const Tensor& base,
                  const Layout& expect) {
  try {
    BP_EXPECT(view.shares_storage(base), "a view must share its base's memory");
    BP_EXPECT(view.is_view());
    BP_EXPECT_SHAPE(view, expect.sizes);
    BP_EXPECT_STRIDES(view, expect.strides);
    BP_EXPECT_EQ(view.storage_offset(), expect.offset);
    BP_EXPECT_EQ(location(view), location_at(base, expect.offset));
    BP_EXPECT_VALUES(view,
                     gather(host_iota(base.numel()), expect.sizes, expect.strides, expect.offset));
  } catch (const CaseFailure& e) {
    throw CaseFailure(what + ": " + e.what());
  }
}

// A write to the base is seen through the view; then the base is restored.
void check_base_write_seen(const std::string& what, const Tensor& view, Tensor base,
                           const Layout& expect) {
  base.mul_(10);
  std::vector<double> expected =
      gather(host_iota(base.numel()), expect.sizes, expect.strides, expect.offset);
  for (double& e : expected) e *= 10;
  try {
    BP_EXPECT_VALUES(view, expected);
  } catch (const CaseFailure& e) {
    throw CaseFailure(what + " (base written): " + e.what());
  }
  base.div_(10);
}

// A write through the view lands exactly on the elements it covers.
void check_view_write_seen(const std::string& what, Tensor view, Tensor base,
                           const Layout& expect) {
  const std::vector<double> host = host_iota(base.numel());
  view.fill_(-1);
  try {
    BP_EXPECT_VALUES(base, scatter(host, expect.sizes, expect.strides, expect.offset, -1));
  } catch (const CaseFailure& e) {
    throw CaseFailure(what + " (view written): " + e.what());
  }
  base.copy_(from_vector(host, base.sizes(), TensorOptions(base.dtype()).device(base.device())));
}

// Every check, for views whose elements do not overlap.
void check_both_ways(const std::string& what, const Tensor& view, const Tensor& base,
                     const Layout& expect) {
  check_layout(what, view, base, expect);
  check_base_write_seen(what, view, base, expect);
  check_view_write_seen(what, view, base, expect);
}

// Overlapping views (windows) are read-only (IP-6): writes go to the base.
void check_overlapping(const std::string& what, Tensor view, const Tensor& base,
                       const Layout& expect) {
  check_layout(what, view, base, expect);
  check_base_write_seen(what, view, base, expect);
  BP_EXPECT_THROWS(view.fill_(0), ValueError);
}

void diagonal_views(const Context& ctx) {
  Tensor m = iota(ctx, {3, 4});
  check_both_ways("m.diagonal()", m.diagonal(), m, {{3}, {5}, 0});
  check_both_ways("m.diagonal(1)", m.diagonal(1), m, {{3}, {5}, 1});
  check_both_ways("m.diagonal(2)", m.diagonal(2), m, {{2}, {5}, 2});
  check_both_ways("m.diagonal(-1)", m.diagonal(-1), m, {{2}, {5}, 4});
  check_both_ways("m.t().diagonal(1)", m.t().diagonal(1), m, {{2}, {5}, 4});
  Tensor none = m.diagonal(4);
  BP_EXPECT_SHAPE(none, {0});
  BP_EXPECT(none.shares_storage(m));
  Tensor x = iota(ctx, {2, 3, 4});
  check_both_ways("x.diagonal(0, 1, 2)", x.diagonal(0, 1, 2), x, {{2, 3}, {12, 5}, 0});
  check_both_ways("x.diagonal(1, 0, 2)", x.diagonal(1, 0, 2), x, {{3, 2}, {4, 13}, 1});
  check_both_ways("x.diagonal(-1, 2, 0)", x.diagonal(-1, 2, 0), x, {{3, 2}, {4, 13}, 1});
}

void as_strided_views(const Context& ctx) {
  Tensor v = iota(ctx, {10});
  // Sliding windows of 3 every 2 elements: neighbouring rows share one.
  check_overlapping("v.as_strided({4, 3}, {2, 1})", v.as_strided({4, 3}, {2, 1}), v,
                    {{4, 3}, {2, 1}, 0});
  check_both_ways("v.as_strided({2, 2}, {3, 1}, 1)", v.as_strided({2, 2}, {3, 1}, 1), v,
                  {{2, 2}, {3, 1}, 1});
  // Without an offset, the view's own offset is kept.
  check_both_ways("v[2:].as_strided({3}, {2})", v.index({Slice(2, None)}).as_strided({3}, {2}), v,
                  {{3}, {2}, 2});
  Tensor m = iota(ctx, {3, 4});
  check_both_ways("m.as_strided({2, 2}, {1, 4})", m.as_strided({2, 2}, {1, 4}), m,
                  {{2, 2}, {1, 4}, 0});
  check_both_ways("v.as_strided({4}, {3})", v.as_strided({4}, {3}), v, {{4}, {3}, 0});
  // Element 10 of a 10-element memory is past its end.
  BP_EXPECT_THROWS(v.as_strided({4}, {3}, 1), Error);
}

void unfold_views(const Context& ctx) {
  Tensor v = iota(ctx, {7});
  check_overlapping("v.unfold(0, 3, 2)", v.unfold(0, 3, 2), v, {{3, 3}, {2, 1}, 0});
  check_both_ways("v.unfold(0, 2, 2)", v.unfold(0, 2, 2), v, {{3, 2}, {2, 1}, 0});
  check_both_ways("v.unfold(0, 2, 3)", v.unfold(0, 2, 3), v, {{2, 2}, {3, 1}, 0});
  Tensor m = iota(ctx, {3, 4});
  check_both_ways("m.unfold(1, 2, 2)", m.unfold(1, 2, 2), m, {{3, 2, 2}, {4, 2, 1}, 0});
  check_overlapping("m.unfold(0, 2, 1)", m.unfold(0, 2, 1), m, {{2, 4, 2}, {4, 1, 4}, 0});
  check_overlapping("m[1:].unfold(1, 3, 1)[0]", m.index({Slice(1, None)}).unfold(1, 3, 1)[0], m,
                    {{2, 3}, {1, 1}, 4});
  check_both_ways("m[1:].unfold(1, 2, 2)[1]", m.index({Slice(1, None)}).unfold(1, 2, 2)[1], m,
                  {{2, 2}, {2, 1}, 8});
  BP_EXPECT_THROWS(v.unfold(0, 8, 1), ValueError);
}

// VW-2: contiguous() is self when contiguous, else a contiguous copy.
void contiguous_rules(const Context& ctx) {
  Tensor x = iota(ctx, {3, 4});
  for (const auto& [what, t] :
       std::vector<std::pair<const char*, Tensor>>{{"x", x},
                                                   {"x.narrow(0, 1, 2)", x.narrow(0, 1, 2)},
                                                   {"x[1]", x[1]},
                                                   {"x[1:2]", x.index({Slice(1, 2)})},
                                                   {"x.unsqueeze(1)", x.unsqueeze(1)}}) {
    BP_EXPECT(t.is_contiguous(), what, " is contiguous");
    BP_EXPECT(t.contiguous().is_same(t), what, ".contiguous() must return self");
  }
  const std::vector<double> host = host_iota(12);
  struct Strided {
    const char* what;
    Tensor t;
    Layout layout;
  };
  for (const Strided& s :
       {Strided{"x.t()", x.t(), {{4, 3}, {1, 4}, 0}},
        Strided{"x[:, ::2]", x.index({Slice(), Slice(None, None, 2)}), {{3, 2}, {4, 2}, 0}},
        Strided{"x[:, 1:3]", x.index({Slice(), Slice(1, 3)}), {{3, 2}, {4, 1}, 1}},
        Strided{"x[:, :1].expand({3, 2})",
                x.index({Slice(), Slice(None, 1)}).expand({3, 2}),
                {{3, 2}, {4, 0}, 0}}}) {
    BP_EXPECT(!s.t.is_contiguous(), s.what, " is not contiguous");
    Tensor c = s.t.contiguous();
    BP_EXPECT(!c.is_same(s.t) && !c.shares_storage(x), s.what, ".contiguous() must copy");
    BP_EXPECT(c.is_contiguous(), s.what);
    BP_EXPECT_SHAPE(c, s.layout.sizes);
    BP_EXPECT_VALUES(c, gather(host, s.layout.sizes, s.layout.strides, s.layout.offset));
    c.fill_(-5);
    BP_EXPECT_VALUES(x, host);  // the copy is independent
  }
}

// VW-2: view() needs compatible strides and points to reshape otherwise.
void view_needs_compatible_strides(const Context& ctx) {
  Tensor x = iota(ctx, {3, 4});
  std::string msg = BP_ERROR_MESSAGE(ValueError, x.t().view({12}));
  BP_EXPECT_MENTIONS(msg, "reshape");
  BP_EXPECT_THROWS(x.index({Slice(), Slice(None, 2)}).view({-1}), ValueError);
  // Every other column: rows and columns still step evenly, so a view.
  Tensor even = x.index({Slice(), Slice(None, None, 2)}).view({-1});
  BP_EXPECT(even.shares_storage(x));
  BP_EXPECT_STRIDES(even, {2});
  BP_EXPECT_VALUES(even, {0, 2, 4, 6, 8, 10});
  // Splitting one dim of a transposed tensor stays a view.
  Tensor ok = x.t().view({2, 2, 3});
  BP_EXPECT(ok.shares_storage(x));
  BP_EXPECT_STRIDES(ok, {2, 1, 4});
  Tensor r = x.t().reshape({12});
  BP_EXPECT(!r.shares_storage(x), "reshape copies where view cannot");
  BP_EXPECT_VALUES(r, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
}

// VW-3: a view of a view refers to the tensor that owns the memory.
void base_of_views(const Context& ctx) {
  Tensor x = iota(ctx, {2, 3, 4});
  BP_EXPECT(!x.is_view(), "a tensor that owns its memory is not a view");
  BP_EXPECT(!x.base().defined());
  Tensor v = x.transpose(0, 1);
  Tensor w = v[1];
  Tensor u = w.unsqueeze(0).narrow(2, 1, 2);
  Tensor d = w.diagonal();
  Tensor s = x.view({6, 4}).index({Slice(None, None, 2)});
  for (const auto& [what, t] :
       std::vector<std::pair<const char*, Tensor>>{{"v", v},
                                                   {"w = v[1]", w},
                                                   {"u = w.unsqueeze(0).narrow(2, 1, 2)", u},
                                                   {"w.diagonal()", d},
                                                   {"x.view({6, 4})[::2]", s},
                                                   {"u.as_strided", u.as_strided({2}, {1})},
                                                   {"x.unfold(2, 2, 2)", x.unfold(2, 2, 2)}}) {
    BP_EXPECT(t.is_view(), what, " is a view");
    BP_EXPECT(t.base().is_same(x), what, ".base() must be x, the owner of the memory");
  }
  BP_EXPECT_EQ(location(v.base()), location(x));
  Tensor c = x.clone();
  BP_EXPECT(!c.is_view());
  BP_EXPECT(c[0].base().is_same(c), "views of a clone have the clone as base");
  BP_EXPECT(!v.contiguous().is_view(), "a contiguous copy owns its memory");
  BP_EXPECT(!v.reshape({-1}).is_view(), "a copying reshape owns its memory");
  BP_EXPECT(x.reshape({-1}).is_view(), "a reshape that can view is a view");
}

// VW-5: out-of-range dims name the dim and the valid range.
void dim_out_of_range(const Context& ctx) {
  Tensor x = iota(ctx, {2, 3});
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(IndexError, x.transpose(0, 2)), "dim 2", "-2 to 1");
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(IndexError, x.sum({-3})), "dim -3", "-2 to 1");
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(IndexError, x.unsqueeze(3)), "dim 3", "-3 to 2");
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(IndexError, x.select(2, 0)), "dim 2", "-2 to 1");
  BP_EXPECT_THROWS(x.size(2), IndexError);
  BP_EXPECT_THROWS(x.narrow(-3, 0, 1), IndexError);
  BP_EXPECT_THROWS(x.squeeze(2), IndexError);
  BP_EXPECT_THROWS(x.flatten(0, 2), IndexError);
  BP_EXPECT_THROWS(x.permute({0, 2}), IndexError);
  BP_EXPECT_THROWS(x.diagonal(0, 0, 2), IndexError);
  BP_EXPECT_VALUES(x, host_iota(6));  // a failed op changes nothing
}

// VW-5: out-of-range indices name the index and the valid range.
void index_out_of_range(const Context& ctx) {
  Tensor x = iota(ctx, {2, 3});
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(IndexError, x.select(1, 3)), "index 3", "-3 to 2");
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(IndexError, x[2]), "index 2", "-2 to 1");
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(IndexError, x[-3]), "index -3", "-2 to 1");
  BP_EXPECT_THROWS((x.index({0, 5})), IndexError);
  BP_EXPECT_THROWS(x.narrow(1, 2, 2), IndexError);
  BP_EXPECT_THROWS(x[0][0][0], IndexError);  // a 0-d tensor has no dim to index
  BP_EXPECT_VALUES(x[-2], {0, 1, 2});
  BP_EXPECT_VALUES(x.select(1, -1), {2, 5});
}

// VW-5: slice bounds clamp like Python's.
void slice_bounds_clamp(const Context& ctx) {
  Tensor v = iota(ctx, {5});
  BP_EXPECT_VALUES(v.index({Slice(2, 100)}), {2, 3, 4});
  BP_EXPECT_VALUES(v.index({Slice(-100, 2)}), {0, 1});
  BP_EXPECT_VALUES(v.index({Slice(-2, None)}), {3, 4});
  BP_EXPECT_VALUES(v.index({Slice(-100, 100)}), {0, 1, 2, 3, 4});
  BP_EXPECT_VALUES(v.index({Slice(1, 100, 2)}), {1, 3});
  BP_EXPECT_SHAPE(v.index({Slice(4, 2)}), {0});
  BP_EXPECT_SHAPE(v.index({Slice(10, None)}), {0});
  BP_EXPECT_SHAPE(v.index({Slice(None, -10)}), {0});
  Tensor m = iota(ctx, {2, 3});
  Tensor s = m.index({Slice(), Slice(1, 99)});
  BP_EXPECT_SHAPE(s, {2, 2});
  BP_EXPECT_VALUES(s, {1, 2, 4, 5});
  BP_EXPECT_SHAPE(m.slice(1, -99, 99), {2, 3});
}

}  // namespace

void add_view_rule_cases(Suite& suite) {
  auto add = [&suite](const char* name, std::vector<std::string> ids, void (*fn)(const Context&)) {
    suite.add({std::string("view.") + name, std::move(ids), kCategory, fn});
  };
  add("diagonal", {"VW-1"}, diagonal_views);
  add("as_strided", {"VW-1", "IP-6"}, as_strided_views);
  add("unfold", {"VW-1", "IP-6"}, unfold_views);
  add("contiguous", {"VW-2"}, contiguous_rules);
  add("view_needs_compatible_strides", {"VW-2"}, view_needs_compatible_strides);
  add("base", {"VW-3"}, base_of_views);
  add("dim_out_of_range", {"VW-5"}, dim_out_of_range);
  add("index_out_of_range", {"VW-5"}, index_out_of_range);
  add("slice_bounds_clamp", {"VW-5"}, slice_bounds_clamp);
}

}  // namespace bp::conformance
