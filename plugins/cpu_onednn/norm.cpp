// core::layer_norm: oneDNN's layer normalisation (inference) for float32,
// the core's composite fused into one primitive. The normalised trailing
// dims are one row of a dense tensor; other layouts, dtypes and tiny
// tensors are declined and the composite runs.
// core::batch_norm, core::batch_norm_inference, core::batch_norm_backward:
// oneDNN's batch normalisation (training forward with the batch statistics,
// inference with the running ones, backward) for float32 NC[D][H]W tensors
// of any plain strides; what oneDNN has no native kernel for is declined.
#include <backplane/sdk/nn_checks.hpp>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

using dnnl::memory;

void layer_norm_kernel(const KernelCall& c) {
  const bp::sdk::check::LayerNormArgs args = bp::sdk::check::layer_norm(c);
  const TensorRef x = c.input(0), w = c.input(1), b = c.input(2), out = c.output(0);
  if (x.dtype() != BP_DTYPE_FLOAT32 || !x.is_contiguous() || !w.is_contiguous() ||
      !b.is_contiguous() || !out.is_contiguous() || x.numel() < kDnnlMinElements ||
      args.row_size == 0)
    throw bp::sdk::Unsupported(
        "[core::layer_norm] oneDNN takes dense float32 tensors: the composite runs");
  const int64_t n = args.row_size, rows = x.numel() / n;
  const memory::desc data({rows, n}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc param({n}, memory::data_type::f32, memory::format_tag::a);
  PrimitiveKey key{};
  key.kind = 6;
  key.dtype = BP_DTYPE_FLOAT32;
  key.ndim = 2;
  key.dims[0][0] = rows;
  key.dims[0][1] = n;
  const float eps = static_cast<float>(args.eps);
  key.scale0 = eps;
  dnnl::primitive prim = cached_primitive(key, [&]() -> dnnl::primitive {
    const dnnl::layer_normalization_forward::primitive_desc pd(
        {dnnl::prop_kind::forward_inference, data, eps,
         dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift},
        dnnl_engine());
    if (is_reference_impl(pd)) return {};
    return dnnl::layer_normalization_forward(pd);
  });
  if (!prim)
    throw bp::sdk::Unsupported(
        "[core::layer_norm] no native oneDNN implementation: the composite runs");
  dnnl::engine& eng = dnnl_engine();
  memory src(data, eng, x.base()), dst(data, eng, out.base());
  memory scale(param, eng, w.base()), shift(param, eng, b.base());
  prim.execute(
      dnnl_stream(),
      {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, scale}, {DNNL_ARG_SHIFT, shift}});
}

// x's layout for oneDNN: its own dims and strides (rank 2 to 5).
memory::desc data_md(const TensorRef& t) {
  memory::dims d, s;
  for (int i = 0; i < t.ndim(); ++i) {
    d.push_back(t.size(i));
    s.push_back(t.stride(i));
  }
  return memory::desc(d, memory::data_type::f32, s);
}
memory::desc channel_md(const TensorRef& t) {
  return memory::desc({t.size(0)}, memory::data_type::f32, {t.stride(0)});
}

[[noreturn]] void decline_bn(const char* op) {
  throw bp::sdk::Unsupported(
      std::string("[") + op +
      "] oneDNN takes dense float32 tensors of rank 2 to 5 with a native kernel for "
      "their layout: the composite runs");
}

dnnl::normalization_flags scale_shift() {
  return dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
}

dnnl::batch_normalization_forward::primitive_desc bn_forward_pd(const memory::desc& x, float eps,
                                                                bool inference) {
  const auto flags =
      inference ? scale_shift() | dnnl::normalization_flags::use_global_stats : scale_shift();
  return {{inference ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training, x,
           eps, flags},
          scratchpad_attr(),
          dnnl_engine()};
}

// Runs `body` unless the call is one oneDNN cannot take; a dnnl::error
// (a layout it refuses) declines too.
// Runs `body` unless the call is one oneDNN cannot take: float32, rank 2 to
// 5, every operand dense (no stride 0, no overlap: oneDNN reads the [C]
// operands as packed vectors whatever their descriptors say). A dnnl::error
// (a layout it refuses) declines too. `skip_output0`: grad_x not asked for.
template <class F>
void with_onednn(const char* op, const KernelCall& c, const TensorRef& x, bool skip_output0,
                 F&& body) {
  if (x.dtype() != BP_DTYPE_FLOAT32 || x.ndim() > 5) decline_bn(op);
  for (int i = 0; i < c.num_inputs(); ++i)
    if (!bp::sdk::is_dense(c.input(i))) decline_bn(op);
  for (int i = skip_output0 ? 1 : 0; i < c.num_outputs(); ++i)
    if (!bp::sdk::is_dense(c.output(i))) decline_bn(op);
  try {
    body();
  } catch (const dnnl::error&) {
    decline_bn(op);
  }
}

