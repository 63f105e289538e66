// ARGSORT and CUMSUM along dim ints[0]: one thread per line, which sorts
// (stably, in the SDK's order) or sums its line on its own
// (bp::sdk::argsort_line, cumsum_line).
#include <backplane/sdk/loops.hpp>
#include <vector>

#include "grid.h"

namespace bp::sim {

namespace {

// A grid of one thread per line along `d`: each at the line's start in
// every operand.
Grid<2> lines(const TensorRef& out, const TensorRef& in, int d) {
  TensorDesc shape(out);
  shape.size(d) = 1;
  return grid<2>({out, in}, shape.ref());
}

void argsort_kernel(const KernelCall& c) {
  bool descending = false;
  const int d = check::argsort(c, &descending);
  const TensorDesc in_desc(c.input(0)), out_desc(c.output(0));  // 0-d as [1]
  const TensorRef in = in_desc.ref(), out = out_desc.ref();
  if (out.numel() == 0) return;
  const Grid<2> threads = lines(out, in, d);
  const int64_t n = in.size(d), step = in.stride(d), ostep = out.stride(d);
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch(threads.numel(), [&](int64_t i) {
      const auto p = threads.at(i);
      bp::sdk::argsort_line(&ref<T>(p[1]), step, n, descending, &ref<int64_t>(p[0]), ostep);
    });
  });
}

void cumsum_kernel(const KernelCall& c) {
  const int d = check::cumsum(c);
  const TensorDesc in_desc(c.input(0)), out_desc(c.output(0));
  const TensorRef in = in_desc.ref(), out = out_desc.ref();
  if (out.numel() == 0) return;
  const Grid<2> threads = lines(out, in, d);
  const int64_t n = in.size(d), step = in.stride(d), ostep = out.stride(d);
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto out_tag) {
      using O = decltype(out_tag);
      launch(threads.numel(), [&](int64_t i) {
        const auto p = threads.at(i);
        bp::sdk::cumsum_line(&ref<T>(p[1]), step, n, &ref<O>(p[0]), ostep);
      });
    };
    if constexpr (std::is_floating_point_v<T>)
      run(T{});
    else
      run(int64_t{});
  });
}

}  // namespace

void register_sort_kernels(Registrar& r) {
  r.add<&argsort_kernel>(BP_OP_ARGSORT, bp::sdk::kBaseDtypes, BP_ORIGIN);
  r.add<&cumsum_kernel>(BP_OP_CUMSUM, bp::sdk::kBaseDtypes, BP_ORIGIN);
}

}  // namespace bp::sim
