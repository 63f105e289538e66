// Pooling: core::avg_pool2d and core::avg_pool2d_backward through oneDNN's
// pooling primitives (float32); core::max_pool2d as the SDK's plain loop
// (backplane/sdk/nn_loops.hpp) over OpenMP threads, because the core's max
// pool returns PyTorch's indices (a position in the input plane), which
// oneDNN's opaque workspace is not, and lets a NaN win a window, which
// oneDNN does not promise. Average pools oneDNN cannot take exactly
// (float64, a ceil-mode divisor it counts otherwise, a layout it has no
// native kernel for) run the same plain loops.
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

void max_pool2d_kernel(const KernelCall& c) {
  const Pool2dArgs p = bp::sdk::check::pool2d(c, "core::max_pool2d");
  bp::sdk::nn::visit_floating(c, c.input(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    over_planes(p, [&](int64_t b, int64_t e) {
      bp::sdk::nn::max_pool2d<T>(p, c.input(0), c.output(0), c.output(1), b, e);
    });
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
