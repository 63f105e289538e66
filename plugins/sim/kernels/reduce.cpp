// SUM, PROD, MAX and MIN over the dims where the output has size 1 and the
// input does not; ARGMAX and ARGMIN along dim ints[0]. One thread per output
// element walks the input elements that reduce into it, in ascending order.
// Accumulators, identities and NaN rules are the SDK's (bp::sdk::fn).
#include "grid.h"

namespace bp::sim {

namespace {

using fn::Reduction;

template <Reduction R>
void reduce_kernel(const KernelCall& c) {
  check::reduce(c);
  const TensorRef in = c.input(0), out = c.output(0);
  // Threads over out's shape find the first input element of their slice;
  // `slice` walks the reduced dims from there.
  const Grid<2> threads = grid<2>({out, in}, out);
  Grid<1> slice = grid<1>({in}, in);
  for (int d = 0; d < in.ndim(); ++d)
    if (out.size(d) == in.size(d)) slice.shape[d] = 1;
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Out = typename fn::ReductionTypes<R, T>::Out;
    using Acc = typename fn::ReductionTypes<R, T>::Acc;
    const int64_t n = slice.numel();
    launch(threads.numel(), [&](int64_t i) {
      const auto p = threads.at(i);
      Acc acc = fn::identity<R, Acc>();
      for (int64_t j = 0; j < n; ++j)
        acc = fn::combine<R, Acc>(acc, static_cast<Acc>(ref<T>(p[1] + slice.offset(0, j))));
      ref<Out>(p[0]) = static_cast<Out>(acc);
    });
  });
}

template <bool kMax>
void arg_kernel(const KernelCall& c) {
  const int d = check::arg_reduce(c);
  const TensorDesc in_desc(c.input(0)), out_desc(c.output(0));  // 0-d as [1]
  const TensorRef in = in_desc.ref(), out = out_desc.ref();
  const Grid<2> threads = grid<2>({out, in}, out);  // each at the start of its line
  const int64_t n = in.size(d), step = in.stride(d);
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch(threads.numel(), [&](int64_t i) {
      const auto p = threads.at(i);
      const T* line = &ref<T>(p[1]);
      int64_t best = 0;
      for (int64_t k = 1; k < n; ++k)
        if (fn::arg_better<kMax>(line[k * step], line[best * step])) best = k;
      ref<int64_t>(p[0]) = best;
    });
  });
}

}  // namespace

void register_reduce_kernels(Registrar& r) {
  using bp::sdk::kBaseDtypes;
  r.add<&reduce_kernel<Reduction::sum>>(BP_OP_SUM, kBaseDtypes, BP_ORIGIN);
  r.add<&reduce_kernel<Reduction::prod>>(BP_OP_PROD, kBaseDtypes, BP_ORIGIN);
  r.add<&reduce_kernel<Reduction::max>>(BP_OP_MAX, kBaseDtypes, BP_ORIGIN);
  r.add<&reduce_kernel<Reduction::min>>(BP_OP_MIN, kBaseDtypes, BP_ORIGIN);
  r.add<&arg_kernel<true>>(BP_OP_ARGMAX, kBaseDtypes, BP_ORIGIN);
  r.add<&arg_kernel<false>>(BP_OP_ARGMIN, kBaseDtypes, BP_ORIGIN);
}

}  // namespace bp::sim
