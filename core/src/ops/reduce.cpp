// Reductions: sum, mean, prod, max, min, argmax, argmin.
#include <backplane/ops.h>

#include <algorithm>

#include "../autograd/graph.h"
#include "../internal.h"

namespace bp {

namespace {

// Which dims a reduction folds: all when `dims` is empty.
std::vector<bool> reduced_dims(const char* op, const Tensor& a, IntArrayRef dims) {
  const int64_t nd = a.dim();
  std::vector<bool> reduce(static_cast<std::size_t>(nd), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, nd, op);
    if (nd == 0) continue;
    BP_CHECK(!reduce[w], "[", op, "] dim ", w, " appears more than once in ", dims);
    reduce[w] = true;
  }
  return reduce;
}

// Runs a reduction kernel into a keepdim-shaped output, then drops the
// reduced dims unless keepdim.
Tensor reduce(Op op, const Tensor& a, const std::vector<bool>& reduce, bool keepdim,
              DType out_dtype, const bp_attrs& attrs = detail::make_attrs()) {
  const int64_t nd = a.dim();
  DimVector kept(a.sizes());
  for (int64_t d = 0; d < nd; ++d)
    if (reduce[d]) kept[d] = 1;
  Tensor out = detail::make_empty(kept, out_dtype, a);
  if (out.numel() > 0) {
    Backend& b = detail::backend_of(a);
    const bp_tensor i = detail::abi_descriptor(a, b.dl_device_type());
    const bp_tensor o = detail::abi_descriptor(out, b.dl_device_type());
    call_kernel(op, a.dtype(), a.device(), {&i, 1}, {&o, 1}, attrs);
  }
  if (keepdim) return out;
  DimVector shape;
  for (int64_t d = 0; d < nd; ++d)
    if (!reduce[d]) shape.push_back(a.size(d));
  detail::reshape_fresh(out, std::move(shape));
  return out;
}

DType accumulate_dtype(DType d) { return is_floating(d) ? d : DType::Int64; }

// The keepdim shape of a reduction of `shape` over `mask`.
DimVector kept_shape(IntArrayRef shape, const std::vector<bool>& mask) {
  DimVector kept(shape);
  for (std::size_t d = 0; d < kept.size(); ++d)
    if (mask[d]) kept[d] = 1;
  return kept;
}

// A gradient of a reduction's result, seen with the input's shape.
Tensor expand_back(const Tensor& g, const DimVector& kept, const DimVector& shape) {
  return g.reshape(kept).expand(shape);
}

// The dims `mask` marks, as a list.
std::vector<int64_t> reduced_list(const std::vector<bool>& mask) {
  std::vector<int64_t> dims;
  for (std::size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) dims.push_back(static_cast<int64_t>(d));
  return dims;
}

// d prod(x) / d x_i over the reduced dims, as PyTorch defines it (AG-16):
// the product of the other elements. prod / x_i where x has no zero; where
// one element is zero, that element gets the product of the others and the
// rest 0; with two or more zeros, all 0.
Tensor prod_grad_factor(const Tensor& x, const std::vector<bool>& mask, const DimVector& kept) {
  const Tensor nonzero = ne(x, 0);
  const Tensor x_safe = where(nonzero, x, ones_like(x));
  const bool all = std::find(mask.begin(), mask.end(), false) == mask.end();
  int64_t dim = 0;
  for (std::size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) dim = static_cast<int64_t>(d);
  const Tensor others = all ? prod(x_safe).reshape(kept) : prod(x_safe, dim, true);
  const Tensor zeros_in_slice = logical_not(nonzero).sum(reduced_list(mask), true);
  const Tensor zero = zeros_like(x);
  return where(nonzero, where(eq(zeros_in_slice, 0), others.div(x_safe), zero),
               where(eq(zeros_in_slice, 1), others.expand(x.sizes()), zero));
}

// sum, mean, prod, max, min over `mask`: the gradient spreads back over the
// reduced elements (evenly for mean; to the extremal ones for max/min).
void record_reduction(Op op, const char* name, const Tensor& a, const std::vector<bool>& mask,
                      const Tensor& out, double scale = 1.0) {
  using autograd::FunctionNode;
  const DimVector shape(a.sizes()), kept = kept_shape(a.sizes(), mask);
  auto node = autograd::make_node(name, {&a}, [=](FunctionNode& n, std::vector<Tensor>& g) {
    const Tensor gk = expand_back(g[0], kept, shape);
    switch (op) {
      case Op::Sum:
        return std::vector<Tensor>{scale == 1.0 ? gk : gk.mul(scale)};
      case Op::Prod:
        return std::vector<Tensor>{gk.mul(prod_grad_factor(n.saved(0), mask, kept))};
      default: {  // Max, Min: evenly among the elements equal to the extremum
        const Tensor x = n.saved(0), y = n.saved(1).reshape(kept);
        // A NaN result was picked from the NaNs (AG-16), which == never matches.
        const Tensor hit = logical_or(eq(x, y), logical_and(ne(x, x), ne(y, y))).to(g[0].dtype());
        const Tensor ties = hit.sum(reduced_list(mask), true);
        return std::vector<Tensor>{gk.mul(hit).div(ties)};
      }
    }
  });
  const bool save = op == Op::Prod || op == Op::Max || op == Op::Min;
  node->save(save ? a : Tensor());
  node->save(save ? out : Tensor());
  autograd::set_history(out, node.get());
}

void check_not_empty(const char* op, const Tensor& a, const std::vector<bool>& reduce) {
  for (int64_t d = 0; d < a.dim(); ++d)
    BP_CHECK_INDEX(!(reduce[d] && a.size(d) == 0), "[", op, "] cannot reduce dim ", d,
                   " of size 0 of ", detail::describe_tensor(a),
                   ": there is no identity for this reduction");
}

bp_attrs dim_attr(int64_t dim) {
  bp_attrs attrs = detail::make_attrs();
  attrs.num_ints = 1;
  attrs.ints[0] = dim;
  return attrs;
}

Tensor arg_reduce(Op op, const char* name, const Tensor& a, std::optional<int64_t> dim,
                  bool keepdim) {
  if (!dim) {
    // Over the flattened tensor; keepdim keeps every dim at size 1.
    BP_CHECK_INDEX(a.numel() > 0, "[", name, "] cannot take the ", name, " of an empty tensor ",
                   detail::describe_tensor(a), " without a dim");
    Tensor flat = a.reshape({-1});
    Tensor r = arg_reduce(op, name, flat, 0, false);
    if (keepdim) detail::reshape_fresh(r, DimVector(static_cast<std::size_t>(a.dim()), 1));
    return r;
  }
  const int64_t d = wrap_dim(*dim, a.dim(), name);
  std::vector<bool> mask(static_cast<std::size_t>(a.dim()), false);
  if (a.dim() > 0) mask[d] = true;
  check_not_empty(name, a, mask);
  return reduce(op, a, mask, keepdim, DType::Int64, dim_attr(a.dim() ? d : 0));
}

}  // namespace

