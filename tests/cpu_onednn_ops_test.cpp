// The cpu_onednn element-wise ops and reductions beyond the first nine,
// loaded as the core would load them and checked against plain loops on
// contiguous, transposed, stepped, offset, broadcast, empty and 0-d
// descriptors. The large shape takes the oneDNN and multi-threaded paths.
#include <cstdint>
#include <limits>

#include "plugin_harness.h"

namespace {

using namespace plugin_harness;

using Ref1 = std::function<double(double)>;
using Ref2 = std::function<double(double, double)>;

const bp_dtype kNumeric[] = {BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64};
const bp_dtype kFloats[] = {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64};

// Rounds a reference value computed in double to what dtype `d` can hold.
double as_dtype(bp_dtype d, double v) { return d == BP_DTYPE_FLOAT32 ? double(float(v)) : v; }

// One unary op over every shape and layout, out of place and in place.
void check_unary(bp_op op, const bp_dtype* dtypes, size_t n_dtypes, bool bool_out,
                 const std::function<double(bp_dtype, double)>& ref, const bp_attrs& attrs,
                 double f64_tol = 0) {
  for (size_t k = 0; k < n_dtypes; ++k) {
    const bp_dtype d = dtypes[k], od = bool_out ? BP_DTYPE_BOOL : d;
    for (const Shape& shape : kShapes)
      for (Layout li : kLayouts)
        for (int mode = 0; mode < 3; ++mode) {  // contiguous out, transposed out, in place
          const bool inplace = mode == 2;
          if (inplace && (li == Layout::broadcast || od != d)) continue;
          const Layout lo = mode == 1 ? Layout::transposed : Layout::contiguous;
          SCOPED_TRACE(str("op ", op, " ", layout_name(li), "->", layout_name(lo), " dtype ", d,
                           " rank ", shape.size(), inplace ? " in-place" : ""));
          Buf in = make(d, shape, li, 1);
          add_specials(in, 1);
          Buf fresh = make(od, shape, lo, 2);
          Buf& out = inplace ? in : fresh;
          const auto want = collect(shape, [&](const Shape& i) { return ref(d, in.get(i)); });
          run(op, d, {&in}, out, attrs);
          expect_values(out, want, f64_tol);
        }
  }
}

TEST(CpuOnednnOps, FloatingUnary) {
  struct Case {
    bp_op op;
    Ref1 f;
  };
  const Case cases[] = {
      {BP_OP_EXP, [](double x) { return std::exp(x); }},
      {BP_OP_LOG, [](double x) { return std::log(x); }},
      {BP_OP_SQRT, [](double x) { return std::sqrt(x); }},
      {BP_OP_SIGMOID, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {BP_OP_TANH, [](double x) { return std::tanh(x); }},
  };
  for (const Case& c : cases) {
    check_unary(
        c.op, kFloats, 2, false, [&](bp_dtype, double x) { return c.f(x); }, attrs_with({}), 1e-15);
    for (bp_dtype d : {BP_DTYPE_BOOL, BP_DTYPE_INT32, BP_DTYPE_INT64})
      EXPECT_EQ(plugin().fn[c.op][d], nullptr) << "op " << c.op << " dtype " << d;
  }
}

TEST(CpuOnednnOps, NegAbsLogicalNot) {
  check_unary(
      BP_OP_NEG, kNumeric, 4, false, [](bp_dtype, double x) { return -x; }, attrs_with({}));
  check_unary(
      BP_OP_ABS, kNumeric, 4, false, [](bp_dtype, double x) { return std::abs(x); },
      attrs_with({}));
  check_unary(
      BP_OP_LOGICAL_NOT, kAll, 5, true, [](bp_dtype, double x) { return x == 0; }, attrs_with({}));
  // The sign of zero survives NEG; the integer minimum wraps.
  Buf z = make(BP_DTYPE_FLOAT32, {40000}, Layout::contiguous);
  for_each_index(z.shape, [&](const Shape& i) { z.set(i, 0.0); });
  Buf zo = make(BP_DTYPE_FLOAT32, {40000}, Layout::contiguous);
  run(BP_OP_NEG, BP_DTYPE_FLOAT32, {&z}, zo, attrs_with({}));
  EXPECT_TRUE(std::signbit(zo.get({39999})));
  Buf m = make(BP_DTYPE_INT32, {1}, Layout::contiguous);
  m.set({0}, double(std::numeric_limits<int32_t>::min()));
  run(BP_OP_ABS, BP_DTYPE_INT32, {&m}, m, attrs_with({}));
  EXPECT_EQ(m.get({0}), double(std::numeric_limits<int32_t>::min()));
}

TEST(CpuOnednnOps, Clamp) {
  for (int given : {1, 2, 3}) {
    auto ref = [given](double lo, double hi) {
      return [=](bp_dtype, double x) {
        if ((given & 1) && x < lo) x = lo;
        if ((given & 2) && x > hi) x = hi;
        return x;
      };
    };
    SCOPED_TRACE(str("bounds given: ", given));
    check_unary(BP_OP_CLAMP, kFloats, 2, false, ref(-1.5, 2.25),
                attrs_with({fscalar(-1.5), fscalar(2.25)}, {given}));
    check_unary(BP_OP_CLAMP, kNumeric, 2, false, ref(-10, 20),
                attrs_with({iscalar(-10), iscalar(20)}, {given}));
    // A fractional bound on integers rounds inwards.
    check_unary(BP_OP_CLAMP, kNumeric, 2, false, ref(-10, 20),
                attrs_with({fscalar(-10.5), fscalar(20.9)}, {given}));
  }
}

// One binary op over layout combinations, out of place and in place.
void check_binary(bp_op op, bp_dtype d, bp_dtype od, const Ref2& ref, bool specials,
                  const std::function<void(Buf&, Buf&)>& prep = nullptr, double f64_tol = 0) {
  using L = Layout;
  const L cases[][3] = {
      {L::contiguous, L::contiguous, L::contiguous}, {L::transposed, L::contiguous, L::contiguous},
      {L::contiguous, L::stepped, L::transposed},    {L::contiguous, L::broadcast, L::contiguous},
      {L::broadcast, L::contiguous, L::stepped},     {L::offset, L::offset, L::offset}};
  for (const Shape& shape : kShapes)
    for (const auto& c : cases)
      for (bool inplace : {false, true}) {
        if (inplace && (c[0] != c[2] || od != d)) continue;
        SCOPED_TRACE(str("op ", op, " dtype ", d, " ", layout_name(c[0]), ",", layout_name(c[1]),
                         "->", layout_name(c[2]), " rank ", shape.size(),
                         inplace ? " in-place" : ""));
        Buf a = make(d, shape, c[0], 1);
        Buf b = make(d, shape, c[1], 2);
        if (specials) {
          add_specials(a, 1);
          add_specials(b, 4);
          // Some equal pairs, for comparisons and ties.
          uint64_t k = 0;
          for_each_index(shape, [&](const Shape& i) {
            if (k++ % 3 == 0 && c[1] != L::broadcast) b.set(i, a.get(i));
          });
        }
        if (prep) prep(a, b);
        Buf fresh = make(od, shape, c[2], 3);
        Buf& out = inplace ? a : fresh;
        const auto want = collect(shape, [&](const Shape& i) { return ref(a.get(i), b.get(i)); });
        run(op, d, {&a, &b}, out, attrs_with({}));
        expect_values(out, want, f64_tol);
      }
}

double nan_max(double x, double y, bool is_max) {
  if (std::isnan(x) || std::isnan(y)) return std::nan("");
  return is_max ? std::max(x, y) : std::min(x, y);
}

TEST(CpuOnednnOps, MaximumMinimum) {
  for (bp_dtype d : kAll) {
    check_binary(
        BP_OP_MAXIMUM, d, d, [](double x, double y) { return nan_max(x, y, true); }, true);
    check_binary(
        BP_OP_MINIMUM, d, d, [](double x, double y) { return nan_max(x, y, false); }, true);
  }
}

TEST(CpuOnednnOps, Pow) {
  // Small integer exponents keep the reference exact.
  auto small_exponents = [](Buf& a, Buf& b) {
    for_each_index(b.shape, [&](const Shape& i) { b.set(i, std::fmod(std::abs(b.get(i)), 4)); });
  };
  for (bp_dtype d : {BP_DTYPE_INT32, BP_DTYPE_INT64})
    check_binary(
        BP_OP_POW, d, d, [](double x, double y) { return std::pow(x, y); }, false, small_exponents);
  for (bp_dtype d : kFloats)
    check_binary(
        BP_OP_POW, d, d, [](double x, double y) { return std::pow(x, y); }, true, nullptr, 1e-15);
  // Exact beyond 2^53; 3^41 wraps modulo 2^64 like the other integer ops.
  Buf base = make(BP_DTYPE_INT64, {2}, Layout::contiguous);
  Buf ex = make(BP_DTYPE_INT64, {2}, Layout::contiguous);
  Buf out = make(BP_DTYPE_INT64, {2}, Layout::contiguous);
  *reinterpret_cast<int64_t*>(base.at({0})) = 3;
  *reinterpret_cast<int64_t*>(ex.at({0})) = 39;
  *reinterpret_cast<int64_t*>(base.at({1})) = 3;
  *reinterpret_cast<int64_t*>(ex.at({1})) = 41;
  run(BP_OP_POW, BP_DTYPE_INT64, {&base, &ex}, out, attrs_with({}));
  EXPECT_EQ(*reinterpret_cast<int64_t*>(out.at({0})), 4052555153018976267);
  EXPECT_EQ(*reinterpret_cast<int64_t*>(out.at({1})), -420491770248316829);
  // A negative exponent is refused before anything is written.
  for (bp_dtype d : {BP_DTYPE_INT32, BP_DTYPE_INT64}) {
    Buf a = make(d, {300, 257}, Layout::contiguous, 1);
    Buf b = make(d, {300, 257}, Layout::contiguous, 2);
    Buf o = make(d, {300, 257}, Layout::contiguous, 3);
    const Buf before = o;
    const CallResult r = call(BP_OP_POW, d, {&a, &b}, o, attrs_with({}));
    EXPECT_EQ(r.status, BP_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(r.message, "[pow] integers to negative integer powers are not allowed");
    EXPECT_EQ(o.storage, before.storage);
  }
}

TEST(CpuOnednnOps, ComparisonsAndLogical) {
  struct Case {
    bp_op op;
    Ref2 f;
  };
  const Case cases[] = {
      {BP_OP_EQ, [](double x, double y) { return x == y; }},
      {BP_OP_NE, [](double x, double y) { return x != y; }},
      {BP_OP_LT, [](double x, double y) { return x < y; }},
      {BP_OP_LE, [](double x, double y) { return x <= y; }},
      {BP_OP_GT, [](double x, double y) { return x > y; }},
      {BP_OP_GE, [](double x, double y) { return x >= y; }},
      {BP_OP_LOGICAL_AND, [](double x, double y) { return x != 0 && y != 0; }},
      {BP_OP_LOGICAL_OR, [](double x, double y) { return x != 0 || y != 0; }},
  };
  for (const Case& c : cases)
    for (bp_dtype d : kAll) check_binary(c.op, d, BP_DTYPE_BOOL, c.f, true);
}

TEST(CpuOnednnOps, Where) {
  using L = Layout;
  const L cases[][4] = {{L::contiguous, L::contiguous, L::contiguous, L::contiguous},
                        {L::transposed, L::stepped, L::broadcast, L::contiguous},
                        {L::broadcast, L::contiguous, L::transposed, L::stepped},
                        {L::offset, L::offset, L::offset, L::offset}};
  for (bp_dtype d : kAll)
    for (const Shape& shape : kShapes)
      for (const auto& c : cases) {
        SCOPED_TRACE(str("dtype ", d, " ", layout_name(c[0]), ",", layout_name(c[1]), ",",
                         layout_name(c[2]), "->", layout_name(c[3]), " rank ", shape.size()));
        Buf cond = make(BP_DTYPE_BOOL, shape, c[0], 1);
        Buf a = make(d, shape, c[1], 2);
        Buf b = make(d, shape, c[2], 3);
        add_specials(a, 2);
        Buf out = make(d, shape, c[3], 4);
        const auto want =
            collect(shape, [&](const Shape& i) { return cond.get(i) != 0 ? a.get(i) : b.get(i); });
        run(BP_OP_WHERE, d, {&cond, &a, &b}, out, attrs_with({}));
        expect_values(out, want);
      }
}

// Reference for PROD, MAX and MIN of the values of one output element.
double reduce_ref(bp_op op, bp_dtype d, const std::vector<double>& xs) {
  if (op == BP_OP_PROD) {
    if (is_float(d)) {
      double p = 1;
      for (double x : xs) p *= x;
      return p;
    }
    uint64_t p = 1;  // integers wrap
    for (double x : xs) p *= uint64_t(int64_t(x));
    return double(int64_t(p));
  }
  double m = xs[0];
  for (double x : xs) m = nan_max(m, x, op == BP_OP_MAX);
  return m;
}

TEST(CpuOnednnOps, ProdMaxMin) {
  const Shape cases[][2] = {
      {{3, 4, 5}, {1, 4, 1}}, {{3, 4, 5}, {1, 1, 1}}, {{3, 4, 5}, {3, 4, 1}},
      {{3, 4, 5}, {3, 4, 5}}, {{3, 1, 5}, {1, 1, 5}}, {{}, {}},
      {{4, 0}, {1, 0}},       {{300, 257}, {1, 1}},   {{300, 257}, {1, 257}},
      {{300, 257}, {300, 1}}, {{70000}, {1}},         {{2, 40000}, {1, 40000}}};
  for (bp_op op : {BP_OP_PROD, BP_OP_MAX, BP_OP_MIN})
    for (bp_dtype d : kAll)
      for (const auto& c : cases)
        for (Layout li : kLayouts)
          for (Layout lo : {Layout::contiguous, Layout::stepped}) {
            SCOPED_TRACE(str("op ", op, " ", layout_name(li), "->", layout_name(lo), " dtype ", d,
                             " ", c[0].size(), "-d to ", c[1].size(), "-d"));
            const bp_dtype od = op == BP_OP_PROD && !is_float(d) ? BP_DTYPE_INT64 : d;
            Buf in = make(d, c[0], li, 1);
            if (op == BP_OP_PROD && is_float(d))  // near 1, so products stay finite
              for_each_index(c[0], [&](const Shape& i) { in.set(i, 1 + in.get(i) / 64); });
            else
              add_specials(in, 5);
            Buf out = make(od, c[1], lo, 2);
            int64_t out_n = 1;
            for (int64_t s : c[1]) out_n *= s;
            std::vector<std::vector<double>> groups(size_t(std::max<int64_t>(out_n, 1)));
            auto slot = [&](Shape i) {
              for (size_t k = 0; k < i.size(); ++k)
                if (c[1][k] == 1) i[k] = 0;
              int64_t flat = 0;
              for (size_t k = 0; k < i.size(); ++k) flat = flat * c[1][k] + i[k];
              return flat;
            };
            for_each_index(c[0], [&](const Shape& i) { groups[slot(i)].push_back(in.get(i)); });
            run(op, d, {&in}, out, attrs_with({}));
            expect_values(out,
                          collect(c[1],
                                  [&](const Shape& i) {
                                    return as_dtype(od, reduce_ref(op, d, groups[slot(i)]));
                                  }),
                          1e-12);
          }
  // MAX and MIN of nothing are errors; PROD of nothing is 1.
  Buf empty = make(BP_DTYPE_FLOAT32, {0, 4}, Layout::contiguous);
  Buf out = make(BP_DTYPE_FLOAT32, {1, 4}, Layout::contiguous);
  EXPECT_EQ(call(BP_OP_MAX, BP_DTYPE_FLOAT32, {&empty}, out, attrs_with({})).status,
            BP_STATUS_INVALID_ARGUMENT);
  run(BP_OP_PROD, BP_DTYPE_FLOAT32, {&empty}, out, attrs_with({}));
  expect_values(out, {1, 1, 1, 1});
}

}  // namespace
