// Shape arithmetic: DimVector, numel, strides, contiguity, broadcasting, dim
// wrapping, view strides and -1 inference. Pure functions: no backend needed.
// Expected values follow NumPy/PyTorch rules, worked out by hand.
#include <backplane/error.h>
#include <backplane/shape.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace {

using Dims = std::vector<int64_t>;

Dims to_dims(const bp::DimVector& v) { return Dims(v.begin(), v.end()); }

using bp::testing::message_of;

TEST(DimVector, SpillsToHeapBeyondInlineCapacityAndKeepsValues) {
  bp::DimVector v;
  for (int64_t i = 0; i < 10; ++i) v.push_back(i * 10);
  ASSERT_EQ(v.size(), 10u);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(v[i], i * 10);

  bp::DimVector copy = v;
  bp::DimVector moved = std::move(v);
  EXPECT_EQ(to_dims(copy), to_dims(moved));
  EXPECT_EQ(moved.back(), 90);
}

TEST(DimVector, InsertAndEraseShiftTheRest) {
  bp::DimVector v{1, 2, 3};
  v.insert(1, 7);
  EXPECT_EQ(to_dims(v), (Dims{1, 7, 2, 3}));
  v.insert(4, 9);
  EXPECT_EQ(to_dims(v), (Dims{1, 7, 2, 3, 9}));
  v.erase(0);
  EXPECT_EQ(to_dims(v), (Dims{7, 2, 3, 9}));
  // Across the inline/heap boundary.
  bp::DimVector w{0, 1, 2, 3, 4, 5};
  w.insert(0, -1);
  EXPECT_EQ(to_dims(w), (Dims{-1, 0, 1, 2, 3, 4, 5}));
}

TEST(Shape, NumelOfScalarIsOneAndOfEmptyIsZero) {
  EXPECT_EQ(bp::numel(bp::IntArrayRef()), 1);
  EXPECT_EQ(bp::numel({2, 3, 4}), 24);
  EXPECT_EQ(bp::numel({2, 0, 4}), 0);
}

TEST(Shape, ContiguousStridesAreRowMajor) {
  EXPECT_EQ(to_dims(bp::contiguous_strides({2, 3, 4})), (Dims{12, 4, 1}));
  EXPECT_EQ(to_dims(bp::contiguous_strides({5})), (Dims{1}));
  EXPECT_TRUE(bp::contiguous_strides(bp::IntArrayRef()).empty());
  // A zero-size dim counts as 1 for the strides of the dims before it
  // (PyTorch: torch.empty(2, 0, 3).stride() == (3, 3, 1)).
  EXPECT_EQ(to_dims(bp::contiguous_strides({2, 0, 3})), (Dims{3, 3, 1}));
}

TEST(Shape, IsContiguousIgnoresStridesOfSizeOneDims) {
  EXPECT_TRUE(bp::is_contiguous({2, 3}, {3, 1}));
  EXPECT_TRUE(bp::is_contiguous({2, 1, 3}, {3, 99, 1}));
  EXPECT_FALSE(bp::is_contiguous({3, 2}, {1, 3}));        // transposed
  EXPECT_FALSE(bp::is_contiguous({2, 3}, {6, 2}));        // every other element
  EXPECT_TRUE(bp::is_contiguous({2, 0, 3}, {7, 5, 11}));  // no elements at all
  EXPECT_TRUE(bp::is_contiguous(bp::IntArrayRef(), bp::IntArrayRef()));
}

TEST(Shape, NonOverlappingAndDenseAcceptsPermutedButNotGapsOrRepeats) {
  EXPECT_TRUE(bp::is_non_overlapping_and_dense({3, 2}, {1, 3}));
  EXPECT_TRUE(bp::is_non_overlapping_and_dense({2, 3, 4}, {1, 8, 2}));
  EXPECT_FALSE(bp::is_non_overlapping_and_dense({2, 3}, {6, 2}));  // gaps
  EXPECT_FALSE(bp::is_non_overlapping_and_dense({3, 4}, {1, 0}));  // expanded
  EXPECT_TRUE(bp::is_non_overlapping_and_dense({4, 1}, {1, 0}));   // size-1 dim
}

TEST(Shape, BroadcastShapesFollowsNumpyRules) {
  EXPECT_EQ(to_dims(bp::broadcast_shapes({2, 1, 3}, {4, 3}, "add")), (Dims{2, 4, 3}));
  EXPECT_EQ(to_dims(bp::broadcast_shapes({5}, bp::IntArrayRef(), "add")), (Dims{5}));
  EXPECT_EQ(to_dims(bp::broadcast_shapes({1}, {0}, "add")), (Dims{0}));
  EXPECT_EQ(to_dims(bp::broadcast_shapes({3, 1}, {1, 4}, "add")), (Dims{3, 4}));
  EXPECT_TRUE(bp::broadcast_shapes(bp::IntArrayRef(), bp::IntArrayRef(), "add").empty());
}

