// core::conv2d and core::conv2d_backward: oneDNN's convolution (forward,
// backward data, backward weights) for float32. The primitive picks its own
// memory formats (blocked, for the vector units); the caller's NCHW tensors
// (any strides) are reordered into them and the results back. A convolution
// oneDNN does not implement natively is declined, and the core's composite
// runs; so is one whose operands' layout oneDNN cannot describe.
#include <backplane/sdk/nn_loops.hpp>
#include <cstring>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// The named ops' attributes: stride, padding, dilation (h, w), groups.
struct ConvParams {
  int64_t sh, sw, ph, pw, dh, dw, groups;
  explicit ConvParams(const bp_attrs& a)
      : sh(a.ints[0]),
        sw(a.ints[1]),
        ph(a.ints[2]),
        pw(a.ints[3]),
        dh(a.ints[4]),
        dw(a.ints[5]),
        groups(a.ints[6]) {}
  memory::dims strides() const { return {sh, sw}; }
  memory::dims dilates() const { return {dh - 1, dw - 1}; }  // oneDNN counts the gaps
  memory::dims padding() const { return {ph, pw}; }
};

memory::dims dims_of(const TensorRef& t) {
  memory::dims d;
  for (int i = 0; i < t.ndim(); ++i) d.push_back(t.size(i));
  return d;
}
memory::dims strides_of(const TensorRef& t) {
  memory::dims s;
  for (int i = 0; i < t.ndim(); ++i) s.push_back(t.stride(i));
  return s;
}

// The caller's layout of an activation (N, C, H, W) or a bias.
memory::desc user_md(const TensorRef& t) {
  return memory::desc(dims_of(t), dt::f32, strides_of(t));
}

// Weights [O, C/G, KH, KW], as oneDNN's [G, O/G, C/G, KH, KW] when grouped.
memory::desc weight_md(const TensorRef& w, int64_t groups) {
  if (groups == 1) return user_md(w);
  const int64_t og = w.size(0) / groups;
  return memory::desc({groups, og, w.size(1), w.size(2), w.size(3)}, dt::f32,
                      {w.stride(0) * og, w.stride(0), w.stride(1), w.stride(2), w.stride(3)});
}
memory::desc any_like(const memory::desc& md) { return memory::desc(md.dims(), dt::f32, tag::any); }

// Memory of `want`'s layout holding the user's data: the user's own when the
// layouts agree, else a reordered copy (in scratch memory).
Scratch to_layout(const memory::desc& want, const memory::desc& user_desc, void* data) {
  dnnl::engine& eng = dnnl_engine();
  memory user(user_desc, eng, data);
  if (want == user_desc) return {user, {}};
  Scratch m = scratch_memory(want);
  dnnl::reorder(user, m.memory).execute(dnnl_stream(), user, m.memory);
  return m;
}

// Memory for a result of layout `want`, written to the user's afterwards by finish().
Scratch result(const memory::desc& want, const memory::desc& user_desc, void* data) {
  if (want == user_desc) return {memory(user_desc, dnnl_engine(), data), {}};
  return scratch_memory(want);
}
void finish(const Scratch& m, const memory::desc& user_desc, void* data) {
  if (m.memory.get_desc() == user_desc) return;
  memory user(user_desc, dnnl_engine(), data);
  dnnl::reorder(m.memory, user).execute(dnnl_stream(), const_cast<memory&>(m.memory), user);
}

dnnl::convolution_forward::primitive_desc forward_pd(const memory::desc& src,
                                                     const memory::desc& wei,
                                                     const memory::desc* bias,
                                                     const memory::desc& dst, const ConvParams& p) {
  const auto desc =
      bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                             dnnl::algorithm::convolution_direct, any_like(src),
                                             any_like(wei), any_like(*bias), any_like(dst),
                                             p.strides(), p.dilates(), p.padding(), p.padding())
           : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                             dnnl::algorithm::convolution_direct, any_like(src),
                                             any_like(wei), any_like(dst), p.strides(), p.dilates(),
                                             p.padding(), p.padding());
  return {desc, scratchpad_attr(), dnnl_engine()};
}

// Whether a 4-D float32 operand holds an inf or a NaN (all exponent bits
// set), over OpenMP threads: an integer OR that vectorises along rows.
bool has_nonfinite(const TensorRef& t) {
  const int64_t planes = t.size(0) * t.size(1), rows = t.size(2), cols = t.size(3);
  uint32_t found = 0;
#pragma omp parallel for reduction(| : found) schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const float* base =
        t.data<float>() + (p / t.size(1)) * t.stride(0) + (p % t.size(1)) * t.stride(1);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = base + r * t.stride(2);
      uint32_t m = 0;
      if (t.stride(3) == 1) {
        for (int64_t i = 0; i < cols; ++i) {
          uint32_t bits;
          std::memcpy(&bits, row + i, sizeof bits);
          m |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
        }
      } else {
        for (int64_t i = 0; i < cols; ++i)
          m |= static_cast<uint32_t>(!std::isfinite(row[i * t.stride(3)]));
      }
      found |= m;
    }
  }
  return found != 0;
}

[[noreturn]] void decline(const char* op) {
  throw bp::sdk::Unsupported(
      std::string("[") + op +
      "] oneDNN has no native implementation for this convolution: the core's "
      "composite runs");
}

