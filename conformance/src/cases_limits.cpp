// Limits and failures: shapes past the ABI's rank or past 64-bit arithmetic
// are refused before anything reaches the backend (CR-8), an undefined
// tensor raises instead of crashing (CR-9), and an op that fails leaves
// its inputs as they were (IP-10). PyTorch's behaviour for the failing
// in-place ops is printed by conformance/fixtures/torch_reference.py (l.*).
#include <backplane/conformance.h>

#include <limits>
#include <sstream>

#include "case_checks.h"
#include "case_util.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "limits";

void rank_limit(const Context& ctx) {
  const std::vector<int64_t> rank8(8, 1), rank9(9, 1), rank12(12, 2);
  Tensor t8 = ones(rank8, ctx.options());
  BP_EXPECT_EQ(t8.dim(), int64_t{8});
  BP_EXPECT_VALUES(t8, {1});
  const auto before = allocation_count(ctx);
  const std::string msg = BP_ERROR_MESSAGE(bp::ValueError, ones(rank9, ctx.options()));
  BP_EXPECT_MENTIONS(msg, "[empty]", "9 dims", "at most 8");
  BP_EXPECT_THROWS(zeros(rank12, ctx.options()), bp::ValueError);
  BP_EXPECT_THROWS(empty(rank9, ctx.options(DType::Int64)), bp::ValueError);
  BP_EXPECT_THROWS(full(rank9, 2, ctx.options()), bp::ValueError);
  BP_EXPECT(allocation_count(ctx) == before, "a refused shape must not allocate");
  // Views cannot raise the rank past the limit either.
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(bp::ValueError, t8.unsqueeze(0)), "[unsqueeze]");
  BP_EXPECT_THROWS(t8.unfold(0, 1, 1), bp::ValueError);
  BP_EXPECT_THROWS(t8.expand(rank9), bp::ValueError);
  BP_EXPECT_THROWS(t8.view(rank9), bp::ValueError);
  BP_EXPECT_THROWS(t8.as_strided(rank9, std::vector<int64_t>(9, 1), 0), bp::ValueError);
  BP_EXPECT_VALUES(t8.add(ones({1}, ctx.options())), {2});
}

void size_overflow(const Context& ctx) {
  const int64_t big = (int64_t{1} << 62) + 1;
  const std::string msg = BP_ERROR_MESSAGE(bp::ValueError, zeros({3, big, 4}, ctx.options()));
  BP_EXPECT_MENTIONS(msg, "[empty]", "overflow");
  BP_EXPECT_THROWS(empty({int64_t{1} << 32, int64_t{1} << 32}, ctx.options()), bp::ValueError);
  // The element count fits, the byte count does not.
  BP_EXPECT_THROWS(empty({int64_t{1} << 61}, ctx.options(DType::Float64)), bp::ValueError);
  BP_EXPECT_THROWS(empty({-1, 2}, ctx.options()), bp::ValueError);
  Tensor small = ones({1, 1}, ctx.options());
  BP_EXPECT_THROWS(small.expand({int64_t{1} << 40, int64_t{1} << 40}), bp::ValueError);
  BP_EXPECT_THROWS(small.view({-1, big, big}), bp::ValueError);
  BP_EXPECT_THROWS(small.as_strided({3}, {std::numeric_limits<int64_t>::max()}, 0), bp::ValueError);
  BP_EXPECT_THROWS(arange(0.0, 1e300, 1.0, ctx.options()), bp::ValueError);
  BP_EXPECT_THROWS(small.narrow(1, 1, std::numeric_limits<int64_t>::max()), bp::IndexError);
  BP_EXPECT_THROWS(zeros({0}, ctx.options()).view({0, big, big}), bp::ValueError);
  // Large but representable views are fine: no memory is needed.
  Tensor wide = small.expand({int64_t{1} << 30, int64_t{1} << 30});
  BP_EXPECT_EQ(wide.numel(), int64_t{1} << 60);
  BP_EXPECT_VALUES(small, {1});
}