TEST(Shape, BroadcastFailureNamesTheOpAndBothShapes) {
  const std::string m = message_of<bp::ValueError>([] {
    bp::broadcast_shapes({2, 3}, {3, 2}, "mul");
  });
  EXPECT_NE(m.find("[mul]"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
  EXPECT_NE(m.find("[3, 2]"), std::string::npos) << m;
}

TEST(Shape, BroadcastStridesAreZeroOnNewAndExpandedDims) {
  EXPECT_EQ(to_dims(bp::broadcast_strides({3, 1}, {1, 1}, {2, 3, 4})), (Dims{0, 1, 0}));
  EXPECT_EQ(to_dims(bp::broadcast_strides({4}, {2}, {3, 4})), (Dims{0, 2}));
  // A size-1 dim that stays size 1 keeps its stride.
  EXPECT_EQ(to_dims(bp::broadcast_strides({1, 4}, {4, 1}, {1, 4})), (Dims{4, 1}));
}

TEST(Shape, WrapDimAcceptsNegativeAndNamesValidRange) {
  EXPECT_EQ(bp::wrap_dim(-1, 3, "sum"), 2);
  EXPECT_EQ(bp::wrap_dim(-3, 3, "sum"), 0);
  EXPECT_EQ(bp::wrap_dim(2, 3, "sum"), 2);
  // A 0-d tensor accepts dims 0 and -1, as in PyTorch.
  EXPECT_EQ(bp::wrap_dim(0, 0, "sum"), 0);
  EXPECT_EQ(bp::wrap_dim(-1, 0, "sum"), 0);
  const std::string m = message_of<bp::IndexError>([] { bp::wrap_dim(3, 3, "transpose"); });
  EXPECT_NE(m.find("[transpose]"), std::string::npos) << m;
  EXPECT_NE(m.find("-3 to 2"), std::string::npos) << m;
  EXPECT_THROW(bp::wrap_dim(-4, 3, "sum"), bp::IndexError);
}

TEST(Shape, ViewStridesSplitAndMergeContiguousDims) {
  bp::DimVector out;
  ASSERT_TRUE(bp::view_strides({2, 3, 4}, {12, 4, 1}, {6, 4}, out));
  EXPECT_EQ(to_dims(out), (Dims{4, 1}));
  ASSERT_TRUE(bp::view_strides({4, 3}, {3, 1}, {2, 2, 3}, out));
  EXPECT_EQ(to_dims(out), (Dims{6, 3, 1}));
  ASSERT_TRUE(bp::view_strides({24}, {1}, {2, 3, 4}, out));
  EXPECT_EQ(to_dims(out), (Dims{12, 4, 1}));
}

TEST(Shape, ViewStridesOfNonContiguousLayouts) {
  bp::DimVector out;
  // Transposed 2x3 (shape [3, 2], strides [1, 3]) cannot be flattened...
  EXPECT_FALSE(bp::view_strides({3, 2}, {1, 3}, {6}, out));
  // ...but may gain a size-1 dim.
  ASSERT_TRUE(bp::view_strides({3, 2}, {1, 3}, {3, 1, 2}, out));
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[2], 3);
  // Every other block of a [4, 3, 4] tensor: shape [2, 3, 4], strides
  // [24, 4, 1]. The inner two dims stay one contiguous chunk of 12.
  ASSERT_TRUE(bp::view_strides({2, 3, 4}, {24, 4, 1}, {2, 12}, out));
  EXPECT_EQ(to_dims(out), (Dims{24, 1}));
  EXPECT_FALSE(bp::view_strides({2, 3, 4}, {24, 4, 1}, {24}, out));
  EXPECT_FALSE(bp::view_strides({2, 3, 4}, {24, 4, 1}, {4, 6}, out));
}

TEST(Shape, ViewStridesOfZeroDimTensor) {
  bp::DimVector out;
  ASSERT_TRUE(bp::view_strides(bp::IntArrayRef(), bp::IntArrayRef(), {1, 1}, out));
  EXPECT_EQ(out.size(), 2u);
}

TEST(Shape, InferShapeResolvesOneMinusOne) {
  EXPECT_EQ(to_dims(bp::infer_shape({-1, 4}, 12, "view")), (Dims{3, 4}));
  EXPECT_EQ(to_dims(bp::infer_shape({2, -1, 2}, 12, "view")), (Dims{2, 3, 2}));
  EXPECT_EQ(to_dims(bp::infer_shape({3, 4}, 12, "view")), (Dims{3, 4}));
}

TEST(Shape, InferShapeRejectsBadShapesNamingTheOp) {
  EXPECT_THROW(bp::infer_shape({-1, -1}, 12, "view"), bp::ValueError);
  EXPECT_THROW(bp::infer_shape({0, -1}, 0, "view"), bp::ValueError);
  EXPECT_THROW(bp::infer_shape({-2, 6}, 12, "view"), bp::ValueError);
  const std::string m = message_of<bp::ValueError>([] { bp::infer_shape({5, -1}, 12, "reshape"); });
  EXPECT_NE(m.find("[reshape]"), std::string::npos) << m;
  EXPECT_NE(m.find("12"), std::string::npos) << m;
  EXPECT_THROW(bp::infer_shape({5, 3}, 12, "view"), bp::ValueError);
}

TEST(Shape, PrintsAsBracketedList) {
  EXPECT_EQ(bp::to_string({2, 3}), "[2, 3]");
  EXPECT_EQ(bp::to_string(bp::IntArrayRef()), "[]");
}

}  // namespace