void conv2d_forward(const KernelCall& c) {
  const TensorRef x = c.input(0), w = c.input(1), b = c.input(2), out = c.output(0);
  const auto args = bp::sdk::check::conv2d(c, "core::conv2d");
  const ConvParams p(c.attrs());
  const memory::desc xs = user_md(x), ws = weight_md(w, p.groups), bs = user_md(b),
                     ys = user_md(out);
  dnnl::convolution_forward::primitive_desc pd;
  try {
    pd = forward_pd(xs, ws, &bs, ys, p);
  } catch (const dnnl::error&) {
    decline("core::conv2d");
  }
  if (is_reference_impl(pd)) decline("core::conv2d");
  const Scratch src = to_layout(pd.src_desc(), xs, x.base());
  const Scratch wei = to_layout(pd.weights_desc(), ws, w.base());
  const Scratch bias = to_layout(pd.bias_desc(), bs, b.base());
  const Scratch dst = result(pd.dst_desc(), ys, out.base());
  const Scratch pad = scratchpad_for(pd);
  dnnl::convolution_forward(pd).execute(dnnl_stream(), {{DNNL_ARG_SRC, src},
                                                        {DNNL_ARG_WEIGHTS, wei},
                                                        {DNNL_ARG_BIAS, bias},
                                                        {DNNL_ARG_DST, dst},
                                                        {DNNL_ARG_SCRATCHPAD, pad}});
  finish(dst, ys, out.base());
  bp::sdk::nn::conv2d_padding_nan<float>(args, w, out);  // oneDNN skips padding taps
}

// Gradients of the input (backward data) and of the weight (backward
// weights), each when its bit of output_mask (ints[7]) is set.
void conv2d_backward(const KernelCall& c) {
  const TensorRef g = c.input(0), x = c.input(1), w = c.input(2), gx = c.output(0),
                  gw = c.output(1);
  const auto args = bp::sdk::check::conv2d(c, "core::conv2d_backward");
  const ConvParams p(c.attrs());
  const bool want_x = c.attrs().ints[7] & 1, want_w = c.attrs().ints[7] & 2;
  const memory::desc gs = user_md(g), xs = user_md(x), ws = weight_md(w, p.groups);
  // The gradients' layouts are those of x and w (the core allocates them contiguous).
  const memory::desc gxs = want_x ? user_md(gx) : xs, gws = want_w ? weight_md(gw, p.groups) : ws;
  dnnl::convolution_forward::primitive_desc hint;
  dnnl::convolution_backward_data::primitive_desc data_pd;
  dnnl::convolution_backward_weights::primitive_desc weights_pd;
  try {
    hint = forward_pd(xs, ws, nullptr, gs, p);
    data_pd = {{dnnl::algorithm::convolution_direct, any_like(xs), any_like(ws), any_like(gs),
                p.strides(), p.dilates(), p.padding(), p.padding()},
               scratchpad_attr(),
               dnnl_engine(),
               hint};
    weights_pd = {{dnnl::algorithm::convolution_direct, any_like(xs), any_like(ws), any_like(gs),
                   p.strides(), p.dilates(), p.padding(), p.padding()},
                  scratchpad_attr(),
                  dnnl_engine(),
                  hint};
  } catch (const dnnl::error&) {
    decline("core::conv2d_backward");
  }
  if (is_reference_impl(data_pd) || is_reference_impl(weights_pd)) decline("core::conv2d_backward");
  dnnl::stream& s = dnnl_stream();
  if (want_x) {
    const Scratch dy = to_layout(data_pd.diff_dst_desc(), gs, g.base());
    const Scratch wei = to_layout(data_pd.weights_desc(), ws, w.base());
    const Scratch dx = result(data_pd.diff_src_desc(), gxs, gx.base());
    const Scratch pad = scratchpad_for(data_pd);
    dnnl::convolution_backward_data(data_pd).execute(s, {{DNNL_ARG_DIFF_DST, dy},
                                                         {DNNL_ARG_WEIGHTS, wei},
                                                         {DNNL_ARG_DIFF_SRC, dx},
                                                         {DNNL_ARG_SCRATCHPAD, pad}});
    finish(dx, gxs, gx.base());
  }
  if (!want_w) return;
  const Scratch dy = to_layout(weights_pd.diff_dst_desc(), gs, g.base());
  const Scratch src = to_layout(weights_pd.src_desc(), xs, x.base());
  const Scratch dw = result(weights_pd.diff_weights_desc(), gws, gw.base());
  const Scratch pad = scratchpad_for(weights_pd);
  dnnl::convolution_backward_weights(weights_pd)
      .execute(s, {{DNNL_ARG_DIFF_DST, dy},
                   {DNNL_ARG_SRC, src},
                   {DNNL_ARG_DIFF_WEIGHTS, dw},
                   {DNNL_ARG_SCRATCHPAD, pad}});
  finish(dw, gws, gw.base());
  if ((p.ph != 0 || p.pw != 0) && has_nonfinite(g))  // oneDNN skips padding taps
    bp::sdk::nn::conv2d_backward_weight_padding_nan<float>(args, g, gw);
}

// oneDNN refuses some layouts (stride 0, overlapping strides) in a memory
// descriptor: those calls go to the composite too.
void conv2d_kernel(const KernelCall& c) {
  try {
    conv2d_forward(c);
  } catch (const dnnl::error&) {
    decline("core::conv2d");
  }
}
void conv2d_backward_kernel(const KernelCall& c) {
  try {
    conv2d_backward(c);
  } catch (const dnnl::error&) {
    decline("core::conv2d_backward");
  }
}

}  // namespace

void register_conv_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;
  r.add_named<&conv2d_kernel>("core::conv2d", BP_SCHEMA_CORE_CONV2D, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
  r.add_named<&conv2d_backward_kernel>("core::conv2d_backward", BP_SCHEMA_CORE_CONV2D_BACKWARD,
                                       {BP_DTYPE_FLOAT32}, BP_ORIGIN);
}

}  // namespace bp::cpu