void undefined_tensor(const Context& ctx) {
  Tensor u;
  BP_EXPECT(!u.defined());
  const std::string msg = BP_ERROR_MESSAGE(bp::ValueError, u.dim());
  BP_EXPECT_MENTIONS(msg, "[dim]", "undefined");
  Tensor x = ones({2}, ctx.options());
  BP_EXPECT_THROWS(u.sizes(), bp::ValueError);
  BP_EXPECT_THROWS(u.numel(), bp::ValueError);
  BP_EXPECT_THROWS(u.dtype(), bp::ValueError);
  BP_EXPECT_THROWS(u.size(0), bp::ValueError);
  BP_EXPECT_THROWS(u.is_contiguous(), bp::ValueError);
  BP_EXPECT_THROWS(u.data_ptr(), bp::ValueError);
  BP_EXPECT_THROWS(u.requires_grad(), bp::ValueError);
  BP_EXPECT_THROWS(u.requires_grad_(), bp::ValueError);
  BP_EXPECT_THROWS(u.grad(), bp::ValueError);
  BP_EXPECT_THROWS(u.backward(), bp::ValueError);
  BP_EXPECT_THROWS(u.detach(), bp::ValueError);
  BP_EXPECT_THROWS(u.clone(), bp::ValueError);
  BP_EXPECT_THROWS(u.contiguous(), bp::ValueError);
  BP_EXPECT_THROWS(u.to(DType::Float64), bp::ValueError);
  BP_EXPECT_THROWS(u.view({2}), bp::ValueError);
  BP_EXPECT_THROWS(u.select(0, 0), bp::ValueError);
  BP_EXPECT_THROWS(u.sum(), bp::ValueError);
  BP_EXPECT_THROWS(u.add(x), bp::ValueError);
  BP_EXPECT_THROWS(x.add(u), bp::ValueError);
  BP_EXPECT_THROWS(x.mul_(u), bp::ValueError);
  BP_EXPECT_THROWS(x.copy_(u), bp::ValueError);
  BP_EXPECT_THROWS(u.zero_(), bp::ValueError);
  BP_EXPECT_THROWS(u.item(), bp::ValueError);
  BP_EXPECT_THROWS(u.to_vector<float>(), bp::ValueError);
  BP_EXPECT_THROWS(u.matmul(x), bp::ValueError);
  BP_EXPECT_THROWS(zeros_like(u), bp::ValueError);
  BP_EXPECT_VALUES(x, {1, 1});
  // Printing says what it is rather than failing.
  std::ostringstream os;
  os << u;
  BP_EXPECT_EQ(os.str(), std::string("tensor(undefined)"));
}

// `fn(a)` must throw E and leave a's values and version as they were. A
// failure found on the device surfaces at the next synchronisation (DV-7):
// then only the values are checked, as the op was enqueued (and counted as a
// modification) before the device saw the bad value.
template <class E, class F>
void expect_refused_unchanged(const Tensor& a, F&& fn, const char* what,
                              bool found_on_device = false) {
  const std::vector<double> before = a.to_vector<double>();
  const uint32_t version = a.version();
  bool thrown = false;
  try {
    fn();
  } catch (const E&) {
    thrown = true;
  }
  BP_EXPECT(thrown, what, " should have been refused");
  BP_EXPECT_EQ(a.to_vector<double>(), before, what, " changed its input");
  if (!found_on_device)
    BP_EXPECT_EQ(a.version(), version, what, " bumped the version of its input");
}

