// Copies: clone() allocates new memory with the same values, keeps dense
// strides (a contiguous layout on request or when the source has gaps or
// repeats), and is independent of its source afterwards (CP-1, CP-5).
// detach() is not part of the API these cases build on, so the CP rules
// about it are left to the autograd cases.
#include <backplane/conformance.h>

#include "case_checks.h"
#include "case_util.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "copy";

// Fresh memory, same metadata but strides, same values, not a view.
void check_clone(const std::string& what, const Tensor& c, const Tensor& src,
                 const std::vector<int64_t>& strides) {
  try {
    BP_EXPECT(!c.is_same(src) && !c.shares_storage(src), "clone() must copy into new memory");
    BP_EXPECT(location(c) != location(src));
    BP_EXPECT(!c.is_view(), "a clone owns its memory");
    BP_EXPECT_EQ(c.dtype(), src.dtype());
    BP_EXPECT_EQ(c.device(), src.device());
    BP_EXPECT_SHAPE(c, std::vector<int64_t>(src.sizes().begin(), src.sizes().end()));
    BP_EXPECT_STRIDES(c, strides);
  } catch (const CaseFailure& e) {
    throw CaseFailure(what + ": " + e.what());
  }
}

// Every dtype: values survive, including bool and negative integers (for
// uint8, their value modulo 256).
void clone_values(const Context& ctx) {
  for (DType d : kAllDTypes) {
    std::vector<double> host;
    for (int i = 0; i < 6; ++i)
      host.push_back(
          d == DType::Bool ? i % 2 : (i % 2 ? -1.0 : 1.0) * (i + 1) * (is_floating(d) ? 0.5 : 1));
    if (d == DType::UInt8)
      for (double& v : host) v = v < 0 ? v + 256 : v;
    Tensor x = from_vector(host, {2, 3}, ctx.options(d));
    Tensor c = x.clone();
    check_clone(std::string("clone of ") + std::string(name(d)), c, x, {3, 1});
    BP_EXPECT_VALUES(c, host);
  }
}

// A dense source keeps its strides, even from an offset; the values are
// the source's, in its logical order.
void clone_keeps_dense_strides(const Context& ctx) {
  Tensor t = iota(ctx, {2, 3}).t();  // [3, 2], strides [1, 3]
  Tensor c = t.clone();
  check_clone("iota({2, 3}).t()", c, t, {1, 3});
  BP_EXPECT_VALUES(c, {0, 3, 1, 4, 2, 5});
  Tensor p = iota(ctx, {2, 3, 4}).permute({2, 0, 1});  // strides [1, 12, 4]
  Tensor cp = p.clone();
  check_clone("permute({2, 0, 1})", cp, p, {1, 12, 4});
  BP_EXPECT_VALUES(cp, gather(host_iota(24), {4, 2, 3}, {1, 12, 4}, 0));
  Tensor o = iota(ctx, {4, 3}).narrow(0, 1, 2).t();  // [3, 2], strides [1, 3], offset 3
  Tensor co = o.clone();
  check_clone("narrow(0, 1, 2).t()", co, o, {1, 3});
  BP_EXPECT_EQ(co.storage_offset(), 0);
  BP_EXPECT_VALUES(co, {3, 6, 4, 7, 5, 8});
}

// A source with gaps (stepped) or repeats (expanded) clones contiguous.
void clone_not_dense_contiguous(const Context& ctx) {
  Tensor s = iota(ctx, {3, 4}).index({Slice(), Slice(None, None, 2)});  // strides [4, 2]
  Tensor cs = s.clone();
  check_clone("x[:, ::2]", cs, s, {2, 1});
  BP_EXPECT(cs.is_contiguous());
  BP_EXPECT_VALUES(cs, {0, 2, 4, 6, 8, 10});
  Tensor e = iota(ctx, {3, 1}).expand({3, 4});
  Tensor ce = e.clone();
  check_clone("expand({3, 4})", ce, e, {4, 1});
  BP_EXPECT_VALUES(ce, {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2});
  ce.add_(1);  // a clone of an expanded tensor has distinct elements: writable
  BP_EXPECT_VALUES(ce, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
}

// MemoryFormat::Contiguous always gives row-major strides.
void clone_contiguous_format(const Context& ctx) {
  Tensor t = iota(ctx, {2, 3}).t();
  Tensor c = t.clone(MemoryFormat::Contiguous);
  check_clone("t().clone(Contiguous)", c, t, {2, 1});
  BP_EXPECT(c.is_contiguous());
  BP_EXPECT_VALUES(c, {0, 3, 1, 4, 2, 5});
  Tensor x = iota(ctx, {2, 3});
  check_clone("x.clone(Contiguous)", x.clone(MemoryFormat::Contiguous), x, {3, 1});
}

// CP-5: changing the clone leaves the source, and its version, alone; and
// the other way round.
void clone_independent(const Context& ctx) {
  Tensor x = iota(ctx, {2, 3});
  Tensor c = x.clone();
  const uint32_t vx = x.version(), vc = c.version();
  c.add_(1);
  c.index({Slice(), 0}).zero_();
  BP_EXPECT_VALUES(c, {0, 2, 3, 0, 5, 6});
  BP_EXPECT_VALUES(x, {0, 1, 2, 3, 4, 5});
  BP_EXPECT_EQ(x.version(), vx, "in-place ops on a clone must not bump the source's version");
  BP_EXPECT(c.version() > vc);
  x.mul_(10);
  BP_EXPECT_VALUES(c, {0, 2, 3, 0, 5, 6});
  // A clone of a view is independent of the view's base.
  Tensor row = x[1];
  Tensor cr = row.clone();
  BP_EXPECT(!cr.is_view() && !cr.shares_storage(x));
  const uint32_t vrow = row.version();
  cr.fill_(-1);
  BP_EXPECT_VALUES(x, {0, 10, 20, 30, 40, 50});
  BP_EXPECT_EQ(row.version(), vrow);
  BP_EXPECT_VALUES(cr, {-1, -1, -1});
}

// Empty and 0-d sources clone too.
void clone_empty_and_0d(const Context& ctx) {
  Tensor e = zeros({0, 3}, ctx.options(DType::Int64));
  Tensor ce = e.clone();
  BP_EXPECT_SHAPE(ce, {0, 3});
  BP_EXPECT_EQ(ce.dtype(), DType::Int64);
  BP_EXPECT(!ce.shares_storage(e));
  Tensor s = scalar_tensor(4.5, ctx.options(DType::Float64));
  Tensor cs = s.clone();
  BP_EXPECT_SHAPE(cs, {});
  BP_EXPECT(!cs.shares_storage(s));
  cs.fill_(1);
  BP_EXPECT_EQ(s.item<double>(), 4.5);
  BP_EXPECT_EQ(cs.item<double>(), 1.0);
}

}  // namespace

void add_copy_cases(Suite& suite) {
  auto add = [&suite](const char* name, std::vector<std::string> ids, void (*fn)(const Context&)) {
    suite.add({std::string("copy.") + name, std::move(ids), kCategory, fn});
  };
  add("clone.values", {"CP-1"}, clone_values);
  add("clone.keeps_dense_strides", {"CP-1"}, clone_keeps_dense_strides);
  add("clone.not_dense_contiguous", {"CP-1"}, clone_not_dense_contiguous);
  add("clone.contiguous_format", {"CP-1"}, clone_contiguous_format);
  add("clone.independent", {"CP-1", "CP-5"}, clone_independent);
  add("clone.empty_and_0d", {"CP-1"}, clone_empty_and_0d);
}

}  // namespace bp::conformance
