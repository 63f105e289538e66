// Sparse COO tensors on the default backend. Expected values are worked
// out by hand in the comments; the printed forms and error messages are
// PyTorch 1.13's for the same calls (dtypes named as Tensor prints them:
// "float64").
#include <backplane/backplane.h>
#include <backplane/debug.h>
#include <backplane/sparse/coo.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace {

using bp::DType;
using bp::SparseTensor;
using bp::Tensor;

using V = std::vector<double>;
using I = std::vector<int64_t>;

Tensor idx2(std::initializer_list<std::initializer_list<int64_t>> rows) { return bp::tensor(rows); }

// (1,0)=1, (0,2)=2, (1,0)=3 in a 2x3: uncoalesced, (1,0) twice.
SparseTensor example() {
  return bp::sparse_coo_tensor(idx2({{1, 0, 1}, {0, 2, 0}}), bp::tensor({1.f, 2.f, 3.f}), {2, 3});
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SparseCoo, MetadataOfAConstructedTensor) {
  const SparseTensor s = example();
  EXPECT_TRUE(s.is_sparse());
  EXPECT_EQ(s.sparse_dim(), 2);
  EXPECT_EQ(s.dense_dim(), 0);
  EXPECT_EQ(s.nnz(), 3);
  EXPECT_EQ(s.dim(), 2);
  EXPECT_EQ(s.size(1), 3);
  EXPECT_FALSE(s.is_coalesced());
  EXPECT_EQ(s._indices().to_vector<int64_t>(), (I{1, 0, 1, 0, 2, 0}));
  EXPECT_THROW(s.values(), bp::ValueError);
  EXPECT_NE(message_of([&] { s.indices(); }).find("please call .coalesce() first"),
            std::string::npos);
}

TEST(SparseCoo, SizeInferredFromTheLargestIndex) {
  const SparseTensor s = bp::sparse_coo_tensor(bp::tensor({{0, 1}}), bp::tensor({1.f, 2.f}));
  EXPECT_EQ(std::vector<int64_t>(s.sizes().begin(), s.sizes().end()), (I{2}));
  // Hybrid: values [2, 2] give a dense dim of 2.
  const SparseTensor h =
      bp::sparse_coo_tensor(bp::tensor({{0, 1}}), bp::tensor({{1.f, 2.f}, {3.f, 4.f}}));
  EXPECT_EQ(h.dense_dim(), 1);
  EXPECT_EQ(std::vector<int64_t>(h.sizes().begin(), h.sizes().end()), (I{2, 2}));
}

TEST(SparseCoo, BadIndicesAreRefusedWithPyTorchsMessages) {
  const Tensor v = bp::tensor({1.f, 2.f});
  EXPECT_NE(message_of([&] {
              bp::sparse_coo_tensor(bp::tensor({{0, 5}}), v, {3});
            }).find("size is inconsistent with indices: for dim 0, size is 3 but found index 5"),
            std::string::npos);
  EXPECT_THROW(bp::sparse_coo_tensor(bp::tensor({{0, -1}}), v, {3}), bp::IndexError);
  EXPECT_NE(message_of([&] {
              bp::sparse_coo_tensor(bp::tensor({{0, -1}}), v, {3});
            }).find("found negative index -1 for dim 0"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              bp::sparse_coo_tensor(bp::tensor({{0, 1}}), bp::tensor({1.f, 2.f, 3.f}), {3});
            })
                .find("indices and values must have same nnz, but got nnz from indices: 2, nnz "
                      "from values: 3"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              bp::sparse_coo_tensor(bp::tensor({0, 1}), v, {3});
            }).find("indices must be sparse_dim x nnz, but got: [2]"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              bp::sparse_coo_tensor(bp::tensor({{0, 1}}), v, {3, 3});
            }).find("number of dimensions must be sparse_dim (1) + dense_dim (0), but got 2"),
            std::string::npos);
  // Floating indices are refused (PyTorch would truncate them); int32 ones are converted.
  EXPECT_THROW(bp::sparse_coo_tensor(bp::tensor({{0.f, 1.f}}), v, {3}), bp::TypeError);
  EXPECT_EQ(v.to_vector<double>(), (V{1, 2}));  // the inputs are untouched
}

