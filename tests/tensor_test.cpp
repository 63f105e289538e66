// Tensor handles, views, version counters, host data and printing, on the
// default backend (cpu_onednn, found beside libbackplane). Expected values
// come from plain loops over the element formula, or from PyTorch's printed
// output for the same tensor.
#include <backplane/backplane.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using bp::DType;
using Dims = std::vector<int64_t>;

Dims dims(bp::IntArrayRef v) { return Dims(v.begin(), v.end()); }

using bp::testing::message_of;

// x[i][j][k] = 12 i + 4 j + k, shape [2, 3, 4], as int64.
bp::Tensor iota_234() { return bp::arange(24).view({2, 3, 4}); }

// --- handles and version counters -------------------------------------------

struct Counted : bp::RefCounted {
  explicit Counted(int* destroyed) : destroyed(destroyed) {}
  ~Counted() override { ++*destroyed; }
  int* destroyed;
};
struct DerivedCounted final : Counted {
  using Counted::Counted;
};

TEST(TensorHandle, IntrusivePointersCountOwnersAcrossConversions) {
  int destroyed = 0;
  {
    bp::IntrusivePtr<DerivedCounted> d = bp::make_intrusive<DerivedCounted>(&destroyed);
    EXPECT_EQ(d->use_count(), 1u);
    const bp::IntrusivePtr<Counted> copy(d);  // a copy shares ownership
    EXPECT_EQ(d->use_count(), 2u);
    bp::IntrusivePtr<Counted> moved(std::move(d));  // a move hands it over
    EXPECT_FALSE(d);
    EXPECT_EQ(moved.get(), copy.get());
    EXPECT_EQ(moved->use_count(), 2u);
    moved.reset();
    EXPECT_EQ(copy->use_count(), 1u);
    EXPECT_EQ(destroyed, 0);
  }
  EXPECT_EQ(destroyed, 1);
}

TEST(TensorHandle, CopyingAHandleAliasesTheTensor) {
  bp::Tensor a = bp::zeros({3});
  bp::Tensor b = a;
  EXPECT_TRUE(b.is_same(a));
  b.fill_(7.0);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{7, 7, 7}));
  // Rebinding a handle does not touch the tensor it named.
  b = bp::ones({3});
  EXPECT_FALSE(b.is_same(a));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{7, 7, 7}));
}

TEST(TensorHandle, ViewsShareStorageButAreOtherTensors) {
  bp::Tensor a = bp::zeros({2, 2});
  bp::Tensor v = a.view({4});
  EXPECT_FALSE(v.is_same(a));
  EXPECT_TRUE(v.shares_storage(a));
  EXPECT_TRUE(v.is_view());
  EXPECT_FALSE(a.is_view());
  EXPECT_TRUE(v.base().is_same(a));
  // A view of a view names the tensor that owns the memory.
  EXPECT_TRUE(v.narrow(0, 1, 2).base().is_same(a));
  EXPECT_EQ(v.data_ptr(), a.data_ptr());
}

TEST(TensorVersion, InPlaceOpOnAViewBumpsTheSharedCounter) {
  bp::Tensor a = bp::zeros({2, 3});
  const uint32_t v0 = a.version();
  bp::Tensor row = a[1];
  EXPECT_EQ(row.version(), v0);
  row.add_(1.0);
  EXPECT_EQ(a.version(), v0 + 1);
  EXPECT_EQ(row.version(), v0 + 1);
  a.t().mul_(2.0);
  EXPECT_EQ(row.version(), v0 + 2);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0, 0, 0, 2, 2, 2}));
}

TEST(TensorVersion, OutOfPlaceOpsAndReadsLeaveItAlone) {
  bp::Tensor a = bp::ones({4});
  const uint32_t v0 = a.version();
  bp::Tensor c = a + a;
  (void)a.sum();
  (void)a.to_vector<float>();
  EXPECT_EQ(a.version(), v0);
  // A clone has its own counter.
  bp::Tensor k = a.clone();
  k.zero_();
  EXPECT_EQ(a.version(), v0);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{2, 2, 2, 2}));
}

TEST(TensorVersion, FillCopyAndAddOutBumpIt) {
  bp::Tensor out = bp::empty({2});
  uint32_t v = out.version();
  out.fill_(1.0);
  EXPECT_EQ(out.version(), ++v);
  out.copy_(bp::full({2}, 3.0));
  EXPECT_EQ(out.version(), ++v);
  bp::add_out(out, bp::ones({2}), bp::full({2}, 2.0));
  EXPECT_EQ(out.version(), ++v);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{3, 3}));
}

