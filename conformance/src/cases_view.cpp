// Views (VW-1): every view op shares its base's memory, has the shape,
// strides and offset worked out by hand below, shows the values a host loop
// over that layout reads, and a write through it is seen by the base.
// reshape of a layout that no view can express copies instead.
#include <backplane/conformance.h>

#include "case_util.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "view";

struct Layout {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
};

// `base` is contiguous, at offset 0, and holds host_iota(numel): storage
// position p holds the value p.
void check_view(const char* what, const Tensor& view, const Tensor& base, const Layout& expect) {
  std::vector<double> host = host_iota(base.numel());
  try {
    BP_EXPECT(view.shares_storage(base), "a view must share its base's memory");
    BP_EXPECT_SHAPE(view, expect.sizes);
    BP_EXPECT_STRIDES(view, expect.strides);
    BP_EXPECT_EQ(view.storage_offset(), expect.offset);
    BP_EXPECT_EQ(location(view), location_at(base, expect.offset));
    BP_EXPECT_VALUES(view, gather(host, expect.sizes, expect.strides, expect.offset));
  } catch (const CaseFailure& e) {
    throw CaseFailure(std::string(what) + ": " + e.what());
  }
}

// Writes -1 through `view` and checks that exactly the elements it covers
// changed in the base; then restores the base for the next check.
void check_write_through(const char* what, Tensor view, Tensor base, const Layout& expect) {
  std::vector<double> host = host_iota(base.numel());
  try {
    view.fill_(-1);
    BP_EXPECT_VALUES(base, scatter(host, expect.sizes, expect.strides, expect.offset, -1));
  } catch (const CaseFailure& e) {
    throw CaseFailure(std::string(what) + " (write through the view): " + e.what());
  }
  base.copy_(from_vector(host, base.sizes(), TensorOptions(base.dtype()).device(base.device())));
}

void check_both(const char* what, const Tensor& view, const Tensor& base, const Layout& expect) {
  check_view(what, view, base, expect);
  check_write_through(what, view, base, expect);
}

// x: shape [2, 3, 4], strides [12, 4, 1], values 0..23.
Tensor sample(const Context& ctx) { return iota(ctx, {2, 3, 4}); }

void view_view(const Context& ctx) {
  Tensor x = sample(ctx);
  check_both("x.view({6, 4})", x.view({6, 4}), x, {{6, 4}, {4, 1}, 0});
  check_both("x.view({4, -1})", x.view({4, -1}), x, {{4, 6}, {6, 1}, 0});
  check_both("x.view({24})", x.view({24}), x, {{24}, {1}, 0});
}

void view_reshape(const Context& ctx) {
  Tensor x = sample(ctx);
  check_both("x.reshape({3, 8})", x.reshape({3, 8}), x, {{3, 8}, {8, 1}, 0});
  check_both("x.reshape({-1})", x.reshape({-1}), x, {{24}, {1}, 0});
  // A contiguous slab at an offset keeps its offset.
  Tensor m = iota(ctx, {4, 6});
  check_both("m.narrow(0, 1, 2).reshape({12})", m.narrow(0, 1, 2).reshape({12}), m, {{12}, {1}, 6});
}

// x.transpose(0, 2) has strides [1, 4, 12]: no strides give it the shape
// [24], so reshape must copy.
void view_reshape_copies(const Context& ctx) {
  Tensor x = sample(ctx);
  Tensor r = x.transpose(0, 2).reshape({24});
  BP_EXPECT(!r.shares_storage(x), "reshape of a non-viewable layout must copy");
  BP_EXPECT_SHAPE(r, {24});
  BP_EXPECT(r.is_contiguous());
  std::vector<double> host = host_iota(24);
  BP_EXPECT_VALUES(r, gather(host, {4, 3, 2}, {1, 4, 12}, 0));
  r.fill_(-1);
  BP_EXPECT_VALUES(x, host);  // the copy is independent of x
}