TEST(SparseCoo, CoalesceSortsAndSumsDuplicates) {
  const SparseTensor s = example();
  const SparseTensor c = s.coalesce();
  ASSERT_TRUE(c.is_coalesced());
  // (0,2) first, then (1,0) = 1 + 3.
  EXPECT_EQ(c.indices().to_vector<int64_t>(), (I{0, 1, 2, 0}));
  EXPECT_EQ(c.values().to_vector<double>(), (V{2, 4}));
  EXPECT_FALSE(s.is_coalesced());  // the original is unchanged
  EXPECT_EQ(s.nnz(), 3);
  // Coalescing a coalesced tensor gives the same tensor.
  EXPECT_TRUE(c.coalesce().values().is_same(c.values()));
}

TEST(SparseCoo, ToDenseSumsDuplicates) {
  EXPECT_EQ(example().to_dense().to_vector<double>(), (V{0, 0, 2, 4, 0, 0}));
  const SparseTensor h =
      bp::sparse_coo_tensor(bp::tensor({{0, 1}}), bp::tensor({{1.f, 2.f}, {3.f, 4.f}}), {3, 2});
  EXPECT_EQ(h.to_dense().to_vector<double>(), (V{1, 2, 3, 4, 0, 0}));
}

TEST(SparseCoo, ZeroEmptiesEveryCopyAndKeepsTheSize) {
  // sparse_coo_tensor([[0, 1]], [1., 2.], (2,)).zero_(), as PyTorch users write it.
  SparseTensor s = bp::sparse_coo_tensor(bp::tensor({{0, 1}}), bp::tensor({1.f, 2.f}), {2});
  const SparseTensor alias = s;
  s.zero_();
  EXPECT_EQ(alias.nnz(), 0);
  EXPECT_TRUE(alias.is_coalesced());
  EXPECT_EQ(alias.size(0), 2);
  EXPECT_EQ(alias._indices().size(0), 1);
  EXPECT_EQ(alias.to_dense().to_vector<double>(), (V{0, 0}));
}

TEST(SparseCoo, PrintsAsPyTorch) {
  EXPECT_EQ(example().to_string(),
            "tensor(indices=tensor([[1, 0, 1],\n"
            "                       [0, 2, 0]]),\n"
            "       values=tensor([1., 2., 3.]),\n"
            "       size=(2, 3), nnz=3, layout=torch.sparse_coo)");
  SparseTensor z = example();
  z.zero_();
  EXPECT_EQ(z.to_string(),
            "tensor(indices=tensor([], size=(2, 0)),\n"
            "       values=tensor([], size=(0,)),\n"
            "       size=(2, 3), nnz=0, layout=torch.sparse_coo)");
  const SparseTensor h =
      bp::sparse_coo_tensor(bp::tensor({{0, 1}}), bp::tensor({{1.f, 2.f}, {3.f, 4.f}}), {3, 2});
  EXPECT_EQ(h.to_string(),
            "tensor(indices=tensor([[0, 1]]),\n"
            "       values=tensor([[1., 2.],\n"
            "                      [3., 4.]]),\n"
            "       size=(3, 2), nnz=2, layout=torch.sparse_coo)");
  const SparseTensor d = bp::sparse_coo_tensor(bp::tensor({{0, 1, 0}}), bp::tensor({1.f, 2.f, 3.f}),
                                               {2}, DType::Float64);
  EXPECT_EQ(d.to_string(),
            "tensor(indices=tensor([[0, 1, 0]]),\n"
            "       values=tensor([1., 2., 3.]),\n"
            "       size=(2,), nnz=3, dtype=float64, layout=torch.sparse_coo)");
  const SparseTensor i = bp::sparse_coo_tensor(bp::tensor({{0, 1, 0}}), bp::tensor({1, 2, 3}), {2});
  EXPECT_EQ(i.to_string(),
            "tensor(indices=tensor([[0, 1, 0]]),\n"
            "       values=tensor([1, 2, 3]),\n"
            "       size=(2,), nnz=3, layout=torch.sparse_coo)");
}

