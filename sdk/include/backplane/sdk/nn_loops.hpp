// Plain loops for the core's overridable nn composites, for a plugin whose
// memory the host can address (or whose device runs host code): conv2d and
// its backward, max_pool2d (PyTorch's indices and NaN rule), avg_pool2d and
// its backward, batch_norm (training, inference, backward). Each takes the
// geometry its check::* function returned (nn_checks.hpp) and works on one
// range of independent items (planes or channels), so that a plugin can
// share the range among threads; operands may have any strides. Sums are
// accumulated in double.
//
//   void max_pool(const bp::sdk::KernelCall& c) {
//     const auto p = bp::sdk::check::pool2d(c, "core::max_pool2d");
//     bp::sdk::nn::max_pool2d<float>(p, c.input(0), c.output(0), c.output(1), 0, p.n * p.c);
//   }
#pragma once

#include <algorithm>
#include <array>
#include <backplane/sdk/nn_checks.hpp>
#include <cmath>
#include <limits>
#include <vector>

namespace bp::sdk::nn {

using check::BatchNormArgs;
using check::Conv2dArgs;
using check::Pool2dArgs;

// Runs body(T{}) for a float32 or float64 call (T float or double);
// declines other dtypes (bp::sdk::unsupported).
template <class F>
void visit_floating(const KernelCall& c, bp_dtype dt, F&& body) {
  if (dt == BP_DTYPE_FLOAT32)
    body(float{});
  else if (dt == BP_DTYPE_FLOAT64)
    body(double{});
  else
    unsupported(c, dt);
}

// Element (i0, i1, i2, i3) of a 4-D operand.
template <class T>
T& at4(const TensorRef& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return t.data<T>()[i0 * t.stride(0) + i1 * t.stride(1) + i2 * t.stride(2) + i3 * t.stride(3)];
}

// --- pooling: items are the n * c planes ------------------------------------------

// The first in-input tap of a window starting at `start` and the end of its
// taps (exclusive) along one dim.
inline void window_taps(int64_t start, int64_t k, int64_t d, int64_t in, int64_t& first,
                        int64_t& end) {
  end = std::min(start + (k - 1) * d + 1, in);
  first = start;
  while (first < 0) first += d;
}

template <class T>
void max_pool2d(const Pool2dArgs& p, const TensorRef& x, const TensorRef& out, const TensorRef& idx,
                int64_t begin, int64_t end) {
  for (int64_t plane = begin; plane < end; ++plane) {
    const int64_t n = plane / p.c, ch = plane % p.c;
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      int64_t h0, h1;
      window_taps(oh * p.sh - p.ph, p.kh, p.dh, p.in_h, h0, h1);
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        int64_t w0, w1;
        window_taps(ow * p.sw - p.pw, p.kw, p.dw, p.in_w, w0, w1);
        T best = -std::numeric_limits<T>::infinity();
        int64_t where = h0 * p.in_w + w0;
        for (int64_t h = h0; h < h1; h += p.dh)
          for (int64_t w = w0; w < w1; w += p.dw) {
            const T v = at4<T>(x, n, ch, h, w);
            if (v > best || std::isnan(v)) {  // a NaN takes the window, as in PyTorch
              best = v;
              where = h * p.in_w + w;
            }
          }
        at4<T>(out, n, ch, oh, ow) = best;
        at4<int64_t>(idx, n, ch, oh, ow) = where;
      }
    }
  }
}

template <class T>
void avg_pool2d(const Pool2dArgs& p, const TensorRef& x, const TensorRef& out, int64_t begin,
                int64_t end) {
  for (int64_t plane = begin; plane < end; ++plane) {
    const int64_t n = plane / p.c, ch = plane % p.c;
    for (int64_t oh = 0; oh < p.out_h; ++oh)
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        const int64_t h0 = std::max<int64_t>(oh * p.sh - p.ph, 0),
                      h1 = std::min(oh * p.sh - p.ph + p.kh, p.in_h);
        const int64_t w0 = std::max<int64_t>(ow * p.sw - p.pw, 0),
                      w1 = std::min(ow * p.sw - p.pw + p.kw, p.in_w);
        double sum = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) sum += at4<T>(x, n, ch, h, w);
        at4<T>(out, n, ch, oh, ow) =
            static_cast<T>(sum / static_cast<double>(check::avg_pool_divisor(p, oh, ow)));
      }
  }
}

