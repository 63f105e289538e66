// Reductions: sum over all elements or over dims.
#include <backplane/ops.h>

#include "../internal.h"

namespace bp {

Tensor sum(const Tensor& a, IntArrayRef dims, bool keepdim) {
  const int64_t nd = a.dim();
  std::vector<bool> reduce(static_cast<std::size_t>(nd), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, nd, "sum");
    if (nd == 0) continue;
    BP_CHECK(!reduce[w], "[sum] dim ", w, " appears more than once in ", dims);
    reduce[w] = true;
  }
  DimVector kept(a.sizes());
  for (int64_t d = 0; d < nd; ++d)
    if (reduce[d]) kept[d] = 1;
  const DType out_dtype = is_floating(a.dtype()) ? a.dtype() : DType::Int64;
  Tensor out = detail::make_empty(kept, out_dtype, a.device());
  Backend& b = detail::backend_of(a.device());
  const bp_tensor i = detail::describe(a, b.dl_device_type());
  const bp_tensor o = detail::describe(out, b.dl_device_type());
  call_kernel(Op::Sum, a.dtype(), a.device(), {&i, 1}, {&o, 1}, detail::make_attrs());
  if (keepdim) return out;
  DimVector shape;
  for (int64_t d = 0; d < nd; ++d)
    if (!reduce[d]) shape.push_back(a.size(d));
  detail::reshape_fresh(out, std::move(shape));
  return out;
}

Tensor sum(const Tensor& a) { return sum(a, IntArrayRef(), false); }

Tensor Tensor::sum() const { return bp::sum(*this); }
Tensor Tensor::sum(IntArrayRef dims, bool keepdim) const { return bp::sum(*this, dims, keepdim); }

}  // namespace bp
