// Indexing by tensors: gather, scatter, index_select.
#include <backplane/ops.h>

#include "../autograd/graph.h"
#include "../internal.h"

namespace bp {

namespace {

bp_attrs dim_attrs(int64_t dim, int64_t reduction = 0) {
  bp_attrs attrs = detail::make_attrs();
  attrs.num_ints = 2;
  attrs.ints[0] = dim;
  attrs.ints[1] = reduction;
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
          int64_t dim, int64_t reduction = 0) {
  Backend& b = detail::backend_of(out);
  bp_tensor in[3];
  int n = 0;
  for (const Tensor* t : inputs) in[n++] = detail::abi_descriptor(*t, b.dl_device_type());
  const bp_tensor o = detail::abi_descriptor(out, b.dl_device_type());
  call_kernel(op, dtype, out.device(), std::span<const bp_tensor>(in, n), {&o, 1},
              dim_attrs(dim, reduction));
}

// The index of index_select expanded to the gradient's shape along `dim`,
// for scattering the gradient back.
Tensor expand_index(const Tensor& index, const Tensor& like, int64_t dim) {
  DimVector shape(static_cast<std::size_t>(like.dim()), 1);
  shape[dim] = index.numel();
  return index.reshape(shape).expand(like.sizes());
}

}  // namespace

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  detail::check_same_device("gather", a, index);
  check_index("gather", index);
  const int64_t d = wrap_dim(dim, a.dim(), "gather");
  check_gather_shape("gather", a, d, index);
  Tensor out = detail::make_empty(index.sizes(), a.dtype(), a);
  if (out.numel() > 0) {
    const Tensor s = a.dim() == 0 ? a.reshape({1}) : a;
    const Tensor i = index.dim() == 0 ? index.reshape({1}) : index;
    const Tensor o = index.dim() == 0 ? out.view({1}) : out;
    call(Op::Gather, a.dtype(), o, {&s, &i}, a.dim() == 0 ? 0 : d);
  }
  if (autograd::needs_grad({&a})) {
    const DimVector shape(a.sizes());
    auto node = autograd::make_node(
        "GatherBackward0", {&a}, [d, shape](autograd::FunctionNode& n, std::vector<Tensor>& g) {
          const Tensor idx = n.saved(0);
          Tensor ga = zeros(shape, TensorOptions(g[0].dtype()).device(g[0].device()));
          return std::vector<Tensor>{ga.scatter_add_(d, idx, g[0])};
        });
    node->save(index);
    autograd::set_history(out, node.get());
  }
  return out;
}

