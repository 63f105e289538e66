// Sparse COO tensors: construction and its checks, the metadata, coalesce,
// to_dense and to_sparse (SP-1).
#include <backplane/autograd.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <sstream>

#include "../internal.h"
#include "coo_internal.h"

namespace bp {

namespace sparse_detail {

SparseTensor make(Tensor indices, Tensor values, DimVector sizes, bool coalesced) {
  auto impl = std::make_shared<SparseTensor::Impl>();
  impl->sparse_dim = indices.size(0);
  impl->indices = std::move(indices);
  impl->values = std::move(values);
  impl->sizes = std::move(sizes);
  impl->coalesced = coalesced;
  return SparseTensor(std::move(impl));
}

int64_t prod(IntArrayRef sizes, std::size_t n) {
  int64_t p = 1;
  for (std::size_t i = 0; i < n; ++i)
    BP_CHECK(!__builtin_mul_overflow(p, sizes[i], &p), "[sparse] the sparse sizes ",
             shape_str(sizes), " hold more than 2^63 elements: no dense form or linear index");
  return p;
}

std::string shape_str(IntArrayRef sizes) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) os << (i ? ", " : "") << sizes[i];
  os << "]";
  return os.str();
}

Tensor linear_index(const Tensor& indices, IntArrayRef sparse_sizes) {
  const int64_t sd = indices.size(0);
  const int64_t nnz = indices.size(1);
  (void)prod(sparse_sizes, static_cast<std::size_t>(sd));  // refuses an overflowing product
  if (sd == 0) return zeros({nnz}, TensorOptions(DType::Int64).device(indices.device()));
  NoGradGuard no_grad;
  Tensor lin = indices.select(0, sd - 1).contiguous();
  int64_t stride = sparse_sizes[static_cast<std::size_t>(sd - 1)];
  for (int64_t d = sd - 2; d >= 0; --d) {
    lin = lin.add(indices.select(0, d), stride);
    stride *= sparse_sizes[static_cast<std::size_t>(d)];
  }
  return lin;
}

Tensor expand_to_rows(const Tensor& index, const Tensor& values) {
  DimVector shape(static_cast<std::size_t>(values.dim()), 1);
  shape[0] = index.size(0);
  return index.view(shape).expand(values.sizes());
}

}  // namespace sparse_detail

using namespace sparse_detail;

