// MATMUL: out[..., m, n] = in0[..., m, k] @ in1[..., k, n] for float32 and
// float64, batch dims broadcast with stride 0. The textbook triple loop,
// accumulating in the operands' type over k in ascending order.
#include "hostref.h"

namespace hostref {

namespace {

template <class T>
void matmul_typed(const TensorRef& out, const TensorRef& a, const TensorRef& b, int64_t batch) {
  const int nd = out.ndim();
  const int64_t m = out.size(nd - 2), n = out.size(nd - 1), k = a.size(nd - 1);
  const int64_t som = out.stride(nd - 2), son = out.stride(nd - 1);
  const int64_t sam = a.stride(nd - 2), sak = a.stride(nd - 1);
  const int64_t sbk = b.stride(nd - 2), sbn = b.stride(nd - 1);
  for (int64_t bi = 0; bi < batch; ++bi) {
    // The batch index, row-major over out's batch dims, as element offsets.
    int64_t oo = 0, oa = 0, ob = 0;
    for (int64_t d = nd - 3, rest = bi; d >= 0; --d) {
      const int64_t i = rest % out.size(d);
      rest /= out.size(d);
      oo += i * out.stride(d);
      oa += i * a.stride(d);
      ob += i * b.stride(d);
    }
    T* o = out.data<T>() + oo;
    const T* x = a.data<T>() + oa;
    const T* y = b.data<T>() + ob;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc = T(0);
        for (int64_t p = 0; p < k; ++p) acc += x[i * sam + p * sak] * y[p * sbk + j * sbn];
        o[i * som + j * son] = acc;
      }
  }
}

void matmul_kernel(const KernelCall& c) {
  const int64_t batch = check::matmul(c);
  const TensorRef a = c.input(0), b = c.input(1), out = c.output(0);
  const int nd = out.ndim();
  const int64_t m = out.size(nd - 2), n = out.size(nd - 1);
  if (batch * m * n == 0) return;
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>)
      matmul_typed<T>(out, a, b, batch);
    else
      bp::sdk::unsupported(c, out.dtype());
  });
}

}  // namespace

void register_matmul_kernels(Registrar& r) {
  r.add<&matmul_kernel>(BP_OP_MATMUL, kFloatDtypes, BP_ORIGIN);
}

}  // namespace hostref
