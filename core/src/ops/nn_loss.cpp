// Losses: nll_loss, cross_entropy (class indices, label smoothing),
// mse_loss and binary_cross_entropy_with_logits, as composites (their
// gradients are those of the ops they are made of).
#include <backplane/autograd.h>
#include <backplane/nn_ops.h>

#include "nn_util.h"

namespace bp {

namespace {

Tensor reduce(const Tensor& loss, Reduction r) {
  switch (r) {
    case Reduction::None:
      return loss;
    case Reduction::Sum:
      return loss.sum();
    case Reduction::Mean:
      return loss.mean();
  }
  return loss;
}

// The target's shape must be the input's without dim 1 (or a 0-d target for a [C] input).
void check_target(const char* op, const Tensor& input, const Tensor& target) {
  BP_CHECK(target.defined(), "[", op, "] the target is an undefined tensor");
  detail::check_same_device(op, input, target);
  BP_CHECK_TYPE(is_floating(input.dtype()), "[", op, "] needs a floating input, got ",
                detail::describe_tensor(input));
  BP_CHECK_TYPE(target.dtype() == DType::Int64, "[", op,
                "] expects int64 class indices as the target, got ",
                detail::describe_tensor(target));
  BP_CHECK(input.dim() >= 1, "[", op,
           "] expects an input of shape [C] or [N, C, ...], got a 0-d tensor");
  DimVector expect;
  for (int64_t d = 0; d < input.dim(); ++d)
    if (d != (input.dim() == 1 ? 0 : 1)) expect.push_back(input.size(d));
  BP_CHECK(IntArrayRef(target.sizes()).equals(expect), "[", op, "] an input of shape ",
           nn_detail::shape_text(input.sizes()), " expects a target of shape ",
           nn_detail::shape_text(expect), ", got ", nn_detail::shape_text(target.sizes()));
}

void check_weight(const char* op, const Tensor& weight, const Tensor& input) {
  if (!weight.defined()) return;
  const int64_t c = input.size(input.dim() == 1 ? 0 : 1);
  detail::check_same_device(op, input, weight);
  BP_CHECK(weight.dim() == 1 && weight.size(0) == c, "[", op, "] the class weight has shape ",
           nn_detail::shape_text(weight.sizes()), ", expected [", c, "]");
  BP_CHECK_TYPE(weight.dtype() == input.dtype(), "[", op, "] the class weight is ",
                name(weight.dtype()), ", the input ", name(input.dtype()));
}

// Per target element: the weight of its class, 0 where ignored.
Tensor target_weights(const Tensor& safe_target, const Tensor& keep, const Tensor& weight,
                      DType dt) {
  if (!weight.defined()) return keep.to(dt);
  return weight.index_select(0, safe_target.reshape({-1})).reshape(safe_target.sizes()) *
         keep.to(dt);
}

// A [C] weight shaped to broadcast against the input's class dim.
Tensor class_shaped(const Tensor& weight, const Tensor& input) {
  if (input.dim() == 1) return weight;
  DimVector shape(static_cast<std::size_t>(input.dim()), 1);
  shape[1] = weight.size(0);
  return weight.reshape(shape);
}

Tensor one_minus(const Tensor& t) { return neg(t) + 1; }

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                int64_t ignore_index, Reduction reduction) {
  check_target("nll_loss", input, target);
  check_weight("nll_loss", weight, input);
  const bool flat = input.dim() == 1;
  const Tensor in = flat ? input.unsqueeze(0) : input;
  const Tensor tg = flat ? target.unsqueeze(0) : target;
  const Tensor keep = ne(tg, ignore_index);
  const Tensor safe = where(keep, tg, zeros_like(tg));
  const int64_t c = in.size(1);
  if (safe.numel() > 0) {
    // Class indices are checked on the host: a bad one names itself.
    const int64_t lo = safe.min().item<int64_t>(), hi = safe.max().item<int64_t>();
    BP_CHECK_INDEX(lo >= 0 && hi < c, "[nll_loss] target ", lo < 0 ? lo : hi,
                   " is out of bounds for ", c, " classes");
  }
  const Tensor picked = in.gather(1, safe.unsqueeze(1)).squeeze(1);
  const Tensor w = target_weights(safe, keep, weight, in.dtype());
  // Ignored targets are masked out, not multiplied by 0: their row may hold -inf.
  Tensor loss = where(keep, -(picked * w), zeros_like(picked));
  if (flat) loss = loss.squeeze(0);
  if (reduction == Reduction::Mean) return loss.sum() / w.sum();
  return reduce(loss, reduction);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                     int64_t ignore_index, Reduction reduction, double label_smoothing) {
  check_target("cross_entropy", input, target);
  check_weight("cross_entropy", weight, input);
  BP_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
           "[cross_entropy] label_smoothing must be between 0.0 and 1.0, got ", label_smoothing);
  const int64_t cdim = input.dim() == 1 ? 0 : 1;
  const Tensor logp = log_softmax(input, cdim);
  const Tensor nll = nll_loss(logp, target, weight, ignore_index, reduction);
  if (label_smoothing == 0) return nll;
  // PyTorch's mix: (1 - s) * nll + s / C * (the loss against a uniform target).
  const int64_t c = input.size(cdim);
  const Tensor keep = ne(target, ignore_index);
  Tensor smooth = -(weight.defined() ? logp * class_shaped(weight, input) : logp).sum({cdim});
  smooth = where(keep, smooth, zeros_like(smooth));
  Tensor ret;
  if (reduction == Reduction::Mean) {
    const Tensor safe = where(keep, target, zeros_like(target));
    ret = smooth.sum() / target_weights(safe, keep, weight, input.dtype()).sum();
  } else {
    ret = reduce(smooth, reduction);
  }
  return nll * (1 - label_smoothing) + ret * (label_smoothing / static_cast<double>(c));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  BP_CHECK(target.defined(), "[mse_loss] the target is an undefined tensor");
  BP_CHECK(
      IntArrayRef(input.sizes()).equals(target.sizes()), "[mse_loss] the input has shape ",
      nn_detail::shape_text(input.sizes()), " and the target ",
      nn_detail::shape_text(target.sizes()),
      "; they must be the same (PyTorch would broadcast them; expand them to one shape first)");
  BP_CHECK_TYPE(is_floating(input.dtype()), "[mse_loss] needs a floating input, got ",
                detail::describe_tensor(input));
  const Tensor d = input - target;
  return reduce(d * d, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight, const Tensor& pos_weight,
                                        Reduction reduction) {
  BP_CHECK(target.defined(),
           "[binary_cross_entropy_with_logits] the target is an undefined tensor");
  BP_CHECK(IntArrayRef(input.sizes()).equals(target.sizes()),
           "[binary_cross_entropy_with_logits] the target has shape ",
           nn_detail::shape_text(target.sizes()), ", the input ",
           nn_detail::shape_text(input.sizes()), "; they must be the same");
  BP_CHECK_TYPE(is_floating(input.dtype()),
                "[binary_cross_entropy_with_logits] needs a floating input, got ",
                detail::describe_tensor(input));
  // log(1 + exp(-x)) as m + log(exp(-m) + exp(-x - m)), m = max(-x, 0): no overflow.
  const Tensor m = clamp(-input, 0.0, std::nullopt);
  const Tensor softplus_neg = m + log(exp(-m) + exp(-input - m));
  Tensor loss;
  if (pos_weight.defined()) {
    const Tensor lw = (pos_weight - 1) * target + 1;
    loss = one_minus(target) * input + lw * softplus_neg;
  } else {
    loss = one_minus(target) * input + softplus_neg;
  }
  if (weight.defined()) loss = loss * weight;
  return reduce(loss, reduction);
}

}  // namespace bp
