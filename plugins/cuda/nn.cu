// The nn kernels cuDNN has no exact counterpart for: core::max_pool2d, whose
// indices are PyTorch's (h * W + w in the input plane, the first maximum in
// window order, a NaN taking its window), which cuDNN's max pooling does not
// return; the batch variance from cuDNN's saved inverse deviation; and
// conv2d's padding rule where cuDNN skips padding taps.
#include <algorithm>
#include <backplane/sdk/nn_checks.hpp>
#include <cmath>

#include "cudnn_lib.h"
#include "elementwise.cuh"

namespace bp::cuda {

namespace {

struct MaxPoolArgs {
  bp::sdk::check::Pool2dArgs p;
  int64_t xs[4];  // the input's strides (elements)
  int64_t total;  // output elements
};

template <class T>
__global__ void __launch_bounds__(kBlock)
    max_pool_kernel(MaxPoolArgs a, const T* x, T* out, int64_t* idx) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (i >= a.total) return;
  const bp::sdk::check::Pool2dArgs& p = a.p;
  const int64_t ow = i % p.out_w, oh = (i / p.out_w) % p.out_h, plane = i / (p.out_w * p.out_h);
  const T* xp = x + (plane / p.c) * a.xs[0] + (plane % p.c) * a.xs[1];
  int64_t h0 = oh * p.sh - p.ph, w0 = ow * p.sw - p.pw;
  const int64_t h1 = min(h0 + (p.kh - 1) * p.dh + 1, p.in_h),
                w1 = min(w0 + (p.kw - 1) * p.dw + 1, p.in_w);
  while (h0 < 0) h0 += p.dh;
  while (w0 < 0) w0 += p.dw;
  T best = -INFINITY;
  int64_t at = h0 * p.in_w + w0;
  for (int64_t h = h0; h < h1; h += p.dh)
    for (int64_t w = w0; w < w1; w += p.dw) {
      const T v = xp[h * a.xs[2] + w * a.xs[3]];
      if (v > best || isnan(v)) {
        best = v;
        at = h * p.in_w + w;
      }
    }
  out[i] = best;
  idx[i] = at;
}

template <class T>
__global__ void __launch_bounds__(kBlock)
    variance_kernel(T* var, const T* inv, int64_t n, double eps) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (i >= n) return;
  const double v = static_cast<double>(inv[i]);
  var[i] = static_cast<T>(fmax(1.0 / (v * v) - eps, 0.0));  // never below 0 through rounding
}

template <class T>
__global__ void __launch_bounds__(kBlock)
    invstd_kernel(T* inv, const T* var, int64_t n, double eps) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (i >= n) return;
  inv[i] = static_cast<T>(1.0 / sqrt(static_cast<double>(var[i]) + eps));
}

// --- conv2d's padding rule (cudnn_lib.h) ---------------------------------------------

struct ConvPadArgs {
  bp::sdk::check::Conv2dArgs a;
  int64_t rs[4];  // strides of the operand read for non-finite values (weight, grad_out)
  int64_t ws[4];  // strides of the result mended (out, grad_weight)
  // The outputs whose windows reach padding, per plane: rows [0, r0) and
  // [r1, out_h) whole, and in the rows between, columns [0, c0) and [c1, out_w).
  int64_t r0, r1, c0, c1, border;
};

// The border output `j` of a plane (0 <= j < p.border) as (oh, ow).
__device__ void border_position(const ConvPadArgs& p, int64_t j, int64_t& oh, int64_t& ow) {
  const int64_t w = p.a.out_w, top = p.r0 * w, bottom = (p.a.out_h - p.r1) * w,
                sides = p.c0 + (w - p.c1);
  if (j < top) {
    oh = j / w;
    ow = j % w;
  } else if (j < top + bottom) {
    oh = p.r1 + (j - top) / w;
    ow = (j - top) % w;
  } else {
    const int64_t k = (j - top - bottom) % sides;
    oh = p.r0 + (j - top - bottom) / sides;
    ow = k < p.c0 ? k : p.c1 + (k - p.c0);
  }
}

// Thread i's weight tap (o, ci, kh, kw) of the O x C/groups x KH x KW weights.
struct Tap {
  int64_t o, ci, kh, kw;
};
__device__ Tap tap_of(const bp::sdk::check::Conv2dArgs& a, int64_t i) {
  const int64_t cg = a.c / a.groups;
  return {i / (a.kw * a.kh * cg), (i / (a.kw * a.kh)) % cg, (i / a.kw) % a.kh, i % a.kw};
}
// Thread i's border output (n, o, oh, ow) of the N x O planes.
struct Border {
  int64_t n, o, oh, ow;
};
__device__ Border border_of(const ConvPadArgs& p, int64_t i) {
  Border b{i / (p.border * p.a.o), (i / p.border) % p.a.o, 0, 0};
  border_position(p, i % p.border, b.oh, b.ow);
  return b;
}

