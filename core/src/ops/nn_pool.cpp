// Pooling: max_pool2d (with the indices its gradient scatters to),
// avg_pool2d and adaptive_avg_pool2d, from window taps of the padded input.
// The gradients are defined here; a backend's "core::max_pool2d",
// "core::avg_pool2d" and "core::avg_pool2d_backward" kernels replace the
// composites (with or without a gradient recorded) when they take the call.
#include <backplane/autograd.h>
#include <backplane/named_ops.h>
#include <backplane/nn_ops.h>

#include <limits>

#include "../autograd/graph.h"
#include "nn_util.h"

namespace bp {

namespace {

using nn_detail::Windows;

TensorOptions like(const Tensor& x, DType d) { return TensorOptions(d).device(x.device()); }

// Position in the unpadded plane (h * W + w) that offset (kh, kw) of each
// window reads, [OH, OW] int64; with `first`, each window's first position
// inside the input instead (PyTorch's initial index).
Tensor window_positions(const Windows& w, int64_t kh, int64_t kw, bool first, const Tensor& x) {
  std::vector<int64_t> pos(static_cast<std::size_t>(w.out[0] * w.out[1]));
  for (int64_t oh = 0; oh < w.out[0]; ++oh)
    for (int64_t ow = 0; ow < w.out[1]; ++ow) {
      int64_t h = oh * w.s[0] - w.p[0] + kh * w.d[0], c = ow * w.s[1] - w.p[1] + kw * w.d[1];
      while (first && h < 0) h += w.d[0];
      while (first && c < 0) c += w.d[1];
      pos[static_cast<std::size_t>(oh * w.out[1] + ow)] = h * w.in[1] + c;
    }
  return from_vector(pos, {w.out[0], w.out[1]}, like(x, DType::Int64));
}

// The divisor of each avg_pool2d window, [OH, OW], as PyTorch counts it.
Tensor divisors(const Windows& w, bool count_include_pad, const Tensor& x) {
  std::vector<double> div(static_cast<std::size_t>(w.out[0] * w.out[1]));
  for (int64_t oh = 0; oh < w.out[0]; ++oh)
    for (int64_t ow = 0; ow < w.out[1]; ++ow) {
      int64_t h0 = oh * w.s[0] - w.p[0], c0 = ow * w.s[1] - w.p[1];
      int64_t h1 = std::min(h0 + w.k[0], w.in[0] + w.p[0]),
              c1 = std::min(c0 + w.k[1], w.in[1] + w.p[1]);
      const int64_t with_pad = (h1 - h0) * (c1 - c0);
      h0 = std::max<int64_t>(h0, 0);
      c0 = std::max<int64_t>(c0, 0);
      h1 = std::min(h1, w.in[0]);
      c1 = std::min(c1, w.in[1]);
      div[static_cast<std::size_t>(oh * w.out[1] + ow)] =
          static_cast<double>(count_include_pad ? with_pad : (h1 - h0) * (c1 - c0));
    }
  return from_vector(div, {w.out[0], w.out[1]}, like(x, DType::Float64)).to(x.dtype());
}

// Adds g (per window) into each tap of a zero padded gradient for an input
// of n x c planes; returns the unpadded part.
Tensor scatter_taps(const Tensor& g, const Windows& w, int64_t n, int64_t c) {
  Tensor gxp = zeros({n, c, w.padded(0), w.padded(1)}, like(g, g.dtype()));
  for (int64_t kh = 0; kh < w.k[0]; ++kh)
    for (int64_t kw = 0; kw < w.k[1]; ++kw) nn_detail::tap(gxp, w, kh, kw).add_(g);
  Tensor gx = gxp.narrow(2, w.p[0], w.in[0]).narrow(3, w.p[1], w.in[1]);
  return gx.is_contiguous() ? gx : gx.contiguous();
}

Size2 stride_or_kernel(std::optional<Size2> stride, Size2 kernel) {
  return stride ? *stride : kernel;
}

// The named ops' geometry attributes: kernel, stride, padding (h, w).
std::vector<OpAttr> geometry(const Windows& w) {
  return {w.k[0], w.k[1], w.s[0], w.s[1], w.p[0], w.p[1]};
}

// The composite max pool: values and PyTorch's indices.
void max_pool_composite(const Tensor& x, const Windows& w, Tensor& out, Tensor& idx) {
  const int64_t n = x.size(0), c = x.size(1);
  const Tensor xp = nn_detail::pad(x, w, -std::numeric_limits<double>::infinity());
  out = full({n, c, w.out[0], w.out[1]}, -std::numeric_limits<double>::infinity(),
             like(x, x.dtype()));
  idx = window_positions(w, 0, 0, true, x).expand({n, c, w.out[0], w.out[1]}).contiguous();
  if (out.numel() == 0) return;
  for (int64_t kh = 0; kh < w.k[0]; ++kh)
    for (int64_t kw = 0; kw < w.k[1]; ++kw) {
      const Tensor t = nn_detail::tap(xp, w, kh, kw);
      // A larger value, or NaN (which then stays the maximum), takes the window.
      const Tensor take = logical_or(gt(t, out), ne(t, t));
      out = where(take, t, out);
      idx = where(take, window_positions(w, kh, kw, false, x), idx);
    }
}

// avg_pool2d's gradient: each window's share of g spread over its taps.
Tensor avg_pool_backward(const Tensor& g, const Windows& w, const Tensor& div,
                         bool count_include_pad, int64_t n, int64_t c) {
  if (g.numel() > 0) {
    Tensor gx = detail::make_empty({n, c, w.in[0], w.in[1]}, g.dtype(), g);
    std::vector<OpAttr> attrs = geometry(w);
    attrs.push_back(int64_t{count_include_pad ? 1 : 0});
    if (detail::run_kernel_override("core::avg_pool2d_backward", {g.contiguous()}, {gx}, attrs))
      return gx;
  }
  return scatter_taps(g.div(div), w, n, c);
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Size2 kernel_size,
                                                  std::optional<Size2> stride, Size2 padding,
                                                  Size2 dilation, bool ceil_mode) {
  bool unbatched = false;
  const Tensor x = nn_detail::as_batch("max_pool2d", input, unbatched);
  const Windows w =
      nn_detail::make_windows("max_pool2d", x, kernel_size, stride_or_kernel(stride, kernel_size),
                              padding, dilation, ceil_mode, true);
  const int64_t n = x.size(0), c = x.size(1);
  Tensor out, idx;
  {
    NoGradGuard no_grad;
    bool done = false;
    if (n * c * w.out[0] * w.out[1] > 0 && has_override("core::max_pool2d", x)) {
      out = detail::make_empty({n, c, w.out[0], w.out[1]}, x.dtype(), x);
      idx = detail::make_empty({n, c, w.out[0], w.out[1]}, DType::Int64, x);
      std::vector<OpAttr> attrs = geometry(w);
      attrs.push_back(w.d[0]);
      attrs.push_back(w.d[1]);
      done = detail::run_kernel_override("core::max_pool2d", {x}, {out, idx}, attrs);
    }
    if (!done) max_pool_composite(x, w, out, idx);
  }
  if (autograd::needs_grad({&x})) {
    const DimVector xs(x.sizes());
    auto node = autograd::make_node(
        "MaxPool2DWithIndicesBackward0", {&x},
        [xs](autograd::FunctionNode& nd, std::vector<Tensor>& g) {
          const Tensor ind = nd.saved(0);
          const int64_t nn = xs[0], cc = xs[1];
          Tensor gx = zeros({nn, cc, xs[2] * xs[3]}, like(g[0], g[0].dtype()));
          if (g[0].numel() > 0)
            gx.scatter_add_(2, ind.reshape({nn, cc, -1}), g[0].reshape({nn, cc, -1}));
          return std::vector<Tensor>{gx.view(xs)};
        });
    node->save(idx);
    autograd::set_history(out, node.get());
  }
  if (unbatched) return {out.squeeze(0), idx.squeeze(0)};
  return {out, idx};
}

Tensor max_pool2d(const Tensor& input, Size2 kernel_size, std::optional<Size2> stride,
                  Size2 padding, Size2 dilation, bool ceil_mode) {
  return max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool2d(const Tensor& input, Size2 kernel_size, std::optional<Size2> stride,
                  Size2 padding, bool ceil_mode, bool count_include_pad) {
  bool unbatched = false;
  const Tensor x = nn_detail::as_batch("avg_pool2d", input, unbatched);
  const Windows w =
      nn_detail::make_windows("avg_pool2d", x, kernel_size, stride_or_kernel(stride, kernel_size),
                              padding, 1, ceil_mode, true);
  Tensor out;
  const Tensor div = divisors(w, count_include_pad, x);
  {
    NoGradGuard no_grad;
    bool done = false;
    if (x.size(0) * x.size(1) * w.out[0] * w.out[1] > 0 && has_override("core::avg_pool2d", x)) {
      out = detail::make_empty({x.size(0), x.size(1), w.out[0], w.out[1]}, x.dtype(), x);
      std::vector<OpAttr> attrs = geometry(w);
      attrs.push_back(int64_t{count_include_pad ? 1 : 0});
      done = detail::run_kernel_override("core::avg_pool2d", {x}, {out}, attrs);
    }
    if (!done) {
      const Tensor xp = nn_detail::pad(x, w, 0);
      out = zeros({x.size(0), x.size(1), w.out[0], w.out[1]}, like(x, x.dtype()));
      if (out.numel() > 0) {
        for (int64_t kh = 0; kh < w.k[0]; ++kh)
          for (int64_t kw = 0; kw < w.k[1]; ++kw) out.add_(nn_detail::tap(xp, w, kh, kw));
        out.div_(div);
      }
    }
  }
  if (autograd::needs_grad({&x})) {
    const int64_t n = x.size(0), c = x.size(1);  // the input itself is not kept
    auto node = autograd::make_node(
        "AvgPool2DBackward0", {&x},
        [w, div, n, c, count_include_pad](autograd::FunctionNode&, std::vector<Tensor>& g) {
          return std::vector<Tensor>{avg_pool_backward(g[0], w, div, count_include_pad, n, c)};
        });
    autograd::set_history(out, node.get());
  }
  return unbatched ? out.squeeze(0) : out;
}

Tensor adaptive_avg_pool2d(const Tensor& input, Size2 output_size) {
  bool unbatched = false;
  const Tensor x = nn_detail::as_batch("adaptive_avg_pool2d", input, unbatched);
  for (int i = 0; i < 2; ++i)
    BP_CHECK(output_size[i] >= 0, "[adaptive_avg_pool2d] output_size must not be negative, got (",
             output_size[0], ", ", output_size[1], ")");
  const int64_t in[2] = {x.size(2), x.size(3)};
  for (int i = 0; i < 2; ++i)
    BP_CHECK(in[i] > 0 || output_size[i] == 0, "[adaptive_avg_pool2d] an input of shape ",
             nn_detail::shape_text(x.sizes()), " has an empty spatial dim");
  Tensor out;
  if (output_size[0] == 1 && output_size[1] == 1) {
    out = x.mean({2, 3}, true);
  } else {
    // Averaging as two matrix products: A_h [OH, H] @ x @ A_w^T [W, OW].
    Tensor a[2];
    for (int i = 0; i < 2; ++i) {
      const int64_t o = output_size[i], n = in[i];
      std::vector<double> m(static_cast<std::size_t>(o * n), 0.0);
      for (int64_t k = 0; k < o; ++k) {
        const int64_t lo = (k * n) / o, hi = ((k + 1) * n + o - 1) / o;
        for (int64_t j = lo; j < hi; ++j)
          m[static_cast<std::size_t>(k * n + j)] = 1.0 / static_cast<double>(hi - lo);
      }
      a[i] = from_vector(m, {o, n}, like(x, DType::Float64)).to(x.dtype());
    }
    out = matmul(matmul(a[0], x), a[1].t());
  }
  return unbatched ? out.squeeze(0) : out;
}

}  // namespace bp