namespace {

// Each sparse dim's smallest and largest index (nnz > 0), reduced on the
// device: only these 2 x sparse_dim values are read back.
struct Bounds {
  std::vector<int64_t> lo, hi;
};
Bounds index_bounds(const Tensor& indices) {
  NoGradGuard no_grad;
  return {bp::min(indices, 1).first.to_vector<int64_t>(),
          bp::max(indices, 1).first.to_vector<int64_t>()};
}

// Indices of another integer dtype become int64, as PyTorch's constructor
// converts them; floating and bool indices are refused.
Tensor int64_indices(const Tensor& indices) {
  if (indices.dtype() == DType::Int64) return indices;
  BP_CHECK_TYPE(is_integral(indices.dtype()),
                "[sparse_coo_tensor] indices must be an integer tensor (converted to int64), got ",
                indices.dtype());
  NoGradGuard no_grad;
  return indices.to(DType::Int64);
}

void check_index_args(const Tensor& indices, const Tensor& values) {
  BP_CHECK(indices.dim() == 2, "[sparse_coo_tensor] indices must be sparse_dim x nnz, but got: ",
           shape_str(indices.sizes()));
  BP_CHECK(values.dim() >= 1,
           "[sparse_coo_tensor] values must be nnz x dense sizes, got a 0-d tensor");
  BP_CHECK(indices.size(1) == values.size(0),
           "[sparse_coo_tensor] indices and values must have same nnz, but got nnz from indices: ",
           indices.size(1), ", nnz from values: ", values.size(0));
  BP_CHECK(indices.device() == values.device(),
           "[sparse_coo_tensor] indices and values must be on one device, got ",
           to_string(indices.device()), " and ", to_string(values.device()));
}

// The checks of the sized form; `bounds` holds the index bounds when the
// caller has them already.
SparseTensor checked(const Tensor& indices, const Tensor& values, IntArrayRef size,
                     std::optional<DType> dtype, std::optional<Bounds> bounds) {
  const int64_t sd = indices.size(0);
  const int64_t dense_dim = values.dim() - 1;
  BP_CHECK(static_cast<int64_t>(size.size()) == sd + dense_dim,
           "[sparse_coo_tensor] number of dimensions must be sparse_dim (", sd, ") + dense_dim (",
           dense_dim, "), but got ", size.size());
  for (int64_t d = 0; d < dense_dim; ++d)
    BP_CHECK(size[static_cast<std::size_t>(sd + d)] == values.size(d + 1),
             "[sparse_coo_tensor] size ", shape_str(size),
             " does not match the values' dense sizes ", shape_str(values.sizes()), " at dim ",
             sd + d);
  for (std::size_t d = 0; d < size.size(); ++d)
    BP_CHECK(size[d] >= 0, "[sparse_coo_tensor] negative size in ", shape_str(size));
  const int64_t nnz = indices.size(1);
  if (nnz > 0) {
    const Bounds b = bounds ? std::move(*bounds) : index_bounds(indices);
    for (int64_t d = 0; d < sd; ++d) {
      const auto k = static_cast<std::size_t>(d);
      BP_CHECK_INDEX(b.lo[k] >= 0, "[sparse_coo_tensor] found negative index ", b.lo[k],
                     " for dim ", d);
      BP_CHECK_INDEX(b.hi[k] < size[k],
                     "[sparse_coo_tensor] size is inconsistent with indices: for dim ", d,
                     ", size is ", size[k], " but found index ", b.hi[k]);
    }
  }
  // The values' memory is shared, as PyTorch shares it; their autograd
  // state is not: flagging the sparse tensor must not flag the caller's
  // tensor. Values that already require grad stay in their graph.
  Tensor v = dtype && *dtype != values.dtype() ? values.to(*dtype) : values;
  if (!v.requires_grad()) v = v.detach();
  // As PyTorch 1.13: a tensor of 0 or 1 stored elements is coalesced from the start.
  return make(indices, std::move(v), DimVector(size), nnz <= 1);
}

}  // namespace

SparseTensor sparse_coo_tensor(const Tensor& given_indices, const Tensor& values, IntArrayRef size,
                               std::optional<DType> dtype) {
  const Tensor indices = int64_indices(given_indices);
  check_index_args(indices, values);
  return checked(indices, values, size, dtype, std::nullopt);
}

SparseTensor sparse_coo_tensor(const Tensor& given_indices, const Tensor& values) {
  const Tensor indices = int64_indices(given_indices);
  check_index_args(indices, values);
  const int64_t sd = indices.size(0);
  const int64_t nnz = indices.size(1);
  DimVector size(static_cast<std::size_t>(sd + values.dim() - 1), 0);
  std::optional<Bounds> bounds;
  if (nnz > 0) {
    bounds = index_bounds(indices);
    for (int64_t d = 0; d < sd; ++d) {
      const int64_t hi = bounds->hi[static_cast<std::size_t>(d)];
      BP_CHECK_INDEX(hi < std::numeric_limits<int64_t>::max(), "[sparse_coo_tensor] index ", hi,
                     " for dim ", d, " leaves no size to infer");
      size[static_cast<std::size_t>(d)] = std::max<int64_t>(hi + 1, 0);
    }
  }
  for (int64_t d = 1; d < values.dim(); ++d)
    size[static_cast<std::size_t>(sd + d - 1)] = values.size(d);
  // The bounds still matter: a negative index is refused.
  return checked(indices, values, size, std::nullopt, std::move(bounds));
}

// --- metadata ---------------------------------------------------------------

SparseTensor::Impl& SparseTensor::impl() const {
  if (!impl_) throw ValueError("[SparseTensor] the tensor is undefined");
  return *impl_;
}
int64_t SparseTensor::sparse_dim() const { return impl().sparse_dim; }
int64_t SparseTensor::dense_dim() const { return impl().values.dim() - 1; }
int64_t SparseTensor::dim() const { return static_cast<int64_t>(impl().sizes.size()); }
IntArrayRef SparseTensor::sizes() const { return impl().sizes; }
int64_t SparseTensor::size(int64_t d) const {
  const int64_t n = dim();
  BP_CHECK_INDEX(d >= -n && d < n, "[SparseTensor::size] dim ", d, " is out of range for ", n,
                 " dims");
  return impl().sizes[static_cast<std::size_t>(d < 0 ? d + n : d)];
}
int64_t SparseTensor::nnz() const { return impl().indices.size(1); }
DType SparseTensor::dtype() const { return impl().values.dtype(); }
Device SparseTensor::device() const { return impl().values.device(); }
bool SparseTensor::is_coalesced() const { return impl().coalesced; }

