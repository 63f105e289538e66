// The cpu_onednn ops that work along one dim (ARGMAX/ARGMIN, SOFTMAX,
// LOG_SOFTMAX, ARGSORT, CUMSUM), the index ops (GATHER, SCATTER, INDEX_SELECT) and RANDOM,
// checked against plain loops. RANDOM is checked against Philox4x32-10 as
// defined in its paper, written out here independently of the SDK header.
#include <algorithm>
#include <cstdint>
#include <numeric>

#include "plugin_harness.h"

namespace {

using namespace plugin_harness;

struct DimCase {
  Shape shape;
  int64_t dim;
};
const DimCase kDimCases[] = {{{3, 4, 5}, 0},  {{3, 4, 5}, 1}, {{3, 4, 5}, 2},  {{3, 4, 5}, -1},
                             {{}, 0},         {{7}, 0},       {{0, 4}, 1},     {{300, 257}, 0},
                             {{300, 257}, 1}, {{70000}, 0},   {{2, 40000}, 1}, {{40000, 2}, 0}};

int64_t wrap(int64_t dim, size_t rank) {
  return dim < 0 ? dim + int64_t(std::max<size_t>(rank, 1)) : dim;
}

// Calls f(index of the line's first element) for each line along `dim`.
void for_each_line(const Shape& shape, int64_t dim, const std::function<void(const Shape&)>& f) {
  if (shape.empty()) return f({});
  Shape outer = shape;
  outer[dim] = 1;
  for_each_index(outer, f);
}

// Flat positions: a few lines get a NaN, a +inf, a -inf.
void add_line_specials(Buf& b) {
  int64_t k = 0;
  for_each_index(b.shape, [&](const Shape& i) {
    const int64_t r = k++ % 1000;
    if (r == 7) b.set(i, std::nan(""));
    if (r == 500) b.set(i, INFINITY);
    if (r == 900) b.set(i, -INFINITY);
  });
}

TEST(CpuOnednnDimOps, ArgmaxArgmin) {
  for (bp_op op : {BP_OP_ARGMAX, BP_OP_ARGMIN})
    for (bp_dtype d : kAll)
      for (const DimCase& c : kDimCases)
        for (Layout li : kLayouts)
          for (Layout lo : {Layout::contiguous, Layout::stepped}) {
            SCOPED_TRACE(str("op ", op, " dtype ", d, " ", layout_name(li), "->", layout_name(lo),
                             " rank ", c.shape.size(), " dim ", c.dim));
            const int64_t dim = wrap(c.dim, c.shape.size());
            Buf in = make(d, c.shape, li, 1);
            add_specials(in, 3);
            Shape os = c.shape;
            if (!os.empty()) os[dim] = 1;
            Buf out = make(BP_DTYPE_INT64, os, lo, 2);
            run(op, d, {&in}, out, attrs_with({}, {c.dim}));
            expect_values(out, collect(os, [&](const Shape& i) {
                            if (c.shape.empty()) return 0.0;
                            Shape j = i;
                            double best = in.get(j);
                            int64_t bi = 0;
                            for (j[dim] = 1; j[dim] < c.shape[dim]; ++j[dim]) {
                              const double v = in.get(j);
                              if (std::isnan(best)) break;
                              if (std::isnan(v) || (op == BP_OP_ARGMAX ? v > best : v < best)) {
                                best = v;
                                bi = j[dim];
                              }
                            }
                            return double(bi);
                          }));
          }
  Buf empty = make(BP_DTYPE_FLOAT32, {0, 4}, Layout::contiguous);
  Buf out = make(BP_DTYPE_INT64, {1, 4}, Layout::contiguous);
  EXPECT_EQ(call(BP_OP_ARGMAX, BP_DTYPE_FLOAT32, {&empty}, out, attrs_with({}, {0})).status,
            BP_STATUS_INVALID_ARGUMENT);
}

TEST(CpuOnednnDimOps, SoftmaxLogSoftmax) {
  for (bp_op op : {BP_OP_SOFTMAX, BP_OP_LOG_SOFTMAX})
    for (bp_dtype d : {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64})
      for (const DimCase& c : kDimCases)
        for (Layout li : kLayouts)
          for (int mode = 0; mode < 3; ++mode)  // contiguous out, stepped out, in place
            for (bool specials : {false, true}) {
              const bool inplace = mode == 2;
              if (inplace && li == Layout::broadcast) continue;
              SCOPED_TRACE(str("op ", op, " dtype ", d, " ", layout_name(li), " mode ", mode,
                               " rank ", c.shape.size(), " dim ", c.dim,
                               specials ? " with NaN/inf" : ""));
              const int64_t dim = wrap(c.dim, c.shape.size());
              Buf in = make(d, c.shape, li, 1);
              if (specials) add_line_specials(in);
              Buf fresh = make(d, c.shape, mode == 1 ? Layout::stepped : Layout::contiguous, 2);
              Buf& out = inplace ? in : fresh;
              Buf want = make(BP_DTYPE_FLOAT64, c.shape, Layout::contiguous);
              for_each_line(c.shape, dim, [&](const Shape& first) {
                const int64_t n = c.shape.empty() ? 1 : c.shape[dim];
                auto at = [&](int64_t k) {
                  Shape j = first;
                  if (!j.empty()) j[dim] = k;
                  return j;
                };
                double m = -INFINITY, sum = 0;
                bool nan = false;
                for (int64_t k = 0; k < n; ++k) {
                  nan |= std::isnan(in.get(at(k)));
                  m = std::max(m, in.get(at(k)));
                }
                for (int64_t k = 0; k < n; ++k) sum += std::exp(in.get(at(k)) - m);
                for (int64_t k = 0; k < n; ++k) {
                  const double x = in.get(at(k)) - m;
                  const double v = op == BP_OP_SOFTMAX ? std::exp(x) / sum : x - std::log(sum);
                  want.set(at(k), nan || std::isinf(m) ? std::nan("") : v);
                }
              });
              const auto w = collect(c.shape, [&](const Shape& i) { return want.get(i); });
              run(op, d, {&in}, out, attrs_with({}, {c.dim}));
              expect_values(out, w, 1e-12);
            }
}

// ARGSORT against std::stable_sort with the order written out here (NaN
// above all numbers), on lines of few distinct values (ties everywhere) with
// NaN and infinities; the long lines take the chunked, merged path.
TEST(CpuOnednnDimOps, Argsort) {
  for (bp_dtype d : kAll)
    for (const DimCase& c : kDimCases)
      for (Layout li : kLayouts)
        for (bool descending : {false, true}) {
          if (descending && li != Layout::contiguous && li != Layout::transposed) continue;
          SCOPED_TRACE(str("dtype ", d, " ", layout_name(li), " rank ", c.shape.size(), " dim ",
                           c.dim, descending ? " descending" : ""));
          const int64_t dim = wrap(c.dim, c.shape.size());
          Buf in = make(d, c.shape, li, 1);
          uint64_t k = 0;
          for_each_index(c.shape, [&](const Shape& i) { in.set(i, double((k++ * 7919) % 5) - 2); });
          add_specials(in, 3);
          Buf out = make(BP_DTYPE_INT64, c.shape, Layout::stepped, 2);
          Buf want = make(BP_DTYPE_INT64, c.shape, Layout::contiguous);
          auto before = [descending](double a, double b) {
            if (std::isnan(a) || std::isnan(b))
              return descending ? std::isnan(a) && !std::isnan(b) : !std::isnan(a) && std::isnan(b);
            return descending ? a > b : a < b;
          };
          for_each_line(c.shape, dim, [&](const Shape& first) {
            const int64_t n = c.shape.empty() ? 1 : c.shape[dim];
            auto at = [&](int64_t j) {
              Shape p = first;
              if (!p.empty()) p[dim] = j;
              return p;
            };
            std::vector<int64_t> order(static_cast<size_t>(n));
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
              return before(in.get(at(a)), in.get(at(b)));
            });
            for (int64_t j = 0; j < n; ++j) want.set(at(j), double(order[size_t(j)]));
          });
          run(BP_OP_ARGSORT, d, {&in}, out, attrs_with({}, {c.dim, descending ? 1 : 0}));
          expect_values(out, collect(c.shape, [&](const Shape& i) { return want.get(i); }));
        }
}