void view_transpose(const Context& ctx) {
  Tensor x = sample(ctx);
  check_both("x.transpose(0, 1)", x.transpose(0, 1), x, {{3, 2, 4}, {4, 12, 1}, 0});
  check_both("x.transpose(-1, -3)", x.transpose(-1, -3), x, {{4, 3, 2}, {1, 4, 12}, 0});
}

void view_t(const Context& ctx) {
  Tensor m = iota(ctx, {3, 4});
  check_both("m.t()", m.t(), m, {{4, 3}, {1, 4}, 0});
  Tensor v = iota(ctx, {5});
  check_both("v.t() (1-D)", v.t(), v, {{5}, {1}, 0});
}

void view_permute(const Context& ctx) {
  Tensor x = sample(ctx);
  check_both("x.permute({2, 0, 1})", x.permute({2, 0, 1}), x, {{4, 2, 3}, {1, 12, 4}, 0});
  check_both("x.permute({1, 2, 0})", x.permute({1, 2, 0}), x, {{3, 4, 2}, {4, 1, 12}, 0});
}

void view_narrow(const Context& ctx) {
  Tensor x = sample(ctx);
  check_both("x.narrow(2, 1, 2)", x.narrow(2, 1, 2), x, {{2, 3, 2}, {12, 4, 1}, 1});
  check_both("x.narrow(0, 1, 1)", x.narrow(0, 1, 1), x, {{1, 3, 4}, {12, 4, 1}, 12});
  check_both("x.narrow(1, 1, 2)", x.narrow(1, 1, 2), x, {{2, 2, 4}, {12, 4, 1}, 4});
}

void view_select(const Context& ctx) {
  Tensor x = sample(ctx);
  check_both("x.select(1, 2)", x.select(1, 2), x, {{2, 4}, {12, 1}, 8});
  check_both("x.select(1, -1)", x.select(1, -1), x, {{2, 4}, {12, 1}, 8});
  check_both("x.select(2, 3)", x.select(2, 3), x, {{2, 3}, {12, 4}, 3});
  check_both("x[1]", x[1], x, {{3, 4}, {4, 1}, 12});
  check_both("x[1][2][3] (0-d)", x[1][2][3], x, {{}, {}, 23});
}

void view_slice_step(const Context& ctx) {
  Tensor x = sample(ctx);
  check_both("x[:, ::2, 1::2]", x.index({Slice(), Slice(0, None, 2), Slice(1, None, 2)}), x,
             {{2, 2, 2}, {12, 8, 2}, 1});
  check_both("x.slice(2, 1, None, 2)", x.slice(2, 1, None, 2), x, {{2, 3, 2}, {12, 4, 2}, 1});
  check_both("x[1, 1:, 3]", x.index({1, Slice(1, None), 3}), x, {{2}, {4}, 19});
  check_both("x[:, :, ::3]", x.index({Slice(), Slice(), Slice(None, None, 3)}), x,
             {{2, 3, 2}, {12, 4, 3}, 0});
  Tensor v = iota(ctx, {10});
  check_both("v[1:8:3]", v.index({Slice(1, 8, 3)}), v, {{3}, {3}, 1});
}

// An expanded tensor repeats elements (stride 0), so writing through it is
// an error (IP-6); the base is written instead and the view must see it.
void check_expand(const char* what, const Tensor& view, Tensor base, const Layout& expect) {
  check_view(what, view, base, expect);
  std::vector<double> host = host_iota(base.numel());
  base.mul_(10);
  std::vector<double> expected = gather(host, expect.sizes, expect.strides, expect.offset);
  for (double& e : expected) e *= 10;
  try {
    BP_EXPECT_VALUES(view, expected);
  } catch (const CaseFailure& e) {
    throw CaseFailure(std::string(what) + " (base written): " + e.what());
  }
  base.div_(10);
}