// grad_x of avg_pool2d from grad_out (`g`): each input position gathers the
// windows that contain it.
template <class T>
void avg_pool2d_backward(const Pool2dArgs& p, const TensorRef& g, const TensorRef& gx,
                         int64_t begin, int64_t end) {
  // Output rows (cols) whose window holds input row h: oh * s - pad <= h < oh * s - pad + k.
  auto range = [](int64_t h, int64_t k, int64_t s, int64_t pad, int64_t out, int64_t& lo,
                  int64_t& hi) {
    const int64_t t = h + pad - k;  // oh * s > t
    lo = t < 0 ? 0 : t / s + 1;
    hi = std::min(out, (h + pad) / s + 1);
  };
  for (int64_t plane = begin; plane < end; ++plane) {
    const int64_t n = plane / p.c, ch = plane % p.c;
    for (int64_t h = 0; h < p.in_h; ++h) {
      int64_t oh0, oh1;
      range(h, p.kh, p.sh, p.ph, p.out_h, oh0, oh1);
      for (int64_t w = 0; w < p.in_w; ++w) {
        int64_t ow0, ow1;
        range(w, p.kw, p.sw, p.pw, p.out_w, ow0, ow1);
        double sum = 0;
        for (int64_t oh = oh0; oh < oh1; ++oh)
          for (int64_t ow = ow0; ow < ow1; ++ow)
            sum +=
                at4<T>(g, n, ch, oh, ow) / static_cast<double>(check::avg_pool_divisor(p, oh, ow));
        at4<T>(gx, n, ch, h, w) = static_cast<T>(sum);
      }
    }
  }
}

// --- conv2d ---------------------------------------------------------------------------

// Forward over the n * o output planes [begin, end).
template <class T>
void conv2d(const Conv2dArgs& a, const TensorRef& x, const TensorRef& w, const TensorRef& b,
            const TensorRef& out, int64_t begin, int64_t end) {
  for (int64_t plane = begin; plane < end; ++plane) {
    const int64_t n = plane / a.o, o = plane % a.o, c0 = (o / a.og()) * a.cg();
    const double bias = b.data<T>()[o * b.stride(0)];
    for (int64_t oh = 0; oh < a.out_h; ++oh)
      for (int64_t ow = 0; ow < a.out_w; ++ow) {
        double sum = bias;
        for (int64_t ci = 0; ci < a.cg(); ++ci)
          for (int64_t kh = 0; kh < a.kh; ++kh) {
            const int64_t h = oh * a.sh - a.ph + kh * a.dh;
            const bool pad_row = h < 0 || h >= a.in_h;
            for (int64_t kw = 0; kw < a.kw; ++kw) {
              const int64_t iw = ow * a.sw - a.pw + kw * a.dw;
              const double wv = at4<T>(w, o, ci, kh, kw);
              // Padding is zeros that multiply (PyTorch's rule): 0 * inf is NaN.
              sum += pad_row || iw < 0 || iw >= a.in_w
                         ? 0.0 * wv
                         : static_cast<double>(at4<T>(x, n, c0 + ci, h, iw)) * wv;
            }
          }
        at4<T>(out, n, o, oh, ow) = static_cast<T>(sum);
      }
  }
}

// grad_x over the n * c input planes [begin, end): each input position
// gathers the outputs whose windows read it.
template <class T>
void conv2d_backward_input(const Conv2dArgs& a, const TensorRef& g, const TensorRef& w,
                           const TensorRef& gx, int64_t begin, int64_t end) {
  for (int64_t plane = begin; plane < end; ++plane) {
    const int64_t n = plane / a.c, c = plane % a.c, grp = c / a.cg(), ci = c % a.cg();
    for (int64_t h = 0; h < a.in_h; ++h)
      for (int64_t iw = 0; iw < a.in_w; ++iw) {
        double sum = 0;
        for (int64_t kh = 0; kh < a.kh; ++kh) {
          const int64_t th = h + a.ph - kh * a.dh;  // = oh * sh
          if (th < 0 || th % a.sh != 0 || th / a.sh >= a.out_h) continue;
          for (int64_t kw = 0; kw < a.kw; ++kw) {
            const int64_t tw = iw + a.pw - kw * a.dw;
            if (tw < 0 || tw % a.sw != 0 || tw / a.sw >= a.out_w) continue;
            for (int64_t oo = 0; oo < a.og(); ++oo) {
              const int64_t o = grp * a.og() + oo;
              sum += static_cast<double>(at4<T>(g, n, o, th / a.sh, tw / a.sw)) *
                     at4<T>(w, o, ci, kh, kw);
            }
          }
        }
        at4<T>(gx, n, c, h, iw) = static_cast<T>(sum);
      }
  }
}

