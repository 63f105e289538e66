// FILL and COPY, for every dtype: the two ops without which no tensor can be
// made or read back. COPY converts like static_cast, except that anything
// becomes bool as x != 0.
#include <backplane/sdk/widen.hpp>

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

// The SDK's cast_copy walks both layouts and converts between any two
// dtypes (float16 and bfloat16 through float32, rounding to nearest even).
void copy_kernel(const KernelCall& c) {
  check::copy(c);
  bp::sdk::cast_copy(c.output(0), c.input(0));
}

}  // namespace

void register_copy_kernels(Registrar& r) {
  r.add<&fill_kernel>(BP_OP_FILL, kBaseDtypes, BP_ORIGIN);
  r.add<&copy_kernel>(BP_OP_COPY, kBaseDtypes, BP_ORIGIN);
}

}  // namespace hostref
