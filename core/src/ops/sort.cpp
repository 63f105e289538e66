// sort, argsort, cumsum and unique_consecutive: the ARGSORT and CUMSUM
// kernels, and what the core builds on them.
#include <backplane/autograd.h>
#include <backplane/ops.h>

#include "../autograd/graph.h"
#include "../internal.h"

namespace bp {

namespace {

// Runs ARGSORT or CUMSUM along dim `d` of `a` into `out` (a's shape); a 0-d
// tensor goes as one element along a dim of size 1. `dir` is ARGSORT's
// direction (ints[1]), -1 for none.
void along_dim(Op op, const Tensor& a, const Tensor& out, int64_t d, int64_t dir = -1) {
  if (out.numel() == 0) return;
  bp_attrs attrs = detail::make_attrs();
  attrs.num_ints = dir >= 0 ? 2 : 1;
  attrs.ints[0] = a.dim() == 0 ? 0 : d;
  if (dir >= 0) attrs.ints[1] = dir;
  Backend& b = detail::backend_of(a);
  const Tensor in = a.dim() == 0 ? a.reshape({1}) : a;
  const Tensor o1 = a.dim() == 0 ? out.view({1}) : out;
  const bp_tensor i = detail::abi_descriptor(in, b.dl_device_type());
  const bp_tensor o = detail::abi_descriptor(o1, b.dl_device_type());
  call_kernel(op, a.dtype(), a.device(), {&i, 1}, {&o, 1}, attrs);
}

}  // namespace

namespace detail {

Flagged flagged(const Tensor& flags) {
  NoGradGuard no_grad;
  const int64_t n = flags.size(0);
  const TensorOptions on_device = TensorOptions(DType::Int64).device(flags.device());
  Flagged f;
  f.rank = cumsum(flags, 0).sub(1);
  f.count = f.rank.narrow(0, n - 1, 1).item<int64_t>() + 1;
  // Unflagged elements write their position to a spare slot past the end.
  const Tensor target = where(gt(flags, 0), f.rank, full({n}, f.count, on_device));
  f.positions = scatter(zeros({f.count + 1}, on_device), 0, target, arange(n, on_device))
                    .narrow(0, 0, f.count);
  return f;
}

Flagged consecutive_runs(const Tensor& x, int64_t d) {
  NoGradGuard no_grad;
  const int64_t n = x.size(d);
  const TensorOptions on_device = TensorOptions(DType::Int64).device(x.device());
  // Each slice against the one before it (slice 0 against itself), then
  // "any" over the other dims (the added last dim gives every rank some):
  // the same kernels whatever the sizes and strides.
  const Tensor before = index_select(x, d, arange(n, on_device).sub(1).clamp(0, std::nullopt));
  const Tensor differs = ne(x, before).unsqueeze(-1);
  DimVector others;
  for (int64_t k = 0; k < differs.dim(); ++k)
    if (k != d) others.push_back(k);
  Tensor starts = gt(differs.sum(others), 0).to(DType::Int64);
  starts.narrow(0, 0, 1).fill_(1);
  return flagged(starts);
}

}  // namespace detail

Tensor argsort(const Tensor& a, int64_t dim, bool descending, bool /*stable*/) {
  // Always stable: a stable order is one an unstable sort may give.
  const int64_t d = wrap_dim(dim, a.dim(), "argsort");
  Tensor out = detail::make_empty(a.sizes(), DType::Int64, a);
  along_dim(Op::Argsort, a, out, d, descending ? 1 : 0);
  return out;
}

std::pair<Tensor, Tensor> sort(const Tensor& a, int64_t dim, bool descending, bool stable) {
  const int64_t d = wrap_dim(dim, a.dim(), "sort");
  Tensor idx = argsort(a, d, descending, stable);
  Tensor values;
  {
    NoGradGuard no_grad;
    values = a.dim() == 0 ? a.clone() : gather(a, d, idx);
  }
  if (autograd::needs_grad({&a})) {
    const DimVector shape(a.sizes());
    auto node = autograd::make_node(
        "SortBackward0", {&a}, [shape, d](autograd::FunctionNode& n, std::vector<Tensor>& g) {
          if (shape.empty()) return std::vector<Tensor>{g[0]};
          Tensor ga = zeros(shape, TensorOptions(g[0].dtype()).device(g[0].device()));
          ga.scatter_(d, n.saved(0), g[0]);  // idx is a permutation of each line
          return std::vector<Tensor>{ga};
        });
    node->save(idx);
    autograd::set_history(values, node.get());
  }
  return {values, idx};
}

namespace {
// `g` with its elements along `d` in reverse order (a copy).
Tensor reversed(const Tensor& g, int64_t d) {
  const int64_t n = g.size(d);
  return index_select(g, d, arange(n - 1, -1, -1, TensorOptions(DType::Int64).device(g.device())));
}
}  // namespace

Tensor cumsum(const Tensor& a, int64_t dim, std::optional<DType> dtype) {
  const Tensor x = dtype ? a.to(*dtype) : a;
  const int64_t d = wrap_dim(dim, x.dim(), "cumsum");
  // The kernel sums bool and integers in int64; a narrower integer dtype
  // asked for is the same sums wrapped, by a conversion after.
  const DType sum_dtype = is_floating(x.dtype()) ? x.dtype() : DType::Int64;
  Tensor out = detail::make_empty(x.sizes(), sum_dtype, x);
  along_dim(Op::Cumsum, x, out, d);
  if (dtype && *dtype != sum_dtype) out = out.to(*dtype);
  if (autograd::needs_grad({&x})) {
    const int64_t rd = x.dim() == 0 ? -1 : d;
    auto node = autograd::make_node(
        "CumsumBackward0", {&x}, [rd](autograd::FunctionNode&, std::vector<Tensor>& g) {
          if (rd < 0 || g[0].numel() == 0) return std::vector<Tensor>{g[0]};
          // The sum of g from each position to the end of its line, as
          // PyTorch forms it: a running sum of the reversed line, reversed.
          return std::vector<Tensor>{reversed(cumsum(reversed(g[0], rd), rd), rd)};
        });
    autograd::set_history(out, node.get());
  }
  return out;
}

std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& a, bool return_inverse,
                                                      bool return_counts,
                                                      std::optional<int64_t> dim) {
  NoGradGuard no_grad;  // not differentiable, as in PyTorch
  BP_CHECK_INDEX(!dim || a.dim() > 0, "[unique_consecutive] dim ", dim.value_or(0),
                 " of a 0-d tensor: a 0-d tensor has no dims");
  const int64_t d = dim ? wrap_dim(*dim, a.dim(), "unique_consecutive") : 0;
  if (dim) {  // PyTorch's refusals of empty slices along other dims
    int64_t zero_dims = 0;
    for (int64_t k = 0; k < a.dim(); ++k) zero_dims += a.size(k) == 0;
    BP_CHECK(zero_dims <= 1, "[unique_consecutive] ", detail::describe_tensor(a),
             " has more than one dim of size 0, so unique cannot be applied");
    BP_CHECK(zero_dims == 0 || a.size(d) == 0, "[unique_consecutive] ", detail::describe_tensor(a),
             " has a dim of size 0 other than dim ", d, ", so unique cannot be applied");
  }
  // The slices compared: along `dim`, or the elements of the flattened tensor.
  const Tensor x = dim ? a : a.reshape({-1});
  const int64_t n = x.size(d);
  const TensorOptions on_device = TensorOptions(DType::Int64).device(a.device());
  Tensor out, inverse, counts;
  if (n == 0) {
    out = detail::make_empty(x.sizes(), a.dtype(), a);
    if (return_inverse) inverse = zeros(dim ? DimVector{0} : DimVector(a.sizes()), on_device);
    if (return_counts) counts = zeros({0}, on_device);
    return {out, inverse, counts};
  }
  const detail::Flagged runs = detail::consecutive_runs(x, d);
  out = index_select(x, d, runs.positions);
  if (return_inverse) inverse = dim ? runs.rank : runs.rank.reshape(a.sizes());
  if (return_counts)
    counts = scatter_add(zeros({runs.count}, on_device), 0, runs.rank, ones({n}, on_device));
  return {out, inverse, counts};
}

std::pair<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending, bool stable) const {
  return bp::sort(*this, dim, descending, stable);
}
Tensor Tensor::argsort(int64_t dim, bool descending, bool stable) const {
  return bp::argsort(*this, dim, descending, stable);
}
Tensor Tensor::cumsum(int64_t dim, std::optional<DType> dtype) const {
  return bp::cumsum(*this, dim, dtype);
}

}  // namespace bp
