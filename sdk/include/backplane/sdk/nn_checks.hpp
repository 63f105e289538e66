// Checks for the core's overridable nn composites (pooling and batch
// normalisation), as bp::sdk::check::layer_norm is for core::layer_norm:
//
//   void avg_pool(const bp::sdk::KernelCall& c) {
//     const auto p = bp::sdk::check::pool2d(c, "core::avg_pool2d");  // geometry, checked
//     ...
//   }
//
// The core checks every call before the kernel runs; a kernel checks again
// what it relies on, so that no call makes it read or write out of bounds.
// They read only descriptors and attributes, never tensor memory.
#pragma once

#include <algorithm>
#include <backplane/sdk/checks.hpp>
#include <cstring>

namespace bp::sdk::check {

// Output size along one dim as PyTorch computes it (pooling and
// convolution): with ceil_mode, a last window must start inside the input
// or the left padding.
inline int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                             bool ceil_mode) {
  const int64_t num = in + 2 * p - ((k - 1) * d + 1);
  if (num < 0) return 0;
  int64_t o = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) --o;
  return o;
}

// The geometry of a 2-D pooling call (NCHW).
struct Pool2dArgs {
  int64_t n, c;          // batch, channels
  int64_t in_h, in_w;    // input plane
  int64_t out_h, out_w;  // output plane (fixes ceil_mode)
  int64_t kh, kw, sh, sw, ph, pw;
  int64_t dh = 1, dw = 1;          // dilation (max_pool2d)
  bool count_include_pad = false;  // avg_pool2d
  bool ceil_mode = false;          // whether the output size is ceil_mode's (and not floor's)
};

// core::max_pool2d (x -> values, int64 indices), core::avg_pool2d (x -> out)
// and core::avg_pool2d_backward (grad_out -> grad_x): 4-D operands of one
// batch and channel count; ints = kernel, stride, padding (h, w), then
// dilation (max) or count_include_pad (avg); kernel, stride and dilation
// positive, padding at most half the kernel, and the output plane the size
// that floor or ceil mode gives.
inline Pool2dArgs pool2d(const KernelCall& c, const char* op) {
  const bool max = std::strcmp(op, "core::max_pool2d") == 0;
  const bool backward = std::strcmp(op, "core::avg_pool2d_backward") == 0;
  BP_SDK_CHECK(c.num_inputs() == 1 && c.num_outputs() == (max ? 2 : 1), op,
               "expected 1 input and " << (max ? 2 : 1) << " output(s), got " << c.num_inputs()
                                       << " and " << c.num_outputs());
  const bp_attrs& a = c.attrs();
  BP_SDK_CHECK(a.num_ints >= (max ? 8 : 7), op,
               "expected " << (max ? 8 : 7) << " int attributes, got " << a.num_ints);
  const TensorRef small = backward ? c.input(0) : c.output(0),
                  big = backward ? c.output(0) : c.input(0);
  BP_SDK_CHECK(small.ndim() == 4 && big.ndim() == 4, op, "expects 4-D (N, C, H, W) operands");
  BP_SDK_CHECK(small.size(0) == big.size(0) && small.size(1) == big.size(1), op,
               "the input and output differ in batch or channels");
  BP_SDK_CHECK(small.dtype() == big.dtype(), op, "the input and output differ in dtype");
  Pool2dArgs p{big.size(0), big.size(1), big.size(2), big.size(3), small.size(2), small.size(3),
               a.ints[0],   a.ints[1],   a.ints[2],   a.ints[3],   a.ints[4],     a.ints[5]};
  if (max) {
    p.dh = a.ints[6];
    p.dw = a.ints[7];
    const TensorRef idx = c.output(1);
    BP_SDK_CHECK(idx.dtype() == BP_DTYPE_INT64, op, "the indices must be int64");
    BP_SDK_CHECK(idx.ndim() == 4, op, "the indices must be 4-D");
    for (int d = 0; d < 4; ++d)
      BP_SDK_CHECK(idx.size(d) == small.size(d), op,
                   "the indices and values differ in size in dim " << d);
  } else {
    p.count_include_pad = a.ints[6] != 0;
  }
  BP_SDK_CHECK(p.kh > 0 && p.kw > 0 && p.sh > 0 && p.sw > 0 && p.dh > 0 && p.dw > 0, op,
               "kernel, stride and dilation must be positive");
  BP_SDK_CHECK(p.ph >= 0 && p.pw >= 0 && 2 * p.ph <= p.kh && 2 * p.pw <= p.kw, op,
               "padding must be between 0 and half the kernel");
  const int64_t fh = pool_out_size(p.in_h, p.kh, p.sh, p.ph, p.dh, false);
  const int64_t fw = pool_out_size(p.in_w, p.kw, p.sw, p.pw, p.dw, false);
  const int64_t ch = pool_out_size(p.in_h, p.kh, p.sh, p.ph, p.dh, true);
  const int64_t cw = pool_out_size(p.in_w, p.kw, p.sw, p.pw, p.dw, true);
  const bool floor_ok = p.out_h == fh && p.out_w == fw, ceil_ok = p.out_h == ch && p.out_w == cw;
  BP_SDK_CHECK(floor_ok || ceil_ok, op,
               "an output plane of " << p.out_h << "x" << p.out_w << " fits neither floor (" << fh
                                     << "x" << fw << ") nor ceil mode (" << ch << "x" << cw << ")");
  p.ceil_mode = !floor_ok;
  return p;
}

