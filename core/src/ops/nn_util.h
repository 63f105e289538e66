// What convolution and pooling share: the geometry of sliding windows over
// an NCHW input, padding, and the windows as a view of the padded input.
#pragma once

#include <backplane/nn_ops.h>
#include <backplane/ops.h>

#include <sstream>
#include <string>

#include "../internal.h"

namespace bp::nn_detail {

inline std::string shape_text(IntArrayRef s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

// A 2-D window sweep: kernel, stride, padding, dilation per spatial dim, the
// input's and output's spatial sizes, and extra zero rows/columns at the end
// (a ceil_mode window running past the padding).
struct Windows {
  int64_t k[2], s[2], p[2], d[2];
  int64_t in[2], out[2], extra[2];
  int64_t span(int i) const { return (k[i] - 1) * d[i] + 1; }  // a window's extent
  int64_t padded(int i) const { return in[i] + 2 * p[i] + extra[i]; }
};

// Output size along one dim, as PyTorch computes it: with ceil_mode, a last
// window must start inside the input or the left padding.
inline int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = (k - 1) * d + 1;
  const int64_t num = in + 2 * p - span;
  if (num < 0) return 0;
  int64_t o = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) --o;
  return o;
}

// Checks kernel/stride/padding/dilation and the input's rank; fills `w`.
// `op` names the op in messages.
inline Windows make_windows(const char* op, const Tensor& x, Size2 kernel, Size2 stride,
                            Size2 padding, Size2 dilation, bool ceil_mode, bool pool) {
  Windows w{};
  for (int i = 0; i < 2; ++i) {
    BP_CHECK(kernel[i] > 0, "[", op, "] kernel_size must be positive, got (", kernel[0], ", ",
             kernel[1], ")");
    BP_CHECK(stride[i] > 0, "[", op, "] stride must be positive, got (", stride[0], ", ", stride[1],
             ")");
    BP_CHECK(padding[i] >= 0, "[", op, "] negative padding (", padding[0], ", ", padding[1],
             ") is not supported");
    BP_CHECK(dilation[i] > 0, "[", op, "] dilation must be positive, got (", dilation[0], ", ",
             dilation[1], ")");
    w.k[i] = kernel[i];
    w.s[i] = stride[i];
    w.p[i] = padding[i];
    w.d[i] = dilation[i];
    w.in[i] = x.size(x.dim() - 2 + i);
  }
  if (pool)
    for (int i = 0; i < 2; ++i)
      BP_CHECK(padding[i] * 2 <= kernel[i], "[", op, "] padding (", padding[0], ", ", padding[1],
               ") should be at most half the kernel size (", kernel[0], ", ", kernel[1], ")");
  for (int i = 0; i < 2; ++i) {
    BP_CHECK(w.in[i] + 2 * w.p[i] >= w.span(i), "[", op, "] the padded input is (",
             w.in[0] + 2 * w.p[0], " x ", w.in[1] + 2 * w.p[1],
             ") per channel for an input of shape ", shape_text(x.sizes()),
             ", smaller than the kernel (", w.span(0), " x ", w.span(1), ")",
             (w.d[0] > 1 || w.d[1] > 1) ? " with its dilation" : "");
    w.out[i] = out_size(w.in[i], w.k[i], w.s[i], w.p[i], w.d[i], ceil_mode);
    w.extra[i] = std::max<int64_t>(0, (w.out[i] - 1) * w.s[i] + w.span(i) - (w.in[i] + 2 * w.p[i]));
  }
  return w;
}

// x [N, C, H, W] padded with `value` (and w.extra at the end); x itself when
// there is nothing to add. Not recorded.
inline Tensor pad(const Tensor& x, const Windows& w, const Scalar& value) {
  if (w.p[0] == 0 && w.p[1] == 0 && w.extra[0] == 0 && w.extra[1] == 0) return x;
  Tensor out =
      detail::full_on({x.size(0), x.size(1), w.padded(0), w.padded(1)}, value, x.dtype(), x);
  out.narrow(2, w.p[0], w.in[0]).narrow(3, w.p[1], w.in[1]).copy_(x);
  return out;
}

// The windows of the padded input xp as a view [N, C, OH, OW, KH, KW].
inline Tensor windows(const Tensor& xp, const Windows& w) {
  Tensor v = xp.unfold(2, w.span(0), w.s[0]).unfold(3, w.span(1), w.s[1]);
  v = v.narrow(2, 0, w.out[0]).narrow(3, 0, w.out[1]);
  if (w.d[0] > 1) v = v.slice(4, 0, std::nullopt, w.d[0]);
  if (w.d[1] > 1) v = v.slice(5, 0, std::nullopt, w.d[1]);
  return v;
}

// The part of a padded [N, C, Hp, Wp] tensor that offset (kh, kw) of every
// window reads: a view [N, C, OH, OW].
inline Tensor tap(const Tensor& xp, const Windows& w, int64_t kh, int64_t kw) {
  return xp.slice(2, kh * w.d[0], kh * w.d[0] + (w.out[0] - 1) * w.s[0] + 1, w.s[0])
      .slice(3, kw * w.d[1], kw * w.d[1] + (w.out[1] - 1) * w.s[1] + 1, w.s[1]);
}

// A 3-D [C, H, W] input as a batch of one; the flag says to undo it.
inline Tensor as_batch(const char* op, const Tensor& x, bool& unbatched) {
  BP_CHECK(x.dim() == 3 || x.dim() == 4, "[", op,
           "] expects a 3-D (C, H, W) or 4-D (N, C, H, W) input, got ", detail::describe_tensor(x));
  BP_CHECK_TYPE(is_floating(x.dtype()), "[", op, "] needs a floating input, got ",
                detail::describe_tensor(x));
  unbatched = x.dim() == 3;
  return unbatched ? x.unsqueeze(0) : x;
}

}  // namespace bp::nn_detail