// --- views: metadata and values ---------------------------------------------

TEST(TensorView, ContiguousMetadata) {
  bp::Tensor x = iota_234();
  EXPECT_EQ(dims(x.sizes()), (Dims{2, 3, 4}));
  EXPECT_EQ(dims(x.strides()), (Dims{12, 4, 1}));
  EXPECT_EQ(x.numel(), 24);
  EXPECT_EQ(x.dim(), 3);
  EXPECT_EQ(x.size(-1), 4);
  EXPECT_EQ(x.storage_offset(), 0);
  EXPECT_TRUE(x.is_contiguous());
  EXPECT_EQ(x.dtype(), DType::Int64);
  EXPECT_EQ(x.itemsize(), 8u);
}

TEST(TensorView, TransposeSwapsSizesAndStrides) {
  bp::Tensor x = iota_234();
  bp::Tensor t = x.transpose(0, 2);
  EXPECT_EQ(dims(t.sizes()), (Dims{4, 3, 2}));
  EXPECT_EQ(dims(t.strides()), (Dims{1, 4, 12}));
  EXPECT_FALSE(t.is_contiguous());
  std::vector<int64_t> expected;
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t i = 0; i < 2; ++i) expected.push_back(12 * i + 4 * j + k);
  EXPECT_EQ(t.to_vector<int64_t>(), expected);
}

TEST(TensorView, NarrowSelectAndSliceMoveTheOffset) {
  bp::Tensor x = iota_234();
  bp::Tensor n = x.narrow(1, 1, 2);
  EXPECT_EQ(dims(n.sizes()), (Dims{2, 2, 4}));
  EXPECT_EQ(dims(n.strides()), (Dims{12, 4, 1}));
  EXPECT_EQ(n.storage_offset(), 4);
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 1; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) expected.push_back(12 * i + 4 * j + k);
  EXPECT_EQ(n.to_vector<int64_t>(), expected);

  bp::Tensor s = x.select(1, -1);  // j = 2
  EXPECT_EQ(dims(s.sizes()), (Dims{2, 4}));
  EXPECT_EQ(dims(s.strides()), (Dims{12, 1}));
  EXPECT_EQ(s.storage_offset(), 8);

  bp::Tensor st = x.slice(2, 1, bp::None, 2);  // k = 1, 3
  EXPECT_EQ(dims(st.sizes()), (Dims{2, 3, 2}));
  EXPECT_EQ(dims(st.strides()), (Dims{12, 4, 2}));
  EXPECT_EQ(st.storage_offset(), 1);
  expected.clear();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 1; k < 4; k += 2) expected.push_back(12 * i + 4 * j + k);
  EXPECT_EQ(st.to_vector<int64_t>(), expected);
}

TEST(TensorView, IndexMixesIntegersAndSlices) {
  bp::Tensor x = iota_234();
  bp::Tensor r = x.index({1, bp::Slice(bp::None, bp::None, 2)});  // x[1, ::2]
  EXPECT_EQ(dims(r.sizes()), (Dims{2, 4}));
  EXPECT_EQ(dims(r.strides()), (Dims{8, 1}));
  EXPECT_EQ(r.storage_offset(), 12);
  std::vector<int64_t> expected;
  for (int64_t j = 0; j < 3; j += 2)
    for (int64_t k = 0; k < 4; ++k) expected.push_back(12 + 4 * j + k);
  EXPECT_EQ(r.to_vector<int64_t>(), expected);
  // Python clamps out-of-range slice bounds.
  EXPECT_EQ(x.slice(2, -100, 100).size(2), 4);
  EXPECT_EQ(x.slice(2, 3, 1).size(2), 0);
}

TEST(TensorView, PermuteUnsqueezeSqueezeAndExpand) {
  bp::Tensor x = iota_234();
  bp::Tensor p = x.permute({2, 0, 1});
  EXPECT_EQ(dims(p.sizes()), (Dims{4, 2, 3}));
  EXPECT_EQ(dims(p.strides()), (Dims{1, 12, 4}));

  bp::Tensor u = x.unsqueeze(0);
  EXPECT_EQ(dims(u.sizes()), (Dims{1, 2, 3, 4}));
  EXPECT_EQ(dims(u.strides()), (Dims{24, 12, 4, 1}));
  bp::Tensor u2 = x.unsqueeze(-1);
  EXPECT_EQ(dims(u2.sizes()), (Dims{2, 3, 4, 1}));
  EXPECT_EQ(dims(u.squeeze().sizes()), (Dims{2, 3, 4}));

  bp::Tensor e = bp::arange(3).view({3, 1}).expand({2, 3, 4});
  EXPECT_EQ(dims(e.sizes()), (Dims{2, 3, 4}));
  EXPECT_EQ(dims(e.strides()), (Dims{0, 1, 0}));
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) expected.push_back(j);
  EXPECT_EQ(e.to_vector<int64_t>(), expected);
}

