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
  if (want_w)
    gw = matmul(gm, columns(x, s).transpose(2, 3)).sum({0}).reshape(weight.sizes());
  if (want_x) {
    // Columns' gradient, then each kernel offset's share added back where it read.
    const Tensor gcols = matmul(weight_matrix(weight, s).transpose(2, 3), gm)
                             .view({s.n, s.c, s.w.k[0], s.w.k[1], s.w.out[0], s.w.out[1]});
    Tensor gxp = zeros({s.n, s.c, s.w.padded(0), s.w.padded(1)}, TensorOptions(x.dtype()).device(x.device()));
    for (int64_t kh = 0; kh < s.w.k[0]; ++kh)
      for (int64_t kw = 0; kw < s.w.k[1]; ++kw)
        nn_detail::tap(gxp, s.w, kh, kw).add_(gcols.select(2, kh).select(2, kw));
    gx = gxp.narrow(2, s.w.p[0], s.w.in[0]).narrow(3, s.w.p[1], s.w.in[1]);
    if (!gx.is_contiguous()) gx = gx.contiguous();
  }
  return {gx, gw};
}

std::pair<Tensor, Tensor> backward(const Tensor& g, const Tensor& x, const Tensor& weight,
                                   const ConvShape& s, bool want_x, bool want_w) {
  if (!want_x && !want_w) return {};
  if (g.numel() > 0 && x.numel() > 0) {
    // An output not asked for is a 1-element stand-in the kernel leaves alone.
    Tensor gx = detail::make_empty(want_x ? x.sizes() : IntArrayRef({1}), x.dtype(), x);
    Tensor gw = detail::make_empty(want_w ? weight.sizes() : IntArrayRef({1}), weight.dtype(), weight);
    std::vector<OpAttr> attrs = attrs_of(s);
    attrs.push_back(int64_t{(want_x ? 1 : 0) | (want_w ? 2 : 0)});
    if (detail::run_kernel_override("core::conv2d_backward", {g.contiguous(), x, weight}, {gx, gw}, attrs))
      return {want_x ? gx : Tensor(), want_w ? gw : Tensor()};
  }
  if (x.numel() == 0 || g.numel() == 0)
    return {want_x ? zeros_like(x) : Tensor(), want_w ? zeros_like(weight) : Tensor()};
  return backward_composite(g, x, weight, s, want_x, want_w);
}

ConvShape check_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride,
                     Size2 padding, Size2 dilation, int64_t groups) {
  BP_CHECK(weight.defined(), "[conv2d] the weight is an undefined tensor");
  BP_CHECK(weight.dim() == 4, "[conv2d] expects a 4-D weight (out_channels, in_channels/groups, kh, kw), got ",
           detail::describe_tensor(weight));
  BP_CHECK(groups > 0, "[conv2d] groups must be positive, got ", groups);
  detail::check_same_device("conv2d", x, weight);
  BP_CHECK_TYPE(weight.dtype() == x.dtype(), "[conv2d] the input is ", name(x.dtype()),
                " and the weight ", name(weight.dtype()), "; they must be the same dtype");
  ConvShape s{x.size(0), x.size(1), weight.size(0), groups, {}};
  BP_CHECK(s.o % groups == 0, "[conv2d] a weight of shape ", nn_detail::shape_text(weight.sizes()),
           " has ", s.o, " output channels, not divisible by groups=", groups);
  BP_CHECK(s.c == weight.size(1) * groups, "[conv2d] given groups=", groups, ", a weight of shape ",
           nn_detail::shape_text(weight.sizes()), " expects an input with ", weight.size(1) * groups,
           " channels, but the input of shape ", nn_detail::shape_text(x.sizes()), " has ", s.c);
  if (bias.defined()) {
    detail::check_same_device("conv2d", x, bias);
    BP_CHECK(bias.dim() == 1 && bias.size(0) == s.o, "[conv2d] the bias has shape ",
             nn_detail::shape_text(bias.sizes()), ", expected [", s.o, "] (one per output channel)");
    BP_CHECK_TYPE(bias.dtype() == x.dtype(), "[conv2d] the input is ", name(x.dtype()), " and the bias ",
                  name(bias.dtype()));
  }
  s.w = nn_detail::make_windows("conv2d", x, {weight.size(2), weight.size(3)}, stride, padding, dilation,
                                false, false);
  return s;
}

}  // namespace

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
      const Tensor b = bias.defined() ? bias : zeros({s.o}, TensorOptions(x.dtype()).device(x.device()));
      done = detail::run_kernel_override("core::conv2d", {x, weight, b}, {out}, attrs_of(s));
    }
    if (!done) forward_composite(out, x, weight, bias, s);
  }
  if (autograd::needs_grad({&x, &weight, &bias})) {
    auto node = autograd::make_node(
        "ConvolutionBackward0", {&x, &weight, &bias},
        [s](autograd::FunctionNode& n, std::vector<Tensor>& g) {
          const Tensor xs = n.saved(0), ws = n.saved(1);
          auto [gx, gw] = backward(g[0], xs, ws, s, n.needs_grad(0), n.needs_grad(1));
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
