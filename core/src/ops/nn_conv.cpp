// conv2d: the composite (windows of the padded input as columns, one
// batched matmul per group) and its gradient, defined here; a backend's
// "core::conv2d" / "core::conv2d_backward" kernels replace either half.
#include <backplane/autograd.h>
#include <backplane/named_ops.h>
#include <backplane/nn_ops.h>

#include "../autograd/graph.h"
#include "nn_util.h"

namespace bp {

namespace {

using nn_detail::Windows;

struct ConvShape {
  int64_t n, c, o, g;  // batch, input channels, output channels, groups
  Windows w;
  int64_t cg() const { return c / g; }
  int64_t og() const { return o / g; }
  int64_t cols() const { return cg() * w.k[0] * w.k[1]; }  // per group
  int64_t positions() const { return w.out[0] * w.out[1]; }
};

std::vector<OpAttr> attrs_of(const ConvShape& s) {
  const Windows& w = s.w;
  return {w.s[0], w.s[1], w.p[0], w.p[1], w.d[0], w.d[1], s.g};
}

// The columns of x: [N, G, Cg*KH*KW, OH*OW], contiguous.
Tensor columns(const Tensor& x, const ConvShape& s) {
  const Tensor win = nn_detail::windows(nn_detail::pad(x, s.w, 0), s.w);  // [N, C, OH, OW, KH, KW]
  return win.reshape({s.n, s.g, s.cg(), s.w.out[0], s.w.out[1], s.w.k[0], s.w.k[1]})
      .permute({0, 1, 2, 5, 6, 3, 4})
      .reshape({s.n, s.g, s.cols(), s.positions()});
}

// weight [O, Cg, KH, KW] as [1, G, Og, Cg*KH*KW].
Tensor weight_matrix(const Tensor& weight, const ConvShape& s) {
  return weight.reshape({1, s.g, s.og(), s.cols()});
}

void forward_composite(Tensor out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const ConvShape& s) {
  Tensor y = matmul(weight_matrix(weight, s), columns(x, s));  // [N, G, Og, P]
  if (bias.defined()) y.add_(bias.reshape({1, s.g, s.og(), 1}));
  out.copy_(y.view(out.sizes()));
}

// Gradients of the input and weight from grad_out, skipping those not asked for.
std::pair<Tensor, Tensor> backward_composite(const Tensor& g, const Tensor& x, const Tensor& weight,
                                             const ConvShape& s, bool want_x, bool want_w) {
  const Tensor gm = g.reshape({s.n, s.g, s.og(), s.positions()});
  Tensor gx, gw;
  if (want_w) gw = matmul(gm, columns(x, s).transpose(2, 3)).sum({0}).reshape(weight.sizes());
  if (want_x) {
    // Columns' gradient, then each kernel offset's share added back where it read.
    const Tensor gcols = matmul(weight_matrix(weight, s).transpose(2, 3), gm)
                             .view({s.n, s.c, s.w.k[0], s.w.k[1], s.w.out[0], s.w.out[1]});
    Tensor gxp = zeros({s.n, s.c, s.w.padded(0), s.w.padded(1)},
                       TensorOptions(x.dtype()).device(x.device()));
    for (int64_t kh = 0; kh < s.w.k[0]; ++kh)
      for (int64_t kw = 0; kw < s.w.k[1]; ++kw)
        nn_detail::tap(gxp, s.w, kh, kw).add_(gcols.select(2, kh).select(2, kw));
    // A tensor of its own, not a view of the padded one (it is
    // conv_transpose2d's result).
    const bool whole = s.w.p[0] == 0 && s.w.p[1] == 0 && s.w.extra[0] == 0 && s.w.extra[1] == 0;
    gx = whole ? gxp
               : gxp.narrow(2, s.w.p[0], s.w.in[0])
                     .narrow(3, s.w.p[1], s.w.in[1])
                     .clone(MemoryFormat::Contiguous);
  }
  return {gx, gw};
}

std::pair<Tensor, Tensor> backward(const Tensor& g, const Tensor& x, const Tensor& weight,
                                   const ConvShape& s, bool want_x, bool want_w) {
  if (!want_x && !want_w) return {};
  if (g.numel() > 0 && x.numel() > 0) {
    // An output not asked for is a 1-element stand-in the kernel leaves alone.
    Tensor gx = detail::make_empty(want_x ? x.sizes() : IntArrayRef({1}), x.dtype(), x);
    Tensor gw =
        detail::make_empty(want_w ? weight.sizes() : IntArrayRef({1}), weight.dtype(), weight);
    std::vector<OpAttr> attrs = attrs_of(s);
    attrs.push_back(int64_t{(want_x ? 1 : 0) | (want_w ? 2 : 0)});
    if (detail::run_kernel_override("core::conv2d_backward", {g.contiguous(), x, weight}, {gx, gw},
                                    attrs))
      return {want_x ? gx : Tensor(), want_w ? gw : Tensor()};
  }
  if (x.numel() == 0 || g.numel() == 0)
    return {want_x ? zeros_like(x) : Tensor(), want_w ? zeros_like(weight) : Tensor()};
  return backward_composite(g, x, weight, s, want_x, want_w);
}

ConvShape check_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride,
                     Size2 padding, Size2 dilation, int64_t groups) {
  BP_CHECK(weight.defined(), "[conv2d] the weight is an undefined tensor");
  BP_CHECK(weight.dim() == 4,
           "[conv2d] expects a 4-D weight (out_channels, in_channels/groups, kh, kw), got ",
           detail::describe_tensor(weight));
  BP_CHECK(groups > 0, "[conv2d] groups must be positive, got ", groups);
  detail::check_same_device("conv2d", x, weight);
  BP_CHECK_TYPE(weight.dtype() == x.dtype(), "[conv2d] the input is ", name(x.dtype()),
                " and the weight ", name(weight.dtype()), "; they must be the same dtype");
  ConvShape s{x.size(0), x.size(1), weight.size(0), groups, {}};
  BP_CHECK(s.o % groups == 0, "[conv2d] a weight of shape ", nn_detail::shape_text(weight.sizes()),
           " has ", s.o, " output channels, not divisible by groups=", groups);
  BP_CHECK(s.c == weight.size(1) * groups, "[conv2d] given groups=", groups, ", a weight of shape ",
           nn_detail::shape_text(weight.sizes()), " expects an input with ",
           weight.size(1) * groups, " channels, but the input of shape ",
           nn_detail::shape_text(x.sizes()), " has ", s.c);
  if (bias.defined()) {
    detail::check_same_device("conv2d", x, bias);
    BP_CHECK(bias.dim() == 1 && bias.size(0) == s.o, "[conv2d] the bias has shape ",
             nn_detail::shape_text(bias.sizes()), ", expected [", s.o,
             "] (one per output channel)");
    BP_CHECK_TYPE(bias.dtype() == x.dtype(), "[conv2d] the input is ", name(x.dtype()),
                  " and the bias ", name(bias.dtype()));
  }
  s.w = nn_detail::make_windows("conv2d", x, {weight.size(2), weight.size(3)}, stride, padding,
                                dilation, false, false);
  return s;
}

// conv_transpose2d as the conv2d whose input gradient it is: that conv's
// input is the transposed convolution's output, its output the input.
struct TransposeShape {
  ConvShape conv;
  bool as_kernel;  // the conv's own output size is the input's: its kernels fit
};

TransposeShape check_transpose(const Tensor& x, const Tensor& weight, const Tensor& bias,
                               Size2 stride, Size2 padding, Size2 output_padding, int64_t groups,
                               Size2 dilation) {
  const char* op = "conv_transpose2d";
  BP_CHECK(weight.defined(), "[", op, "] the weight is an undefined tensor");
  BP_CHECK(weight.dim() == 4, "[", op,
           "] expects a 4-D weight (in_channels, out_channels/groups, kh, kw), got ",
           detail::describe_tensor(weight));
  BP_CHECK(groups > 0, "[", op, "] groups must be positive, got ", groups);
  detail::check_same_device(op, x, weight);
  BP_CHECK_TYPE(weight.dtype() == x.dtype(), "[", op, "] the input is ", name(x.dtype()),
                " and the weight ", name(weight.dtype()), "; they must be the same dtype");
  BP_CHECK(x.size(1) == weight.size(0), "[", op, "] a weight of shape ",
           nn_detail::shape_text(weight.sizes()), " expects an input with ", weight.size(0),
           " channels, but the input of shape ", nn_detail::shape_text(x.sizes()), " has ",
           x.size(1));
  BP_CHECK(x.size(0) == 0 || x.size(1) == 0 || (x.size(2) > 0 && x.size(3) > 0), "[", op,
           "] an input of shape ", nn_detail::shape_text(x.sizes()),
           " has no elements per channel; only a "
           "batch or channel count of 0 is supported");
  BP_CHECK(weight.size(0) >= groups, "[", op, "] given groups=", groups,
           ", expected the weight to be at least ", groups,
           " at dimension 0, but got a weight of shape ", nn_detail::shape_text(weight.sizes()));
  BP_CHECK(weight.size(2) > 0 && weight.size(3) > 0, "[", op,
           "] kernel_size must be positive, got (", weight.size(2), ", ", weight.size(3),
           ") from a weight of shape ", nn_detail::shape_text(weight.sizes()));
  BP_CHECK(weight.size(0) % groups == 0, "[", op, "] a weight of shape ",
           nn_detail::shape_text(weight.sizes()), " has ", weight.size(0),
           " input channels, not divisible by groups=", groups);
  const int64_t out_channels = weight.size(1) * groups;
  if (bias.defined()) {
    detail::check_same_device(op, x, bias);
    BP_CHECK(bias.dim() == 1 && bias.size(0) == out_channels, "[", op, "] the bias has shape ",
             nn_detail::shape_text(bias.sizes()), ", expected [", out_channels,
             "] (one per output channel)");
    BP_CHECK_TYPE(bias.dtype() == x.dtype(), "[", op, "] the input is ", name(x.dtype()),
                  " and the bias ", name(bias.dtype()));
  }
  nn_detail::Windows w{};
  for (int i = 0; i < 2; ++i) {
    BP_CHECK(stride[i] > 0, "[", op, "] stride must be positive, got (", stride[0], ", ", stride[1],
             ")");
    BP_CHECK(padding[i] >= 0, "[", op, "] negative padding (", padding[0], ", ", padding[1],
             ") is not supported");
    BP_CHECK(dilation[i] > 0, "[", op, "] dilation must be positive, got (", dilation[0], ", ",
             dilation[1], ")");
    BP_CHECK(output_padding[i] >= 0, "[", op, "] negative output_padding (", output_padding[0],
             ", ", output_padding[1], ") is not supported");
    BP_CHECK(output_padding[i] < stride[i] || output_padding[i] < dilation[i], "[", op,
             "] output_padding (", output_padding[0], ", ", output_padding[1],
             ") must be smaller than either stride (", stride[0], ", ", stride[1],
             ") or dilation (", dilation[0], ", ", dilation[1], ")");
    w.k[i] = weight.size(2 + i);
    w.s[i] = stride[i];
    w.p[i] = padding[i];
    w.d[i] = dilation[i];
    w.out[i] = x.size(2 + i);
    w.in[i] = (w.out[i] - 1) * w.s[i] - 2 * w.p[i] + w.span(i) + output_padding[i];
  }
  BP_CHECK(w.in[0] > 0 && w.in[1] > 0, "[", op, "] an input of shape ",
           nn_detail::shape_text(x.sizes()), " with kernel (", w.k[0], ", ", w.k[1], "), stride (",
           w.s[0], ", ", w.s[1], "), padding (", w.p[0], ", ", w.p[1], ") and dilation (", w.d[0],
           ", ", w.d[1], ") gives an output of (", w.in[0], " x ", w.in[1],
           ") per channel: too small");
  // The windows reach no further than the output's end (w.extra is 0): an
  // output_padding of stride or more only adds elements no window touches.
  bool as_kernel = true;
  for (int i = 0; i < 2; ++i)
    as_kernel = as_kernel &&
                nn_detail::out_size(w.in[i], w.k[i], w.s[i], w.p[i], w.d[i], false) == w.out[i];
  return {ConvShape{x.size(0), out_channels, weight.size(0), groups, w}, as_kernel};
}

// The conv's input gradient for output gradient `g` (the transposed
// convolution's input), or its weight gradient for input `y`.
Tensor transpose_forward(const Tensor& x, const Tensor& weight, const TransposeShape& t) {
  const ConvShape& s = t.conv;
  const DimVector out_shape{s.n, s.c, s.w.in[0], s.w.in[1]};
  if (x.numel() == 0 || weight.numel() == 0)
    return zeros(out_shape, TensorOptions(x.dtype()).device(x.device()));
  // The conv's input, for its shape: a kernel reads none of it for an input gradient.
  const Tensor like = detail::make_empty(out_shape, x.dtype(), x);
  if (t.as_kernel) return backward(x, like, weight, s, true, false).first;
  return backward_composite(x.contiguous(), like, weight, s, true, false).first;
}

}  // namespace

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Size2 stride,
                        Size2 padding, Size2 output_padding, int64_t groups, Size2 dilation) {
  bool unbatched = false;
  const Tensor x = nn_detail::as_batch("conv_transpose2d", input, unbatched);
  const TransposeShape t =
      check_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = transpose_forward(x, weight, t);
    if (bias.defined() && out.numel() > 0) out.add_(bias.reshape({1, t.conv.c, 1, 1}));
  }
  if (autograd::needs_grad({&x, &weight, &bias})) {
    auto node = autograd::make_node(
        "ConvolutionBackward0", {&x, &weight, &bias},
        [t, stride, padding, dilation, groups](autograd::FunctionNode& n, std::vector<Tensor>& g) {
          const Tensor xs = n.saved(0), ws = n.saved(1);
          const Tensor gy = g[0].contiguous();
          Tensor gx, gw, gb;
          // The input's gradient is the conv of the output's; its weight's,
          // the conv's weight gradient with the roles of input and output swapped.
          if (n.needs_grad(0) && xs.numel() == 0)
            gx = zeros_like(xs);
          else if (n.needs_grad(0))
            gx = conv2d(gy, ws, Tensor(), stride, padding, dilation, groups)
                     .narrow(2, 0, xs.size(2))
                     .narrow(3, 0, xs.size(3));
          if (n.needs_grad(1)) {
            if (xs.numel() == 0 || gy.numel() == 0)
              gw = zeros_like(ws);
            else if (t.as_kernel)
              gw = backward(xs, gy, ws, t.conv, false, true).second;
            else
              gw = backward_composite(xs.contiguous(), gy, ws, t.conv, false, true).second;
          }
          if (n.needs_grad(2)) gb = gy.sum({0, 2, 3});
          return std::vector<Tensor>{gx, gw, gb};
        });
    node->save(x);
    node->save(weight);
    autograd::set_history(out, node.get());
  }
  return unbatched ? out.squeeze(0) : out;
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Size2 stride,
              Size2 padding, Size2 dilation, int64_t groups) {
  bool unbatched = false;
  const Tensor x = nn_detail::as_batch("conv2d", input, unbatched);
  const ConvShape s = check_conv(x, weight, bias, stride, padding, dilation, groups);
  Tensor out = detail::make_empty({s.n, s.o, s.w.out[0], s.w.out[1]}, x.dtype(), x);
  if (out.numel() > 0) {
    NoGradGuard no_grad;
    // A kernel always gets a bias (zeros for none); the composite adds one only when given.
    bool done = false;
    if (has_override("core::conv2d", x)) {
      const Tensor b =
          bias.defined() ? bias : zeros({s.o}, TensorOptions(x.dtype()).device(x.device()));
      done = detail::run_kernel_override("core::conv2d", {x, weight, b}, {out}, attrs_of(s));
    }
    if (!done) forward_composite(out, x, weight, bias, s);
  }
  if (autograd::needs_grad({&x, &weight, &bias})) {
    auto node = autograd::make_node("ConvolutionBackward0", {&x, &weight, &bias},
                                    [s](autograd::FunctionNode& n, std::vector<Tensor>& g) {
                                      const Tensor xs = n.saved(0), ws = n.saved(1);
                                      auto [gx, gw] = backward(g[0], xs, ws, s, n.needs_grad(0),
                                                               n.needs_grad(1));
                                      Tensor gb;
                                      if (n.needs_grad(2)) gb = g[0].sum({0, 2, 3});
                                      return std::vector<Tensor>{gx, gw, gb};
                                    });
    node->save(x);
    node->save(weight);
    autograd::set_history(out, node.get());
  }
  return unbatched ? out.squeeze(0) : out;
}

}  // namespace bp
