// Pooling: core::avg_pool2d and core::avg_pool2d_backward through oneDNN's
// pooling primitives (float32); core::max_pool2d as the plugin's own loop
// (float32 rows without dilation: 16 columns at a time, branch-free) or the
// SDK's plain loop (backplane/sdk/nn_loops.hpp), over OpenMP threads, because the core's max
// pool returns PyTorch's indices (a position in the input plane), which
// oneDNN's opaque workspace is not, and lets a NaN win a window, which
// oneDNN does not promise. Average pools oneDNN cannot take exactly
// (float64, a ceil-mode divisor it counts otherwise, a layout it has no
// native kernel for) run the same plain loops.
#include <algorithm>
#include <backplane/sdk/nn_loops.hpp>
#include <cmath>
#include <limits>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

using bp::sdk::check::Pool2dArgs;
using dnnl::memory;

// Runs loop(begin, end) over the n * c planes, shared among the OpenMP
// threads when the work is large enough.
template <class F>
void over_planes(const Pool2dArgs& p, F&& loop) {
  const int64_t planes = p.n * p.c;
  const int64_t work = planes * p.out_h * p.out_w * p.kh * p.kw;
#pragma omp parallel for if (work >= kParallelMinElements) schedule(static)
  for (int64_t i = 0; i < planes; ++i) loop(i, i + 1);
}

// ---------------------------------------------------------------------------
// max_pool2d: values and indices in one pass over each window.

// One output element by the plain loop's rule (bp::sdk::nn::max_pool2d):
// taps in window order, the first maximum, and a NaN taking the window.
// Inlined into each of the instruction sets' clones below.
#define BP_POOL_INLINE __attribute__((always_inline)) inline
BP_POOL_INLINE void max_pool_one(const Pool2dArgs& p, const float* plane, int64_t row_stride,
                                 int64_t h0, int64_t h1, int64_t ow, float* out, int64_t* idx) {
  int64_t w0, w1;
  bp::sdk::nn::window_taps(ow * p.sw - p.pw, p.kw, 1, p.in_w, w0, w1);
  float best = -std::numeric_limits<float>::infinity();
  int64_t where = h0 * p.in_w + w0;
  for (int64_t h = h0; h < h1; ++h)
    for (int64_t w = w0; w < w1; ++w) {
      const float v = plane[h * row_stride + w];
      if (v > best || std::isnan(v)) {
        best = v;
        where = h * p.in_w + w;
      }
    }
  *out = best;
  *idx = where;
}

// kBlock output columns whose windows lie inside the row, branch-free: on
// real data the plain loop's comparison is a coin toss for the branch
// predictor, and the block's lanes vectorise. kSw is the stride along w
// (0: p.sw at run time). Same rule as max_pool_one.
constexpr int64_t kPoolBlock = 16;
template <int kSw, int64_t kCols>
BP_POOL_INLINE void max_pool_block(const Pool2dArgs& p, const float* plane, int64_t row_stride,
                                   int64_t h0, int64_t h1, int64_t ow0, int64_t cols, float* out,
                                   int64_t* idx) {
  const int64_t sw = kSw > 0 ? kSw : p.sw;
  const int64_t n = kCols > 0 ? kCols : cols;
  float best[kPoolBlock];
  int64_t where[kPoolBlock];
  const int64_t start0 = ow0 * sw - p.pw;
  for (int64_t k = 0; k < n; ++k) {
    best[k] = -std::numeric_limits<float>::infinity();
    where[k] = h0 * p.in_w + start0 + k * sw;
  }
  for (int64_t h = h0; h < h1; ++h) {
    const float* row = plane + h * row_stride + start0;
    for (int64_t j = 0; j < p.kw; ++j) {
      const int64_t pos = h * p.in_w + start0 + j;
      for (int64_t k = 0; k < n; ++k) {
        const float v = row[k * sw + j];
        const bool take = v > best[k] || v != v;
        best[k] = take ? v : best[k];
        where[k] = take ? pos + k * sw : where[k];
      }
    }
  }
  for (int64_t k = 0; k < n; ++k) {
    out[k] = best[k];
    idx[k] = where[k];
  }
}