Tensor sum(const Tensor& a, IntArrayRef dims, bool keepdim) {
  const std::vector<bool> mask = reduced_dims("sum", a, dims);
  Tensor out = reduce(Op::Sum, a, mask, keepdim, accumulate_dtype(a.dtype()));
  if (autograd::needs_grad({&a}))
    record_reduction(Op::Sum, dims.empty() ? "SumBackward0" : "SumBackward1", a, mask, out);
  return out;
}
Tensor sum(const Tensor& a) { return sum(a, IntArrayRef(), false); }

Tensor mean(const Tensor& a, IntArrayRef dims, bool keepdim) {
  BP_CHECK_TYPE(is_floating(a.dtype()), "[mean] needs a floating input, got ",
                detail::describe_tensor(a), "; convert it first with .to(float32)");
  const std::vector<bool> mask = reduced_dims("mean", a, dims);
  int64_t count = 1;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (mask[d]) count *= a.size(d);
  Tensor s;
  {
    NoGradGuard no_grad;
    s = reduce(Op::Sum, a, mask, keepdim, a.dtype());
    // The mean of nothing is NaN, as 0/0.
    s.div_(detail::full_on({}, static_cast<double>(count), a.dtype(), a));
  }
  if (autograd::needs_grad({&a}))
    record_reduction(Op::Sum, dims.empty() ? "MeanBackward0" : "MeanBackward1", a, mask, s,
                     1.0 / static_cast<double>(count));
  return s;
}
Tensor mean(const Tensor& a) { return mean(a, IntArrayRef(), false); }