__device__ bool on_padding(const bp::sdk::check::Conv2dArgs& a, int64_t oh, int64_t ow, int64_t kh,
                           int64_t kw) {
  const int64_t h = oh * a.sh - a.ph + kh * a.dh, w = ow * a.sw - a.pw + kw * a.dw;
  return h < 0 || h >= a.in_h || w < 0 || w >= a.in_w;
}

// flags[(o * KH + kh) * KW + kw] for each weight tap holding an inf or NaN
// (any input channel); flags[O * KH * KW] when there is one.
template <class T>
__global__ void __launch_bounds__(kBlock)
    weight_flags_kernel(ConvPadArgs p, const T* w, unsigned char* flags) {
  const auto& a = p.a;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (i >= a.o * (a.c / a.groups) * a.kh * a.kw) return;
  const Tap t = tap_of(a, i);
  if (isfinite(w[t.o * p.rs[0] + t.ci * p.rs[1] + t.kh * p.rs[2] + t.kw * p.rs[3]])) return;
  flags[(t.o * a.kh + t.kh) * a.kw + t.kw] = 1;
  flags[a.o * a.kh * a.kw] = 1;
}

// NaN into each border output whose window puts a flagged tap on padding.
template <class T>
__global__ void __launch_bounds__(kBlock)
    out_nan_kernel(ConvPadArgs p, T* out, const unsigned char* flags) {
  const auto& a = p.a;
  if (!flags[a.o * a.kh * a.kw]) return;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (i >= a.n * a.o * p.border) return;
  const Border b = border_of(p, i);
  for (int64_t kh = 0; kh < a.kh; ++kh)
    for (int64_t kw = 0; kw < a.kw; ++kw)
      if (flags[(b.o * a.kh + kh) * a.kw + kw] && on_padding(a, b.oh, b.ow, kh, kw)) {
        out[b.n * p.ws[0] + b.o * p.ws[1] + b.oh * p.ws[2] + b.ow * p.ws[3]] = NAN;
        return;
      }
}

// Flags the weight taps that a non-finite grad_out meets on padding (only
// the border outputs are read).
template <class T>
__global__ void __launch_bounds__(kBlock)
    grad_flags_kernel(ConvPadArgs p, const T* g, unsigned char* flags) {
  const auto& a = p.a;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (i >= a.n * a.o * p.border) return;
  const Border b = border_of(p, i);
  if (isfinite(g[b.n * p.rs[0] + b.o * p.rs[1] + b.oh * p.rs[2] + b.ow * p.rs[3]])) return;
  for (int64_t kh = 0; kh < a.kh; ++kh)
    for (int64_t kw = 0; kw < a.kw; ++kw)
      if (on_padding(a, b.oh, b.ow, kh, kw)) flags[(b.o * a.kh + kh) * a.kw + kw] = 1;
  flags[a.o * a.kh * a.kw] = 1;
}

template <class T>
__global__ void __launch_bounds__(kBlock)
    grad_weight_nan_kernel(ConvPadArgs p, T* gw, const unsigned char* flags) {
  const auto& a = p.a;
  if (!flags[a.o * a.kh * a.kw]) return;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (i >= a.o * (a.c / a.groups) * a.kh * a.kw) return;
  const Tap t = tap_of(a, i);
  if (flags[(t.o * a.kh + t.kh) * a.kw + t.kw])
    gw[t.o * p.ws[0] + t.ci * p.ws[1] + t.kh * p.ws[2] + t.kw * p.ws[3]] = NAN;
}

// ceil(num / den) for den > 0, 0 for num <= 0.
int64_t ceil_div_or_zero(int64_t num, int64_t den) { return num <= 0 ? 0 : (num + den - 1) / den; }