void view_expand(const Context& ctx) {
  Tensor c = iota(ctx, {3, 1});
  check_expand("c.expand({3, 4})", c.expand({3, 4}), c, {{3, 4}, {1, 0}, 0});
  check_expand("c.expand({-1, 4})", c.expand({-1, 4}), c, {{3, 4}, {1, 0}, 0});
  check_expand("c.expand({2, 3, 4})", c.expand({2, 3, 4}), c, {{2, 3, 4}, {0, 1, 0}, 0});
  Tensor v = iota(ctx, {4});
  check_expand("v.expand({2, 4})", v.expand({2, 4}), v, {{2, 4}, {0, 1}, 0});
}

void view_squeeze(const Context& ctx) {
  Tensor y = iota(ctx, {2, 1, 3, 1, 4});  // strides [12, 12, 4, 4, 1]
  check_both("y.squeeze()", y.squeeze(), y, {{2, 3, 4}, {12, 4, 1}, 0});
  check_both("y.squeeze(1)", y.squeeze(1), y, {{2, 3, 1, 4}, {12, 4, 4, 1}, 0});
  check_both("y.squeeze(-2)", y.squeeze(-2), y, {{2, 1, 3, 4}, {12, 12, 4, 1}, 0});
  check_both("y.squeeze(0) (size 2: unchanged)", y.squeeze(0), y,
             {{2, 1, 3, 1, 4}, {12, 12, 4, 4, 1}, 0});
}

void view_unsqueeze(const Context& ctx) {
  Tensor x = sample(ctx);
  check_both("x.unsqueeze(0)", x.unsqueeze(0), x, {{1, 2, 3, 4}, {24, 12, 4, 1}, 0});
  check_both("x.unsqueeze(1)", x.unsqueeze(1), x, {{2, 1, 3, 4}, {12, 4, 4, 1}, 0});
  check_both("x.unsqueeze(-1)", x.unsqueeze(-1), x, {{2, 3, 4, 1}, {12, 4, 1, 1}, 0});
  Tensor column = x.select(2, 1);  // [2, 3], strides [12, 4], offset 1
  check_both("x.select(2, 1).unsqueeze(1)", column.unsqueeze(1), x, {{2, 1, 3}, {12, 4, 4}, 1});
}

void view_flatten(const Context& ctx) {
  Tensor x = sample(ctx);
  check_both("x.flatten()", x.flatten(), x, {{24}, {1}, 0});
  check_both("x.flatten(1)", x.flatten(1), x, {{2, 12}, {12, 1}, 0});
  check_both("x.flatten(0, 1)", x.flatten(0, 1), x, {{6, 4}, {4, 1}, 0});
  check_both("x[:, 1:].flatten(1)", x.index({Slice(), Slice(1, None)}).flatten(1), x,
             {{2, 8}, {12, 1}, 4});
}

// Views of views describe the original memory.
void view_of_view(const Context& ctx) {
  Tensor x = sample(ctx);
  Tensor v = x.transpose(0, 2).narrow(0, 1, 2);  // [2, 3, 2], strides [1, 4, 12], offset 1
  check_both("x.transpose(0, 2).narrow(0, 1, 2)", v, x, {{2, 3, 2}, {1, 4, 12}, 1});
  check_both("...[1]", v[1], x, {{3, 2}, {4, 12}, 2});
  check_both("...[1].t()", v[1].t(), x, {{2, 3}, {12, 4}, 2});
}

}  // namespace

void add_view_cases(Suite& suite) {
  auto add = [&suite](const char* name, void (*fn)(const Context&)) {
    suite.add({std::string("view.") + name, {"VW-1"}, kCategory, fn});
  };
  add("view", view_view);
  add("reshape", view_reshape);
  add("reshape_copies", view_reshape_copies);
  add("transpose", view_transpose);
  add("t", view_t);
  add("permute", view_permute);
  add("narrow", view_narrow);
  add("select", view_select);
  add("slice_step", view_slice_step);
  add("expand", view_expand);
  add("squeeze", view_squeeze);
  add("unsqueeze", view_unsqueeze);
  add("flatten", view_flatten);
  add("view_of_view", view_of_view);
}

}  // namespace bp::conformance