Tensor prod(const Tensor& a, int64_t dim, bool keepdim) {
  std::vector<bool> mask(static_cast<std::size_t>(a.dim()), false);
  const int64_t d = wrap_dim(dim, a.dim(), "prod");
  if (a.dim() > 0) mask[d] = true;
  Tensor out = reduce(Op::Prod, a, mask, keepdim, accumulate_dtype(a.dtype()));
  if (autograd::needs_grad({&a})) record_reduction(Op::Prod, "ProdBackward1", a, mask, out);
  return out;
}
Tensor prod(const Tensor& a) {
  const std::vector<bool> mask = reduced_dims("prod", a, {});
  Tensor out = reduce(Op::Prod, a, mask, false, accumulate_dtype(a.dtype()));
  if (autograd::needs_grad({&a})) record_reduction(Op::Prod, "ProdBackward0", a, mask, out);
  return out;
}

Tensor max(const Tensor& a) {
  BP_CHECK_INDEX(a.numel() > 0, "[max] cannot take the max of an empty tensor ",
                 detail::describe_tensor(a), " without a dim; give a dim or check numel() first");
  const std::vector<bool> mask = reduced_dims("max", a, {});
  Tensor out = reduce(Op::Max, a, mask, false, a.dtype());
  if (autograd::needs_grad({&a})) record_reduction(Op::Max, "MaxBackward1", a, mask, out);
  return out;
}
Tensor min(const Tensor& a) {
  BP_CHECK_INDEX(a.numel() > 0, "[min] cannot take the min of an empty tensor ",
                 detail::describe_tensor(a), " without a dim; give a dim or check numel() first");
  const std::vector<bool> mask = reduced_dims("min", a, {});
  Tensor out = reduce(Op::Min, a, mask, false, a.dtype());
  if (autograd::needs_grad({&a})) record_reduction(Op::Min, "MinBackward1", a, mask, out);
  return out;
}

namespace {
// max or min over one dim: the values, and the index each came from, which
// is also where the gradient goes.
std::pair<Tensor, Tensor> extremum(Op value_op, Op index_op, const char* name,
                                   const char* grad_name, const Tensor& a, int64_t dim,
                                   bool keepdim) {
  Tensor idx = arg_reduce(index_op, name, a, dim, keepdim);
  std::vector<bool> mask(static_cast<std::size_t>(a.dim()), false);
  const int64_t d = wrap_dim(dim, a.dim(), name);
  if (a.dim() > 0) mask[d] = true;
  Tensor values = reduce(value_op, a, mask, keepdim, a.dtype());
  if (autograd::needs_grad({&a})) {
    const DimVector shape(a.sizes()), kept = kept_shape(a.sizes(), mask);
    const int64_t dd = a.dim() == 0 ? 0 : d;
    auto node = autograd::make_node(
        grad_name, {&a}, [=](autograd::FunctionNode& n, std::vector<Tensor>& g) {
          if (shape.size() == 0) return std::vector<Tensor>{g[0].reshape(shape)};
          Tensor ga = zeros(shape, TensorOptions(g[0].dtype()).device(g[0].device()));
          ga.scatter_(dd, n.saved(0).reshape(kept), g[0].reshape(kept));
          return std::vector<Tensor>{ga};
        });
    node->save(idx);
    autograd::set_history(values, node.get());
  }
  return {values, idx};
}
}  // namespace

std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) {
  return extremum(Op::Max, Op::Argmax, "max", "MaxBackward0", a, dim, keepdim);
}
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) {
  return extremum(Op::Min, Op::Argmin, "min", "MinBackward0", a, dim, keepdim);
}

Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce(Op::Argmax, "argmax", a, dim, keepdim);
}
Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce(Op::Argmin, "argmin", a, dim, keepdim);
}

Tensor Tensor::sum() const { return bp::sum(*this); }
Tensor Tensor::sum(IntArrayRef dims, bool keepdim) const { return bp::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return bp::mean(*this); }
Tensor Tensor::mean(IntArrayRef dims, bool keepdim) const { return bp::mean(*this, dims, keepdim); }
Tensor Tensor::max() const { return bp::max(*this); }
Tensor Tensor::min() const { return bp::min(*this); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return bp::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return bp::argmin(*this, dim, keepdim);
}

}  // namespace bp