namespace {
// scatter_ and scatter_add_ without autograd: checks, then the kernel.
void scatter_impl(const char* op, Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                  int64_t reduction) {
  detail::check_same_device(op, self, index);
  detail::check_same_device(op, self, src);
  check_index(op, index);
  BP_CHECK_TYPE(src.dtype() == self.dtype(), "[", op, "] src must have self's dtype ", self.dtype(),
                ", got ", detail::describe_tensor(src));
  const int64_t d = wrap_dim(dim, self.dim(), op);
  check_gather_shape(op, self, d, index);
  BP_CHECK(src.dim() == index.dim() || src.dim() == 0, "[", op,
           "] src must have the index's "
           "rank ",
           index.dim(), ", got ", detail::describe_tensor(src));
  for (int64_t k = 0; k < index.dim() && src.dim() == index.dim(); ++k)
    BP_CHECK_INDEX(index.size(k) <= src.size(k), "[", op, "] index size ", index.size(k),
                   " at dim ", k, " exceeds src's size ", src.size(k));
  detail::check_writable(op, self);
  detail::check_no_partial_overlap(op, self, src);
  if (index.numel() > 0) {
    // src seen with the index's shape (its leading part; a 0-d src expands).
    NoGradGuard no_grad;
    const Tensor s =
        src.dim() == 0 ? src.expand(index.sizes()) : src.as_strided(index.sizes(), src.strides());
    const Tensor self1 = self.dim() == 0 ? self.reshape({1}) : self;
    const Tensor i = index.dim() == 0 ? index.reshape({1}) : index;
    const Tensor s1 = index.dim() == 0 ? s.reshape({1}) : s;
    call(Op::Scatter, self.dtype(), self1, {&i, &s1}, self.dim() == 0 ? 0 : d, reduction);
  }
  self.impl()->version->bump();
}
}  // namespace

Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Tensor& src) {
  if (autograd::record_inplace("scatter_", *this, {&src}, [&](const Tensor& old) {
        return bp::scatter(old, dim, index, src);
      }))
    return *this;
  scatter_impl("scatter_", *this, dim, index, src, 0);
  return *this;
}

Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  if (autograd::record_inplace("scatter_add_", *this, {&src}, [&](const Tensor& old) {
        return bp::scatter_add(old, dim, index, src);
      }))
    return *this;
  scatter_impl("scatter_add_", *this, dim, index, src, 1);
  return *this;
}

Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Scalar& value) {
  return scatter_(dim, index, detail::full_on({}, value, dtype(), *this));
}

Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = a.clone();
    scatter_impl("scatter", out, dim, index, src, 0);
  }
  if (autograd::needs_grad({&a, &src})) {
    const int64_t d = wrap_dim(dim, a.dim(), "scatter");
    auto node = autograd::make_node("ScatterBackward0", {&a, &src},
                                    [d](autograd::FunctionNode& n, std::vector<Tensor>& g) {
                                      const Tensor idx = n.saved(0);
                                      Tensor ga, gs;
                                      if (n.needs_grad(0))
                                        ga = bp::scatter(g[0], d, idx, Scalar(0.0));
                                      if (n.needs_grad(1)) gs = g[0].gather(d, idx);
                                      return std::vector<Tensor>{ga, gs};
                                    });
    node->save(index);
    autograd::set_history(out, node.get());
  }
  return out;
}

Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = a.clone();
    scatter_impl("scatter_add", out, dim, index, src, 1);
  }
  if (autograd::needs_grad({&a, &src})) {
    const int64_t d = wrap_dim(dim, a.dim(), "scatter_add");
    auto node = autograd::make_node("ScatterAddBackward0", {&a, &src},
                                    [d](autograd::FunctionNode& n, std::vector<Tensor>& g) {
                                      Tensor gs;
                                      if (n.needs_grad(1)) gs = g[0].gather(d, n.saved(0));
                                      return std::vector<Tensor>{g[0], gs};
                                    });
    node->save(index);
    autograd::set_history(out, node.get());
  }
  return out;
}

Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Scalar& value) {
  return scatter(a, dim, index, detail::full_on({}, value, a.dtype(), a));
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
  // A 0-d result has one element, which exactly one index writes: any other
  // count would leave it unwritten (or drop values), as PyTorch refuses.
  BP_CHECK_INDEX(a.dim() != 0 || index.numel() == 1,
                 "[index_select] Index to scalar can have only 1 value, got ", index.numel(),
                 " value(s)");
  const Tensor s = a.dim() == 0 ? a.reshape({1}) : a;
  DimVector shape(s.sizes());
  shape[a.dim() == 0 ? 0 : d] = index.numel();
  Tensor out = detail::make_empty(shape, a.dtype(), a);
  if (out.numel() > 0) call(Op::IndexSelect, a.dtype(), out, {&s, &index}, a.dim() == 0 ? 0 : d);
  if (a.dim() == 0) detail::reshape_fresh(out, DimVector());
  if (autograd::needs_grad({&a})) {
    const DimVector shape(s.sizes());
    const DimVector a_shape(a.sizes());
    const int64_t dd = a.dim() == 0 ? 0 : d;
    auto node = autograd::make_node(
        "IndexSelectBackward0", {&a},
        [dd, shape, a_shape](autograd::FunctionNode& n, std::vector<Tensor>& g) {
          const Tensor idx = n.saved(0);
          const Tensor go =
              g[0].reshape(DimVector(g[0].dim() == 0 ? DimVector{1} : DimVector(g[0].sizes())));
          Tensor ga = zeros(shape, TensorOptions(g[0].dtype()).device(g[0].device()));
          ga.scatter_add_(dd, expand_index(idx, go, dd), go);
          return std::vector<Tensor>{ga.reshape(a_shape)};
        });
    node->save(index);
    autograd::set_history(out, node.get());
  }
  return out;
}

Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  return bp::gather(*this, dim, index);
}
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return bp::index_select(*this, dim, index);
}

}  // namespace bp