// Training (the batch's mean and variance are outputs 1 and 2) or inference
// (the running statistics are inputs 3 and 4): one forward primitive.
template <bool kInference>
void batch_norm_forward_kernel(const KernelCall& c) {
  constexpr const char* op = kInference ? "core::batch_norm_inference" : "core::batch_norm";
  const bp::sdk::check::BatchNormArgs a = bp::sdk::check::batch_norm(c, op);
  const TensorRef x = c.input(0), out = c.output(0);
  const TensorRef m = kInference ? c.input(3) : c.output(1),
                  v = kInference ? c.input(4) : c.output(2);
  with_onednn(op, c, x, false, [&] {
    const memory::desc xs = data_md(x), ys = data_md(out);
    const auto pd = bn_forward_pd(xs, static_cast<float>(a.eps), kInference);
    if (is_reference_impl(pd) || ys != xs) decline_bn(op);
    dnnl::engine& eng = dnnl_engine();
    memory src(xs, eng, x.base()), dst(ys, eng, out.base());
    memory scale(channel_md(c.input(1)), eng, c.input(1).base()),
        shift(channel_md(c.input(2)), eng, c.input(2).base());
    memory mean(channel_md(m), eng, m.base()), var(channel_md(v), eng, v.base());
    const Scratch pad = scratchpad_for(pd);
    dnnl::batch_normalization_forward(pd).execute(dnnl_stream(), {{DNNL_ARG_SRC, src},
                                                                  {DNNL_ARG_DST, dst},
                                                                  {DNNL_ARG_SCALE, scale},
                                                                  {DNNL_ARG_SHIFT, shift},
                                                                  {DNNL_ARG_MEAN, mean},
                                                                  {DNNL_ARG_VARIANCE, var},
                                                                  {DNNL_ARG_SCRATCHPAD, pad}});
  });
}

void batch_norm_backward_kernel(const KernelCall& c) {
  constexpr const char* op = "core::batch_norm_backward";
  const bp::sdk::check::BatchNormArgs a = bp::sdk::check::batch_norm(c, op);
  const TensorRef g = c.input(0), x = c.input(1), gx = c.output(0);
  with_onednn(op, c, x, !(a.output_mask & 1), [&] {
    const memory::desc xs = data_md(x), gs = data_md(g);
    if (gs != xs) decline_bn(op);  // one layout for the data operands
    const float eps = static_cast<float>(a.eps);
    const auto hint = bn_forward_pd(xs, eps, false);
    const dnnl::batch_normalization_backward::primitive_desc pd(
        {dnnl::prop_kind::backward, gs, xs, eps, scale_shift()}, scratchpad_attr(), dnnl_engine(),
        hint);
    if (is_reference_impl(pd)) decline_bn(op);
    dnnl::engine& eng = dnnl_engine();
    // grad_x goes to the caller's output when asked for, else to scratch.
    const memory::desc gxs = (a.output_mask & 1) ? data_md(gx) : pd.diff_src_desc();
    if (gxs != pd.diff_src_desc()) decline_bn(op);
    memory src(xs, eng, x.base()), dy(gs, eng, g.base());
    Scratch dx =
        (a.output_mask & 1) ? Scratch{memory(gxs, eng, gx.base()), {}} : scratch_memory(gxs);
    memory scale(channel_md(c.input(2)), eng, c.input(2).base());
    memory mean(channel_md(c.input(3)), eng, c.input(3).base()),
        var(channel_md(c.input(4)), eng, c.input(4).base());
    memory dscale(channel_md(c.output(1)), eng, c.output(1).base()),
        dshift(channel_md(c.output(2)), eng, c.output(2).base());
    // oneDNN asks for the shift it does not read in backward (use_shift).
    const Scratch shift = scratch_memory(channel_md(c.input(2)));
    const Scratch pad = scratchpad_for(pd);
    dnnl::batch_normalization_backward(pd).execute(dnnl_stream(), {{DNNL_ARG_SCRATCHPAD, pad},
                                                                   {DNNL_ARG_SRC, src},
                                                                   {DNNL_ARG_DIFF_DST, dy},
                                                                   {DNNL_ARG_SCALE, scale},
                                                                   {DNNL_ARG_SHIFT, shift},
                                                                   {DNNL_ARG_MEAN, mean},
                                                                   {DNNL_ARG_VARIANCE, var},
                                                                   {DNNL_ARG_DIFF_SRC, dx},
                                                                   {DNNL_ARG_DIFF_SCALE, dscale},
                                                                   {DNNL_ARG_DIFF_SHIFT, dshift}});
  });
}

}  // namespace

void register_norm_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;
  r.add_named<&layer_norm_kernel>("core::layer_norm", BP_SCHEMA_CORE_LAYER_NORM, {BP_DTYPE_FLOAT32},
                                  BP_ORIGIN);
  r.add_named<&batch_norm_forward_kernel<false>>("core::batch_norm", BP_SCHEMA_CORE_BATCH_NORM,
                                                 {BP_DTYPE_FLOAT32}, BP_ORIGIN);
  r.add_named<&batch_norm_forward_kernel<true>>("core::batch_norm_inference",
                                                BP_SCHEMA_CORE_BATCH_NORM_INFERENCE,
                                                {BP_DTYPE_FLOAT32}, BP_ORIGIN);
  r.add_named<&batch_norm_backward_kernel>("core::batch_norm_backward",
                                           BP_SCHEMA_CORE_BATCH_NORM_BACKWARD, {BP_DTYPE_FLOAT32},
                                           BP_ORIGIN);
}

}  // namespace bp::cpu
