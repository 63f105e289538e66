// SOFTMAX and LOG_SOFTMAX along dim ints[0], float32 and float64. Stable:
// the line's max is subtracted before exponentiating, and the sum runs in
// double. Each element is read before its output is written, so out may be
// the input (in place).
#include <cmath>

#include "hostref.h"

namespace hostref {

namespace {

// One line of n elements, sx and so apart.
template <bool kLog, class T>
void softmax_line(T* o, int64_t so, const T* x, int64_t sx, int64_t n) {
  T m = x[0];
  for (int64_t k = 1; k < n; ++k) m = x[k * sx] > m ? x[k * sx] : m;
  double sum = 0;
  if constexpr (kLog) {
    for (int64_t k = 0; k < n; ++k) sum += std::exp(x[k * sx] - m);
    const T lse = static_cast<T>(std::log(sum));
    for (int64_t k = 0; k < n; ++k) o[k * so] = (x[k * sx] - m) - lse;
  } else {
    for (int64_t k = 0; k < n; ++k) {
      const T e = std::exp(x[k * sx] - m);
      o[k * so] = e;
      sum += e;
    }
    const T inv = static_cast<T>(1.0 / sum);
    for (int64_t k = 0; k < n; ++k) o[k * so] *= inv;
  }
}

template <bool kLog>
void softmax_kernel(const KernelCall& c) {
  const int d = check::softmax(c);
  const bp_dtype dt = c.input(0).dtype();
  if (c.output(0).numel() == 0) return;
  // Both operands walk the first element of each line; the line itself is
  // the dim d of size n.
  TensorDesc o(c.output(0)), x(c.input(0));
  const int64_t n = x.size(d), so = o.stride(d), sx = x.stride(d);
  o.size(d) = x.size(d) = 1;
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      bp::sdk::for_each_row<2>({o.ref(), x.ref()}, [&](auto p, auto s, int64_t len) {
        for (int64_t j = 0; j < len; ++j)
          softmax_line<kLog>(&at<T>(p[0], s[0], j), so, &at<T>(p[1], s[1], j), sx, n);
      });
    } else {
      bp::sdk::unsupported(c, dt);
    }
  });
}

}  // namespace

void register_softmax_kernels(Registrar& r) {
  r.add<&softmax_kernel<false>>(BP_OP_SOFTMAX, kFloatDtypes, BP_ORIGIN);
  r.add<&softmax_kernel<true>>(BP_OP_LOG_SOFTMAX, kFloatDtypes, BP_ORIGIN);
}

}  // namespace hostref