// The divisor of avg_pool2d's window at output (oh, ow), as PyTorch counts
// it: the window's part inside the padded input with count_include_pad,
// else its part inside the input.
inline int64_t avg_pool_divisor(const Pool2dArgs& p, int64_t oh, int64_t ow) {
  int64_t h0 = oh * p.sh - p.ph, w0 = ow * p.sw - p.pw;
  int64_t h1 = std::min(h0 + p.kh, p.in_h + p.ph), w1 = std::min(w0 + p.kw, p.in_w + p.pw);
  if (p.count_include_pad) return (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, p.in_h);
  w1 = std::min(w1, p.in_w);
  return (h1 - h0) * (w1 - w0);
}

// The geometry of a conv2d call (NCHW).
struct Conv2dArgs {
  int64_t n, c, o, groups;  // batch, input and output channels, groups
  int64_t in_h, in_w, out_h, out_w, kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t output_mask = 3;                   // core::conv2d_backward: input (1), weight (2)
  int64_t cg() const { return c / groups; }  // input channels per group
  int64_t og() const { return o / groups; }  // output channels per group
};

// core::conv2d (x, weight, bias -> out) and core::conv2d_backward
// (grad_out, x, weight -> grad_x, grad_weight): x [N, C, H, W], weight
// [O, C/groups, KH, KW], bias [O], out and grad_out [N, O, OH, OW] of the
// convolution's size, grad_x and grad_weight of x's and weight's shapes (a
// 1-element stand-in when its bit of output_mask is clear); one floating
// dtype; ints = stride, padding, dilation (h, w), groups, then output_mask.
inline Conv2dArgs conv2d(const KernelCall& c, const char* op) {
  const bool backward = std::strcmp(op, "core::conv2d_backward") == 0;
  BP_SDK_CHECK(c.num_inputs() == 3 && c.num_outputs() == (backward ? 2 : 1), op,
               "expected 3 inputs and " << (backward ? 2 : 1) << " output(s), got "
                                        << c.num_inputs() << " and " << c.num_outputs());
  const bp_attrs& at = c.attrs();
  BP_SDK_CHECK(at.num_ints >= (backward ? 8 : 7), op,
               "expected " << (backward ? 8 : 7) << " int attributes");
  const TensorRef x = c.input(backward ? 1 : 0), w = c.input(backward ? 2 : 1);
  const TensorRef y = backward ? c.input(0) : c.output(0);
  for (const TensorRef* t : {&x, &w, &y}) {
    BP_SDK_CHECK(t->ndim() == 4, op, "expects 4-D operands (N, C, H, W) and a 4-D weight");
    BP_SDK_CHECK(t->dtype() == x.dtype(), op,
                 "operands must share x's dtype " << dtype_name(x.dtype()));
  }
  Conv2dArgs a{x.size(0),  x.size(1),  w.size(0),  at.ints[6], x.size(2),  x.size(3),
               y.size(2),  y.size(3),  w.size(2),  w.size(3),  at.ints[0], at.ints[1],
               at.ints[2], at.ints[3], at.ints[4], at.ints[5]};
  if (backward) a.output_mask = at.ints[7];
  BP_SDK_CHECK(
      a.groups > 0 && a.c % a.groups == 0 && a.o % a.groups == 0 && w.size(1) * a.groups == a.c, op,
      "a weight of shape [" << a.o << ", " << w.size(1) << ", " << a.kh << ", " << a.kw
                            << "] does not fit " << a.c << " input channels in " << a.groups
                            << " groups");
  BP_SDK_CHECK(a.sh > 0 && a.sw > 0 && a.dh > 0 && a.dw > 0 && a.ph >= 0 && a.pw >= 0, op,
               "stride and dilation must be positive, padding not negative");
  BP_SDK_CHECK(y.size(0) == a.n && y.size(1) == a.o &&
                   a.out_h == pool_out_size(a.in_h, a.kh, a.sh, a.ph, a.dh, false) &&
                   a.out_w == pool_out_size(a.in_w, a.kw, a.sw, a.pw, a.dw, false),
               op, "the output's shape is not the convolution's");
  if (!backward) {
    const TensorRef b = c.input(2);
    BP_SDK_CHECK(b.ndim() == 1 && b.size(0) == a.o && b.dtype() == x.dtype(), op,
                 "the bias must be [" << a.o << "] of x's dtype");
  } else {
    const TensorRef gx = c.output(0), gw = c.output(1);
    if (a.output_mask & 1) {
      BP_SDK_CHECK(gx.ndim() == 4 && gx.dtype() == x.dtype(), op,
                   "grad_x must have x's shape and dtype");
      for (int d = 0; d < 4; ++d)
        BP_SDK_CHECK(gx.size(d) == x.size(d), op, "grad_x must have x's shape and dtype");
    }
    if (a.output_mask & 2) {
      BP_SDK_CHECK(gw.ndim() == 4 && gw.dtype() == x.dtype(), op,
                   "grad_weight must have the weight's shape and dtype");
      for (int d = 0; d < 4; ++d)
        BP_SDK_CHECK(gw.size(d) == w.size(d), op,
                     "grad_weight must have the weight's shape and dtype");
    }
  }
  return a;
}

