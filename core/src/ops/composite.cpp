// Composite ops a backend may override: silu and layer_norm. Each is built
// from primitives (so it runs and differentiates everywhere); where the
// backend registers "core::<name>" for the dtype and no gradient is being
// recorded, its fused kernel runs instead (named_ops.h).
#include <backplane/ops.h>

#include <sstream>

#include "../internal.h"

namespace bp {

namespace {

void check_floating(const char* op, const Tensor& x) {
  if (!is_floating(x.dtype()))
    throw NotImplementedError(std::string("[") + op + "] not implemented for dtype " +
                              std::string(name(x.dtype())) + ": floating dtypes only");
}

std::string shape_text(IntArrayRef s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

}  // namespace

Tensor silu(const Tensor& x) {
  check_floating("silu", x);
  Tensor fused = detail::run_override("core::silu", {x}, {});
  if (fused.defined()) return fused;
  return x * sigmoid(x);
}

Tensor layer_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  check_floating("layer_norm", x);
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  const int64_t nd = x.dim();
  BP_CHECK(k >= 1, "[layer_norm] normalized_shape must have at least one dim");
  bool trailing = nd >= k;
  for (int64_t i = 0; trailing && i < k; ++i) trailing = x.size(nd - k + i) == normalized_shape[i];
  BP_CHECK(trailing, "[layer_norm] given normalized_shape=", shape_text(normalized_shape),
           ", expected an input of shape [*, ", shape_text(normalized_shape).substr(1),
           ", but got one of shape ", shape_text(x.sizes()));
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    const char* what = p == &weight ? "weight" : "bias";
    bool same = p->dim() == k;
    for (int64_t i = 0; same && i < k; ++i) same = p->size(i) == normalized_shape[i];
    BP_CHECK(same, "[layer_norm] the ", what, " has shape ", shape_text(p->sizes()),
             ", expected normalized_shape ", shape_text(normalized_shape));
    BP_CHECK(p->dtype() == x.dtype(), "[layer_norm] the ", what, " is ", name(p->dtype()),
             ", the input ", name(x.dtype()));
    detail::check_same_device("layer_norm", x, *p);
  }
  if (weight.defined() && bias.defined()) {
    Tensor fused = detail::run_override("core::layer_norm", {x, weight, bias}, {k, eps});
    if (fused.defined()) return fused;
  }
  std::vector<int64_t> dims;
  for (int64_t d = nd - k; d < nd; ++d) dims.push_back(d);
  const IntArrayRef reduce(dims.data(), dims.size());
  const Tensor centred = x - x.mean(reduce, true);
  const Tensor var = (centred * centred).mean(reduce, true);
  Tensor y = centred / sqrt(var + eps);
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

}  // namespace bp