TEST(SparseCoo, ToSparseKeepsNonzerosInOrder) {
  const SparseTensor s = bp::to_sparse(bp::tensor({{0.f, 1.f}, {2.f, 0.f}}));
  EXPECT_TRUE(s.is_coalesced());
  EXPECT_EQ(s.indices().to_vector<int64_t>(), (I{0, 1, 1, 0}));
  EXPECT_EQ(s.values().to_vector<double>(), (V{1, 2}));
  // Over dim 0 only: both rows hold a nonzero, values are the rows.
  const SparseTensor h = bp::to_sparse(bp::tensor({{0.f, 1.5f}, {0.f, 0.f}}), 1);
  EXPECT_EQ(h.indices().to_vector<int64_t>(), (I{0}));
  EXPECT_EQ(h.values().to_vector<double>(), (V{0, 1.5}));
  EXPECT_EQ(h.dense_dim(), 1);
}

TEST(SparseCoo, AddSparseAndDense) {
  const SparseTensor s = example();
  // Both coalesced: the sum is, and holds each coordinate once.
  const SparseTensor cc = s.coalesce() + s.coalesce();
  EXPECT_TRUE(cc.is_coalesced());
  EXPECT_EQ(cc.values().to_vector<double>(), (V{4, 8}));
  // Otherwise the stored elements are concatenated.
  const SparseTensor ss = s + s;
  EXPECT_FALSE(ss.is_coalesced());
  EXPECT_EQ(ss.nnz(), 6);
  EXPECT_EQ(ss.to_dense().to_vector<double>(), (V{0, 0, 4, 8, 0, 0}));
  // dense + sparse is dense: ones + [[0,0,2],[4,0,0]].
  EXPECT_EQ((bp::ones({2, 3}) + s).to_vector<double>(), (V{1, 1, 3, 5, 1, 1}));
  Tensor d = bp::ones({2, 3});
  const uint32_t before = d.version();
  bp::add_(d, s, 2);
  EXPECT_EQ(d.to_vector<double>(), (V{1, 1, 5, 9, 1, 1}));
  EXPECT_GT(d.version(), before);
  const SparseTensor other = bp::sparse_coo_tensor(idx2({{0}, {0}}), bp::tensor({1.f}), {3, 3});
  EXPECT_NE(message_of([&] {
              s.add(other);
            }).find("expected sizes of 'self' and 'other' to match, but [2, 3] != [3, 3]"),
            std::string::npos);
}

TEST(SparseCoo, ScalarOpsTransposeAndSums) {
  const SparseTensor s = example();
  EXPECT_EQ((s * 2)._values().to_vector<double>(), (V{2, 4, 6}));
  EXPECT_FALSE((s * 2).is_coalesced());
  EXPECT_TRUE((s.coalesce() * 2).is_coalesced());
  EXPECT_EQ((s / 2)._values().to_vector<double>(), (V{0.5, 1, 1.5}));
  const SparseTensor t = s.t();
  EXPECT_EQ(t._indices().to_vector<int64_t>(), (I{0, 2, 0, 1, 0, 1}));
  EXPECT_EQ(t.size(0), 3);
  EXPECT_FALSE(t.is_coalesced());
  EXPECT_EQ(bp::sparse::sum(s).item<double>(), 6);
  // Over dim 0: column sums, sparse: column 0 holds 4, column 2 holds 2.
  const auto r0 = bp::sparse::sum(s, {0});
  ASSERT_TRUE(r0.is_sparse());
  EXPECT_EQ(r0.sparse().indices().to_vector<int64_t>(), (I{0, 2}));
  EXPECT_EQ(r0.sparse().values().to_vector<double>(), (V{4, 2}));
  EXPECT_THROW(r0.dense(), bp::ValueError);
  EXPECT_EQ(bp::sparse::sum(s, {0, 1}).dense().item<double>(), 6);
  // Hybrid rows (0: [1, 2], 1: [3, 4]) in a 3x2: over the sparse dim the
  // result is dense [4, 6]; over the dense dim it is sparse [3, 7].
  const SparseTensor h =
      bp::sparse_coo_tensor(bp::tensor({{0, 1}}), bp::tensor({{1.f, 2.f}, {3.f, 4.f}}), {3, 2});
  EXPECT_EQ(bp::sparse::sum(h, {0}).dense().to_vector<double>(), (V{4, 6}));
  EXPECT_EQ(bp::sparse::sum(h, {1}).sparse().values().to_vector<double>(), (V{3, 7}));
}

