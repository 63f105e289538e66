// Sparse COO tensors: construction and its checks, the metadata, coalesce,
// to_dense and to_sparse (SP-1).
#include "coo_internal.h"

#include <backplane/autograd.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <sstream>

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

// The coordinates on the host, row-major [sparse_dim][nnz].
std::vector<int64_t> host_indices(const Tensor& indices) {
  NoGradGuard no_grad;
  return indices.to_vector<int64_t>();
}

void check_index_args(const Tensor& indices, const Tensor& values) {
  BP_CHECK_TYPE(indices.dtype() == DType::Int64,
                "[sparse_coo_tensor] indices must be int64, got ", indices.dtype());
  BP_CHECK(indices.dim() == 2, "[sparse_coo_tensor] indices must be sparse_dim x nnz, but got: ",
           shape_str(indices.sizes()));
  BP_CHECK(values.dim() >= 1, "[sparse_coo_tensor] values must be nnz x dense sizes, got a 0-d tensor");
  BP_CHECK(indices.size(1) == values.size(0),
           "[sparse_coo_tensor] indices and values must have same nnz, but got nnz from indices: ",
           indices.size(1), ", nnz from values: ", values.size(0));
  BP_CHECK(indices.device() == values.device(),
           "[sparse_coo_tensor] indices and values must be on one device, got ",
           to_string(indices.device()), " and ", to_string(values.device()));
}

// The checks of the sized form; `host` holds the indices when the caller
// has copied them already.
SparseTensor checked(const Tensor& indices, const Tensor& values, IntArrayRef size,
                     std::optional<DType> dtype, std::vector<int64_t> host) {
  const int64_t sd = indices.size(0);
  const int64_t dense_dim = values.dim() - 1;
  BP_CHECK(static_cast<int64_t>(size.size()) == sd + dense_dim,
           "[sparse_coo_tensor] number of dimensions must be sparse_dim (", sd, ") + dense_dim (",
           dense_dim, "), but got ", size.size());
  for (int64_t d = 0; d < dense_dim; ++d)
    BP_CHECK(size[static_cast<std::size_t>(sd + d)] == values.size(d + 1),
             "[sparse_coo_tensor] size ", shape_str(size), " does not match the values' dense sizes ",
             shape_str(values.sizes()), " at dim ", sd + d);
  for (std::size_t d = 0; d < size.size(); ++d)
    BP_CHECK(size[d] >= 0, "[sparse_coo_tensor] negative size in ", shape_str(size));
  const int64_t nnz = indices.size(1);
  if (nnz > 0) {
    const std::vector<int64_t> h = host.empty() ? host_indices(indices) : std::move(host);
    for (int64_t d = 0; d < sd; ++d) {
      const auto row = h.begin() + d * nnz;
      const auto [lo, hi] = std::minmax_element(row, row + nnz);
      BP_CHECK_INDEX(*lo >= 0, "[sparse_coo_tensor] found negative index ", *lo, " for dim ", d);
      BP_CHECK_INDEX(*hi < size[static_cast<std::size_t>(d)],
                     "[sparse_coo_tensor] size is inconsistent with indices: for dim ", d,
                     ", size is ", size[static_cast<std::size_t>(d)], " but found index ", *hi);
    }
  }
  // The values' memory is shared, as PyTorch shares it; their autograd
  // state is not: flagging the sparse tensor must not flag the caller's
  // tensor. Values that already require grad stay in their graph.
  Tensor v = dtype && *dtype != values.dtype() ? values.to(*dtype) : values;
  if (!v.requires_grad()) v = v.detach();
  return make(indices, std::move(v), DimVector(size), false);
}

}  // namespace

SparseTensor sparse_coo_tensor(const Tensor& indices, const Tensor& values, IntArrayRef size,
                               std::optional<DType> dtype) {
  check_index_args(indices, values);
  return checked(indices, values, size, dtype, {});
}

