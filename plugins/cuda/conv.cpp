// core::conv2d and core::conv2d_backward on cuDNN (float32 and float64, FMA
// math: no TF32 rounding), each problem's algorithm measured on its first
// call. Where cuDNN is missing (cudnn_lib.h), or refuses a layout, the
// kernels decline and the core's composite (cuBLAS matmuls) runs.

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "cudnn_lib.h"

namespace bp::cuda {

namespace {

struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc(cudnnDataType_t type, const TensorRef& w) {
    if (!w.is_contiguous())
      BP_SDK_UNSUPPORTED("a weight that is not contiguous (cuDNN takes packed filters)");
    BP_CUDNN_TRY(cudnn().cudnnCreateFilterDescriptor(&d));
    try {
      BP_CUDNN_TRY(cudnn().cudnnSetFilter4dDescriptor(d, type, CUDNN_TENSOR_NCHW, as_int(w.size(0)),
                                                      as_int(w.size(1)), as_int(w.size(2)),
                                                      as_int(w.size(3))));
    } catch (...) {
      cudnn().cudnnDestroyFilterDescriptor(d);
      throw;
    }
  }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  ~FilterDesc() { cudnn().cudnnDestroyFilterDescriptor(d); }
};

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc(cudnnDataType_t type, const bp_attrs& a) {
    BP_CUDNN_TRY(cudnn().cudnnCreateConvolutionDescriptor(&d));
    try {
      BP_CUDNN_TRY(cudnn().cudnnSetConvolution2dDescriptor(
          d, as_int(a.ints[2]), as_int(a.ints[3]), as_int(a.ints[0]), as_int(a.ints[1]),
          as_int(a.ints[4]), as_int(a.ints[5]), CUDNN_CROSS_CORRELATION, type));
      BP_CUDNN_TRY(cudnn().cudnnSetConvolutionGroupCount(d, as_int(a.ints[6])));
      BP_CUDNN_TRY(cudnn().cudnnSetConvolutionMathType(d, CUDNN_FMA_MATH));
    } catch (...) {
      cudnn().cudnnDestroyConvolutionDescriptor(d);
      throw;
    }
  }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  ~ConvDesc() { cudnn().cudnnDestroyConvolutionDescriptor(d); }
};

// The algorithm of each problem (direction, dtype, device, shapes and
// strides, attributes): the fastest that cuDNN measures within the
// workspace limit, found on the problem's first call (cudnnFind*, which
// times each candidate, as PyTorch's cudnn.benchmark) and kept.
constexpr std::size_t kMaxWorkspace = std::size_t{1} << 30;
using ProblemKey = std::array<int64_t, 48>;
struct Choice {
  int algo;
  std::size_t workspace;
};

ProblemKey problem_key(int direction, const KernelCall& c, const TensorRef& a, const TensorRef& b,
                       const TensorRef& out) {
  ProblemKey k{};
  std::size_t i = 0;
  k[i++] = direction;
  k[i++] = a.dtype();
  k[i++] = c.device();
  for (const TensorRef* t : {&a, &b, &out})
    for (int d = 0; d < 4; ++d) {
      k[i++] = t->size(d);
      k[i++] = t->stride(d);
    }
  for (int n = 0; n < 7; ++n) k[i++] = c.attrs().ints[n];
  return k;
}

template <class Perf, class Find>
Choice choose(const ProblemKey& key, Find find) {
  static std::mutex mu;
  static auto* chosen = new std::map<ProblemKey, Choice>();  // never destroyed: used until exit
  auto result = [](const Choice& c) {
    if (c.algo < 0)
      BP_SDK_UNSUPPORTED("cuDNN has no algorithm for this convolution; the composite runs");
    return c;
  };
  {
    std::lock_guard lock(mu);
    if (auto it = chosen->find(key); it != chosen->end()) return result(it->second);
  }
  // A problem cuDNN cannot take is remembered too: Find synchronises the device.
  Choice c{-1, 0};
  Perf perf[16];
  int n = 0;
  if (find(16, &n, perf) == CUDNN_STATUS_SUCCESS)
    for (int i = 0; i < n; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace) {
        c = {static_cast<int>(perf[i].algo), perf[i].memory};
        break;
      }
  {
    std::lock_guard lock(mu);
    chosen->emplace(key, c);
  }
  return result(c);
}

