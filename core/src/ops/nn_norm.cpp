// Normalisation over channels: batch_norm (batch statistics in training,
// with in-place running-stat updates; running statistics in evaluation) and
// group_norm, as composites of reductions and elementwise ops, so their
// gradients come from those ops'. layer_norm is in composite.cpp.
#include <backplane/autograd.h>
#include <backplane/nn_ops.h>

#include "nn_util.h"

namespace bp {

namespace {

// A per-channel [C] tensor shaped to broadcast against x's dim 1.
Tensor per_channel(const Tensor& t, const Tensor& x) {
  DimVector shape(static_cast<std::size_t>(x.dim()), 1);
  shape[1] = x.size(1);
  return t.reshape(shape);
}

void check_channel_param(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  if (!t.defined()) return;
  detail::check_same_device(op, x, t);
  BP_CHECK(t.dim() == 1 && t.size(0) == x.size(1), "[", op, "] the ", what, " has shape ",
           nn_detail::shape_text(t.sizes()), ", expected [", x.size(1), "] for an input of shape ",
           nn_detail::shape_text(x.sizes()));
  BP_CHECK_TYPE(t.dtype() == x.dtype(), "[", op, "] the ", what, " is ", name(t.dtype()),
                ", the input ", name(x.dtype()));
}

Tensor affine(Tensor y, const Tensor& weight, const Tensor& bias, const Tensor& x) {
  if (weight.defined()) y = y * per_channel(weight, x);
  if (bias.defined()) y = y + per_channel(bias, x);
  return y;
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps) {
  BP_CHECK(input.dim() >= 2, "[batch_norm] expects an input with a channel dim (N, C, ...), got ",
           detail::describe_tensor(input));
  BP_CHECK_TYPE(is_floating(input.dtype()), "[batch_norm] needs a floating input, got ",
                detail::describe_tensor(input));
  check_channel_param("batch_norm", "weight", weight, input);
  check_channel_param("batch_norm", "bias", bias, input);
  check_channel_param("batch_norm", "running_mean", running_mean, input);
  check_channel_param("batch_norm", "running_var", running_var, input);
  BP_CHECK(training || (running_mean.defined() && running_var.defined()),
           "[batch_norm] in evaluation, running_mean and running_var are required");
  if (input.numel() == 0) return affine(input * 1, weight, bias, input);  // nothing to normalise, as PyTorch
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  Tensor mean, var;
  if (training) {
    const int64_t count = input.numel() / std::max<int64_t>(input.size(1), 1);
    BP_CHECK(count > 1, "[batch_norm] expected more than 1 value per channel when training, got an input of shape ",
             nn_detail::shape_text(input.sizes()));
    mean = input.mean(dims, true);
    const Tensor centred = input - mean;
    var = (centred * centred).mean(dims, true);
    if (running_mean.defined() || running_var.defined()) {
      NoGradGuard no_grad;
      Tensor rm = running_mean, rv = running_var;
      if (rm.defined()) rm.mul_(1 - momentum).add_(mean.detach().reshape({-1}), momentum);
      if (rv.defined())
        rv.mul_(1 - momentum)
            .add_(var.detach().reshape({-1}), momentum * static_cast<double>(count) / static_cast<double>(count - 1));
    }
    return affine(centred / sqrt(var + eps), weight, bias, input);
  }
  mean = per_channel(running_mean, input);
  var = per_channel(running_var, input);
  return affine((input - mean) / sqrt(var + eps), weight, bias, input);
}

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  BP_CHECK(input.dim() >= 2, "[group_norm] expects an input with a channel dim (N, C, ...), got ",
           detail::describe_tensor(input));
  BP_CHECK_TYPE(is_floating(input.dtype()), "[group_norm] needs a floating input, got ",
                detail::describe_tensor(input));
  BP_CHECK(num_groups > 0 && input.size(1) % num_groups == 0, "[group_norm] expected the ", input.size(1),
           " channels of an input of shape ", nn_detail::shape_text(input.sizes()),
           " to be divisible by num_groups=", num_groups);
  check_channel_param("group_norm", "weight", weight, input);
  check_channel_param("group_norm", "bias", bias, input);
  if (input.numel() == 0) return affine(input * 1, weight, bias, input);  // nothing to normalise, as PyTorch
  const Tensor xr = input.reshape({input.size(0), num_groups, -1});
  const Tensor centred = xr - xr.mean({2}, true);
  const Tensor var = (centred * centred).mean({2}, true);
  return affine((centred / sqrt(var + eps)).reshape(input.sizes()), weight, bias, input);
}

}  // namespace bp
