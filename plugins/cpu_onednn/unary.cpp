// Element-wise unary ops. Large dense float32 RELU, ABS, SQRT, SIGMOID and
// TANH go to oneDNN's eltwise primitive; everything else runs the plugin's
// loops. oneDNN 2.6's other candidates are not accurate enough: exp turns
// NaN into inf, log returns -1.4e-6 for log(1) and is off for denormals,
// linear (for NEG) loses the sign of -0, and clip turns NaN into the lower
// bound. Integers stay on the loops, where oneDNN would round through f32.
#include <cmath>
#include <limits>
#include <type_traits>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

enum class Un { relu, neg, abs, exp, log, sqrt, sigmoid, tanh, erf, clamp };

// The oneDNN algorithm that matches the loop closely enough, if any.
constexpr bool dnnl_alg(Un op, dnnl::algorithm* alg) {
  // relu stays on the loop: oneDNN's relu turns NaN into 0, and the loop is
  // as fast for a memory-bound op.
  switch (op) {
    case Un::abs:
      *alg = dnnl::algorithm::eltwise_abs;
      return true;
    case Un::sqrt:
      *alg = dnnl::algorithm::eltwise_sqrt;
      return true;
    case Un::sigmoid:
      *alg = dnnl::algorithm::eltwise_logistic;
      return true;
    case Un::tanh:
      *alg = dnnl::algorithm::eltwise_tanh;
      return true;
    default:
      return false;
  }
}

template <class T, Un Op>
struct UnaryFn {
  T lo, hi;  // CLAMP's bounds
  T operator()(T x) const {
    namespace fn = bp::sdk::fn;  // integer NEG and ABS wrap; NaN passes RELU and CLAMP
    if constexpr (Op == Un::relu) {
      return fn::relu(x);
    } else if constexpr (Op == Un::neg) {
      return fn::neg(x);
    } else if constexpr (Op == Un::abs) {
      return fn::abs(x);
    } else if constexpr (Op == Un::exp) {
      return std::exp(x);
    } else if constexpr (Op == Un::log) {
      return std::log(x);
    } else if constexpr (Op == Un::sqrt) {
      return std::sqrt(x);
    } else if constexpr (Op == Un::sigmoid) {
      return fn::sigmoid(x);
    } else if constexpr (Op == Un::tanh) {
      return std::tanh(x);
    } else if constexpr (Op == Un::erf) {
      return std::erf(x);
    } else {
      return fn::clamp(x, lo, hi);
    }
  }
};

bool try_dnnl_eltwise(dnnl::algorithm alg, const TensorRef& out, const TensorRef& in,
                      float alpha = 0.0f) {
  if (!is_dense(out) || !same_strides(out, in)) return false;
  const int64_t n = out.numel();
  PrimitiveKey key{};
  key.kind = 2;
  key.alg = static_cast<int32_t>(alg);
  key.scale0 = alpha;
  key.dtype = BP_DTYPE_FLOAT32;
  key.ndim = 1;
  key.dims[0][0] = n;
  const dnnl::memory::desc md({n}, dnnl::memory::data_type::f32, dnnl::memory::dims{1});
  dnnl::primitive prim = cached_primitive(key, [&]() -> dnnl::primitive {
    dnnl::eltwise_forward::primitive_desc pd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, alg, md, alpha, 0.0f),
        dnnl_engine());
    if (is_reference_impl(pd)) return {};
    return dnnl::eltwise_forward(pd);
  });
  if (!prim) return false;
  execute_src_dst(prim, md, in.base(), md, out.base());
  return true;
}

template <class T, Un Op>
void unary_typed(const KernelCall& c, const TensorRef& out, const TensorRef& in) {
  UnaryFn<T, Op> fn{};
  if constexpr (Op == Un::clamp) {
    // check::clamp ran in unary_kernel.
    bp::sdk::clamp_bounds<T>(c, c.attrs().ints[0], &fn.lo, &fn.hi);
  }
  if (out.numel() == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    dnnl::algorithm alg{};
    if (dnnl_alg(Op, &alg) && out.numel() >= kDnnlMinElements && try_dnnl_eltwise(alg, out, in))
      return;
  }
  unary_map<T, T>(out, in, fn);
}

