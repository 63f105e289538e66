// FILL and COPY, for every dtype: the two ops without which no tensor can be
// made or read back. COPY converts like static_cast, except that anything
// becomes bool as x != 0.
#include "hostref.h"

namespace hostref {

namespace {

void fill_kernel(const KernelCall& c) {
  HOSTREF_CHECK(
      c.num_inputs() == 0 && c.num_outputs() == 1, "fill",
      "expected no input and 1 output, got " << c.num_inputs() << " and " << c.num_outputs());
  HOSTREF_CHECK(c.attrs().num_scalars >= 1, "fill", "the value (scalars[0]) is missing");
  bp::sdk::visit_dtype(c.output(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = bp::sdk::scalar_as<T>(c.scalar(0));
    bp::sdk::for_each_row<1>({c.output(0)}, [&](auto p, auto s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) at<T>(p[0], s[0], i) = v;
    });
  });
}

void copy_kernel(const KernelCall& c) {
  HOSTREF_CHECK(
      c.num_inputs() == 1 && c.num_outputs() == 1, "copy",
      "expected 1 input and 1 output, got " << c.num_inputs() << " and " << c.num_outputs());
  const TensorRef in = c.input(0), out = c.output(0);
  HOSTREF_CHECK(in.ndim() == out.ndim(), "copy",
                "input rank " << in.ndim() << " differs from output rank " << out.ndim());
  for (int d = 0; d < in.ndim(); ++d)
    HOSTREF_CHECK(
        in.size(d) == out.size(d), "copy",
        "input and output differ in dim " << d << ": " << in.size(d) << " vs " << out.size(d));
  bp::sdk::visit_dtype(out.dtype(), [&](auto to_tag) {
    using To = decltype(to_tag);
    bp::sdk::visit_dtype(in.dtype(), [&](auto from_tag) {
      using From = decltype(from_tag);
      map1<To, From>(out, in, [](From x) {
        if constexpr (std::is_same_v<To, bool>)
          return x != From(0);
        else
          return static_cast<To>(x);
      });
    });
  });
}

}  // namespace

void register_copy_kernels(Registrar& r) {
  r.add<&fill_kernel>(BP_OP_FILL, kAllDtypes, BP_ORIGIN);
  r.add<&copy_kernel>(BP_OP_COPY, kAllDtypes, BP_ORIGIN);
}

}  // namespace hostref
