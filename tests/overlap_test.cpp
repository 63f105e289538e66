// The memory-overlap checks of in-place ops (IP-6): an input that partially
// overlaps the output is refused, one that is exactly the output or misses
// it is accepted; and an output whose elements share memory is refused.
// Checked on hand-picked layouts and against brute force on random ones.
#include <backplane/backplane.h>
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

namespace {

using Dims = std::vector<int64_t>;

std::set<int64_t> positions(const Dims& size, const Dims& stride, int64_t offset) {
  std::set<int64_t> out;
  Dims idx(size.size(), 0);
  int64_t n = 1;
  for (int64_t s : size) n *= s;
  for (int64_t k = 0; k < n; ++k) {
    int64_t p = offset;
    for (std::size_t d = 0; d < size.size(); ++d) p += idx[d] * stride[d];
    out.insert(p);
    for (std::size_t d = size.size(); d-- > 0;)
      if (++idx[d] < size[d])
        break;
      else
        idx[d] = 0;
  }
  return out;
}

bool refused(bp::Tensor out, const bp::Tensor& in) {
  try {
    out.add_(in);
    return false;
  } catch (const bp::ValueError&) {
    return true;
  }
}

TEST(Overlap, TwoColumnsOfOneMatrixDoNotOverlap) {
  bp::Tensor x = bp::zeros({64, 64});
  EXPECT_FALSE(refused(x.index({bp::Slice(), 0}), x.index({bp::Slice(), 1})));
  EXPECT_FALSE(refused(x.index({bp::Slice(0, bp::None, 2)}), x.index({bp::Slice(1, bp::None, 2)})));
}

TEST(Overlap, ShiftedWindowsOverlapPartially) {
  bp::Tensor x = bp::zeros({16});
  EXPECT_TRUE(refused(x.index({bp::Slice(1, bp::None)}), x.index({bp::Slice(0, -1)})));
  bp::Tensor m = bp::zeros({8, 8});
  EXPECT_TRUE(refused(m.index({bp::Slice(1, bp::None)}), m.index({bp::Slice(0, -1)})));
  // A row and a column cross at one element.
  EXPECT_TRUE(refused(m.index({2}), m.index({bp::Slice(), 5})));
}

TEST(Overlap, TheOutputItselfIsAccepted) {
  bp::Tensor x = bp::ones({4, 4});
  bp::Tensor col = x.index({bp::Slice(), 1});
  EXPECT_FALSE(refused(col, col));
  EXPECT_EQ(x.index({0, 1}).item<double>(), 2.0);
}

TEST(Overlap, AnOutputWhoseElementsShareMemoryIsRefused) {
  bp::Tensor x = bp::zeros({8});
  bp::Tensor windows = x.as_strided({3, 4}, {2, 1});  // rows overlap
  EXPECT_THROW(windows.add_(bp::ones({3, 4})), bp::ValueError);
  bp::Tensor apart = x.as_strided({2, 4}, {4, 1});
  EXPECT_NO_THROW(apart.add_(bp::ones({2, 4})));
}

// Random layouts of one storage, the answer checked by listing positions.
TEST(Overlap, AgreesWithBruteForceOnRandomLayouts) {
  std::mt19937_64 rng(12345);
  bp::Tensor base = bp::zeros({4096});
  int refusals = 0, accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 3);
    Dims size(rank), out_stride(rank), in_stride(rank);
    for (int d = 0; d < rank; ++d) {
      size[d] = 1 + static_cast<int64_t>(rng() % 6);
      out_stride[d] = 1 + static_cast<int64_t>(rng() % 12);
      in_stride[d] = rng() % 2 ? out_stride[d] : 1 + static_cast<int64_t>(rng() % 12);
    }
    const int64_t out_off = static_cast<int64_t>(rng() % 40),
                  in_off = static_cast<int64_t>(rng() % 40);
    const std::set<int64_t> o = positions(size, out_stride, out_off);
    if (static_cast<int64_t>(o.size()) !=
        bp::Tensor(base).as_strided(size, out_stride, out_off).numel())
      continue;  // an output with repeated elements: the other check's business
    const std::set<int64_t> i = positions(size, in_stride, in_off);
    // The same elements in the same order (a stride of a dim of size 1
    // addresses nothing): the output itself, accepted.
    bool same = out_off == in_off;
    for (int d = 0; d < rank; ++d) same = same && (size[d] == 1 || out_stride[d] == in_stride[d]);
    bool common = false;
    for (int64_t p : i) common = common || o.count(p) != 0;
    const bool expected = common && !same;
    bp::Tensor out = base.as_strided(size, out_stride, out_off);
    bp::Tensor in = base.as_strided(size, in_stride, in_off);
    EXPECT_EQ(refused(out, in), expected)
        << "trial " << trial << ": out offset " << out_off << ", in offset " << in_off;
    (expected ? refusals : accepted)++;
  }
  EXPECT_GT(refusals, 100);
  EXPECT_GT(accepted, 100);
}

}  // namespace
