// The layers a convolutional network needs, as functions with PyTorch 1.13's
// semantics and argument names (torch.nn.functional): convolution, pooling,
// normalisation, dropout, activations, losses and embedding.
//
// Each one is built from the core's primitive ops, so it runs and
// differentiates on every backend. The heavy ones have their gradient
// defined by the core and a kernel a backend may supply through a named op
// "core::<name>" (named_ops.h): conv2d and its backward run oneDNN's
// convolution on cpu_onednn and cuDNN's on cuda, with the gradient recorded
// or not; the composite is what the conformance suite compares them with.
// Image tensors are NCHW (a 3-D CHW input is taken as a batch of one).
#pragma once

#include <backplane/tensor.h>

#include <array>
#include <cstdint>
#include <optional>
#include <utility>

namespace bp {

// Two sizes (height, width); one number stands for both.
struct Size2 {
  std::array<int64_t, 2> v{0, 0};
  bool pair = false;                      // given as two numbers (printed as a tuple, as PyTorch)
  Size2(int64_t both) : v{both, both} {}  // NOLINT: implicit, as PyTorch's ints
  Size2(int64_t h, int64_t w) : v{h, w}, pair(true) {}
  int64_t operator[](int i) const { return v[static_cast<std::size_t>(i)]; }
};

// --- convolution ---------------------------------------------------------------
// out[n, o] = bias[o] + sum over the o's group of input channels c and the
// kernel (kh, kw) of weight[o, c, kh, kw] * in[n, c, oh*stride + kh*dilation -
// padding, ...], zero outside the input. weight is [out_channels,
// in_channels/groups, kh, kw]; bias (optional) [out_channels].
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              Size2 stride = 1, Size2 padding = 0, Size2 dilation = 1, int64_t groups = 1);

// The transposed convolution (the gradient of conv2d with respect to its
// input, as an op): each input element adds weight[c, o] times itself into
// the output window it maps to. weight is [in_channels,
// out_channels/groups, kh, kw]; bias (optional) [out_channels]. The output
// is (in - 1) * stride - 2 * padding + dilation * (kernel - 1) +
// output_padding + 1 per spatial dim; output_padding must be smaller than
// stride or dilation. PyTorch's argument order.
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        Size2 stride = 1, Size2 padding = 0, Size2 output_padding = 0,
                        int64_t groups = 1, Size2 dilation = 1);

// --- pooling ---------------------------------------------------------------------
// Max over each window (padding counts as -inf); stride defaults to the kernel
// size. The indices are positions in each input plane (h * W + w), the first
// maximal one in window order; NaN is the maximum when present.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Size2 kernel_size,
                                                  std::optional<Size2> stride = std::nullopt,
                                                  Size2 padding = 0, Size2 dilation = 1,
                                                  bool ceil_mode = false);
Tensor max_pool2d(const Tensor& input, Size2 kernel_size,
                  std::optional<Size2> stride = std::nullopt, Size2 padding = 0, Size2 dilation = 1,
                  bool ceil_mode = false);
// Mean over each window; count_include_pad counts the zero padding in the
// divisor (never the part of a ceil_mode window beyond it).
Tensor avg_pool2d(const Tensor& input, Size2 kernel_size,
                  std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true);
// Mean over windows [floor(i*H/OH), ceil((i+1)*H/OH)) giving output_size.
Tensor adaptive_avg_pool2d(const Tensor& input, Size2 output_size);

// --- normalisation ------------------------------------------------------------------
// Over dim 1 (channels): in training, the batch's statistics (biased variance)
// normalise, and running_mean/running_var (when given) are updated in place as
// (1 - momentum) * running + momentum * batch (the unbiased variance); in
// evaluation, the running statistics normalise. weight and bias are optional.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  bool training = false, double momentum = 0.1, double eps = 1e-5);
// Channels split into num_groups groups, each normalised over its channels
// and spatial positions, then weight[c] * y + bias[c].
Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// layer_norm is in ops.h.

// --- dropout ------------------------------------------------------------------------
// In training, zeroes each element with probability p and scales the rest by
// 1/(1-p); the mask comes from the process generator (rand), so a seed gives
// the same mask on every backend. Identity when not training or p == 0.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true);
// The same, written into `input` (which must not require grad as a leaf).
Tensor& dropout_(Tensor& input, double p = 0.5, bool training = true);

// --- activations --------------------------------------------------------------------
// x * Phi(x) = x/2 (1 + erf(x / sqrt 2)); with tanh_approximation, PyTorch's
// approximate="tanh": x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu(const Tensor& input, bool tanh_approximation = false);
// relu, silu and erf are in ops.h.

// --- softmax with a dtype ----------------------------------------------------------
// F.softmax(input, dim, dtype=...): the input converted to `dtype` first (so
// the sums run in it, as PyTorch's), the gradient flowing back through the
// conversion. The dim is always given: PyTorch 1.13's implicit dim is
// deprecated and has no form here (see docs/nn.md).
Tensor softmax(const Tensor& input, int64_t dim, DType dtype);
Tensor log_softmax(const Tensor& input, int64_t dim, DType dtype);

// --- losses -------------------------------------------------------------------------
enum class Reduction { None, Mean, Sum };
// Negative log likelihood: input [N, C] (or [N, C, d...]) of log-probabilities,
// target int64 class indices [N] ([N, d...]); weight (optional, [C]) scales each
// class; targets equal to ignore_index count for nothing (mean divides by the
// weight of the others).
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                int64_t ignore_index = -100, Reduction reduction = Reduction::Mean);
// log_softmax over dim 1, then nll_loss; label_smoothing mixes in the uniform
// distribution over classes.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                     int64_t ignore_index = -100, Reduction reduction = Reduction::Mean,
                     double label_smoothing = 0.0);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// -(target * log sigmoid(x) * pos_weight + (1 - target) * log(1 - sigmoid(x))),
// computed without overflow for large |x|.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = Tensor(),
                                        const Tensor& pos_weight = Tensor(),
                                        Reduction reduction = Reduction::Mean);

// --- embedding ----------------------------------------------------------------------
// weight[indices]: indices int64 of any shape, result indices.shape + [D]. The
// row padding_idx (when given) gets no gradient.
Tensor embedding(const Tensor& indices, const Tensor& weight,
                 std::optional<int64_t> padding_idx = std::nullopt);

}  // namespace bp
