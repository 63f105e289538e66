// Normalisation over channels: batch_norm (batch statistics in training,
// with in-place running-stat updates; running statistics in evaluation) and
// group_norm. Training batch_norm defines its gradient here (from the batch
// statistics, as PyTorch's native_batch_norm_backward), and a backend's
// "core::batch_norm" / "core::batch_norm_backward" kernels replace either
// half; in evaluation, and for group_norm, the gradient comes from the
// elementwise ops of the composite ("core::batch_norm_inference" replaces it
// when no gradient is recorded). layer_norm is in composite.cpp.
#include <backplane/autograd.h>
#include <backplane/named_ops.h>
#include <backplane/nn_ops.h>

#include <array>

#include "../autograd/graph.h"
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

namespace {

// The dims batch_norm reduces over: all but the channels.
std::vector<int64_t> stat_dims(const Tensor& x) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

Tensor ones_or(const Tensor& t, const Tensor& x, double v) {
  return t.defined() ? t : full({x.size(1)}, v, TensorOptions(x.dtype()).device(x.device()));
}

// Training forward: the output and the batch's mean and biased variance [C].
std::array<Tensor, 3> batch_norm_train(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                       double eps) {
  NoGradGuard no_grad;
  if (has_override("core::batch_norm", x)) {
    const Tensor out = detail::make_empty(x.sizes(), x.dtype(), x);
    const Tensor mean = detail::make_empty({x.size(1)}, x.dtype(), x);
    const Tensor var = detail::make_empty({x.size(1)}, x.dtype(), x);
    if (detail::run_kernel_override("core::batch_norm",
                                    {x, ones_or(weight, x, 1), ones_or(bias, x, 0)},
                                    {out, mean, var}, {eps}))
      return {out, mean, var};
  }
  const std::vector<int64_t> dims = stat_dims(x);
  const Tensor mean = x.mean(dims, true);
  const Tensor centred = x - mean;
  const Tensor var = (centred * centred).mean(dims, true);
  return {affine(centred / sqrt(var + eps), weight, bias, x), mean.reshape({-1}),
          var.reshape({-1})};
}

// Training backward from the batch statistics: gradients of x, weight and
// bias, each when wanted (the others undefined).
std::array<Tensor, 3> batch_norm_train_backward(const Tensor& g, const Tensor& x,
                                                const Tensor& weight, const Tensor& mean,
                                                const Tensor& var, double eps, const bool want[3]) {
  if (!want[0] && !want[1] && !want[2]) return {};
  if (has_override("core::batch_norm_backward", x)) {
    // An output not asked for is a 1-element stand-in the kernel leaves alone.
    const Tensor gx = detail::make_empty(want[0] ? x.sizes() : IntArrayRef({1}), x.dtype(), x);
    const Tensor gw = detail::make_empty({x.size(1)}, x.dtype(), x);
    const Tensor gb = detail::make_empty({x.size(1)}, x.dtype(), x);
    const int64_t mask = (want[0] ? 1 : 0) | (want[1] ? 2 : 0) | (want[2] ? 4 : 0);
    if (detail::run_kernel_override("core::batch_norm_backward",
                                    {g.contiguous(), x, ones_or(weight, x, 1), mean, var},
                                    {gx, gw, gb}, {eps, mask}))
      return {want[0] ? gx : Tensor(), want[1] ? gw : Tensor(), want[2] ? gb : Tensor()};
  }
  const std::vector<int64_t> dims = stat_dims(x);
  const double m = static_cast<double>(x.numel() / x.size(1));
  const Tensor invstd = per_channel(pow(var + eps, -0.5), x);
  const Tensor xhat = (x - per_channel(mean, x)) * invstd;
  const Tensor gb = g.sum(dims);
  const Tensor gw = (g * xhat).sum(dims);
  Tensor gx;
  if (want[0]) {
    const Tensor scale = weight.defined() ? invstd * per_channel(weight, x) : invstd;
    gx = (g - per_channel(gb, x) / m - xhat * per_channel(gw, x) / m) * scale;
  }
  return {gx, want[1] ? gw : Tensor(), want[2] ? gb : Tensor()};
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
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
  if (input.numel() == 0)
    return affine(input * 1, weight, bias, input);  // nothing to normalise, as PyTorch
  if (!training) {
    if (Tensor out = detail::run_override(
            "core::batch_norm_inference",
            {input, ones_or(weight, input, 1), ones_or(bias, input, 0), running_mean, running_var},
            {eps});
        out.defined())
      return out;
    const Tensor mean = per_channel(running_mean, input), var = per_channel(running_var, input);
    return affine((input - mean) / sqrt(var + eps), weight, bias, input);
  }
  const int64_t count = input.numel() / input.size(1);
  BP_CHECK(
      count > 1,
      "[batch_norm] expected more than 1 value per channel when training, got an input of shape ",
      nn_detail::shape_text(input.sizes()));
  auto [out, mean, var] = batch_norm_train(input, weight, bias, eps);
  if (running_mean.defined() || running_var.defined()) {
    NoGradGuard no_grad;
    Tensor rm = running_mean, rv = running_var;
    if (rm.defined()) rm.mul_(1 - momentum).add_(mean, momentum);
    if (rv.defined())
      rv.mul_(1 - momentum)
          .add_(var, momentum * static_cast<double>(count) / static_cast<double>(count - 1));
  }
  if (autograd::needs_grad({&input, &weight, &bias})) {
    auto node = autograd::make_node(
        "NativeBatchNormBackward0", {&input, &weight, &bias},
        [eps, has_weight = weight.defined()](autograd::FunctionNode& n, std::vector<Tensor>& g) {
          const bool want[3] = {n.needs_grad(0), n.needs_grad(1), n.needs_grad(2)};
          auto [gx, gw, gb] =
              batch_norm_train_backward(g[0], n.saved(0), has_weight ? n.saved(3) : Tensor(),
                                        n.saved(1), n.saved(2), eps, want);
          return std::vector<Tensor>{gx, gw, gb};
        });
    node->save(input);
    node->save(mean);
    node->save(var);
    if (weight.defined()) node->save(weight);
    autograd::set_history(out, node.get());
  }
  return out;
}

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  BP_CHECK(input.dim() >= 2, "[group_norm] expects an input with a channel dim (N, C, ...), got ",
           detail::describe_tensor(input));
  BP_CHECK_TYPE(is_floating(input.dtype()), "[group_norm] needs a floating input, got ",
                detail::describe_tensor(input));
  BP_CHECK(num_groups > 0 && input.size(1) % num_groups == 0, "[group_norm] expected the ",
           input.size(1), " channels of an input of shape ", nn_detail::shape_text(input.sizes()),
           " to be divisible by num_groups=", num_groups);
  check_channel_param("group_norm", "weight", weight, input);
  check_channel_param("group_norm", "bias", bias, input);
  if (input.numel() == 0)
    return affine(input * 1, weight, bias, input);  // nothing to normalise, as PyTorch
  const Tensor xr = input.reshape({input.size(0), num_groups, -1});
  const Tensor centred = xr - xr.mean({2}, true);
  const Tensor var = (centred * centred).mean({2}, true);
  return affine((centred / sqrt(var + eps)).reshape(input.sizes()), weight, bias, input);
}

}  // namespace bp
