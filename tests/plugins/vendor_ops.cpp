// Named ops of a plugin's own, for named_ops_test: host memory,
// fill and copy, three vendor ops and an override of the core's silu. Built twice: as `vendor_ops`,
// and with VENDOR_OPS_BAD_SCHEMA as `bad_schema`, whose registration the core must refuse.
#include <algorithm>
#include <backplane/sdk/checks.hpp>
#include <backplane/sdk/loops.hpp>

#include "host_kernels.hpp"

namespace {

namespace check = bp::sdk::check;

// out = a * x + b * y: "(Tensor x, Tensor y, float a, float b) -> Tensor".
void axpby(const bp::sdk::KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 2, false);
  const double a = c.scalar(0).value.f, b = c.scalar(1).value.f;
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>)
      bp::sdk::map2<T, T>(c.output(0), c.input(0), c.input(1),
                          [=](T x, T y) { return static_cast<T>(a * x + b * y); });
    else
      bp::sdk::unsupported(c, dt);
  });
}

// out = x + k: "(Tensor x, int k) -> Tensor", integers.
void shift(const bp::sdk::KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 1, false);
  const int64_t k = c.attrs().ints[0];
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
      bp::sdk::map1<T, T>(c.output(0), c.input(0), [=](T x) { return static_cast<T>(x + k); });
    else
      bp::sdk::unsupported(c, dt);
  });
}

#ifndef VENDOR_OPS_BAD_SCHEMA
// The positive and negative parts of x, or their magnitudes when `magnitude`:
// "(Tensor x, bool magnitude) -> (Tensor, Tensor)", float32.
void split_sign(const bp::sdk::KernelCall& c) {
  check::arity(c, 1, 2);
  const bool magnitude = c.attrs().ints[0] != 0;
  bp::sdk::map1<float, float>(c.output(0), c.input(0), [](float x) { return std::max(x, 0.0f); });
  bp::sdk::map1<float, float>(c.output(1), c.input(0), [=](float x) {
    const float n = std::min(x, 0.0f);
    return magnitude ? -n : n;
  });
}
#endif

#ifndef VENDOR_OPS_BAD_SCHEMA
// A deliberately wrong override of the core's composite silu: x + 1000, so
// that a test sees which path ran.
void silu_plus_1000(const bp::sdk::KernelCall& c) {
  check::elementwise(c, 1, false);
  bp::sdk::map1<float, float>(c.output(0), c.input(0), [](float x) { return x + 1000.0f; });
}
#endif

class VendorOpsPlugin final : public bp::sdk::Plugin {
 public:
#ifdef VENDOR_OPS_BAD_SCHEMA
  const char* name() const override { return "bad_schema"; }
#else
  const char* name() const override { return "vendor_ops"; }
#endif
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_fill_and_copy(r);
#ifdef VENDOR_OPS_BAD_SCHEMA
    // A good op first: the refusal of the next must take it away too.
    r.add_named<&shift>("fake::shift", "(Tensor x, int k) -> Tensor", {BP_DTYPE_INT64}, BP_ORIGIN);
    r.add_named<&axpby>("fake::axpby", "(Tensor x, Tensor y, double a) -> Tensor",
                        {BP_DTYPE_FLOAT32}, BP_ORIGIN);
#else
    r.add_named<&axpby>("fake::axpby", "(Tensor x, Tensor y, float a, float b) -> Tensor",
                        {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}, BP_ORIGIN);
    r.add_named<&shift>("fake::shift", "(Tensor x, int k) -> Tensor",
                        {BP_DTYPE_INT32, BP_DTYPE_INT64}, BP_ORIGIN);
    r.add_named<&split_sign>("fake::split_sign", "(Tensor x, bool magnitude) -> (Tensor, Tensor)",
                             {BP_DTYPE_FLOAT32}, BP_ORIGIN);
    r.add_named<&silu_plus_1000>("core::silu", "(Tensor x) -> Tensor", {BP_DTYPE_FLOAT32},
                                 BP_ORIGIN);
#endif
  }
};

}  // namespace

BP_SDK_PLUGIN(VendorOpsPlugin)
