// The nn kernels cuDNN has no exact counterpart for: core::max_pool2d, whose
// indices are PyTorch's (h * W + w in the input plane, the first maximum in
// window order, a NaN taking its window), which cuDNN's max pooling does not
// return; and the batch variance from cuDNN's saved inverse deviation.
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

}  // namespace

void max_pool2d_cuda(const KernelCall& c) {
  MaxPoolArgs a{bp::sdk::check::pool2d(c, "core::max_pool2d"), {}, 0};
  const TensorRef x = c.input(0), out = c.output(0), idx = c.output(1);
  if (!out.is_contiguous() || !idx.is_contiguous())
    BP_UNSUPPORTED("writes contiguous outputs only; the composite runs");
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
    BP_UNSUPPORTED("not implemented for " << bp::sdk::dtype_name(x.dtype()));
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