template <Un Op>
void unary_kernel(const KernelCall& c) {
  const bp_dtype dt =
      Op == Un::clamp ? (check::clamp(c), c.input(0).dtype()) : check::elementwise(c, 1, false);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    constexpr bool float_only = Op == Un::exp || Op == Un::log || Op == Un::sqrt ||
                                Op == Un::sigmoid || Op == Un::tanh || Op == Un::erf;
    if constexpr (std::is_same_v<T, bool> || (float_only && !std::is_floating_point_v<T>)) {
      bp::sdk::unsupported(c, dt);
    } else {
      unary_typed<T, Op>(c, c.output(0), c.input(0));
    }
  });
}

void logical_not_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 1, true);
  if (c.output(0).numel() == 0) return;
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    unary_map<bool, T>(c.output(0), c.input(0), [](T x) { return x == T(0); });
  });
}

// core::silu, the core's composite x * sigmoid(x) fused: oneDNN's swish
// (alpha 1) for large dense float32, one loop otherwise.
void silu_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 1, false);
  const TensorRef out = c.output(0), in = c.input(0);
  if (out.numel() == 0) return;
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      if constexpr (std::is_same_v<T, float>) {
        if (out.numel() >= kDnnlMinElements &&
            try_dnnl_eltwise(dnnl::algorithm::eltwise_swish, out, in, 1.0f))
          return;
      }
      unary_map<T, T>(out, in, [](T x) { return x / (T(1) + std::exp(-x)); });
    } else {
      bp::sdk::unsupported(c, dt);
    }
  });
}

// core::gelu, the core's composite fused: oneDNN's gelu_erf / gelu_tanh for
// large dense float32, one loop otherwise.
void gelu_kernel(const KernelCall& c) {
  BP_SDK_CHECK(c.attrs().num_ints >= 1, "core::gelu", "expects ints[0] = tanh_approximation");
  const bp_dtype dt = check::elementwise(c, 1, false);
  const TensorRef out = c.output(0), in = c.input(0);
  const bool approx = c.attrs().ints[0] != 0;
  if (out.numel() == 0) return;
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      if constexpr (std::is_same_v<T, float>) {
        const auto alg =
            approx ? dnnl::algorithm::eltwise_gelu_tanh : dnnl::algorithm::eltwise_gelu_erf;
        if (out.numel() >= kDnnlMinElements && try_dnnl_eltwise(alg, out, in, 0.0f)) return;
      }
      if (approx)
        unary_map<T, T>(out, in, [](T x) {
          const double d = x;
          return static_cast<T>(0.5 * d *
                                (1 + std::tanh(0.7978845608028654 * (d + 0.044715 * d * d * d))));
        });
      else
        unary_map<T, T>(out, in, [](T x) {
          const double d = x;
          return static_cast<T>(0.5 * d * (1 + std::erf(d * 0.7071067811865476)));
        });
    } else {
      bp::sdk::unsupported(c, dt);
    }
  });
}

}  // namespace

void register_unary_kernels(Registrar& r) {
  r.add<&unary_kernel<Un::relu>>(BP_OP_RELU, kNumericDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::neg>>(BP_OP_NEG, kNumericDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::abs>>(BP_OP_ABS, kNumericDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::exp>>(BP_OP_EXP, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::log>>(BP_OP_LOG, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::sqrt>>(BP_OP_SQRT, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::sigmoid>>(BP_OP_SIGMOID, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::tanh>>(BP_OP_TANH, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::erf>>(BP_OP_ERF, kFloatDtypes, BP_ORIGIN);
  r.add<&unary_kernel<Un::clamp>>(BP_OP_CLAMP, kNumericDtypes, BP_ORIGIN);
  r.add<&logical_not_kernel>(BP_OP_LOGICAL_NOT, kBaseDtypes, BP_ORIGIN);
  if (r.has_named_ops()) {
    r.add_named<&silu_kernel>("core::silu", BP_SCHEMA_CORE_SILU, kFloatDtypes, BP_ORIGIN);
    r.add_named<&gelu_kernel>("core::gelu", BP_SCHEMA_CORE_GELU, kFloatDtypes, BP_ORIGIN);
  }
}

}  // namespace bp::cpu