TEST(SparseCoo, MmAndAddmm) {
  // [[0,0,2],[4,0,0]] @ arange(12).view(3,4): row 0 = 2 * [8..11], row 1 = 4 * [0..3].
  const Tensor d = bp::arange(0.f, 12.f).reshape({3, 4});
  EXPECT_EQ(bp::mm(example(), d).to_vector<double>(), (V{16, 18, 20, 22, 0, 4, 8, 12}));
  EXPECT_EQ(bp::addmm(bp::ones({2, 4}), example(), d, 0.5, 2).to_vector<double>(),
            (V{32.5, 36.5, 40.5, 44.5, 0.5, 8.5, 16.5, 24.5}));
  EXPECT_NE(message_of([&] {
              bp::mm(example(), bp::ones({4, 2}));
            }).find("cannot be multiplied (3 != 4)"),
            std::string::npos);
}

bool reached(const bp::debug::KernelRecording& rec, const std::string& op) {
  const auto k = rec.kernels();
  return std::any_of(k.begin(), k.end(),
                     [&](const bp::debug::ReachedKernel& r) { return r.op == op; });
}

TEST(SparseCoo, MmRunsTheBackendsKernelWithoutGradAndMatchesTheComposite) {
  // cpu_onednn registers core::sparse_mm: no gather (index_select) reached.
  bp::manual_seed(3);
  const Tensor a = bp::randn({40, 30}) * bp::gt(bp::rand({40, 30}), 0.8).to(DType::Float32);
  const SparseTensor s = bp::to_sparse(a);
  const Tensor d = bp::randn({30, 9});
  ASSERT_TRUE(bp::has_override("core::sparse_mm", d));
  Tensor native, composite;
  {
    bp::NoGradGuard no_grad;
    bp::debug::KernelRecording rec;
    native = bp::mm(s, d);
    EXPECT_FALSE(reached(rec, "index_select"));
  }
  {
    bp::CompositeOnlyGuard only;
    bp::debug::KernelRecording rec;
    composite = bp::mm(s, d);
    EXPECT_TRUE(reached(rec, "index_select"));
  }
  const auto x = native.to_vector<double>(), y = composite.to_vector<double>(),
             z = bp::matmul(a, d).to_vector<double>();
  ASSERT_EQ(x.size(), y.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(x[i], y[i], 1e-4) << "at " << i;
    EXPECT_NEAR(x[i], z[i], 1e-4) << "at " << i;
  }
}

TEST(SparseCoo, GradientsOfMmReachTheDenseOperandAndTheValues) {
  Tensor d = bp::arange(0.f, 12.f).reshape({3, 4}).requires_grad_();
  SparseTensor s = example();
  s.requires_grad_();
  bp::mm(s, d).sum().backward();
  // d's row k gets the sum of column k of the sparse matrix: 4, 0, 2.
  EXPECT_EQ(d.grad().to_vector<double>(), (V{4, 4, 4, 4, 0, 0, 0, 0, 2, 2, 2, 2}));
  // Each stored value gets the sum of its column's row of d: (1,0) -> 0+1+2+3,
  // (0,2) -> 8+9+10+11.
  EXPECT_EQ(s._values().grad().to_vector<double>(), (V{6, 38, 6}));
  // As a sparse tensor, PyTorch's: one entry per coordinate, the
  // derivative by that dense element (6, not 6 + 6).
  const SparseTensor g = s.grad();
  EXPECT_EQ(g.indices().to_vector<int64_t>(), (I{0, 1, 2, 0}));
  EXPECT_EQ(g.values().to_vector<double>(), (V{38, 6}));
}

