// Named ops. One of this plugin's own, beside the primitive ones:
// hostref::lerp, out = a + w * (b - a), which programs call with
//   bp::call_op("hostref::lerp", {a, b}, {0.25})
// The core checks each call against the schema (two tensors, one float)
// before the kernel runs; the kernel checks what the schema cannot say
// (shapes, dtypes) with the SDK's element-wise check. And a fused kernel
// for one of the core's composite ops, core::layer_norm, which the core runs
// in place of its composite when no gradient is being recorded.
#include <cmath>

#include "hostref.h"

namespace hostref {

namespace {

void lerp_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 2, false);
  const double w = c.scalar(0).value.f;
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>)
      map2<T, T>(c.output(0), c.input(0), c.input(1),
                 [=](T a, T b) { return static_cast<T>(a + w * (b - a)); });
    else
      bp::sdk::unsupported(c, dt);
  });
}

// core::layer_norm: the core's composite layer_norm as one pass per row,
// for contiguous operands (others are declined: the core then runs its
// composite). ints[0] = the number of normalised (trailing) dims,
// scalars[0] = eps; inputs x, weight, bias.
void layer_norm_kernel(const KernelCall& c) {
  const bp::sdk::check::LayerNormArgs args = check::layer_norm(c);
  const int64_t n = args.row_size;
  const double eps = args.eps;
  const TensorRef x = c.input(0), w = c.input(1), b = c.input(2), out = c.output(0);
  const bp_dtype dt = x.dtype();
  if (!x.is_contiguous() || !w.is_contiguous() || !b.is_contiguous() || !out.is_contiguous())
    throw bp::sdk::Unsupported(
        "[core::layer_norm] non-contiguous operands: the core's composite runs");
  if (n == 0 || x.numel() == 0) return;
  const int64_t rows = x.numel() / n;
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T* xs = x.data<T>();
      const T* ws = w.data<T>();
      const T* bs = b.data<T>();
      T* os = out.data<T>();
      for (int64_t r = 0; r < rows; ++r, xs += n, os += n) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < n; ++i) mean += xs[i];
        mean /= static_cast<double>(n);
        for (int64_t i = 0; i < n; ++i) var += (xs[i] - mean) * (xs[i] - mean);
        const double inv = 1.0 / std::sqrt(var / static_cast<double>(n) + eps);
        for (int64_t i = 0; i < n; ++i)
          os[i] = static_cast<T>((xs[i] - mean) * inv * ws[i] + bs[i]);
      }
    } else {
      bp::sdk::unsupported(c, dt);
    }
  });
}

}  // namespace

void register_named_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;  // a core that takes no named ops
  r.add_named<&lerp_kernel>("hostref::lerp", "(Tensor a, Tensor b, float weight) -> Tensor",
                            kFloatDtypes, BP_ORIGIN);
  r.add_named<&layer_norm_kernel>(
      "core::layer_norm",
      "(Tensor x, Tensor weight, Tensor bias, int normalized_dims, float eps) -> Tensor",
      kFloatDtypes, BP_ORIGIN);
}

}  // namespace hostref