// CUMSUM against running sums in double (int64 for bool and integers).
TEST(CpuOnednnDimOps, Cumsum) {
  for (bp_dtype d : kAll)
    for (const DimCase& c : kDimCases)
      for (Layout li : kLayouts) {
        SCOPED_TRACE(
            str("dtype ", d, " ", layout_name(li), " rank ", c.shape.size(), " dim ", c.dim));
        const int64_t dim = wrap(c.dim, c.shape.size());
        const bool floating = d == BP_DTYPE_FLOAT32 || d == BP_DTYPE_FLOAT64;
        Buf in = make(d, c.shape, li, 1);
        Buf out = make(floating ? d : BP_DTYPE_INT64, c.shape, Layout::stepped, 2);
        Buf want = make(BP_DTYPE_FLOAT64, c.shape, Layout::contiguous);
        for_each_line(c.shape, dim, [&](const Shape& first) {
          const int64_t n = c.shape.empty() ? 1 : c.shape[dim];
          double acc = 0;
          for (int64_t j = 0; j < n; ++j) {
            Shape p = first;
            if (!p.empty()) p[dim] = j;
            want.set(p, acc += in.get(p));
          }
        });
        run(BP_OP_CUMSUM, d, {&in}, out, attrs_with({}, {c.dim}));
        expect_values(out, collect(c.shape, [&](const Shape& i) { return want.get(i); }), 1e-12);
      }
  Buf in = make(BP_DTYPE_INT32, {4}, Layout::contiguous);
  Buf wrong = make(BP_DTYPE_INT32, {4}, Layout::contiguous);
  EXPECT_EQ(call(BP_OP_CUMSUM, BP_DTYPE_INT32, {&in}, wrong, attrs_with({}, {0})).status,
            BP_STATUS_INVALID_ARGUMENT);  // an int32 cumsum is int64
}