// float32 planes whose rows are dense (stride 1 along w in the input, the
// values and the indices), without dilation.
template <int kSw>
BP_POOL_INLINE void max_pool_rows(const Pool2dArgs& p, const TensorRef& x, const TensorRef& out,
                                  const TensorRef& idx, int64_t begin, int64_t end) {
  const int64_t sw = kSw > 0 ? kSw : p.sw;
  // Columns whose window is inside the row: ow * sw - pw >= 0 and
  // ow * sw - pw + kw <= in_w.
  const int64_t lo = std::min((p.pw + sw - 1) / sw, p.out_w);
  const int64_t hi = p.in_w >= p.kw ? std::clamp((p.in_w - p.kw + p.pw) / sw + 1, lo, p.out_w) : lo;
  for (int64_t plane = begin; plane < end; ++plane) {
    const int64_t n = plane / p.c, ch = plane % p.c;
    const float* xp = x.data<float>() + n * x.stride(0) + ch * x.stride(1);
    float* op = out.data<float>() + n * out.stride(0) + ch * out.stride(1);
    int64_t* ip = idx.data<int64_t>() + n * idx.stride(0) + ch * idx.stride(1);
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      int64_t h0, h1;
      bp::sdk::nn::window_taps(oh * p.sh - p.ph, p.kh, 1, p.in_h, h0, h1);
      float* orow = op + oh * out.stride(2);
      int64_t* irow = ip + oh * idx.stride(2);
      for (int64_t ow = 0; ow < lo; ++ow)
        max_pool_one(p, xp, x.stride(2), h0, h1, ow, orow + ow, irow + ow);
      int64_t ow = lo;
      for (; ow + kPoolBlock <= hi; ow += kPoolBlock)
        max_pool_block<kSw, kPoolBlock>(p, xp, x.stride(2), h0, h1, ow, kPoolBlock, orow + ow,
                                        irow + ow);
      if (ow < hi)
        max_pool_block<kSw, 0>(p, xp, x.stride(2), h0, h1, ow, hi - ow, orow + ow, irow + ow);
      for (ow = hi; ow < p.out_w; ++ow)
        max_pool_one(p, xp, x.stride(2), h0, h1, ow, orow + ow, irow + ow);
    }
  }
}

// Built for AVX-512, AVX2 and the baseline: the block's lanes become vector
// compares and blends where the machine has them.
#define BP_POOL_CLONES BP_CPU_CLONES("arch=skylake-avx512", "arch=haswell", "default")
BP_POOL_CLONES void max_pool_rows_stride1(const Pool2dArgs& p, const TensorRef& x,
                                          const TensorRef& out, const TensorRef& idx, int64_t b,
                                          int64_t e) {
  max_pool_rows<1>(p, x, out, idx, b, e);
}
BP_POOL_CLONES void max_pool_rows_stride2(const Pool2dArgs& p, const TensorRef& x,
                                          const TensorRef& out, const TensorRef& idx, int64_t b,
                                          int64_t e) {
  max_pool_rows<2>(p, x, out, idx, b, e);
}
BP_POOL_CLONES void max_pool_rows_strided(const Pool2dArgs& p, const TensorRef& x,
                                          const TensorRef& out, const TensorRef& idx, int64_t b,
                                          int64_t e) {
  max_pool_rows<0>(p, x, out, idx, b, e);
}

void max_pool2d_kernel(const KernelCall& c) {
  const Pool2dArgs p = bp::sdk::check::pool2d(c, "core::max_pool2d");
  const TensorRef x = c.input(0), out = c.output(0), idx = c.output(1);
  if (x.dtype() == BP_DTYPE_FLOAT32 && p.dh == 1 && p.dw == 1 && x.stride(3) == 1 &&
      out.stride(3) == 1 && idx.stride(3) == 1) {
    over_planes(p, [&](int64_t b, int64_t e) {
      if (p.sw == 1)
        max_pool_rows_stride1(p, x, out, idx, b, e);
      else if (p.sw == 2)
        max_pool_rows_stride2(p, x, out, idx, b, e);
      else
        max_pool_rows_strided(p, x, out, idx, b, e);
    });
    return;
  }
  bp::sdk::nn::visit_floating(c, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    over_planes(p, [&](int64_t b, int64_t e) { bp::sdk::nn::max_pool2d<T>(p, x, out, idx, b, e); });
  });
}

// ---------------------------------------------------------------------------
// avg_pool2d: oneDNN's average pooling, forward and backward.

memory::desc plain_md(const TensorRef& t) {
  return memory::desc({t.size(0), t.size(1), t.size(2), t.size(3)}, memory::data_type::f32,
                      {t.stride(0), t.stride(1), t.stride(2), t.stride(3)});
}

// oneDNN's right padding for the output size p gives (at least 0, which a
// floor-mode output always allows).
memory::dims right_padding(const Pool2dArgs& p) {
  return {std::max<int64_t>((p.out_h - 1) * p.sh + p.kh - p.in_h - p.ph, 0),
          std::max<int64_t>((p.out_w - 1) * p.sw + p.kw - p.in_w - p.pw, 0)};
}