struct BatchNormArgs {
  int64_t n, c;     // batch, channels
  int64_t spatial;  // elements per (sample, channel): the product of dims 2..
  double eps;
  int64_t output_mask = 7;  // core::batch_norm_backward: x (1), weight (2), bias (4)
};

// core::batch_norm (x, weight, bias -> out, mean, var),
// core::batch_norm_inference (x, weight, bias, running_mean, running_var ->
// out) and core::batch_norm_backward (grad_out, x, weight, mean, var ->
// grad_x, grad_weight, grad_bias): x of rank 2 or more, of one floating
// dtype with every operand, per-channel operands of [C], outputs of x's
// shape or [C] (grad_x a 1-element stand-in when its mask bit is clear);
// scalars[0] = eps, ints[0] = output_mask (backward).
inline BatchNormArgs batch_norm(const KernelCall& c, const char* op) {
  const bool inference = std::strcmp(op, "core::batch_norm_inference") == 0;
  const bool backward = std::strcmp(op, "core::batch_norm_backward") == 0;
  const int ins = backward || inference ? 5 : 3, outs = inference ? 1 : 3;
  BP_SDK_CHECK(c.num_inputs() == ins && c.num_outputs() == outs, op,
               "expected " << ins << " inputs and " << outs << " output(s), got " << c.num_inputs()
                           << " and " << c.num_outputs());
  BP_SDK_CHECK(
      c.attrs().num_scalars >= 1 && (!backward || c.attrs().num_ints >= 1), op,
      "eps (scalars[0])" << (backward ? " and output_mask (ints[0])" : "") << " are required");
  const TensorRef x = c.input(backward ? 1 : 0);
  BP_SDK_CHECK(x.ndim() >= 2, op, "expects x of rank 2 or more, got rank " << x.ndim());
  BatchNormArgs args{x.size(0), x.size(1), 1, c.scalar(0).value.f};
  for (int d = 2; d < x.ndim(); ++d) args.spatial *= x.size(d);
  if (backward) args.output_mask = c.attrs().ints[0];
  auto same_as_x = [&](const TensorRef& t, const char* what) {
    BP_SDK_CHECK(t.dtype() == x.dtype(), op,
                 what << " must share x's dtype " << dtype_name(x.dtype()));
    BP_SDK_CHECK(t.ndim() == x.ndim(), op, what << " must have x's shape");
    for (int d = 0; d < x.ndim(); ++d)
      BP_SDK_CHECK(t.size(d) == x.size(d), op, what << " must have x's shape");
  };
  auto per_channel = [&](const TensorRef& t, const char* what) {
    BP_SDK_CHECK(t.dtype() == x.dtype(), op,
                 what << " must share x's dtype " << dtype_name(x.dtype()));
    BP_SDK_CHECK(t.ndim() == 1 && t.size(0) == args.c, op,
                 what << " must have shape [" << args.c << "]");
  };
  if (backward) {
    same_as_x(c.input(0), "grad_out");
    per_channel(c.input(2), "weight");
    per_channel(c.input(3), "mean");
    per_channel(c.input(4), "var");
    if (args.output_mask & 1) same_as_x(c.output(0), "grad_x");
    per_channel(c.output(1), "grad_weight");
    per_channel(c.output(2), "grad_bias");
  } else {
    per_channel(c.input(1), "weight");
    per_channel(c.input(2), "bias");
    if (inference) {
      per_channel(c.input(3), "running_mean");
      per_channel(c.input(4), "running_var");
    } else {
      per_channel(c.output(1), "mean");
      per_channel(c.output(2), "var");
    }
    same_as_x(c.output(0), "the output");
  }
  return args;
}

}  // namespace bp::sdk::check