void conv2d_kernel(const KernelCall& c) {
  require_cudnn();
  const TensorRef x = c.input(0), w = c.input(1), b = c.input(2), out = c.output(0);
  const cudnnDataType_t type = data_type(x.dtype());
  Stream& s = prepare(c);
  const cudnnHandle_t h = handle_for(s);
  const TensorDesc xd(type, x), yd(type, out), bd(type, b.size(0), b.stride(0));
  const FilterDesc wd(type, w);
  const ConvDesc cd(type, c.attrs());
  const Choice ch = choose<cudnnConvolutionFwdAlgoPerf_t>(
      problem_key(0, c, x, w, out), [&](int req, int* n, auto* p) {
        return cudnn().cudnnFindConvolutionForwardAlgorithm(h, xd.d, wd.d, cd.d, yd.d, req, n, p);
      });
  const std::size_t ws_bytes = std::max<std::size_t>(ch.workspace, 1);
  Scratch ws(s, ws_bytes);
  const Scale k(type);
  const void* one = k.one();
  const void* zero = k.zero();
  BP_CUDNN_CHECK(cudnn().cudnnConvolutionForward(h, one, xd.d, x.base(), wd.d, w.base(), cd.d,
                                                 static_cast<cudnnConvolutionFwdAlgo_t>(ch.algo),
                                                 ws.get(), ws_bytes, zero, yd.d, out.base()));
  BP_CUDNN_CHECK(cudnn().cudnnAddTensor(h, one, bd.d, b.base(), one, yd.d, out.base()));
  conv2d_padding_nan(s, c);
}

// The gradients of the input and of the weight, each when its bit of
// output_mask (ints[7]) is set (the other output is a stand-in, untouched).
void conv2d_backward_kernel(const KernelCall& c) {
  require_cudnn();
  const TensorRef g = c.input(0), x = c.input(1), w = c.input(2), gx = c.output(0),
                  gw = c.output(1);
  const bool want_x = c.attrs().ints[7] & 1, want_w = c.attrs().ints[7] & 2;
  const cudnnDataType_t type = data_type(x.dtype());
  Stream& s = prepare(c);
  const cudnnHandle_t h = handle_for(s);
  const TensorDesc gd(type, g), xd(type, x);
  const FilterDesc wd(type, w);
  const ConvDesc cd(type, c.attrs());
  const Scale k(type);
  // The gradients are contiguous, of x's and w's shapes.
  std::optional<TensorDesc> gxd;
  std::optional<FilterDesc> gwd;
  Choice dc{0, 0}, fc{0, 0};
  if (want_x) {
    const int64_t dims[4] = {x.size(0), x.size(1), x.size(2), x.size(3)};
    const int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    gxd.emplace(type, dims, strides);
    dc = choose<cudnnConvolutionBwdDataAlgoPerf_t>(
        problem_key(1, c, g, w, x), [&](int req, int* n, auto* p) {
          return cudnn().cudnnFindConvolutionBackwardDataAlgorithm(h, wd.d, gd.d, cd.d, gxd->d, req,
                                                                   n, p);
        });
  }
  if (want_w) {
    gwd.emplace(type, w);
    fc = choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
        problem_key(2, c, g, x, w), [&](int req, int* n, auto* p) {
          return cudnn().cudnnFindConvolutionBackwardFilterAlgorithm(h, xd.d, gd.d, cd.d, gwd->d,
                                                                     req, n, p);
        });
  }
  const std::size_t ws_bytes = std::max<std::size_t>({dc.workspace, fc.workspace, 1});
  Scratch ws(s, ws_bytes);
  if (want_x)
    BP_CUDNN_CHECK(
        cudnn().cudnnConvolutionBackwardData(h, k.one(), wd.d, w.base(), gd.d, g.base(), cd.d,
                                             static_cast<cudnnConvolutionBwdDataAlgo_t>(dc.algo),
                                             ws.get(), ws_bytes, k.zero(), gxd->d, gx.base()));
  if (want_w)
    BP_CUDNN_CHECK(cudnn().cudnnConvolutionBackwardFilter(
        h, k.one(), xd.d, x.base(), gd.d, g.base(), cd.d,
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(fc.algo), ws.get(), ws_bytes, k.zero(), gwd->d,
        gw.base()));
  if (want_w) conv2d_backward_weight_padding_nan(s, c);
}

}  // namespace

void register_conv_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;
  r.add_named<&conv2d_kernel>("core::conv2d", BP_SCHEMA_CORE_CONV2D,
                              {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}, BP_ORIGIN);
  r.add_named<&conv2d_backward_kernel>("core::conv2d_backward", BP_SCHEMA_CORE_CONV2D_BACKWARD,
                                       {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}, BP_ORIGIN);
}

}  // namespace bp::cuda