// A valid index value for position `k` along a dim of size n (with repeats).
int64_t pick(uint64_t k, int64_t n) { return int64_t(((k + 3) * 2654435761u) % uint64_t(n)); }

Buf make_index(const Shape& shape, Layout l, int64_t limit) {
  Buf b = make(BP_DTYPE_INT64, shape, l);
  uint64_t k = 0;
  for_each_index(shape, [&](const Shape& i) { b.set(i, double(pick(k++, limit))); });
  return b;
}

// Runs an index op that must fail on a bad index and leave its inputs alone.
void expect_index_error(bp_op op, bp_dtype d, std::vector<Buf*> in, Buf& out, const bp_attrs& attrs,
                        const std::string& want) {
  std::vector<std::vector<uint64_t>> before;
  for (Buf* b : in) before.push_back(b->storage);
  const CallResult r = call(op, d, in, out, attrs);
  EXPECT_EQ(r.status, BP_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(r.message, want);
  for (size_t k = 0; k < in.size(); ++k) EXPECT_EQ(in[k]->storage, before[k]);
}

struct GatherCase {
  Shape self, index;
  int64_t dim;
};
const GatherCase kGatherCases[] = {{{3, 4, 5}, {2, 4, 3}, 2},
                                   {{3, 4, 5}, {6, 2, 5}, 0},
                                   {{3, 4, 5}, {3, 7, 1}, 1},
                                   {{3, 4, 5}, {0, 2, 5}, 0},
                                   {{}, {}, 0},
                                   {{300, 257}, {300, 257}, 1},
                                   {{300, 257}, {400, 257}, 0}};

TEST(CpuOnednnIndexOps, Gather) {
  for (bp_dtype d : kAll)
    for (const GatherCase& c : kGatherCases)
      for (Layout ls : kLayouts)
        for (Layout li : {Layout::contiguous, Layout::transposed, Layout::broadcast})
          for (Layout lo : {Layout::contiguous, Layout::stepped}) {
            SCOPED_TRACE(str("dtype ", d, " ", layout_name(ls), ",", layout_name(li), "->",
                             layout_name(lo), " rank ", c.self.size(), " dim ", c.dim));
            Buf self = make(d, c.self, ls, 1);
            Buf index = make_index(c.index, li, c.self.empty() ? 1 : c.self[c.dim]);
            Buf out = make(d, c.index, lo, 2);
            const auto want = collect(c.index, [&](const Shape& i) {
              Shape j = i;
              if (!j.empty()) j[c.dim] = int64_t(index.get(i));
              return self.get(j);
            });
            run(BP_OP_GATHER, d, {&self, &index}, out, attrs_with({}, {c.dim}));
            expect_values(out, want);
          }
  Buf self = make(BP_DTYPE_FLOAT32, {3, 4}, Layout::contiguous, 1);
  Buf out = make(BP_DTYPE_FLOAT32, {3, 2}, Layout::contiguous, 2);
  for (int64_t bad : {4, -1}) {
    Buf index = make_index({3, 2}, Layout::contiguous, 4);
    index.set({2, 1}, double(bad));
    expect_index_error(
        BP_OP_GATHER, BP_DTYPE_FLOAT32, {&self, &index}, out, attrs_with({}, {1}),
        str("[gather] index ", bad, " is out of range for dim 1 of size 4 (valid range: [0, 4))"));
  }
}

TEST(CpuOnednnIndexOps, Scatter) {
  for (bp_dtype d : kAll)
    for (const GatherCase& c : kGatherCases)
      for (Layout ls : {Layout::contiguous, Layout::transposed, Layout::stepped, Layout::offset})
        for (Layout li : {Layout::contiguous, Layout::transposed})
          for (int src_kind = 0; src_kind < 3; ++src_kind) {  // contiguous, stepped, scalar
            // The index must fit in self outside `dim`.
            Shape is = c.index;
            for (size_t k = 0; k < is.size(); ++k)
              if (int64_t(k) != c.dim) is[k] = std::min(is[k], c.self[k]);
            SCOPED_TRACE(str("dtype ", d, " ", layout_name(ls), ",", layout_name(li), " src ",
                             src_kind, " rank ", c.self.size(), " dim ", c.dim));
            Buf self = make(d, c.self, ls, 1);
            Buf index = make_index(is, li, c.self.empty() ? 1 : c.self[c.dim]);
            Buf src = make(d, src_kind == 2 ? Shape{} : is,
                           src_kind == 1 ? Layout::stepped : Layout::contiguous, 2);
            if (src_kind == 2) {  // one value seen through all-zero strides
              src.shape = is;
              src.strides.assign(is.size(), 0);
            }
            Buf want = make(BP_DTYPE_FLOAT64, c.self, Layout::contiguous);
            for_each_index(c.self, [&](const Shape& i) { want.set(i, self.get(i)); });
            for_each_index(is, [&](const Shape& i) {
              Shape j = i;
              if (!j.empty()) j[c.dim] = int64_t(index.get(i));
              want.set(j, src.get(i));
            });
            run(BP_OP_SCATTER, d, {&index, &src}, self, attrs_with({}, {c.dim, 0}));
            expect_values(self, collect(c.self, [&](const Shape& i) { return want.get(i); }));
          }
  Buf self = make(BP_DTYPE_INT32, {3, 4}, Layout::contiguous, 1);
  Buf src = make(BP_DTYPE_INT32, {3, 2}, Layout::contiguous, 2);
  Buf index = make_index({3, 2}, Layout::contiguous, 3);
  index.set({1, 0}, 3);
  const Buf before = self;
  expect_index_error(BP_OP_SCATTER, BP_DTYPE_INT32, {&index, &src}, self, attrs_with({}, {0, 0}),
                     "[scatter] index 3 is out of range for dim 0 of size 3 (valid range: [0, 3))");
  EXPECT_EQ(self.storage, before.storage);
  // Reductions other than none (0) and add (1) are not implemented.
  EXPECT_EQ(
      call(BP_OP_SCATTER, BP_DTYPE_INT32, {&index, &src}, self, attrs_with({}, {0, 2})).status,
      BP_STATUS_UNSUPPORTED);
}

// Reduction 1 adds every source element, duplicates included.
TEST(CpuOnednnIndexOps, ScatterAddCountsDuplicates) {
  Buf self = make(BP_DTYPE_INT64, {4}, Layout::contiguous, 1);
  Buf src = make(BP_DTYPE_INT64, {5}, Layout::contiguous, 2);
  Buf index = make_index({5}, Layout::contiguous, 3);
  const int64_t idx[5] = {0, 2, 2, 3, 2};
  std::vector<double> want(4);
  for (int64_t i = 0; i < 4; ++i) want[i] = self.get({i});
  for (int64_t i = 0; i < 5; ++i) {
    index.set({i}, double(idx[i]));
    want[idx[i]] += src.get({i});
  }
  run(BP_OP_SCATTER, BP_DTYPE_INT64, {&index, &src}, self, attrs_with({}, {0, 1}));
  expect_values(self, want);
}

TEST(CpuOnednnIndexOps, IndexSelect) {
  const DimCase cases[] = {{{3, 4, 5}, 0}, {{3, 4, 5}, 1}, {{3, 4, 5}, 2},  {{3, 4, 5}, -2},
                           {{}, 0},        {{7}, 0},       {{300, 257}, 0}, {{300, 257}, 1}};
  for (bp_dtype d : kAll)
    for (const DimCase& c : cases)
      for (int64_t m : {0, 1, 7, 500})
        for (Layout ls : kLayouts)
          for (Layout li : {Layout::contiguous, Layout::stepped, Layout::broadcast}) {
            const int64_t dim = wrap(c.dim, c.shape.size());
            if (c.shape.empty() && m != 1) continue;
            SCOPED_TRACE(str("dtype ", d, " ", layout_name(ls), ",", layout_name(li), " rank ",
                             c.shape.size(), " dim ", c.dim, " m ", m));
            Buf self = make(d, c.shape, ls, 1);
            Buf index = make_index({m}, li, c.shape.empty() ? 1 : c.shape[dim]);
            Shape os = c.shape;
            if (!os.empty()) os[dim] = m;
            Buf out = make(d, os, Layout::transposed, 2);
            const auto want = collect(os, [&](const Shape& i) {
              Shape j = i;
              if (!j.empty()) j[dim] = int64_t(index.get({i[dim]}));
              return self.get(j);
            });
            run(BP_OP_INDEX_SELECT, d, {&self, &index}, out, attrs_with({}, {c.dim}));
            expect_values(out, want);
          }
  Buf self = make(BP_DTYPE_INT64, {3, 4}, Layout::contiguous, 1);
  Buf index = make_index({5}, Layout::contiguous, 3);
  index.set({4}, -2);
  Buf out = make(BP_DTYPE_INT64, {5, 4}, Layout::contiguous, 2);
  expect_index_error(
      BP_OP_INDEX_SELECT, BP_DTYPE_INT64, {&self, &index}, out, attrs_with({}, {0}),
      "[index_select] index -2 is out of range for dim 0 of size 3 (valid range: [0, 3))");
}

// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, SC'11): ten rounds of
// (c0, c1, c2, c3) <- (hi(M1*c2) ^ c1 ^ k0, lo(M1*c2), hi(M0*c0) ^ c3 ^ k1, lo(M0*c0))
// with M0 = 0xD2511F53, M1 = 0xCD9E8D57, and the key bumped by the Weyl
// constants (0x9E3779B9, 0xBB67AE85) after each round.
std::array<uint32_t, 4> philox(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c[0], p1 = uint64_t(0xCD9E8D57u) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1],
         uint32_t(p0)};
    k = {k[0] + 0x9E3779B9u, k[1] + 0xBB67AE85u};
  }
  return c;
}

