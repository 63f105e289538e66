// Arithmetic on sparse COO tensors: by a scalar, sparse + sparse,
// dense + sparse, sparse x dense products, transpose and sums (SP-1). Each
// is a composite of dense ops on the indices and values, so it runs on
// every backend and is differentiable in the values and dense operands.
#include <backplane/autograd.h>
#include <backplane/named_ops.h>

#include <algorithm>

#include "../internal.h"
#include "coo_internal.h"

namespace bp {

using namespace sparse_detail;

namespace {

// [a; b] along dim 0, differentiable in both.
Tensor cat0(const Tensor& a, const Tensor& b) {
  DimVector shape(a.sizes());
  shape[0] = a.size(0) + b.size(0);
  Tensor out = zeros(shape, TensorOptions(a.dtype()).device(a.device()));
  out.narrow(0, 0, a.size(0)).copy_(a);
  out.narrow(0, a.size(0), b.size(0)).copy_(b);
  return out;
}

// As PyTorch: a floating alpha with an integral result is refused, not truncated.
void check_alpha(const char* op, DType result, const Scalar& alpha) {
  BP_CHECK_TYPE(
      !(is_integral(result) || result == DType::Bool) || !alpha.is_floating(), "[", op,
      "] For integral input tensors, argument alpha must not be a floating point number.");
}

void check_same_sizes(const char* op, IntArrayRef a, IntArrayRef b) {
  BP_CHECK(DimVector(a) == DimVector(b), "[", op,
           "] expected sizes of 'self' and 'other' to match, but ", shape_str(a),
           " != ", shape_str(b));
}

}  // namespace

SparseTensor SparseTensor::mul(const Scalar& v) const {
  const Impl& s = impl();
  return make(s.indices, s.values.mul(v), s.sizes, s.coalesced);
}

SparseTensor SparseTensor::div(const Scalar& v) const {
  const Impl& s = impl();
  return make(s.indices, s.values.div(v), s.sizes, s.coalesced);
}

SparseTensor& SparseTensor::mul_(const Scalar& v) {
  impl().values.mul_(v);
  return *this;
}

SparseTensor& SparseTensor::div_(const Scalar& v) {
  impl().values.div_(v);
  return *this;
}

SparseTensor SparseTensor::neg() const {
  const Impl& s = impl();
  return make(s.indices, s.values.neg(), s.sizes, s.coalesced);
}

SparseTensor SparseTensor::add(const SparseTensor& other, const Scalar& alpha) const {
  const Impl& a = impl();
  const Impl& b = other.impl();
  check_same_sizes("add", a.sizes, b.sizes);
  BP_CHECK(a.sparse_dim == b.sparse_dim, "[add] sparse_dim differs: ", a.sparse_dim, " and ",
           b.sparse_dim);
  BP_CHECK(device() == other.device(), "[add] the tensors are on ", bp::to_string(device()),
           " and ", bp::to_string(other.device()));
  const DType out = promote_types(dtype(), other.dtype());
  check_alpha("add", out, alpha);
  Tensor bv = b.values.to(out);
  if (!(alpha.to_double() == 1.0)) bv = bv.mul(alpha);
  Tensor indices;
  {
    NoGradGuard no_grad;
    indices = cat0(a.indices.transpose(0, 1), b.indices.transpose(0, 1)).transpose(0, 1);
  }
  SparseTensor sum = make(std::move(indices), cat0(a.values.to(out), bv), a.sizes, false);
  // Both coalesced: the result is too (PyTorch merges the two sorted lists).
  return a.coalesced && b.coalesced ? sum.coalesce() : sum;
}

SparseTensor SparseTensor::sub(const SparseTensor& other, const Scalar& alpha) const {
  BP_CHECK_TYPE(
      !(dtype() == DType::Bool && other.dtype() == DType::Bool),
      "[sub] Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
      "`^` or `logical_xor()` operator instead.");
  return add(other.neg(), alpha);
}

SparseTensor SparseTensor::t() const {
  const Impl& s = impl();
  BP_CHECK(dim() <= 2 && dense_dim() == 0,
           "[t] expects a sparse tensor of at most 2 dims with no dense dims, got sparse_dim ",
           s.sparse_dim, " and dense_dim ", dense_dim());
  // As PyTorch, a copy: changing the transpose in place leaves this tensor.
  if (s.sparse_dim < 2) return clone();
  Tensor swapped;
  {
    NoGradGuard no_grad;
    const Tensor order =
        from_vector(std::vector<int64_t>{1, 0}, {2}, TensorOptions(DType::Int64).device(device()));
    swapped = s.indices.index_select(0, order);
  }
  return make(std::move(swapped), s.values.clone(), DimVector{s.sizes[1], s.sizes[0]}, false);
}

// --- dense and sparse -------------------------------------------------------

namespace {

// The values scaled by alpha in `out`'s dtype, and their rows of the dense
// tensor viewed as [prod(sparse sizes), dense sizes...].
Tensor scaled_values(const SparseTensor& s, DType out, const Scalar& alpha) {
  Tensor v = s._values().to(out);
  return alpha.to_double() == 1.0 ? v : v.mul(alpha);
}

DimVector flat_shape(const SparseTensor& s) {
  DimVector shape(s._values().sizes());
  shape[0] = prod(s.sizes(), static_cast<std::size_t>(s.sparse_dim()));
  return shape;
}

}  // namespace

Tensor add(const Tensor& dense, const SparseTensor& sparse, const Scalar& alpha) {
  check_same_sizes("add", dense.sizes(), sparse.sizes());
  BP_CHECK(dense.device() == sparse.device(), "[add] the tensors are on ",
           to_string(dense.device()), " and ", to_string(sparse.device()));
  const DType out = promote_types(dense.dtype(), sparse.dtype());
  check_alpha("add", out, alpha);
  const Tensor v = scaled_values(sparse, out, alpha);
  const Tensor lin = linear_index(sparse._indices(), sparse.sizes());
  return scatter_add(dense.to(out).reshape(flat_shape(sparse)), 0, expand_to_rows(lin, v), v)
      .view(dense.sizes());
}

Tensor& add_(Tensor& dense, const SparseTensor& sparse, const Scalar& alpha) {
  check_same_sizes("add_", dense.sizes(), sparse.sizes());
  BP_CHECK(dense.device() == sparse.device(), "[add_] the tensors are on ",
           to_string(dense.device()), " and ", to_string(sparse.device()));
  const DType out = promote_types(dense.dtype(), sparse.dtype());
  BP_CHECK_TYPE(out == dense.dtype(), "[add_] result type ", out,
                " can't be cast to the desired output type ", dense.dtype());
  check_alpha("add_", out, alpha);
  if (!dense.is_contiguous()) {
    dense.add_(sparse.to_dense(), alpha);
    return dense;
  }
  const Tensor v = scaled_values(sparse, out, alpha);
  const Tensor lin = linear_index(sparse._indices(), sparse.sizes());
  dense.view(flat_shape(sparse)).scatter_add_(0, expand_to_rows(lin, v), v);
  return dense;
}

Tensor mm(const SparseTensor& sparse, const Tensor& dense) {
  BP_CHECK(sparse.sparse_dim() == 2 && sparse.dense_dim() == 0,
           "[mm] expects a 2-D sparse matrix with no dense dims, got sizes ",
           shape_str(sparse.sizes()), " with sparse_dim ", sparse.sparse_dim());
  BP_CHECK(dense.dim() == 2, "[mm] expects a 2-D dense matrix, got sizes ",
           shape_str(dense.sizes()));
  BP_CHECK(sparse.size(1) == dense.size(0), "[mm] sparse ", shape_str(sparse.sizes()),
           " and dense ", shape_str(dense.sizes()), " cannot be multiplied (", sparse.size(1),
           " != ", dense.size(0), ")");
  BP_CHECK(dense.device() == sparse.device(), "[mm] the tensors are on ",
           to_string(sparse.device()), " and ", to_string(dense.device()));
  const DType out = promote_types(dense.dtype(), sparse.dtype());
  // A backend's native kernel (core::sparse_mm) when no gradient is being
  // recorded; it takes the coalesced form.
  const bool recording =
      GradMode::is_enabled() && (sparse.requires_grad() || dense.requires_grad());
  // The operand already of the result's dtype tells has_override the
  // backend and dtype: no probe tensor on every call.
  const Tensor& probe = sparse.dtype() == out ? sparse._values() : dense;
  if (!recording && probe.dtype() == out && has_override("core::sparse_mm", probe)) {
    const SparseTensor c = sparse.coalesce();
    Tensor result =
        empty({sparse.size(0), dense.size(1)}, TensorOptions(out).device(dense.device()));
    if (detail::run_kernel_override(
            "core::sparse_mm", {c._values().to(out), c._indices(), dense.to(out)}, {result}, {}))
      return result;
  }
  const Tensor idx = sparse._indices();
  Tensor rows, cols;
  {
    NoGradGuard no_grad;
    rows = idx.select(0, 0).contiguous();
    cols = idx.select(0, 1).contiguous();
  }
  // out[r] += v * dense[c] for each stored (r, c, v).
  const Tensor picked = dense.to(out).index_select(0, cols);
  const Tensor terms = picked.mul(sparse._values().to(out).unsqueeze(1));
  const Tensor zero =
      zeros({sparse.size(0), dense.size(1)}, TensorOptions(out).device(dense.device()));
  return scatter_add(zero, 0, expand_to_rows(rows, terms), terms);
}

Tensor matmul(const SparseTensor& sparse, const Tensor& dense) {
  BP_CHECK(dense.dim() == 1 || dense.dim() == 2,
           "[matmul] a sparse matrix times a dense tensor of ", dense.dim(), " dims (sizes ",
           shape_str(dense.sizes()), "): only a 1-D or 2-D dense operand is supported");
  if (dense.dim() == 2) return mm(sparse, dense);
  BP_CHECK(sparse.dim() == 2 && sparse.size(1) == dense.size(0), "[matmul] sparse ",
           shape_str(sparse.sizes()), " and dense ", shape_str(dense.sizes()),
           " cannot be multiplied");
  return mm(sparse, dense.unsqueeze(1)).squeeze(1);
}

Tensor addmm(const Tensor& input, const SparseTensor& sparse, const Tensor& dense,
             const Scalar& beta, const Scalar& alpha) {
  Tensor prod = mm(sparse, dense);
  if (alpha.to_double() != 1.0) prod = prod.mul(alpha);
  // As PyTorch: with beta 0 the input's values are ignored, NaN included;
  // its shape must still broadcast to the product's (expand checks, no copy).
  if (beta.to_double() == 0.0) {
    (void)input.expand(prod.sizes());
    return prod;
  }
  const Tensor in = beta.to_double() == 1.0 ? input : input.mul(beta);
  return bp::add(in, prod);
}

// --- sums -----------------------------------------------------------------------

namespace sparse {

const Tensor& SumResult::dense() const {
  BP_CHECK(!is_sparse(),
           "[sparse::sum] the result is sparse (a sparse dim remains): use .sparse()");
  return std::get<Tensor>(v_);
}

const SparseTensor& SumResult::sparse() const {
  BP_CHECK(is_sparse(),
           "[sparse::sum] the result is dense (every sparse dim was reduced): use .dense()");
  return std::get<SparseTensor>(v_);
}

Tensor sum(const SparseTensor& s) { return s._values().sum(); }

SumResult sum(const SparseTensor& s, IntArrayRef dims_in) {
  const int64_t n = s.dim();
  const int64_t sd = s.sparse_dim();
  std::vector<bool> reduce(static_cast<std::size_t>(n), false);
  for (int64_t d : dims_in) {
    BP_CHECK_INDEX(d >= -n && d < n, "[sparse::sum] dim ", d, " is out of range for ", n, " dims");
    const auto at = static_cast<std::size_t>(d < 0 ? d + n : d);
    BP_CHECK(!reduce[at], "[sparse::sum] dim ", d, " appears twice in the dims");
    reduce[at] = true;
  }
  Tensor v = s._values();
  DimVector dense_dims;  // of the values: dense dim d is values dim d - sd + 1
  for (int64_t d = sd; d < n; ++d)
    if (reduce[static_cast<std::size_t>(d)]) dense_dims.push_back(d - sd + 1);
  if (!dense_dims.empty()) v = v.sum(dense_dims);
  DimVector kept_sparse;
  for (int64_t d = 0; d < sd; ++d)
    if (!reduce[static_cast<std::size_t>(d)]) kept_sparse.push_back(d);
  if (kept_sparse.empty()) return SumResult(v.sum({0}));
  DimVector sizes;
  for (int64_t d = 0; d < n; ++d)
    if (!reduce[static_cast<std::size_t>(d)]) sizes.push_back(s.size(d));
  Tensor idx = s._indices();
  if (static_cast<int64_t>(kept_sparse.size()) < sd) {
    NoGradGuard no_grad;
    std::vector<int64_t> rows(kept_sparse.data(), kept_sparse.data() + kept_sparse.size());
    idx = idx.index_select(0, from_vector(rows, {static_cast<int64_t>(rows.size())},
                                          TensorOptions(DType::Int64).device(s.device())));
  }
  return SumResult(make(std::move(idx), std::move(v), std::move(sizes), false).coalesce());
}

}  // namespace sparse

}  // namespace bp