// The geometry oneDNN averages as PyTorch does: excluding padding, oneDNN
// counts the window's part inside the input, as PyTorch; including it,
// oneDNN divides by the whole kernel, which PyTorch does unless a ceil-mode
// window reaches past the padded input.
bool avg_matches(const Pool2dArgs& p) {
  if (!p.count_include_pad) return true;
  const memory::dims r = right_padding(p);
  return r[0] <= p.ph && r[1] <= p.pw;
}

dnnl::pooling_v2_forward::desc avg_desc(const Pool2dArgs& p, const memory::desc& src,
                                        const memory::desc& dst) {
  return {dnnl::prop_kind::forward_training,
          p.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                              : dnnl::algorithm::pooling_avg_exclude_padding,
          src,
          dst,
          {p.sh, p.sw},
          {p.kh, p.kw},
          {0, 0},
          {p.ph, p.pw},
          right_padding(p)};
}

// oneDNN's kernels assume layouts without stride 0 or overlap.
bool dense(const TensorRef& a, const TensorRef& b) {
  return bp::sdk::is_dense(a) && bp::sdk::is_dense(b);
}

// oneDNN's average pooling when it averages as PyTorch (float32, a native
// kernel for the layout); true when it ran.
bool avg_pool2d_onednn(const Pool2dArgs& p, const TensorRef& x, const TensorRef& out) {
  if (x.dtype() != BP_DTYPE_FLOAT32 || !avg_matches(p) || !dense(x, out)) return false;
  try {
    const memory::desc xs = plain_md(x), ys = plain_md(out);
    const dnnl::pooling_v2_forward::primitive_desc pd(avg_desc(p, xs, ys), dnnl_engine());
    if (is_reference_impl(pd)) return false;
    dnnl::engine& eng = dnnl_engine();
    memory src(xs, eng, x.base()), dst(ys, eng, out.base());
    dnnl::pooling_v2_forward(pd).execute(dnnl_stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

bool avg_pool2d_backward_onednn(const Pool2dArgs& p, const TensorRef& g, const TensorRef& gx) {
  if (g.dtype() != BP_DTYPE_FLOAT32 || !avg_matches(p) || !dense(g, gx)) return false;
  try {
    const memory::desc gs = plain_md(g), gxs = plain_md(gx);
    const dnnl::pooling_v2_forward::primitive_desc hint(avg_desc(p, gxs, gs), dnnl_engine());
    const dnnl::pooling_v2_backward::primitive_desc pd(
        {p.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                             : dnnl::algorithm::pooling_avg_exclude_padding,
         gxs,
         gs,
         {p.sh, p.sw},
         {p.kh, p.kw},
         {0, 0},
         {p.ph, p.pw},
         right_padding(p)},
        dnnl_engine(), hint);
    if (is_reference_impl(pd)) return false;
    dnnl::engine& eng = dnnl_engine();
    memory dy(gs, eng, g.base()), dx(gxs, eng, gx.base());
    dnnl::pooling_v2_backward(pd).execute(dnnl_stream(),
                                          {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_SRC, dx}});
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

// Where oneDNN does not average as PyTorch, the SDK's loop runs.
void avg_pool2d_kernel(const KernelCall& c) {
  const Pool2dArgs p = bp::sdk::check::pool2d(c, "core::avg_pool2d");
  if (avg_pool2d_onednn(p, c.input(0), c.output(0))) return;
  bp::sdk::nn::visit_floating(c, c.input(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    over_planes(p, [&](int64_t b, int64_t e) {
      bp::sdk::nn::avg_pool2d<T>(p, c.input(0), c.output(0), b, e);
    });
  });
}

void avg_pool2d_backward_kernel(const KernelCall& c) {
  const Pool2dArgs p = bp::sdk::check::pool2d(c, "core::avg_pool2d_backward");
  if (avg_pool2d_backward_onednn(p, c.input(0), c.output(0))) return;
  bp::sdk::nn::visit_floating(c, c.input(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    over_planes(p, [&](int64_t b, int64_t e) {
      bp::sdk::nn::avg_pool2d_backward<T>(p, c.input(0), c.output(0), b, e);
    });
  });
}

}  // namespace

void register_pool_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;
  r.add_named<&max_pool2d_kernel>("core::max_pool2d", BP_SCHEMA_CORE_MAX_POOL2D,
                                  {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}, BP_ORIGIN);
  r.add_named<&avg_pool2d_kernel>("core::avg_pool2d", BP_SCHEMA_CORE_AVG_POOL2D,
                                  {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}, BP_ORIGIN);
  r.add_named<&avg_pool2d_backward_kernel>("core::avg_pool2d_backward",
                                           BP_SCHEMA_CORE_AVG_POOL2D_BACKWARD,
                                           {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}, BP_ORIGIN);
}

}  // namespace bp::cpu
