// Comparisons, LOGICAL_AND/OR and WHERE: all loops. They are memory-bound,
// and oneDNN's binary comparisons compute in f32 (inexact for large
// integers) with no int64 or float64 support on CPU.
#include <type_traits>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

enum class Cmp { eq, ne, lt, le, gt, ge, logical_and, logical_or };

template <class T, Cmp Op>
struct CmpFn {
  bool operator()(T x, T y) const {
    if constexpr (Op == Cmp::eq) return x == y;
    if constexpr (Op == Cmp::ne) return x != y;
    if constexpr (Op == Cmp::lt) return x < y;
    if constexpr (Op == Cmp::le) return x <= y;
    if constexpr (Op == Cmp::gt) return x > y;
    if constexpr (Op == Cmp::ge) return x >= y;
    if constexpr (Op == Cmp::logical_and) return bp::sdk::fn::logical_and(x, y);
    if constexpr (Op == Cmp::logical_or) return bp::sdk::fn::logical_or(x, y);
  }
};

template <Cmp Op>
void compare_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 2, true);
  if (c.output(0).numel() == 0) return;
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    binary_map<bool, T>(c.output(0), c.input(0), c.input(1), CmpFn<T, Op>{});
  });
}

template <class T>
void where_typed(const TensorRef& out, const TensorRef& cond, const TensorRef& a,
                 const TensorRef& b) {
  const int64_t n = out.numel();
  if ((out.is_contiguous() && cond.is_contiguous() && a.is_contiguous() && b.is_contiguous()) ||
      (is_dense(out) && same_strides(out, cond) && same_strides(out, a) && same_strides(out, b))) {
    T* o = out.data<T>();
    const bool* m = cond.data<bool>();
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    for_range(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = m[i] ? x[i] : y[i];
    });
    return;
  }
  for_each_row_parallel<4>(
      {out, cond, a, b}, [&](std::array<char*, 4> p, std::array<int64_t, 4> s, int64_t len) {
        T* o = reinterpret_cast<T*>(p[0]);
        const bool* m = reinterpret_cast<const bool*>(p[1]);
        const T* x = reinterpret_cast<const T*>(p[2]);
        const T* y = reinterpret_cast<const T*>(p[3]);
        constexpr int64_t sz = sizeof(T);
        const int64_t so = s[0] / sz, sm = s[1], sx = s[2] / sz, sy = s[3] / sz;
        for (int64_t i = 0; i < len; ++i) o[i * so] = m[i * sm] ? x[i * sx] : y[i * sy];
      });
}

void where_kernel(const KernelCall& c) {
  const bp_dtype dt = check::where(c);
  if (c.output(0).numel() == 0) return;
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    where_typed<decltype(tag)>(c.output(0), c.input(0), c.input(1), c.input(2));
  });
}

}  // namespace

void register_compare_kernels(Registrar& r) {
  r.add<&compare_kernel<Cmp::eq>>(BP_OP_EQ, kBaseDtypes, BP_ORIGIN);
  r.add<&compare_kernel<Cmp::ne>>(BP_OP_NE, kBaseDtypes, BP_ORIGIN);
  r.add<&compare_kernel<Cmp::lt>>(BP_OP_LT, kBaseDtypes, BP_ORIGIN);
  r.add<&compare_kernel<Cmp::le>>(BP_OP_LE, kBaseDtypes, BP_ORIGIN);
  r.add<&compare_kernel<Cmp::gt>>(BP_OP_GT, kBaseDtypes, BP_ORIGIN);
  r.add<&compare_kernel<Cmp::ge>>(BP_OP_GE, kBaseDtypes, BP_ORIGIN);
  r.add<&compare_kernel<Cmp::logical_and>>(BP_OP_LOGICAL_AND, kBaseDtypes, BP_ORIGIN);
  r.add<&compare_kernel<Cmp::logical_or>>(BP_OP_LOGICAL_OR, kBaseDtypes, BP_ORIGIN);
  r.add<&where_kernel>(BP_OP_WHERE, kBaseDtypes, BP_ORIGIN);
}

}  // namespace bp::cpu
