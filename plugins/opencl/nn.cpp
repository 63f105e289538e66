// Kernels for the core's overridable nn composites (kernels/nn.cl):
// core::max_pool2d, core::avg_pool2d and core::avg_pool2d_backward (one
// work-item per output element); core::batch_norm, core::batch_norm_inference
// and core::batch_norm_backward over contiguous operands (a work-group per
// channel for the statistics, a work-item per element for the rest). conv2d
// runs the core's composite on this backend: an unfold copy and CLBlast's
// batched GEMM, the im2col + GEMM a hand-written kernel would do.
#include <backplane/sdk/nn_checks.hpp>

#include "opencl_backend.h"
#include "registration.h"

namespace bp::opencl {

namespace {

// kernels/nn.cl's Pool, field for field.
struct Pool {
  cl_long n, c, in_h, in_w, out_h, out_w, kh, kw, sh, sw, ph, pw, dh, dw;
  cl_long count_include_pad;
  cl_long xs[4];
  cl_long x_off, o_off, i_off;
};

// The geometry, `strided`'s byte strides and offset, the first output's offset.
Pool pool_of(const bp::sdk::check::Pool2dArgs& a, const TensorRef& strided, const TensorRef& out) {
  Pool p{a.n,     a.c,  a.in_h, a.in_w, a.out_h,
         a.out_w, a.kh, a.kw,   a.sh,   a.sw,
         a.ph,    a.pw, a.dh,   a.dw,   a.count_include_pad ? 1 : 0,
         {},      0,    0,      0};
  const cl_long es = static_cast<cl_long>(bp::sdk::dtype_size(strided.dtype()));
  for (int d = 0; d < 4; ++d) p.xs[d] = strided.stride(d) * es;
  p.x_off = static_cast<cl_long>(strided.raw().byte_offset);
  p.o_off = static_cast<cl_long>(out.raw().byte_offset);
  return p;
}

void require_contiguous(const KernelCall& c) {
  for (int i = 0; i < c.num_outputs(); ++i)
    if (!c.output(i).is_contiguous())
      throw bp::sdk::Unsupported("[pool] writes contiguous outputs only: the composite runs");
}

ProgramSpec spec_for(bp_dtype t) { return ProgramSpec{"nn", {{"T", t}}, {}}; }

void max_pool2d(const KernelCall& c) {
  OpScope scope("core::max_pool2d");
  check_dtype(c.device(), c.dtype());
  const auto a = bp::sdk::check::pool2d(c, "core::max_pool2d");
  require_contiguous(c);
  const TensorRef x = c.input(0), out = c.output(0), idx = c.output(1);
  Pool p = pool_of(a, x, out);
  p.i_off = static_cast<cl_long>(idx.raw().byte_offset);
  Stream& s = resolve(c.device(), c.stream());
  cl_kernel k = kernel(c.device(), spec_for(c.dtype()), "max_pool2d");
  Args(k).mem(out.raw().data).mem(idx.raw().data).mem(x.raw().data) << p;
  launch(s, k, static_cast<std::size_t>(a.n * a.c * a.out_h * a.out_w));
}

void avg_pool2d(const KernelCall& c) {
  OpScope scope("core::avg_pool2d");
  check_dtype(c.device(), c.dtype());
  const auto a = bp::sdk::check::pool2d(c, "core::avg_pool2d");
  require_contiguous(c);
  const TensorRef x = c.input(0), out = c.output(0);
  const Pool p = pool_of(a, x, out);
  Stream& s = resolve(c.device(), c.stream());
  cl_kernel k = kernel(c.device(), spec_for(c.dtype()), "avg_pool2d");
  Args(k).mem(out.raw().data).mem(x.raw().data) << p;
  launch(s, k, static_cast<std::size_t>(a.n * a.c * a.out_h * a.out_w));
}

void avg_pool2d_backward(const KernelCall& c) {
  OpScope scope("core::avg_pool2d_backward");
  check_dtype(c.device(), c.dtype());
  const auto a = bp::sdk::check::pool2d(c, "core::avg_pool2d_backward");
  require_contiguous(c);
  const TensorRef g = c.input(0), gx = c.output(0);
  const Pool p = pool_of(a, g, gx);
  Stream& s = resolve(c.device(), c.stream());
  cl_kernel k = kernel(c.device(), spec_for(c.dtype()), "avg_pool2d_backward");
  Args(k).mem(gx.raw().data).mem(g.raw().data) << p;
  launch(s, k, static_cast<std::size_t>(a.n * a.c * a.in_h * a.in_w));
}

// --- batch_norm ----------------------------------------------------------------------

// kernels/nn.cl's Bn.
struct Bn {
  cl_long n, c, s;
  cl_long x_off, o_off, g_off;
  cl_long p_off[6];  // mean, var, weight, bias, grad_weight, grad_bias
};
enum Role { kMean, kVar, kWeight, kBias, kGradWeight, kGradBias };

cl_long off(const TensorRef& t) { return static_cast<cl_long>(t.raw().byte_offset); }

Bn bn_of(const bp::sdk::check::BatchNormArgs& a, const TensorRef& x) {
  Bn b{};
  b.n = a.n;
  b.c = a.c;
  b.s = a.spatial;
  b.x_off = off(x);
  return b;
}

void require_dense(const KernelCall& c, bool skip_output0) {
  for (int i = 0; i < c.num_inputs(); ++i)
    if (!c.input(i).is_contiguous())
      throw bp::sdk::Unsupported("[batch_norm] takes contiguous operands: the composite runs");
  for (int i = skip_output0 ? 1 : 0; i < c.num_outputs(); ++i)
    if (!c.output(i).is_contiguous())
      throw bp::sdk::Unsupported("[batch_norm] writes contiguous outputs: the composite runs");
}

// eps as the kernels' accumulator type (double for float64, else float).
template <class F>
void with_eps(bp_dtype d, double eps, F&& f) {
  if (d == BP_DTYPE_FLOAT64)
    f(static_cast<cl_double>(eps));
  else
    f(static_cast<cl_float>(eps));
}

// Launches a per-channel kernel: one work-group of a power of two work-items per channel.
void per_channel(const KernelCall& c, Stream& s, cl_kernel k, int64_t channels, int64_t per) {
  std::size_t l = 1;
  while (l < 256 && static_cast<int64_t>(l) < per) l <<= 1;
  l = fit_local(k, c.device(), l);
  launch(s, k, static_cast<std::size_t>(channels) * l, l);
}

// y = (x - mean) / sqrt(var + eps) * w + b with the given [C] operands.
void bn_apply(const KernelCall& c, Stream& s, Bn b, const TensorRef& x, const TensorRef& out,
              const TensorRef& mean, const TensorRef& var, const TensorRef& w,
              const TensorRef& bias, double eps) {
  b.o_off = off(out);
  b.p_off[kMean] = off(mean);
  b.p_off[kVar] = off(var);
  b.p_off[kWeight] = off(w);
  b.p_off[kBias] = off(bias);
  cl_kernel k = kernel(c.device(), spec_for(x.dtype()), "bn_apply");
  with_eps(x.dtype(), eps, [&](auto e) {
    Args(k).mem(out.raw().data)
            .mem(x.raw().data)
            .mem(mean.raw().data)
            .mem(var.raw().data)
            .mem(w.raw().data)
            .mem(bias.raw().data)
        << b << e;
  });
  launch(s, k, static_cast<std::size_t>(b.n * b.c * b.s));
}

void batch_norm(const KernelCall& c) {
  OpScope scope("core::batch_norm");
  check_dtype(c.device(), c.dtype());
  const auto a = bp::sdk::check::batch_norm(c, "core::batch_norm");
  require_dense(c, false);
  const TensorRef x = c.input(0), mean = c.output(1), var = c.output(2);
  Bn b = bn_of(a, x);
  b.p_off[kMean] = off(mean);
  b.p_off[kVar] = off(var);
  Stream& s = resolve(c.device(), c.stream());
  cl_kernel k = kernel(c.device(), spec_for(x.dtype()), "bn_stats");
  Args(k).mem(mean.raw().data).mem(var.raw().data).mem(x.raw().data) << b;
  per_channel(c, s, k, a.c, a.n * a.spatial);
  bn_apply(c, s, b, x, c.output(0), mean, var, c.input(1), c.input(2), a.eps);
}

void batch_norm_inference(const KernelCall& c) {
  OpScope scope("core::batch_norm_inference");
  check_dtype(c.device(), c.dtype());
  const auto a = bp::sdk::check::batch_norm(c, "core::batch_norm_inference");
  require_dense(c, false);
  const TensorRef x = c.input(0);
  Stream& s = resolve(c.device(), c.stream());
  bn_apply(c, s, bn_of(a, x), x, c.output(0), c.input(3), c.input(4), c.input(1), c.input(2),
           a.eps);
}

void batch_norm_backward(const KernelCall& c) {
  OpScope scope("core::batch_norm_backward");
  check_dtype(c.device(), c.dtype());
  const auto a = bp::sdk::check::batch_norm(c, "core::batch_norm_backward");
  const bool want_x = a.output_mask & 1;
  require_dense(c, !want_x);
  const TensorRef g = c.input(0), x = c.input(1), w = c.input(2), mean = c.input(3),
                  var = c.input(4);
  const TensorRef gx = c.output(0), gw = c.output(1), gb = c.output(2);
  Bn b = bn_of(a, x);
  b.g_off = off(g);
  b.o_off = off(gx);
  b.p_off[kMean] = off(mean);
  b.p_off[kVar] = off(var);
  b.p_off[kWeight] = off(w);
  b.p_off[kGradWeight] = off(gw);
  b.p_off[kGradBias] = off(gb);
  Stream& s = resolve(c.device(), c.stream());
  cl_kernel k = kernel(c.device(), spec_for(x.dtype()), "bn_backward_reduce");
  with_eps(x.dtype(), a.eps, [&](auto e) {
    Args(k).mem(gw.raw().data)
            .mem(gb.raw().data)
            .mem(g.raw().data)
            .mem(x.raw().data)
            .mem(mean.raw().data)
            .mem(var.raw().data)
        << b << e;
  });
  per_channel(c, s, k, a.c, a.n * a.spatial);
  if (!want_x) return;
  cl_kernel ka = kernel(c.device(), spec_for(x.dtype()), "bn_backward_apply");
  with_eps(x.dtype(), a.eps, [&](auto e) {
    Args(ka).mem(gx.raw().data)
            .mem(g.raw().data)
            .mem(x.raw().data)
            .mem(mean.raw().data)
            .mem(var.raw().data)
            .mem(w.raw().data)
            .mem(gw.raw().data)
            .mem(gb.raw().data)
        << b << e;
  });
  launch(s, ka, static_cast<std::size_t>(a.n * a.c * a.spatial));
}

}  // namespace

void register_nn_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;
  // float32, and float64 where a device has it (one without declines).
  const uint32_t mask =
      dtype_mask(kFloating) & (BP_DTYPE_BIT(BP_DTYPE_FLOAT32) | BP_DTYPE_BIT(BP_DTYPE_FLOAT64));
  r.add_named_raw("core::max_pool2d", BP_SCHEMA_CORE_MAX_POOL2D, mask,
                  &bp::sdk::kernel_thunk<max_pool2d>, nullptr, BP_ORIGIN);
  r.add_named_raw("core::avg_pool2d", BP_SCHEMA_CORE_AVG_POOL2D, mask,
                  &bp::sdk::kernel_thunk<avg_pool2d>, nullptr, BP_ORIGIN);
  r.add_named_raw("core::avg_pool2d_backward", BP_SCHEMA_CORE_AVG_POOL2D_BACKWARD, mask,
                  &bp::sdk::kernel_thunk<avg_pool2d_backward>, nullptr, BP_ORIGIN);
  r.add_named_raw("core::batch_norm", BP_SCHEMA_CORE_BATCH_NORM, mask,
                  &bp::sdk::kernel_thunk<batch_norm>, nullptr, BP_ORIGIN);
  r.add_named_raw("core::batch_norm_inference", BP_SCHEMA_CORE_BATCH_NORM_INFERENCE, mask,
                  &bp::sdk::kernel_thunk<batch_norm_inference>, nullptr, BP_ORIGIN);
  r.add_named_raw("core::batch_norm_backward", BP_SCHEMA_CORE_BATCH_NORM_BACKWARD, mask,
                  &bp::sdk::kernel_thunk<batch_norm_backward>, nullptr, BP_ORIGIN);
}

}  // namespace bp::opencl