template <class T>
void padding_nan(const Stream& s, const bp::sdk::check::Conv2dArgs& a, const TensorRef& read,
                 const TensorRef& write, bool backward) {
  const int64_t taps = a.o * a.kh * a.kw, weights = taps * (a.c / a.groups);
  if ((a.ph == 0 && a.pw == 0) || weights == 0 || a.n * a.o * a.out_h * a.out_w == 0) return;
  ConvPadArgs p{a, {}, {}, 0, 0, 0, 0, 0};
  for (int d = 0; d < 4; ++d) {
    p.rs[d] = read.stride(d);
    p.ws[d] = write.stride(d);
  }
  // Rows [r0, r1) and columns [c0, c1) have every tap inside the input.
  p.r0 = std::min(ceil_div_or_zero(a.ph, a.sh), a.out_h);
  p.r1 = std::clamp(ceil_div_or_zero(a.in_h + a.ph - (a.kh - 1) * a.dh, a.sh), p.r0, a.out_h);
  p.c0 = std::min(ceil_div_or_zero(a.pw, a.sw), a.out_w);
  p.c1 = std::clamp(ceil_div_or_zero(a.in_w + a.pw - (a.kw - 1) * a.dw, a.sw), p.c0, a.out_w);
  p.border = a.out_h * a.out_w - (p.r1 - p.r0) * (p.c1 - p.c0);
  const int64_t outs = a.n * a.o * p.border;
  if (outs == 0) return;
  Scratch flags(s, static_cast<std::size_t>(taps + 1));
  auto* f = flags.as<unsigned char>();
  BP_CUDA_CHECK(cudaMemsetAsync(f, 0, static_cast<std::size_t>(taps + 1), s.handle));
  const T* r = static_cast<const T*>(read.base());
  T* w = static_cast<T*>(write.base());
  if (!backward) {
    weight_flags_kernel<T><<<grid_for(weights, kBlock), kBlock, 0, s.handle>>>(p, r, f);
    out_nan_kernel<T><<<grid_for(outs, kBlock), kBlock, 0, s.handle>>>(p, w, f);
  } else {
    grad_flags_kernel<T><<<grid_for(outs, kBlock), kBlock, 0, s.handle>>>(p, r, f);
    grad_weight_nan_kernel<T><<<grid_for(weights, kBlock), kBlock, 0, s.handle>>>(p, w, f);
  }
  BP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void conv2d_padding_nan(const Stream& s, const KernelCall& c) {
  const auto a = bp::sdk::check::conv2d(c, "core::conv2d");
  if (c.input(0).dtype() == BP_DTYPE_FLOAT64)
    padding_nan<double>(s, a, c.input(1), c.output(0), false);
  else
    padding_nan<float>(s, a, c.input(1), c.output(0), false);
}

void conv2d_backward_weight_padding_nan(const Stream& s, const KernelCall& c) {
  const auto a = bp::sdk::check::conv2d(c, "core::conv2d_backward");
  if (c.input(0).dtype() == BP_DTYPE_FLOAT64)
    padding_nan<double>(s, a, c.input(0), c.output(1), true);
  else
    padding_nan<float>(s, a, c.input(0), c.output(1), true);
}

void max_pool2d_cuda(const KernelCall& c) {
  MaxPoolArgs a{bp::sdk::check::pool2d(c, "core::max_pool2d"), {}, 0};
  const TensorRef x = c.input(0), out = c.output(0), idx = c.output(1);
  if (!out.is_contiguous() || !idx.is_contiguous())
    BP_SDK_UNSUPPORTED("writes contiguous outputs only; the composite runs");
  for (int d = 0; d < 4; ++d) a.xs[d] = x.stride(d);
  a.total = a.p.n * a.p.c * a.p.out_h * a.p.out_w;
  if (a.total == 0) return;
  const cudaStream_t s = prepare(c).handle;
  const unsigned blocks = grid_for(a.total, kBlock);
  auto* ib = static_cast<int64_t*>(idx.base());
  if (x.dtype() == BP_DTYPE_FLOAT32)
    max_pool_kernel<float><<<blocks, kBlock, 0, s>>>(a, static_cast<const float*>(x.base()),
                                                     static_cast<float*>(out.base()), ib);
  else if (x.dtype() == BP_DTYPE_FLOAT64)
    max_pool_kernel<double><<<blocks, kBlock, 0, s>>>(a, static_cast<const double*>(x.base()),
                                                      static_cast<double*>(out.base()), ib);
  else
    BP_SDK_UNSUPPORTED("not implemented for " << bp::sdk::dtype_name(x.dtype()));
  BP_CUDA_CHECK(cudaGetLastError());
}

void variance_from_invstd(cudaStream_t s, bp_dtype dtype, void* var, const void* inv, int64_t n,
                          double eps) {
  if (n == 0) return;
  const unsigned blocks = grid_for(n, kBlock);
  if (dtype == BP_DTYPE_FLOAT64)
    variance_kernel<double><<<blocks, kBlock, 0, s>>>(static_cast<double*>(var),
                                                      static_cast<const double*>(inv), n, eps);
  else
    variance_kernel<float><<<blocks, kBlock, 0, s>>>(static_cast<float*>(var),
                                                     static_cast<const float*>(inv), n, eps);
  BP_CUDA_CHECK(cudaGetLastError());
}

void invstd_from_variance(cudaStream_t s, bp_dtype dtype, void* inv, const void* var, int64_t n,
                          double eps) {
  if (n == 0) return;
  const unsigned blocks = grid_for(n, kBlock);
  if (dtype == BP_DTYPE_FLOAT64)
    invstd_kernel<double><<<blocks, kBlock, 0, s>>>(static_cast<double*>(inv),
                                                    static_cast<const double*>(var), n, eps);
  else
    invstd_kernel<float><<<blocks, kBlock, 0, s>>>(static_cast<float*>(inv),
                                                   static_cast<const float*>(var), n, eps);
  BP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace bp::cuda