// grad_weight over the output channels [begin, end).
template <class T>
void conv2d_backward_weight(const Conv2dArgs& a, const TensorRef& g, const TensorRef& x,
                            const TensorRef& gw, int64_t begin, int64_t end) {
  for (int64_t o = begin; o < end; ++o) {
    const int64_t c0 = (o / a.og()) * a.cg();
    for (int64_t ci = 0; ci < a.cg(); ++ci)
      for (int64_t kh = 0; kh < a.kh; ++kh)
        for (int64_t kw = 0; kw < a.kw; ++kw) {
          double sum = 0;
          for (int64_t n = 0; n < a.n; ++n)
            for (int64_t oh = 0; oh < a.out_h; ++oh) {
              const int64_t h = oh * a.sh - a.ph + kh * a.dh;
              const bool pad_row = h < 0 || h >= a.in_h;
              for (int64_t ow = 0; ow < a.out_w; ++ow) {
                const int64_t iw = ow * a.sw - a.pw + kw * a.dw;
                const double gv = at4<T>(g, n, o, oh, ow);
                sum += pad_row || iw < 0 || iw >= a.in_w
                           ? 0.0 * gv
                           : gv * static_cast<double>(at4<T>(x, n, c0 + ci, h, iw));
              }
            }
          at4<T>(gw, o, ci, kh, kw) = static_cast<T>(sum);
        }
  }
}

// Padding is zeros that multiply (PyTorch's rule), so an inf or NaN weight on a
// padding tap makes that output NaN, and an inf or NaN grad_out makes the
// gradient of a weight it meets on padding NaN. A library that skips padding
// taps (oneDNN's convolution) gives finite values there; these mend its
// results. The forward one reads the weight; both write only where a value
// is not finite.
template <class T>
void conv2d_padding_nan(const Conv2dArgs& a, const TensorRef& w, const TensorRef& out) {
  if (a.ph == 0 && a.pw == 0) return;
  for (int64_t o = 0; o < a.o; ++o)
    for (int64_t kh = 0; kh < a.kh; ++kh)
      for (int64_t kw = 0; kw < a.kw; ++kw) {
        bool finite = true;
        for (int64_t ci = 0; ci < a.cg() && finite; ++ci)
          finite = std::isfinite(static_cast<double>(at4<T>(w, o, ci, kh, kw)));
        if (finite) continue;
        for (int64_t oh = 0; oh < a.out_h; ++oh) {
          const int64_t h = oh * a.sh - a.ph + kh * a.dh;
          for (int64_t ow = 0; ow < a.out_w; ++ow) {
            const int64_t iw = ow * a.sw - a.pw + kw * a.dw;
            if (h >= 0 && h < a.in_h && iw >= 0 && iw < a.in_w) continue;
            for (int64_t n = 0; n < a.n; ++n)
              at4<T>(out, n, o, oh, ow) = std::numeric_limits<T>::quiet_NaN();
          }
        }
      }
}

template <class T>
void conv2d_backward_weight_padding_nan(const Conv2dArgs& a, const TensorRef& g,
                                        const TensorRef& gw) {
  if (a.ph == 0 && a.pw == 0) return;
  for (int64_t n = 0; n < a.n; ++n)
    for (int64_t o = 0; o < a.o; ++o)
      for (int64_t oh = 0; oh < a.out_h; ++oh)
        for (int64_t ow = 0; ow < a.out_w; ++ow) {
          if (std::isfinite(static_cast<double>(at4<T>(g, n, o, oh, ow)))) continue;
          for (int64_t kh = 0; kh < a.kh; ++kh) {
            const int64_t h = oh * a.sh - a.ph + kh * a.dh;
            for (int64_t kw = 0; kw < a.kw; ++kw) {
              const int64_t iw = ow * a.sw - a.pw + kw * a.dw;
              if (h >= 0 && h < a.in_h && iw >= 0 && iw < a.in_w) continue;
              for (int64_t ci = 0; ci < a.cg(); ++ci)
                at4<T>(gw, o, ci, kh, kw) = std::numeric_limits<T>::quiet_NaN();
            }
          }
        }
}

// --- batch_norm: items are channels ------------------------------------------------