TEST(TensorView, ViewOfTransposedFailsButReshapeCopies) {
  bp::Tensor t = iota_234().transpose(1, 2);  // [2, 4, 3]
  const std::string m = message_of<bp::ValueError>([&] { t.view({24}); });
  EXPECT_NE(m.find("[view]"), std::string::npos) << m;
  bp::Tensor r = t.reshape({24});
  EXPECT_FALSE(r.shares_storage(t));
  EXPECT_TRUE(r.is_contiguous());
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 4; ++k)
      for (int64_t j = 0; j < 3; ++j) expected.push_back(12 * i + 4 * j + k);
  EXPECT_EQ(r.to_vector<int64_t>(), expected);
  // A compatible reshape is a view.
  bp::Tensor x = iota_234();
  EXPECT_TRUE(x.reshape({6, -1}).shares_storage(x));
  EXPECT_EQ(dims(x.flatten(1).sizes()), (Dims{2, 12}));
}

TEST(TensorView, WritingThroughAViewChangesTheBase) {
  bp::Tensor a = bp::zeros({3, 3});
  a.select(1, 1).fill_(5.0);  // the middle column
  a.narrow(0, 2, 1).add_(1.0);
  std::vector<float> expected(9, 0.0f);
  for (int i = 0; i < 3; ++i) expected[i * 3 + 1] = 5;
  for (int j = 0; j < 3; ++j) expected[6 + j] += 1;
  EXPECT_EQ(a.to_vector<float>(), expected);
}

// --- host data ----------------------------------------------------------------

TEST(TensorData, ItemReadsOneElementInAnyDtype) {
  EXPECT_EQ(bp::scalar_tensor(3.5).item<double>(), 3.5);
  EXPECT_EQ(bp::scalar_tensor(3.5).dim(), 0);
  EXPECT_EQ(bp::tensor({42}).item<int64_t>(), 42);
  EXPECT_EQ(bp::full({1, 1}, 9, DType::Int32).item<int32_t>(), 9);
  EXPECT_TRUE(bp::full({1}, true, DType::Bool).item<bool>());
  bp::Scalar s = bp::scalar_tensor(-2.25, DType::Float64).item();
  EXPECT_TRUE(s.is_floating());
  EXPECT_EQ(s.to_double(), -2.25);
  EXPECT_EQ(bp::tensor({7}).item().kind(), DType::Int64);
}

