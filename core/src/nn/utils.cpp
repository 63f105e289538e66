// Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_).
#include <backplane/autograd.h>
#include <backplane/error.h>
#include <backplane/nn/utils.h>
#include <backplane/ops.h>

#include <cmath>

namespace bp::nn::utils {

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  BP_CHECK(norm_type > 0, "[clip_grad_norm_] norm_type must be positive or infinity, got ",
           norm_type);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return scalar_tensor(0.0);
  const Device device = grads.front().device();
  const bool inf = std::isinf(norm_type);
  Tensor total;
  for (const Tensor& g : grads) {
    const Tensor a = g.to(DType::Float64).abs();
    Tensor part = inf ? (a.numel() ? a.max() : scalar_tensor(0.0, DType::Float64))
                      : (norm_type == 2 ? (a * a).sum() : a.pow(norm_type).sum());
    part = part.to(device);
    total = !total.defined() ? part : (inf ? maximum(total, part) : total + part);
  }
  if (!inf) total = norm_type == 2 ? total.sqrt() : total.pow(1.0 / norm_type);
  if (error_if_nonfinite) {
    const double v = total.item<double>();
    BP_CHECK(std::isfinite(v), "[clip_grad_norm_] the total norm of order ", norm_type,
             " for gradients from `parameters` is non-finite, so it cannot be clipped");
  }
  const Tensor coef = clamp(full_like(total, max_norm) / (total + 1e-6), std::nullopt, 1.0);
  for (Tensor& g : grads) g.mul_(coef.to(g.device(), g.dtype()));
  return total.to(grads.front().dtype());
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  BP_CHECK(clip_value >= 0, "[clip_grad_value_] clip_value must be >= 0, got ", clip_value);
  NoGradGuard no_grad;
  for (const Tensor& p : parameters) {
    if (!p.defined()) continue;
    Tensor g = p.grad();
    if (g.defined()) g.clamp_(-clip_value, clip_value);
  }
}

}  // namespace bp::nn::utils