Tensor SparseTensor::indices() const {
  BP_CHECK(impl().coalesced,
           "Cannot get indices on an uncoalesced tensor, please call .coalesce() first");
  return impl().indices;
}
Tensor SparseTensor::values() const {
  BP_CHECK(impl().coalesced,
           "Cannot get values on an uncoalesced tensor, please call .coalesce() first");
  return impl().values;
}
Tensor SparseTensor::_indices() const { return impl().indices; }
Tensor SparseTensor::_values() const { return impl().values; }

// --- coalesce -----------------------------------------------------------------

namespace {

// Where each stored element goes when coalescing, found on the device with
// ARGSORT and CUMSUM: the distinct coordinates in lexicographic order
// ([sparse_dim, unique]), each stored element's rank among them
// (`segment`), one stored element of each (`firsts`).
struct CoalescePlan {
  Tensor indices, segment, firsts;
  int64_t unique = 0;
};

CoalescePlan plan_coalesce(const Tensor& indices) {
  NoGradGuard no_grad;
  const int64_t sd = indices.size(0);
  const int64_t nnz = indices.size(1);
  const TensorOptions on_device = TensorOptions(DType::Int64).device(indices.device());
  CoalescePlan plan;
  if (nnz == 0) {
    plan.indices = indices;
    plan.segment = plan.firsts = zeros({0}, on_device);
    return plan;
  }
  // Columns sorted lexicographically by stable sorts on each row, the last
  // first: no linear index, so no overflow whatever the sizes.
  Tensor order = arange(nnz, on_device);
  for (int64_t d = sd - 1; d >= 0; --d) {
    const Tensor key = index_select(indices.select(0, d), 0, order);
    order = index_select(order, 0, argsort(key, 0, false, true));
  }
  const Tensor sorted = index_select(indices, 1, order);
  const detail::Flagged runs = detail::consecutive_runs(sorted, 1);
  plan.unique = runs.count;
  plan.indices = index_select(sorted, 1, runs.positions);
  plan.segment = scatter(zeros({nnz}, on_device), 0, order, runs.rank);
  plan.firsts = index_select(order, 0, runs.positions);
  return plan;
}

}  // namespace

SparseTensor SparseTensor::coalesce() const {
  const Impl& s = impl();
  if (s.coalesced) return *this;
  const CoalescePlan plan = plan_coalesce(s.indices);
  Tensor indices = plan.indices;
  const Tensor& seg = plan.segment;
  DimVector vshape(s.values.sizes());
  vshape[0] = plan.unique;
  const Tensor zero = zeros(vshape, TensorOptions(dtype()).device(device()));
  Tensor values = scatter_add(zero, 0, expand_to_rows(seg, s.values), s.values);
  return make(std::move(indices), std::move(values), s.sizes, true);
}

// --- to_dense / to_sparse -------------------------------------------------------

Tensor SparseTensor::to_dense() const {
  const Impl& s = impl();
  const auto sd = static_cast<std::size_t>(s.sparse_dim);
  DimVector flat_shape(s.values.sizes());
  flat_shape[0] = prod(s.sizes, sd);
  const Tensor zero = zeros(flat_shape, TensorOptions(dtype()).device(device()));
  const Tensor lin = linear_index(s.indices, s.sizes);
  return scatter_add(zero, 0, expand_to_rows(lin, s.values), s.values).view(s.sizes);
}