void failed_ops_change_nothing(const Context& ctx) {
  Tensor a = from_vector(host_iota(6), {2, 3}, ctx.options());
  // l.*: shapes that do not broadcast to self's.
  expect_refused_unchanged<bp::ValueError>(
      a, [&] { a.add_(ones({4}, ctx.options())); }, "a.add_(ones(4))");
  expect_refused_unchanged<bp::ValueError>(
      a,
      [&] {
        a.mul_(ones({2, 1, 3}, ctx.options()));
      },
      "a.mul_(ones(2,1,3))");
  expect_refused_unchanged<bp::ValueError>(
      a, [&] { a.copy_(ones({4}, ctx.options())); }, "a.copy_(ones(4))");
  expect_refused_unchanged<bp::ValueError>(
      a,
      [&] {
        a.copy_(ones({2, 1, 3}, ctx.options()));
      },
      "a.copy_(ones(2,1,3))");
  expect_refused_unchanged<bp::ValueError>(
      a,
      [&] {
        a.sub_(ones({3, 3}, ctx.options()), 2);
      },
      "a.sub_(ones(3,3))");
  // l.int_a.add_(float): a floating result does not fit an integer self.
  Tensor i = from_vector(host_iota(6), {2, 3}, ctx.options(DType::Int64));
  expect_refused_unchanged<bp::TypeError>(
      i,
      [&] {
        i.add_(full({2, 3}, 0.5, ctx.options()));
      },
      "int_a.add_(float)");
  expect_refused_unchanged<bp::TypeError>(
      i, [&] { i.div_(2); }, "int_a.div_(2)");
  // Writing through an expanded view, and partial overlap (IP-6).
  Tensor row = from_vector(host_iota(3), {3}, ctx.options());
  expect_refused_unchanged<bp::ValueError>(
      row,
      [&] {
        row.expand({2, 3}).add_(1);
      },
      "expanded.add_(1)");
  Tensor buf = from_vector(host_iota(6), {6}, ctx.options());
  expect_refused_unchanged<bp::ValueError>(
      buf, [&] { buf.narrow(0, 1, 4).copy_(buf.narrow(0, 0, 4)); }, "partially overlapping copy_");
  expect_refused_unchanged<bp::ValueError>(
      buf, [&] { buf.narrow(0, 0, 4).add_(buf.narrow(0, 2, 4)); }, "partially overlapping add_");
  // An index out of range, found by the kernel (at once, or on the device
  // and reported by the next synchronisation): it must check every index
  // before it writes anything.
  Tensor idx =
      from_vector(std::vector<double>{0, 1, 2, 0, 1, 7}, {2, 3}, ctx.options(DType::Int64));
  expect_refused_unchanged<bp::Error>(
      a,
      [&] {
        a.scatter_(1, idx, full({2, 3}, -1, ctx.options()));
        bp::synchronize(ctx.device());
      },
      "a.scatter_(bad index)", true);
  expect_refused_unchanged<bp::Error>(
      a,
      [&] {
        a.scatter_add_(1, idx, full({2, 3}, -1, ctx.options()));
        bp::synchronize(ctx.device());
      },
      "a.scatter_add_(bad index)", true);
  // Bad arguments of other in-place ops.
  expect_refused_unchanged<bp::IndexError>(
      a,
      [&] {
        a.scatter_(5, zeros({1, 1}, ctx.options(DType::Int64)), 1.0);
      },
      "a.scatter_(5)");
  expect_refused_unchanged<bp::ValueError>(
      a, [&] { a.clamp_(std::nullopt, std::nullopt); }, "a.clamp_()");
}

// A result with fewer elements than indices, or more, would be left partly
// unwritten: index_select of a 0-d tensor takes exactly one index, as
// PyTorch's "Index to scalar can have only 1 value".
void index_select_of_scalar(const Context& ctx) {
  const Tensor a = full({}, 4, ctx.options());
  const Tensor none = empty({0}, ctx.options(DType::Int64));
  const Tensor two = from_vector(std::vector<double>{0, 0}, {2}, ctx.options(DType::Int64));
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(bp::IndexError, a.index_select(0, none)), "[index_select]",
                     "Index to scalar can have only 1 value, got 0 value(s)");
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(bp::IndexError, a.index_select(0, two)),
                     "Index to scalar can have only 1 value, got 2 value(s)");
  const Tensor one = from_vector(std::vector<double>{0}, {1}, ctx.options(DType::Int64));
  const Tensor r = a.index_select(0, one);
  BP_EXPECT_EQ(r.dim(), int64_t{0});
  BP_EXPECT_VALUES(r, {4});
  // gather's result has the index's shape: an empty index gives an empty result.
  BP_EXPECT_EQ(a.gather(0, none).numel(), int64_t{0});
}

}  // namespace

void add_limit_cases(Suite& suite) {
  auto add = [&suite](const char* name, std::vector<std::string> ids, void (*fn)(const Context&)) {
    suite.add({std::string("limits.") + name, std::move(ids), kCategory, fn});
  };
  add("rank_limit", {"CR-8"}, rank_limit);
  add("size_overflow", {"CR-8"}, size_overflow);
  add("undefined_tensor", {"CR-9"}, undefined_tensor);
  add("failed_ops_change_nothing", {"IP-10", "IP-4", "IP-5", "IP-6"}, failed_ops_change_nothing);
  add("index_select_of_scalar", {"VW-6"}, index_select_of_scalar);
}

}  // namespace bp::conformance
