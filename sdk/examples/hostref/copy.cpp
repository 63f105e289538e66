// FILL and COPY, for every dtype: the two ops without which no tensor can be
// made or read back. COPY converts like static_cast, except that anything
// becomes bool as x != 0.
#include "hostref.h"

namespace hostref {

namespace {

void fill_kernel(const KernelCall& c) {
  check::fill(c);
  bp::sdk::visit_dtype(c.output(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = bp::sdk::scalar_as<T>(c.scalar(0));
    bp::sdk::for_each_row<1>({c.output(0)}, [&](auto p, auto s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) at<T>(p[0], s[0], i) = v;
    });
  });
}

void copy_kernel(const KernelCall& c) {
  check::copy(c);
  const TensorRef in = c.input(0), out = c.output(0);
  if (bp::sdk::is_narrow(out.dtype()) || bp::sdk::is_narrow(in.dtype())) {
    bp::sdk::cast_copy(out, in);  // float16, bfloat16, int8, uint8, int16
    return;
  }
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