TEST(TensorData, ItemOfSeveralElementsIsATypedErrorNamingTheOp) {
  bp::Tensor t = bp::zeros({2, 2});
  const std::string m = message_of<bp::ValueError>([&] { t.item<float>(); });
  EXPECT_NE(m.find("[item]"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 2]"), std::string::npos) << m;
}

TEST(TensorData, ToVectorConvertsAndHandlesEmpty) {
  bp::Tensor i = bp::tensor({1, -2, 3}, DType::Int32);
  EXPECT_EQ(i.to_vector<double>(), (std::vector<double>{1, -2, 3}));
  bp::Tensor f = bp::tensor({1.75, -0.5});
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(f.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  bp::Tensor b = bp::tensor({true, false, true});
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_TRUE(bp::zeros({0, 3}).to_vector<float>().empty());
  std::vector<float> host{0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f};
  EXPECT_EQ(bp::from_vector(host, {2, 3}).to_vector<float>(), host);
}

TEST(TensorData, ArangeCountsLikePython) {
  EXPECT_EQ(bp::arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(bp::arange(1, 10, 3).to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(bp::arange(5, 0, -2).to_vector<int64_t>(), (std::vector<int64_t>{5, 3, 1}));
  bp::Tensor f = bp::arange(0.0, 1.0, 0.25);
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_THROW(bp::arange(0, 5, 0), bp::ValueError);
}

// --- printing (PyTorch's format) ----------------------------------------------

TEST(TensorPrint, MatrixOfWholeFloats) {
  EXPECT_EQ(bp::arange(4.0).view({2, 2}).to_string(),
            "tensor([[0., 1.],\n"
            "        [2., 3.]])");
}

TEST(TensorPrint, IntegersScalarsAndBools) {
  EXPECT_EQ(bp::tensor({1, 2, 3}).to_string(), "tensor([1, 2, 3])");
  EXPECT_EQ(bp::scalar_tensor(3.5).to_string(), "tensor(3.5000)");
  EXPECT_EQ(bp::tensor({-1.0, 2.5}).to_string(), "tensor([-1.0000,  2.5000])");
  EXPECT_EQ(bp::tensor({true, false}).to_string(), "tensor([ True, False])");
  EXPECT_EQ(bp::tensor({10, -200}).to_string(), "tensor([  10, -200])");
}

TEST(TensorPrint, NonDefaultDtypesGetASuffix) {
  EXPECT_EQ(bp::tensor({1, 2, 3}, DType::Int32).to_string(), "tensor([1, 2, 3], dtype=int32)");
  EXPECT_EQ(bp::tensor({1.5, 2.25}, DType::Float64).to_string(),
            "tensor([1.5000, 2.2500], dtype=float64)");
  // int64 and float32 are the defaults: no suffix.
  EXPECT_EQ(bp::scalar_tensor(2, DType::Int64).to_string(), "tensor(2)");
}

TEST(TensorPrint, ScientificWhenMagnitudesDiffer) {
  EXPECT_EQ(bp::tensor({0.001, 1000.0}).to_string(), "tensor([1.0000e-03, 1.0000e+03])");
}

TEST(TensorPrint, ThreeDimsSeparateBlocksWithABlankLine) {
  EXPECT_EQ(bp::arange(8.0).view({2, 2, 2}).to_string(),
            "tensor([[[0., 1.],\n"
            "         [2., 3.]],\n"
            "\n"
            "        [[4., 5.],\n"
            "         [6., 7.]]])");
}

TEST(TensorPrint, NonContiguousPrintsInLogicalOrder) {
  EXPECT_EQ(bp::arange(4.0).view({2, 2}).t().to_string(),
            "tensor([[0., 2.],\n"
            "        [1., 3.]])");
}

TEST(TensorPrint, LongRowsWrapAtEightyColumns) {
  // Each element is 3 wide plus ", ": (80 - 7) / 5 = 14 per line.
  EXPECT_EQ(bp::arange(30.0).to_string(),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
            "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
            "        28., 29.])");
}

TEST(TensorPrint, LargeTensorsAreSummarized) {
  EXPECT_EQ(bp::arange(2000).to_string(), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
}

TEST(TensorPrint, EmptyTensorsShowTheirSize) {
  EXPECT_EQ(bp::zeros({0}).to_string(), "tensor([])");
  EXPECT_EQ(bp::zeros({2, 0}).to_string(), "tensor([], size=(2, 0))");
}

// --- errors are typed and name the op ----------------------------------------

TEST(TensorErrors, ShapesThatDoNotBroadcast) {
  bp::Tensor a = bp::zeros({2, 3}), b = bp::zeros({4});
  const std::string m = message_of<bp::ValueError>([&] { (void)(a + b); });
  EXPECT_EQ(m.rfind("[add]", 0), 0u) << m;
  EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
  EXPECT_NE(m.find("[4]"), std::string::npos) << m;
}

TEST(TensorErrors, InPlaceMayNotChangeSelfsShape) {
  bp::Tensor a = bp::zeros({3}), b = bp::zeros({2, 3});
  const std::string m = message_of<bp::ValueError>([&] { a.add_(b); });
  EXPECT_EQ(m.rfind("[add_]", 0), 0u) << m;
}

TEST(TensorErrors, DimOutOfRangeIsAnIndexError) {
  bp::Tensor a = bp::zeros({2, 3});
  const std::string m = message_of<bp::IndexError>([&] { a.transpose(0, 2); });
  EXPECT_EQ(m.rfind("[transpose]", 0), 0u) << m;
  EXPECT_THROW(a.select(0, 2), bp::IndexError);
  EXPECT_THROW(a.narrow(1, 2, 2), bp::IndexError);
  EXPECT_THROW(bp::scalar_tensor(1.0).select(0, 0), bp::IndexError);
}

TEST(TensorErrors, WritingToAnExpandedTensorIsRefused) {
  bp::Tensor e = bp::zeros({3, 1}).expand({3, 4});
  const std::string m = message_of<bp::ValueError>([&] { e.fill_(1.0); });
  EXPECT_EQ(m.rfind("[fill_]", 0), 0u) << m;
  EXPECT_NE(m.find("stride 0"), std::string::npos) << m;
}

TEST(TensorErrors, PartialOverlapIsRefused) {
  bp::Tensor a = bp::arange(6.0);
  const std::string m =
      message_of<bp::ValueError>([&] { a.narrow(0, 0, 4).copy_(a.narrow(0, 2, 4)); });
  EXPECT_EQ(m.rfind("[copy_]", 0), 0u) << m;
  // Exactly the same elements are allowed: x += x.
  a.add_(a);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0, 2, 4, 6, 8, 10}));
}

TEST(TensorErrors, AddOutChecksItsOutput) {
  bp::Tensor out = bp::empty({3});
  EXPECT_THROW(bp::add_out(out, bp::ones({2}), bp::ones({2})), bp::ValueError);
  bp::Tensor wrong = bp::empty({2}, DType::Float64);
  const std::string m =
      message_of<bp::TypeError>([&] { bp::add_out(wrong, bp::ones({2}), bp::ones({2})); });
  EXPECT_EQ(m.rfind("[add_out]", 0), 0u) << m;
}

TEST(TensorErrors, MissingKernelNamesOpDtypeAndBackend) {
  // cpu_onednn has no add for bool (PyTorch's logical-or add is not offered).
  bp::Tensor b = bp::tensor({true, false});
  const std::string m = message_of<bp::NotImplementedError>([&] { (void)(b + b); });
  EXPECT_EQ(m.rfind("[add]", 0), 0u) << m;
  EXPECT_NE(m.find("bool"), std::string::npos) << m;
  EXPECT_NE(m.find("cpu_onednn"), std::string::npos) << m;
}

TEST(TensorErrors, ErrorsLeaveTheProcessUsable) {
  bp::Tensor a = bp::ones({2});
  EXPECT_THROW((void)(a + bp::ones({3})), bp::Error);
  EXPECT_EQ((a + a).to_vector<float>(), (std::vector<float>{2, 2}));
}

}  // namespace

// Large dense float32 tensors take the backend's fast paths; NaN must still
// pass through relu (PyTorch: relu(nan) is nan), as it does for small ones.
TEST(TensorValues, ReluKeepsNaNOnLargeDenseTensors) {
  for (int64_t n : {int64_t{8}, int64_t{1} << 17}) {
    bp::Tensor x = bp::full({n}, std::nan(""));
    std::vector<float> y = bp::relu(x).to_vector<float>();
    EXPECT_TRUE(std::isnan(y.front())) << n;
    EXPECT_TRUE(std::isnan(y.back())) << n;
  }
}

// Options that name no dtype leave the dtype to the template (CR-2) and to
// arange's inference (CR-4).
TEST(TensorFactories, OptionsWithoutDtypeKeepTheInferredOne) {
  bp::Tensor t = bp::zeros({2}, bp::DType::Int32);
  EXPECT_EQ(bp::zeros_like(t, bp::TensorOptions().device(t.device())).dtype(), bp::DType::Int32);
  EXPECT_EQ(bp::arange(0, 3, 1, bp::TensorOptions().device(t.device())).dtype(), bp::DType::Int64);
  EXPECT_EQ(bp::full({2}, 1.5).version(), 0u);  // a new tensor starts at version 0
}

// A transposed operand of a large elementwise op takes the tiled path of the
// CPU backend; the values must equal those of contiguous copies, for either
// operand transposed and for sizes that are not multiples of the tile.
TEST(TensorValues, LargeTransposedOperandsMatchContiguousCopies) {
  bp::manual_seed(3);
  bp::Tensor a = bp::randn({300, 257});
  bp::Tensor bt = bp::randn({257, 300}).t();
  const std::vector<float> x = a.to_vector<float>(), y = bt.contiguous().to_vector<float>();
  const std::vector<float> sum = bp::add(a, bt).to_vector<float>();
  const std::vector<float> diff = bp::sub(bt, a).to_vector<float>();
  const std::vector<bool> less = bp::lt(a, bt).to_vector<bool>();  // a bool output
  ASSERT_EQ(sum.size(), x.size());
  ASSERT_EQ(less.size(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(sum[i], x[i] + y[i]) << i;
    ASSERT_EQ(diff[i], y[i] - x[i]) << i;
    ASSERT_EQ(less[i], x[i] < y[i]) << i;
  }
}