SparseTensor to_sparse(const Tensor& dense, std::optional<int64_t> sparse_dim) {
  const int64_t sd = sparse_dim.value_or(dense.dim());
  BP_CHECK(sd >= 0 && sd <= dense.dim(), "[to_sparse] sparse_dim must be in [0, ", dense.dim(),
           "] for a tensor of sizes ", shape_str(dense.sizes()), ", got ", sd);
  const auto usd = static_cast<std::size_t>(sd);
  DimVector flat_shape(static_cast<std::size_t>(dense.dim() - sd + 1));
  flat_shape[0] = prod(dense.sizes(), usd);
  for (int64_t d = sd; d < dense.dim(); ++d)
    flat_shape[static_cast<std::size_t>(d - sd + 1)] = dense.size(d);
  const Tensor flat = dense.reshape(flat_shape);
  // A position is stored when any of its dense elements is nonzero; the
  // positions are found on the device and only they are read back.
  const TensorOptions on_device = TensorOptions(DType::Int64).device(dense.device());
  Tensor picked = zeros({0}, on_device);
  std::vector<int64_t> positions;
  if (flat_shape[0] > 0) {
    NoGradGuard no_grad;
    Tensor mask = ne(flat, 0).to(DType::Int64);
    if (flat.dim() > 1) {
      DimVector rest;
      for (int64_t d = 1; d < flat.dim(); ++d) rest.push_back(d);
      mask = gt(mask.sum(rest), 0).to(DType::Int64);
    }
    picked = detail::flagged(mask).positions;
    positions = picked.to_vector<int64_t>();
  }
  const auto n = static_cast<int64_t>(positions.size());
  std::vector<int64_t> idx(usd * positions.size());
  for (int64_t j = 0; j < n; ++j) {
    int64_t rem = positions[static_cast<std::size_t>(j)];
    for (int64_t d = sd - 1; d >= 0; --d) {
      idx[static_cast<std::size_t>(d * n + j)] = rem % dense.size(d);
      rem /= dense.size(d);
    }
  }
  Tensor values = flat.index_select(0, picked);
  return make(from_vector(idx, {sd, n}, on_device), std::move(values), DimVector(dense.sizes()),
              true);
}

// --- state changes and copies -----------------------------------------------------

SparseTensor& SparseTensor::zero_() {
  Impl& s = impl();
  const bool leaf_grad = s.values.requires_grad() && s.values.is_leaf();
  BP_CHECK_T(AutogradError, !(leaf_grad && GradMode::is_enabled()),
             "[zero_] a leaf Variable that requires grad is being used in an in-place operation "
             "(the sparse tensor's values); use a no-grad guard");
  // As PyTorch: every dim becomes sparse (a hybrid tensor's dense dims
  // too), with indices [dim, 0] and values [0].
  s.sparse_dim = static_cast<int64_t>(s.sizes.size());
  s.indices = zeros({s.sparse_dim, 0}, TensorOptions(DType::Int64).device(device()));
  s.values = zeros({0}, TensorOptions(dtype()).device(device()));
  if (leaf_grad) s.values.requires_grad_();
  s.coalesced = true;
  return *this;
}

SparseTensor SparseTensor::clone() const {
  const Impl& s = impl();
  return make(s.indices.clone(), s.values.clone(), s.sizes, s.coalesced);
}

SparseTensor SparseTensor::detach() const {
  const Impl& s = impl();
  return make(s.indices, s.values.detach(), s.sizes, s.coalesced);
}

SparseTensor SparseTensor::to(Device device) const {
  const Impl& s = impl();
  if (device == this->device()) return *this;
  return make(s.indices.to(device), s.values.to(device), s.sizes, s.coalesced);
}

SparseTensor SparseTensor::to(DType dtype) const {
  const Impl& s = impl();
  if (dtype == this->dtype()) return *this;
  return make(s.indices, s.values.to(dtype), s.sizes, s.coalesced);
}

// --- autograd -------------------------------------------------------------------

SparseTensor& SparseTensor::requires_grad_(bool requires_grad) {
  impl().values.requires_grad_(requires_grad);
  return *this;
}

bool SparseTensor::requires_grad() const { return impl().values.requires_grad(); }

SparseTensor SparseTensor::grad() const {
  const Impl& s = impl();
  Tensor g = s.values.grad();
  if (!g.defined()) return SparseTensor();
  if (s.coalesced) return make(s.indices, std::move(g), s.sizes, true);
  // As PyTorch: the gradient at each distinct coordinate, the derivative by
  // the dense element there. Every stored duplicate of a coordinate has
  // that same gradient, so the first one's is taken (a sum would count it
  // once per duplicate).
  const CoalescePlan plan = plan_coalesce(s.indices);
  NoGradGuard no_grad;
  Tensor picked = g.index_select(0, plan.firsts);
  return make(plan.indices, std::move(picked), s.sizes, true);
}

}  // namespace bp
