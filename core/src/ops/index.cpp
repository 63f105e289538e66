// Indexing by tensors: gather, scatter, index_select.
#include <backplane/ops.h>

#include "../internal.h"

namespace bp {

namespace {

bp_attrs dim_attrs(int64_t dim) {
  bp_attrs attrs = detail::make_attrs();
  attrs.num_ints = 2;
  attrs.ints[0] = dim;
  attrs.ints[1] = 0;
  return attrs;
}

void check_index(const char* op, const Tensor& index) {
  BP_CHECK_TYPE(index.dtype() == DType::Int64, "[", op, "] the index must be int64, got ",
                detail::describe_tensor(index), "; convert it with .to(int64)");
}

// gather/scatter's rule: the index has self's rank, and no dim but `dim`
// larger than self's (PyTorch's).
void check_gather_shape(const char* op, const Tensor& self, int64_t dim, const Tensor& index) {
  BP_CHECK(index.dim() == self.dim() || (self.dim() == 0 && index.dim() <= 1), "[", op,
           "] the index must have as many dims as self: got ", detail::describe_tensor(index),
           " for ", detail::describe_tensor(self));
  for (int64_t d = 0; d < index.dim() && self.dim() > 0; ++d)
    BP_CHECK_INDEX(d == dim || index.size(d) <= self.size(d), "[", op, "] index size ",
                   index.size(d), " at dim ", d, " exceeds self's size ", self.size(d));
}

void call(Op op, DType dtype, const Tensor& out, std::initializer_list<const Tensor*> inputs,
          int64_t dim) {
  Backend& b = detail::backend_of(out.device());
  bp_tensor in[3];
  int n = 0;
  for (const Tensor* t : inputs) in[n++] = detail::describe(*t, b.dl_device_type());
  const bp_tensor o = detail::describe(out, b.dl_device_type());
  call_kernel(op, dtype, out.device(), std::span<const bp_tensor>(in, n), {&o, 1},
              dim_attrs(dim));
}

}  // namespace

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  detail::check_same_device("gather", a, index);
  check_index("gather", index);
  const int64_t d = wrap_dim(dim, a.dim(), "gather");
  check_gather_shape("gather", a, d, index);
  Tensor out = detail::make_empty(index.sizes(), a.dtype(), a.device());
  if (out.numel() > 0) {
    const Tensor s = a.dim() == 0 ? a.reshape({1}) : a;
    const Tensor i = index.dim() == 0 ? index.reshape({1}) : index;
    const Tensor o = index.dim() == 0 ? out.view({1}) : out;
    call(Op::Gather, a.dtype(), o, {&s, &i}, a.dim() == 0 ? 0 : d);
  }
  return out;
}

Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_same_device("scatter_", *this, index);
  detail::check_same_device("scatter_", *this, src);
  check_index("scatter_", index);
  BP_CHECK_TYPE(src.dtype() == dtype(), "[scatter_] src must have self's dtype ", dtype(),
                ", got ", detail::describe_tensor(src));
  const int64_t d = wrap_dim(dim, this->dim(), "scatter_");
  check_gather_shape("scatter_", *this, d, index);
  for (int64_t k = 0; k < index.dim() && src.dim() == index.dim(); ++k)
    BP_CHECK_INDEX(index.size(k) <= src.size(k), "[scatter_] index size ", index.size(k),
                   " at dim ", k, " exceeds src's size ", src.size(k));
  BP_CHECK(src.dim() == index.dim() || src.dim() == 0, "[scatter_] src must have the index's "
           "rank ", index.dim(), ", got ", detail::describe_tensor(src));
  detail::check_writable("scatter_", *this);
  detail::check_no_partial_overlap("scatter_", *this, src);
  if (index.numel() > 0) {
    // src seen with the index's shape (its leading part; a 0-d src expands).
    const Tensor s = src.dim() == 0 ? src.expand(index.sizes())
                                    : src.as_strided(index.sizes(), src.strides());
    const Tensor self1 = this->dim() == 0 ? reshape({1}) : *this;
    const Tensor i = index.dim() == 0 ? index.reshape({1}) : index;
    const Tensor s1 = index.dim() == 0 ? s.reshape({1}) : s;
    call(Op::Scatter, dtype(), self1, {&i, &s1}, this->dim() == 0 ? 0 : d);
  }
  impl_->version->bump();
  return *this;
}

Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Scalar& value) {
  return scatter_(dim, index, scalar_tensor(value, TensorOptions(dtype()).device(device())));
}

Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = a.clone();
  out.scatter_(dim, index, src);
  return out;
}

Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Scalar& value) {
  Tensor out = a.clone();
  out.scatter_(dim, index, value);
  return out;
}

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index_in) {
  detail::check_same_device("index_select", a, index_in);
  BP_CHECK_TYPE(index_in.dtype() == DType::Int64 || index_in.dtype() == DType::Int32,
                "[index_select] the index must be int64 or int32, got ",
                detail::describe_tensor(index_in));
  BP_CHECK(index_in.dim() <= 1, "[index_select] the index must be 1-D, got ",
           detail::describe_tensor(index_in));
  const Tensor index = index_in.to(DType::Int64).reshape({-1});
  const int64_t d = wrap_dim(dim, a.dim(), "index_select");
  const Tensor s = a.dim() == 0 ? a.reshape({1}) : a;
  DimVector shape(s.sizes());
  shape[a.dim() == 0 ? 0 : d] = index.numel();
  Tensor out = detail::make_empty(shape, a.dtype(), a.device());
  if (out.numel() > 0) call(Op::IndexSelect, a.dtype(), out, {&s, &index}, a.dim() == 0 ? 0 : d);
  if (a.dim() == 0) detail::reshape_fresh(out, DimVector());
  return out;
}

Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return bp::gather(*this, dim, index); }
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return bp::index_select(*this, dim, index);
}

}  // namespace bp
