// SUM, PROD, MAX and MIN over the dims where out has size 1 and in0 does
// not; ARGMAX and ARGMIN along the one dim ints[0]. Sums and products of
// floats accumulate in double and of bool and integers in int64 (their out
// dtype); MAX and MIN propagate NaN; ARG* keep the first winner, a NaN
// counting as the most extreme value.
#include <limits>
#include <memory>

#include "hostref.h"

namespace hostref {

namespace {

using fn::Reduction;

// A contiguous buffer of Acc seen as a tensor of `shape` with `strides`.
bp_tensor host_view(void* data, bp_dtype dt, int ndim, const int64_t* shape,
                    const int64_t* strides) {
  bp_tensor t{};
  t.data = data;
  t.ndim = ndim;
  t.dtype = bp::sdk::to_dl(dt);
  t.shape = const_cast<int64_t*>(shape);
  t.strides = const_cast<int64_t*>(strides);
  return t;
}

template <Reduction R, class T, class Out, class Acc>
void reduce_typed(const TensorRef& out, const TensorRef& in) {
  const int nd = in.ndim();
  const int64_t out_n = out.numel();
  if (out_n == 0) return;
  // Not a std::vector: Acc may be bool.
  std::unique_ptr<Acc[]> acc(new Acc[out_n]);
  for (int64_t i = 0; i < out_n; ++i) acc[i] = fn::identity<R, Acc>();
  // acc, contiguous over out's shape, seen with in's shape: stride 0 on the
  // reduced dims, so walking in and acc together combines every element of
  // in into its output position.
  std::array<int64_t, BP_MAX_DIMS> over_in{}, over_out{};
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; --d) {
    over_out[d] = s;
    over_in[d] = out.size(d) == in.size(d) ? s : 0;
    s *= out.size(d);
  }
  constexpr bp_dtype acc_dt = bp::sdk::dtype_of<Acc>::value;
  const bp_tensor acc_in = host_view(acc.get(), acc_dt, nd, in.shape(), over_in.data());
  bp::sdk::for_each_row<2>({TensorRef(acc_in), in}, [&](auto p, auto st, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      at<Acc>(p[0], st[0], i) =
          fn::combine<R, Acc>(at<Acc>(p[0], st[0], i), static_cast<Acc>(at<T>(p[1], st[1], i)));
  });
  const bp_tensor acc_out = host_view(acc.get(), acc_dt, nd, out.shape(), over_out.data());
  map1<Out, Acc>(out, TensorRef(acc_out), [](Acc a) { return static_cast<Out>(a); });
}

template <Reduction R>
void reduce_kernel(const KernelCall& c) {
  check::reduce(c);
  const TensorRef in = c.input(0), out = c.output(0);
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Types = fn::ReductionTypes<R, T>;
    reduce_typed<R, T, typename Types::Out, typename Types::Acc>(out, in);
  });
}

template <bool kMax>
void arg_kernel(const KernelCall& c) {
  const int d = check::arg_reduce(c);
  const TensorRef in = c.input(0), out = c.output(0);
  TensorDesc o(out), x(in);
  const int64_t n = x.size(d), sd = x.stride(d);
  if (out.numel() == 0) return;
  x.size(d) = 1;  // x now walks the first element of each line, like out
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    bp::sdk::for_each_row<2>({o.ref(), x.ref()}, [&](auto p, auto s, int64_t len) {
      for (int64_t j = 0; j < len; ++j) {
        const T* line = &at<T>(p[1], s[1], j);
        T best = line[0];
        int64_t index = 0;
        for (int64_t k = 1; k < n; ++k)
          if (fn::arg_better<kMax>(line[k * sd], best)) best = line[k * sd], index = k;
        at<int64_t>(p[0], s[0], j) = index;
      }
    });
  });
}

}  // namespace

void register_reduce_kernels(Registrar& r) {
  r.add<&reduce_kernel<Reduction::sum>>(BP_OP_SUM, kBaseDtypes, BP_ORIGIN);
  r.add<&reduce_kernel<Reduction::prod>>(BP_OP_PROD, kBaseDtypes, BP_ORIGIN);
  r.add<&reduce_kernel<Reduction::max>>(BP_OP_MAX, kBaseDtypes, BP_ORIGIN);
  r.add<&reduce_kernel<Reduction::min>>(BP_OP_MIN, kBaseDtypes, BP_ORIGIN);
  r.add<&arg_kernel<true>>(BP_OP_ARGMAX, kBaseDtypes, BP_ORIGIN);
  r.add<&arg_kernel<false>>(BP_OP_ARGMIN, kBaseDtypes, BP_ORIGIN);
}

}  // namespace hostref
