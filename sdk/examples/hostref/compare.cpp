// Comparisons (EQ..GE), LOGICAL_AND, LOGICAL_OR and WHERE, for every dtype.
// The comparisons and logical ops write bool; WHERE writes its values' dtype.
#include "hostref.h"

namespace hostref {

namespace {

enum class Cmp { eq, ne, lt, le, gt, ge, logical_and, logical_or };

template <Cmp Op>
void compare_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 2, true);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    map2<bool, T>(c.output(0), c.input(0), c.input(1), [](T x, T y) {
      switch (Op) {
        case Cmp::eq:
          return x == y;
        case Cmp::ne:
          return x != y;
        case Cmp::lt:
          return x < y;
        case Cmp::le:
          return x <= y;
        case Cmp::gt:
          return x > y;
        case Cmp::ge:
          return x >= y;
        case Cmp::logical_and:
          return fn::logical_and(x, y);
        case Cmp::logical_or:
          return fn::logical_or(x, y);
      }
      return false;
    });
  });
}

// out = in0 ? in1 : in2; the condition is bool, the dispatch dtype in1's.
void where_kernel(const KernelCall& c) {
  const bp_dtype dt = check::where(c);
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    bp::sdk::for_each_row<4>(
        {c.output(0), c.input(0), c.input(1), c.input(2)}, [&](auto p, auto s, int64_t n) {
          for (int64_t i = 0; i < n; ++i)
            at<T>(p[0], s[0], i) =
                at<bool>(p[1], s[1], i) ? at<T>(p[2], s[2], i) : at<T>(p[3], s[3], i);
        });
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

}  // namespace hostref
