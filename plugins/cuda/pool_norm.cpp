// Pooling and batch normalisation on cuDNN: core::avg_pool2d and its
// backward (cuDNN's average pooling, which takes symmetric padding and floor
// mode only: a ceil-mode output is declined), core::batch_norm,
// core::batch_norm_inference and core::batch_norm_backward (cuDNN's spatial
// batch normalisation, float32 and float64, contiguous operands); and
// core::max_pool2d from nn.cu. A call cuDNN refuses is declined and the
// core's composite runs.
#include <backplane/sdk/nn_checks.hpp>

#include "cudnn_lib.h"

namespace bp::cuda {

namespace {

struct PoolDesc {
  cudnnPoolingDescriptor_t d = nullptr;
  explicit PoolDesc(const bp::sdk::check::Pool2dArgs& p) {
    BP_CUDNN_TRY(cudnn().cudnnCreatePoolingDescriptor(&d));
    try {
      BP_CUDNN_TRY(cudnn().cudnnSetPooling2dDescriptor(
          d,
          p.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                              : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
          CUDNN_PROPAGATE_NAN, as_int(p.kh), as_int(p.kw), as_int(p.ph), as_int(p.pw), as_int(p.sh),
          as_int(p.sw)));
    } catch (...) {
      cudnn().cudnnDestroyPoolingDescriptor(d);
      throw;
    }
  }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
  ~PoolDesc() { cudnn().cudnnDestroyPoolingDescriptor(d); }
};

// The call's pooling geometry, when cuDNN's average pooling computes it as
// PyTorch: floor mode (cuDNN pads both sides alike; with floor mode every
// window lies inside the padded input, so both count the same divisor).
// The checked geometry of an average pooling call cuDNN can take: floor
// mode, the operand `in` and the result dense.
bp::sdk::check::Pool2dArgs avg_geometry(const KernelCall& c, const char* op) {
  require_cudnn();
  const bp::sdk::check::Pool2dArgs p = bp::sdk::check::pool2d(c, op);
  if (p.ceil_mode) BP_SDK_UNSUPPORTED("cuDNN pools in floor mode only; the composite runs");
  if (!bp::sdk::is_dense(c.input(0)) || !bp::sdk::is_dense(c.output(0)))
    BP_SDK_UNSUPPORTED("cuDNN takes operands without stride 0 or overlap; the composite runs");
  return p;
}

void avg_pool2d_kernel(const KernelCall& c) {
  const auto p = avg_geometry(c, "core::avg_pool2d");
  const TensorRef x = c.input(0), out = c.output(0);
  const cudnnDataType_t type = data_type(x.dtype());
  Stream& s = prepare(c);
  const cudnnHandle_t h = handle_for(s);
  const TensorDesc xd(type, x), yd(type, out);
  const PoolDesc pd(p);
  const Scale k(type);
  BP_CUDNN_TRY(
      cudnn().cudnnPoolingForward(h, pd.d, k.one(), xd.d, x.base(), k.zero(), yd.d, out.base()));
}

// Average pooling's gradient reads neither the input nor the output values
// (it is linear): cuDNN is given the gradients' buffers in their places.
void avg_pool2d_backward_kernel(const KernelCall& c) {
  const auto p = avg_geometry(c, "core::avg_pool2d_backward");
  const TensorRef g = c.input(0), gx = c.output(0);
  const cudnnDataType_t type = data_type(g.dtype());
  Stream& s = prepare(c);
  const cudnnHandle_t h = handle_for(s);
  const TensorDesc gd(type, g), gxd(type, gx);
  const PoolDesc pd(p);
  const Scale k(type);
  BP_CUDNN_TRY(cudnn().cudnnPoolingBackward(h, pd.d, k.one(), gd.d, g.base(), gd.d, g.base(), gxd.d,
                                            gx.base(), k.zero(), gxd.d, gx.base()));
}

// --- batch_norm -----------------------------------------------------------------------

// x (rank 2 or more, contiguous) as cuDNN's [N, C, S, 1], S the product of
// the spatial dims: spatial batch normalisation reduces over N and S.
struct BnShapes {
  cudnnDataType_t type;
  TensorDesc data, channel;
  BnShapes(const TensorRef& x, const bp::sdk::check::BatchNormArgs& a)
      : type(data_type(x.dtype())),
        data(type, {a.n, a.c, a.spatial, 1}, {a.c * a.spatial, a.spatial, 1, 1}),
        channel(type, a.c, 1) {}
};

// Declines unless every tensor operand is contiguous (grad_x only when asked for).
void require_contiguous(const KernelCall& c, bool skip_output0) {
  for (int i = 0; i < c.num_inputs(); ++i)
    if (!c.input(i).is_contiguous())
      BP_SDK_UNSUPPORTED("cuDNN takes contiguous operands; the composite runs");
  for (int i = skip_output0 ? 1 : 0; i < c.num_outputs(); ++i)
    if (!c.output(i).is_contiguous())
      BP_SDK_UNSUPPORTED("cuDNN takes contiguous operands; the composite runs");
}

// Training forward: the output, the batch mean (cuDNN's saved mean) and the
// biased variance (from cuDNN's saved 1 / sqrt(var + eps)).
void batch_norm_kernel(const KernelCall& c) {
  require_cudnn();
  const auto a = bp::sdk::check::batch_norm(c, "core::batch_norm");
  require_contiguous(c, false);
  const TensorRef x = c.input(0), out = c.output(0);
  const BnShapes sh(x, a);
  Stream& s = prepare(c);
  const cudnnHandle_t h = handle_for(s);
  const Scale k(sh.type);
  Scratch inv(s, static_cast<std::size_t>(a.c) * bp::sdk::dtype_size(x.dtype()));
  BP_CUDNN_TRY(cudnn().cudnnBatchNormalizationForwardTraining(
      h, CUDNN_BATCHNORM_SPATIAL, k.one(), k.zero(), sh.data.d, x.base(), sh.data.d, out.base(),
      sh.channel.d, c.input(1).base(), c.input(2).base(), 0.0, nullptr, nullptr, a.eps,
      c.output(1).base(), inv.get()));
  variance_from_invstd(s.handle, x.dtype(), c.output(2).base(), inv.get(), a.c, a.eps);
}

void batch_norm_inference_kernel(const KernelCall& c) {
  require_cudnn();
  const auto a = bp::sdk::check::batch_norm(c, "core::batch_norm_inference");
  require_contiguous(c, false);
  const TensorRef x = c.input(0), out = c.output(0);
  const BnShapes sh(x, a);
  Stream& s = prepare(c);
  const cudnnHandle_t h = handle_for(s);
  const Scale k(sh.type);
  BP_CUDNN_TRY(cudnn().cudnnBatchNormalizationForwardInference(
      h, CUDNN_BATCHNORM_SPATIAL, k.one(), k.zero(), sh.data.d, x.base(), sh.data.d, out.base(),
      sh.channel.d, c.input(1).base(), c.input(2).base(), c.input(3).base(), c.input(4).base(),
      a.eps));
}

// The gradients from the given batch statistics: the mean, and the inverse
// deviation computed from the variance (cuDNN's saved-statistics arguments).
void batch_norm_backward_kernel(const KernelCall& c) {
  require_cudnn();
  const auto a = bp::sdk::check::batch_norm(c, "core::batch_norm_backward");
  const bool want_x = a.output_mask & 1;
  require_contiguous(c, !want_x);
  const TensorRef g = c.input(0), x = c.input(1);
  const BnShapes sh(x, a);
  Stream& s = prepare(c);
  const cudnnHandle_t h = handle_for(s);
  const Scale k(sh.type);
  const std::size_t x_bytes =
      static_cast<std::size_t>(a.n * a.c * a.spatial) * bp::sdk::dtype_size(x.dtype());
  Scratch unwanted(s, want_x ? 1 : std::max<std::size_t>(x_bytes, 1));
  void* dx = want_x ? c.output(0).base() : unwanted.get();
  Scratch inv(s, static_cast<std::size_t>(a.c) * bp::sdk::dtype_size(x.dtype()));
  invstd_from_variance(s.handle, x.dtype(), inv.get(), c.input(4).base(), a.c, a.eps);
  BP_CUDNN_TRY(cudnn().cudnnBatchNormalizationBackward(
      h, CUDNN_BATCHNORM_SPATIAL, k.one(), k.zero(), k.one(), k.zero(), sh.data.d, x.base(),
      sh.data.d, g.base(), sh.data.d, dx, sh.channel.d, c.input(2).base(), c.output(1).base(),
      c.output(2).base(), a.eps, c.input(3).base(), inv.get()));
}

}  // namespace

void register_pool_norm_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;
  const std::initializer_list<bp_dtype> floats = {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64};
  r.add_named<&max_pool2d_cuda>("core::max_pool2d", BP_SCHEMA_CORE_MAX_POOL2D, floats, BP_ORIGIN);
  r.add_named<&avg_pool2d_kernel>("core::avg_pool2d", BP_SCHEMA_CORE_AVG_POOL2D, floats, BP_ORIGIN);
  r.add_named<&avg_pool2d_backward_kernel>("core::avg_pool2d_backward",
                                           BP_SCHEMA_CORE_AVG_POOL2D_BACKWARD, floats, BP_ORIGIN);
  r.add_named<&batch_norm_kernel>("core::batch_norm", BP_SCHEMA_CORE_BATCH_NORM, floats, BP_ORIGIN);
  r.add_named<&batch_norm_inference_kernel>("core::batch_norm_inference",
                                            BP_SCHEMA_CORE_BATCH_NORM_INFERENCE, floats, BP_ORIGIN);
  r.add_named<&batch_norm_backward_kernel>("core::batch_norm_backward",
                                           BP_SCHEMA_CORE_BATCH_NORM_BACKWARD, floats, BP_ORIGIN);
}

}  // namespace bp::cuda
