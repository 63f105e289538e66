// A named op of this plugin's own (ABI 1.2), beside the primitive ones:
// hostref::lerp, out = a + w * (b - a), which programs call with
//   bp::call_op("hostref::lerp", {a, b}, {0.25})
// The core checks each call against the schema (two tensors, one float)
// before the kernel runs; the kernel checks what the schema cannot say
// (shapes, dtypes) with the SDK's element-wise check.
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

}  // namespace

void register_named_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;  // a core older than ABI 1.2
  r.add_named<&lerp_kernel>("hostref::lerp", "(Tensor a, Tensor b, float weight) -> Tensor",
                            kFloatDtypes, BP_ORIGIN);
}

}  // namespace hostref