TEST(SparseCoo, ToDenseBackwardGivesASparseGradient) {
  SparseTensor s = example();
  s.requires_grad_();
  (s.to_dense() * bp::arange(0.f, 6.f).reshape({2, 3})).sum().backward();
  // PyTorch 1.13: indices [[0, 1], [2, 0]], values [2, 3].
  const SparseTensor g = s.grad();
  EXPECT_EQ(g.indices().to_vector<int64_t>(), (I{0, 1, 2, 0}));
  EXPECT_EQ(g.values().to_vector<double>(), (V{2, 3}));
}

TEST(SparseCoo, TheValuesShareMemoryNotAutogradState) {
  const Tensor v = bp::tensor({1.f, 2.f});
  SparseTensor s = bp::sparse_coo_tensor(bp::tensor({{0, 1}}), v, {2});
  s.requires_grad_();
  EXPECT_FALSE(v.requires_grad());
  EXPECT_TRUE(s._values().shares_storage(v));
  // A leaf that requires grad cannot be emptied in place while recording.
  EXPECT_THROW(s.zero_(), bp::AutogradError);
  EXPECT_EQ(s.nnz(), 2);
  {
    bp::NoGradGuard no_grad;
    s.zero_();
  }
  EXPECT_EQ(s.nnz(), 0);
  EXPECT_TRUE(s.requires_grad());
}

TEST(SparseCoo, TransposeIsACopyAndAlphaMustFitTheDtype) {
  const SparseTensor s = example();
  SparseTensor t = s.t();
  t.mul_(10);
  EXPECT_EQ(s._values().to_vector<double>(), (V{1, 2, 3}));
  const SparseTensor one = bp::sparse_coo_tensor(bp::tensor({{0, 2}}), bp::tensor({1.f, 2.f}), {3});
  EXPECT_EQ(one.t().to_dense().to_vector<double>(), (V{1, 0, 2}));
  const SparseTensor ints = bp::sparse_coo_tensor(bp::tensor({{0, 1}}), bp::tensor({1, 2}), {2});
  EXPECT_THROW(ints.add(ints, 2.5), bp::TypeError);
  Tensor d = bp::zeros({2}, bp::TensorOptions(DType::Int64));
  EXPECT_THROW(bp::add_(d, ints, 0.5), bp::TypeError);
  EXPECT_EQ(d.to_vector<int64_t>(), (I{0, 0}));
  EXPECT_EQ(ints.add(ints, 3).to_dense().to_vector<int64_t>(), (I{4, 8}));
}

TEST(SparseCoo, HugeSizesAreRefusedBeforeTheyOverflow) {
  const SparseTensor s = bp::sparse_coo_tensor(bp::tensor({{0}, {0}}), bp::tensor({1.f}),
                                               {int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_EQ(s.coalesce().nnz(), 1);  // sorting needs no linear index
  EXPECT_THROW(s.to_dense(), bp::ValueError);
}

TEST(SparseCoo, CloneDetachAndTo) {
  SparseTensor s = example();
  s.requires_grad_();
  const SparseTensor c = s.clone();
  EXPECT_FALSE(c._values().is_same(s._values()));
  EXPECT_EQ(c.to_dense().to_vector<double>(), s.to_dense().to_vector<double>());
  EXPECT_FALSE(s.detach().requires_grad());
  EXPECT_TRUE(s.detach()._values().shares_storage(s._values()));
  EXPECT_EQ(s.to(DType::Float64).dtype(), DType::Float64);
}

}  // namespace
