// core::layer_norm: oneDNN's layer normalisation (inference) for float32,
// the core's composite fused into one primitive. The normalised trailing
// dims are one row of a dense tensor; other layouts, dtypes and tiny
// tensors are declined and the composite runs.
#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

using dnnl::memory;

void layer_norm_kernel(const KernelCall& c) {
  const bp::sdk::check::LayerNormArgs args = bp::sdk::check::layer_norm(c);
  const TensorRef x = c.input(0), w = c.input(1), b = c.input(2), out = c.output(0);
  if (x.dtype() != BP_DTYPE_FLOAT32 || !x.is_contiguous() || !w.is_contiguous() || !b.is_contiguous() ||
      !out.is_contiguous() || x.numel() < kDnnlMinElements || args.row_size == 0)
    throw bp::sdk::Unsupported("[core::layer_norm] oneDNN takes dense float32 tensors: the composite runs");
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
  if (!prim) throw bp::sdk::Unsupported("[core::layer_norm] no native oneDNN implementation: the composite runs");
  dnnl::engine& eng = dnnl_engine();
  memory src(data, eng, x.base()), dst(data, eng, out.base());
  memory scale(param, eng, w.base()), shift(param, eng, b.base());
  prim.execute(dnnl_stream(),
               {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, scale}, {DNNL_ARG_SHIFT, shift}});
}

}  // namespace

void register_norm_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;
  r.add_named<&layer_norm_kernel>("core::layer_norm", BP_SCHEMA_CORE_LAYER_NORM, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
}

}  // namespace bp::cpu
