// cuDNN for the CUDA plugin's nn kernels (conv.cpp, pool_norm.cpp): the
// library loaded at run time (libcudnn.so.9, from the CUDA toolkit's library
// directory or the loader's path), a handle per thread and device, RAII
// tensor descriptors. Where cuDNN is missing or refuses a call, a kernel
// declines and the core's composite runs, so the plugin works without it.
#pragma once

#include <cudnn.h>

#include <limits>
#include <stdexcept>
#include <string>

#include "cuda_backend.h"

namespace bp::cuda {

// The entry points used, resolved once.
// clang-format off
#define BP_CUDNN_FUNCTIONS(X)                                                                      \
  X(cudnnCreate)                                                                                   \
  X(cudnnSetStream)                                                                                \
  X(cudnnGetErrorString)                                                                           \
  X(cudnnCreateTensorDescriptor)                                                                   \
  X(cudnnDestroyTensorDescriptor)                                                                  \
  X(cudnnSetTensor4dDescriptorEx)                                                                  \
  X(cudnnCreateFilterDescriptor)                                                                   \
  X(cudnnDestroyFilterDescriptor)                                                                  \
  X(cudnnSetFilter4dDescriptor)                                                                    \
  X(cudnnCreateConvolutionDescriptor)                                                              \
  X(cudnnDestroyConvolutionDescriptor)                                                             \
  X(cudnnSetConvolution2dDescriptor)                                                               \
  X(cudnnSetConvolutionGroupCount)                                                                 \
  X(cudnnSetConvolutionMathType)                                                                   \
  X(cudnnFindConvolutionForwardAlgorithm)                                                          \
  X(cudnnConvolutionForward)                                                                       \
  X(cudnnAddTensor)                                                                                \
  X(cudnnFindConvolutionBackwardDataAlgorithm)                                                     \
  X(cudnnConvolutionBackwardData)                                                                  \
  X(cudnnFindConvolutionBackwardFilterAlgorithm)                                                   \
  X(cudnnConvolutionBackwardFilter)                                                                \
  X(cudnnCreatePoolingDescriptor)                                                                  \
  X(cudnnDestroyPoolingDescriptor)                                                                 \
  X(cudnnSetPooling2dDescriptor)                                                                   \
  X(cudnnPoolingForward)                                                                           \
  X(cudnnPoolingBackward)                                                                          \
  X(cudnnDeriveBNTensorDescriptor)                                                                 \
  X(cudnnBatchNormalizationForwardTraining)                                                        \
  X(cudnnBatchNormalizationForwardInference)                                                       \
  X(cudnnBatchNormalizationBackward)
// clang-format on

struct Cudnn {
#define BP_CUDNN_FIELD(name) decltype(&::name) name = nullptr;
  BP_CUDNN_FUNCTIONS(BP_CUDNN_FIELD)
#undef BP_CUDNN_FIELD
  std::string missing;  // why it is not usable ("" when it is)
};

// The library, loaded on first use and never unloaded.
const Cudnn& cudnn();

// Declines the call (the composite runs) when cuDNN is missing.
void require_cudnn();

// Declines the call (the composite runs) when cuDNN cannot take it.
#define BP_CUDNN_TRY(expr)                                                    \
  do {                                                                        \
    const cudnnStatus_t bp_st_ = (expr);                                      \
    if (bp_st_ != CUDNN_STATUS_SUCCESS)                                       \
      BP_SDK_UNSUPPORTED(#expr << ": " << cudnn().cudnnGetErrorString(bp_st_) \
                               << "; the composite runs");                    \
  } while (0)
// A failure once work is queued is an error.
#define BP_CUDNN_CHECK(expr)                                                                  \
  do {                                                                                        \
    const cudnnStatus_t bp_st_ = (expr);                                                      \
    if (bp_st_ != CUDNN_STATUS_SUCCESS)                                                       \
      throw std::runtime_error(std::string("[") + current_op() +                              \
                               "] " #expr " failed: " + cudnn().cudnnGetErrorString(bp_st_)); \
  } while (0)

// One handle per thread and device, pointed at the call's stream each time.
cudnnHandle_t handle_for(const Stream& s);

// A size or stride as cuDNN's int; a larger one is declined.
int as_int(int64_t v);

// cuDNN's type for a float32 or float64 call; others are declined.
cudnnDataType_t data_type(bp_dtype d);

// A 4-D tensor descriptor (RAII); one whose setup fails is destroyed before
// the call is declined.
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc(cudnnDataType_t type, const int64_t (&dims)[4], const int64_t (&strides)[4]);
  TensorDesc(cudnnDataType_t type, const TensorRef& t)
      : TensorDesc(type, {t.size(0), t.size(1), t.size(2), t.size(3)},
                   {t.stride(0), t.stride(1), t.stride(2), t.stride(3)}) {}
  // A [C] vector as [1, C, 1, 1].
  TensorDesc(cudnnDataType_t type, int64_t c, int64_t stride)
      : TensorDesc(type, {1, c, 1, 1}, {c * stride, stride, 1, 1}) {}
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  ~TensorDesc() { cudnn().cudnnDestroyTensorDescriptor(d); }
};

// 1 and 0 in the call's dtype, as cuDNN's scaling factors.
struct Scale {
  double d1 = 1, d0 = 0;
  float f1 = 1, f0 = 0;
  bool f64;
  explicit Scale(cudnnDataType_t t) : f64(t == CUDNN_DATA_DOUBLE) {}
  const void* one() const { return f64 ? static_cast<const void*>(&d1) : &f1; }
  const void* zero() const { return f64 ? static_cast<const void*>(&d0) : &f0; }
};

// nn.cu: core::max_pool2d (the plugin's own kernel: PyTorch's indices and
// NaN rule); var[i] = max(1 / inv[i]^2 - eps, 0) for n elements of `dtype`
// (the batch variance from cuDNN's saved inverse standard deviation), on `s`.
void max_pool2d_cuda(const KernelCall& c);
// Padding is zeros that multiply (PyTorch's rule: 0 * inf is NaN), and
// cuDNN's algorithms may skip padding taps (its float64 ones do): these set
// NaN where an inf or NaN weight (forward) or grad_out (backward, of the
// weight) meets padding. Two small kernels each; the work beyond a pass
// over the weight, or over grad_out's border, is done only for non-finite
// values.
void conv2d_padding_nan(const Stream& s, const KernelCall& c);
void conv2d_backward_weight_padding_nan(const Stream& s, const KernelCall& c);
void variance_from_invstd(cudaStream_t s, bp_dtype dtype, void* var, const void* inv, int64_t n,
                          double eps);
// inv[i] = 1 / sqrt(var[i] + eps): cuDNN's saved inverse deviation from a variance.
void invstd_from_variance(cudaStream_t s, bp_dtype dtype, void* inv, const void* var, int64_t n,
                          double eps);

}  // namespace bp::cuda