SparseTensor sparse_coo_tensor(const Tensor& indices, const Tensor& values) {
  check_index_args(indices, values);
  const int64_t sd = indices.size(0);
  const int64_t nnz = indices.size(1);
  DimVector size(static_cast<std::size_t>(sd + values.dim() - 1), 0);
  std::vector<int64_t> h;
  if (nnz > 0) {
    h = host_indices(indices);
    for (int64_t d = 0; d < sd; ++d) {
      const auto row = h.begin() + d * nnz;
      const int64_t hi = *std::max_element(row, row + nnz);
      BP_CHECK_INDEX(hi < std::numeric_limits<int64_t>::max(), "[sparse_coo_tensor] index ", hi,
                     " for dim ", d, " leaves no size to infer");
      size[static_cast<std::size_t>(d)] = std::max<int64_t>(hi + 1, 0);
    }
  }
  for (int64_t d = 1; d < values.dim(); ++d) size[static_cast<std::size_t>(sd + d - 1)] = values.size(d);
  // The bounds still matter: a negative index is refused.
  return checked(indices, values, size, std::nullopt, std::move(h));
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

// Where each stored element goes when coalescing: the distinct coordinates
// in lexicographic order ([sparse_dim, unique] row-major), the first stored
// element of each, and each stored element's rank among them.
struct CoalescePlan {
  std::vector<int64_t> indices, firsts, segment;
  int64_t unique = 0;
};

CoalescePlan plan_coalesce(const Tensor& indices_dev) {
  const int64_t sd = indices_dev.size(0);
  const int64_t nnz = indices_dev.size(1);
  const std::vector<int64_t> h = host_indices(indices_dev);
  auto at = [&](int64_t d, int64_t j) { return h[static_cast<std::size_t>(d * nnz + j)]; };
  // Columns sorted lexicographically: no linear index, so no overflow
  // whatever the sizes.
  std::vector<int64_t> order(static_cast<std::size_t>(nnz));
  std::iota(order.begin(), order.end(), 0);
  auto less = [&](int64_t a, int64_t b) {
    for (int64_t d = 0; d < sd; ++d)
      if (at(d, a) != at(d, b)) return at(d, a) < at(d, b);
    return false;
  };
  std::stable_sort(order.begin(), order.end(), less);
  CoalescePlan plan;
  plan.segment.resize(static_cast<std::size_t>(nnz));
  for (std::size_t p = 0; p < order.size(); ++p) {
    if (p == 0 || less(order[p - 1], order[p])) plan.firsts.push_back(order[p]);
    plan.segment[static_cast<std::size_t>(order[p])] = static_cast<int64_t>(plan.firsts.size()) - 1;
  }
  plan.unique = static_cast<int64_t>(plan.firsts.size());
  plan.indices.resize(static_cast<std::size_t>(sd * plan.unique));
  for (int64_t d = 0; d < sd; ++d)
    for (int64_t u = 0; u < plan.unique; ++u)
      plan.indices[static_cast<std::size_t>(d * plan.unique + u)] =
          at(d, plan.firsts[static_cast<std::size_t>(u)]);
  return plan;
}

}  // namespace

SparseTensor SparseTensor::coalesce() const {
  const Impl& s = impl();
  if (s.coalesced) return *this;
  const CoalescePlan plan = plan_coalesce(s.indices);
  const TensorOptions on_device = TensorOptions(DType::Int64).device(device());
  Tensor indices = from_vector(plan.indices, {s.sparse_dim, plan.unique}, on_device);
  // Duplicates are summed on the device: values never leave it.
  const Tensor seg = from_vector(plan.segment, {s.indices.size(1)}, on_device);
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
  // A position is stored when any of its dense elements is nonzero.
  std::vector<int64_t> nonzero;
  {
    NoGradGuard no_grad;
    Tensor mask = ne(flat, 0).to(DType::Int64);
    if (flat.dim() > 1) {
      DimVector rest;
      for (int64_t d = 1; d < flat.dim(); ++d) rest.push_back(d);
      mask = mask.sum(rest);
    }
    nonzero = mask.to_vector<int64_t>();
  }
  std::vector<int64_t> positions;
  for (std::size_t p = 0; p < nonzero.size(); ++p)
    if (nonzero[p]) positions.push_back(static_cast<int64_t>(p));
  const auto n = static_cast<int64_t>(positions.size());
  std::vector<int64_t> idx(usd * positions.size());
  for (int64_t j = 0; j < n; ++j) {
    int64_t rem = positions[static_cast<std::size_t>(j)];
    for (int64_t d = sd - 1; d >= 0; --d) {
      idx[static_cast<std::size_t>(d * n + j)] = rem % dense.size(d);
      rem /= dense.size(d);
    }
  }
  const TensorOptions on_device = TensorOptions(DType::Int64).device(dense.device());
  Tensor values = flat.index_select(0, from_vector(positions, {n}, on_device));
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
  DimVector vshape(s.values.sizes());
  vshape[0] = 0;
  s.indices = zeros({s.sparse_dim, 0}, TensorOptions(DType::Int64).device(device()));
  s.values = zeros(vshape, TensorOptions(dtype()).device(device()));
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
  const TensorOptions on_device = TensorOptions(DType::Int64).device(device());
  NoGradGuard no_grad;
  Tensor picked = g.index_select(0, from_vector(plan.firsts, {plan.unique}, on_device));
  return make(from_vector(plan.indices, {s.sparse_dim, plan.unique}, on_device), std::move(picked),
              s.sizes, true);
}

}  // namespace bp