// Element n of the stream as BP_OP_RANDOM defines it, in the dtype `d`.
double stream_value(bp_dtype d, bool normal, uint64_t seed, uint64_t n) {
  const auto x =
      philox({uint32_t(n), uint32_t(n >> 32), 0, 0}, {uint32_t(seed), uint32_t(seed >> 32)});
  auto unit = [](uint32_t hi, uint32_t lo) {
    return double(((uint64_t(hi) << 32) | lo) >> 11) * 0x1p-53;
  };
  if (normal) {
    const double z = std::sqrt(-2 * std::log(1 - unit(x[0], x[1]))) *
                     std::cos(6.283185307179586 * unit(x[2], x[3]));
    return d == BP_DTYPE_FLOAT32 ? double(float(z)) : z;
  }
  return d == BP_DTYPE_FLOAT32 ? double(x[0] >> 8) * 0x1p-24 : unit(x[0], x[1]);
}

TEST(CpuOnednnRandom, PhiloxKnownAnswers) {
  // The known-answer vectors published with the Random123 library.
  EXPECT_EQ(philox({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

Buf random_fill(bp_dtype d, const Shape& shape, Layout l, int64_t kind, uint64_t seed,
                uint64_t offset) {
  Buf out = make(d, shape, l);
  run(BP_OP_RANDOM, d, {}, out, attrs_with({}, {kind, int64_t(seed), int64_t(offset)}));
  return out;
}

TEST(CpuOnednnRandom, MatchesTheStreamInAnyLayout) {
  const uint64_t seed = 0xDEADBEEFCAFEBABEull;  // negative as int64
  for (bp_dtype d : {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64})
    for (int64_t kind : {0, 1})
      for (const Shape& shape : kShapes)
        for (Layout l : {Layout::contiguous, Layout::transposed, Layout::stepped, Layout::offset}) {
          SCOPED_TRACE(
              str("dtype ", d, " kind ", kind, " ", layout_name(l), " rank ", shape.size()));
          const uint64_t offset = (uint64_t(1) << 32) - 100;  // crosses into the high word
          Buf out = random_fill(d, shape, l, kind, seed, offset);
          uint64_t k = 0;
          expect_values(
              out,
              collect(shape,
                      [&](const Shape&) { return stream_value(d, kind == 1, seed, offset + k++); }),
              0, 0);
        }
}

TEST(CpuOnednnRandom, Statistics) {
  for (bp_dtype d : {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}) {
    Buf u = random_fill(d, {100000}, Layout::contiguous, 0, 42, 0);
    Buf z = random_fill(d, {100000}, Layout::contiguous, 1, 42, 0);
    double umin = 1, umax = 0, sum = 0, sq = 0;
    for (int64_t i = 0; i < 100000; ++i) {
      umin = std::min(umin, u.get({i}));
      umax = std::max(umax, u.get({i}));
      sum += z.get({i});
      sq += z.get({i}) * z.get({i});
    }
    EXPECT_GE(umin, 0.0);
    EXPECT_LT(umax, 1.0);
    EXPECT_GT(umax - umin, 0.999);
    const double mean = sum / 100000, sd = std::sqrt(sq / 100000 - mean * mean);
    EXPECT_NEAR(mean, 0.0, 0.015);  // 5 standard errors
    EXPECT_NEAR(sd, 1.0, 0.015);
  }
}

TEST(CpuOnednnRandom, SeedAndOffset) {
  for (bp_dtype d : {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}) {
    const Buf a = random_fill(d, {1000}, Layout::contiguous, 0, 7, 100);
    const Buf b = random_fill(d, {1000}, Layout::contiguous, 0, 7, 100);
    const Buf shifted = random_fill(d, {1000}, Layout::contiguous, 0, 7, 150);
    const Buf other = random_fill(d, {1000}, Layout::contiguous, 0, 8, 100);
    EXPECT_EQ(a.storage, b.storage);
    EXPECT_NE(a.storage, other.storage);
    const size_t bytes = d == BP_DTYPE_FLOAT32 ? 4 : 8;
    EXPECT_EQ(std::memcmp(reinterpret_cast<const char*>(a.storage.data()) + 50 * bytes,
                          shifted.storage.data(), 950 * bytes),
              0);
  }
}

}  // namespace
