// ARGSORT and CUMSUM along the one dim ints[0], one line at a time with the
// SDK's line loops: a stable sort in fn::sorts_before's order (NaN last
// ascending, first descending), and running sums in double for floats and
// in int64 (wrapping) for bool and integers.
#include <type_traits>
#include <vector>

#include "hostref.h"

namespace hostref {

namespace {

// Calls line(first element of the input line, of the output line) for each
// line along d.
template <class Line>
void lines(const TensorRef& in, const TensorRef& out, int d, Line&& line) {
  TensorDesc o(out), x(in);
  x.size(d) = 1;
  o.size(d) = 1;
  bp::sdk::for_each_row<2>({o.ref(), x.ref()}, [&](auto p, auto s, int64_t len) {
    for (int64_t j = 0; j < len; ++j) line(p[1] + j * s[1], p[0] + j * s[0]);
  });
}

void argsort_kernel(const KernelCall& c) {
  bool descending = false;
  const int d = check::argsort(c, &descending);
  const TensorDesc in(c.input(0)), out(c.output(0));  // 0-d as [1]
  if (out.ref().numel() == 0) return;
  const int64_t n = in.ref().size(d), step = in.ref().stride(d), ostep = out.ref().stride(d);
  bp::sdk::visit_dtype(in.ref().dtype(), [&](auto tag) {
    using T = decltype(tag);
    lines(in.ref(), out.ref(), d, [&](char* x, char* o) {
      bp::sdk::argsort_line(reinterpret_cast<const T*>(x), step, n, descending,
                            reinterpret_cast<int64_t*>(o), ostep);
    });
  });
}

void cumsum_kernel(const KernelCall& c) {
  const int d = check::cumsum(c);
  const TensorDesc in(c.input(0)), out(c.output(0));
  if (out.ref().numel() == 0) return;
  const int64_t n = in.ref().size(d), step = in.ref().stride(d), ostep = out.ref().stride(d);
  bp::sdk::visit_dtype(in.ref().dtype(), [&](auto tag) {
    using T = decltype(tag);
    using O = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
    lines(in.ref(), out.ref(), d, [&](char* x, char* o) {
      bp::sdk::cumsum_line(reinterpret_cast<const T*>(x), step, n, reinterpret_cast<O*>(o), ostep);
    });
  });
}

}  // namespace

void register_sort_kernels(Registrar& r) {
  r.add<&argsort_kernel>(BP_OP_ARGSORT, kBaseDtypes, BP_ORIGIN);
  r.add<&cumsum_kernel>(BP_OP_CUMSUM, kBaseDtypes, BP_ORIGIN);
}

}  // namespace hostref