// Calls f(offsets) for every element of channel `ch` of the rank >= 2
// operands `ts` (one shape), offsets[k] in elements of ts[k].
template <std::size_t K, class F>
void for_channel(const std::array<TensorRef, K>& ts, int64_t ch, F&& f) {
  const TensorRef& x = ts[0];
  int64_t count = 1;
  for (int d = 0; d < x.ndim(); ++d)
    if (d != 1) count *= x.size(d);
  std::array<int64_t, K> off{};
  for (int64_t i = 0; i < count; ++i) {
    int64_t r = i;
    for (std::size_t k = 0; k < K; ++k) off[k] = ch * ts[k].stride(1);
    for (int d = x.ndim() - 1; d >= 0; --d) {
      if (d == 1) continue;
      const int64_t coord = r % x.size(d);
      r /= x.size(d);
      for (std::size_t k = 0; k < K; ++k) off[k] += coord * ts[k].stride(d);
    }
    f(off);
  }
}

// Training forward: out, and each channel's mean and biased variance.
template <class T>
void batch_norm(const BatchNormArgs& a, const TensorRef& x, const TensorRef& w, const TensorRef& b,
                const TensorRef& out, const TensorRef& mean, const TensorRef& var, int64_t begin,
                int64_t end) {
  const double m = static_cast<double>(a.n * a.spatial);
  for (int64_t ch = begin; ch < end; ++ch) {
    double sum = 0, sq = 0;
    for_channel<1>({x}, ch, [&](const auto& o) { sum += x.data<T>()[o[0]]; });
    const double mu = sum / m;
    for_channel<1>({x}, ch, [&](const auto& o) {
      const double d = x.data<T>()[o[0]] - mu;
      sq += d * d;
    });
    const double v = sq / m, inv = 1.0 / std::sqrt(v + a.eps);
    const double scale = w.data<T>()[ch * w.stride(0)] * inv, shift = b.data<T>()[ch * b.stride(0)];
    for_channel<2>({x, out}, ch, [&](const auto& o) {
      out.data<T>()[o[1]] = static_cast<T>((x.data<T>()[o[0]] - mu) * scale + shift);
    });
    mean.data<T>()[ch * mean.stride(0)] = static_cast<T>(mu);
    var.data<T>()[ch * var.stride(0)] = static_cast<T>(v);
  }
}

// Inference: the running statistics `rm`, `rv`.
template <class T>
void batch_norm_inference(const BatchNormArgs& a, const TensorRef& x, const TensorRef& w,
                          const TensorRef& b, const TensorRef& rm, const TensorRef& rv,
                          const TensorRef& out, int64_t begin, int64_t end) {
  for (int64_t ch = begin; ch < end; ++ch) {
    const double mu = rm.data<T>()[ch * rm.stride(0)];
    const double scale =
        w.data<T>()[ch * w.stride(0)] / std::sqrt(rv.data<T>()[ch * rv.stride(0)] + a.eps);
    const double shift = b.data<T>()[ch * b.stride(0)];
    for_channel<2>({x, out}, ch, [&](const auto& o) {
      out.data<T>()[o[1]] = static_cast<T>((x.data<T>()[o[0]] - mu) * scale + shift);
    });
  }
}

// Backward from the batch statistics: grad_x (output_mask bit 0), and the
// weight's and bias's gradients (always written: they are [C]).
template <class T>
void batch_norm_backward(const BatchNormArgs& a, const TensorRef& g, const TensorRef& x,
                         const TensorRef& w, const TensorRef& mean, const TensorRef& var,
                         const TensorRef& gx, const TensorRef& gw, const TensorRef& gb,
                         int64_t begin, int64_t end) {
  const double m = static_cast<double>(a.n * a.spatial);
  for (int64_t ch = begin; ch < end; ++ch) {
    const double mu = mean.data<T>()[ch * mean.stride(0)];
    const double inv = 1.0 / std::sqrt(var.data<T>()[ch * var.stride(0)] + a.eps);
    double sg = 0, sgx = 0;
    for_channel<2>({x, g}, ch, [&](const auto& o) {
      const double gv = g.data<T>()[o[1]];
      sg += gv;
      sgx += gv * (x.data<T>()[o[0]] - mu) * inv;
    });
    gw.data<T>()[ch * gw.stride(0)] = static_cast<T>(sgx);
    gb.data<T>()[ch * gb.stride(0)] = static_cast<T>(sg);
    if (!(a.output_mask & 1)) continue;
    const double scale = w.data<T>()[ch * w.stride(0)] * inv;
    for_channel<3>({x, g, gx}, ch, [&](const auto& o) {
      const double xhat = (x.data<T>()[o[0]] - mu) * inv;
      gx.data<T>()[o[2]] = static_cast<T>(scale * (g.data<T>()[o[1]] - sg / m - xhat * sgx / m));
    });
  }
}

}  // namespace bp::sdk::nn
