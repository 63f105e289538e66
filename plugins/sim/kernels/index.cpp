// GATHER and INDEX_SELECT (one thread per output element: find the start of
// its input line, then the indexed position), SCATTER (one thread per line
// along the dim, in order, so that with duplicate indices the last write
// wins) and RANDOM (one thread per element: value k depends only on k).
// Every index is checked before anything is written; a bad one fails the
// kernel on the queue, and the error reaches the host at the next
// synchronisation of the stream.
#include "grid.h"

namespace bp::sim {

namespace {

// out[e] = line(e)[index[e] * sd]: the threads' grid has self's stride 0
// along the indexed dim, so each finds the start of its line.
template <class T>
void lookup(const Grid<3>& threads, int64_t sd) {
  launch(threads.numel(), [&](int64_t i) {
    const auto p = threads.at(i);
    ref<T>(p[0]) = (&ref<T>(p[2]))[ref<int64_t>(p[1]) * sd];
  });
}

// Operands are seen through TensorDescs, which show a 0-d tensor as [1].
void gather_kernel(const KernelCall& c) {
  const int d = check::gather(c);
  const TensorDesc self(c.input(0)), index(c.input(1)), out(c.output(0));
  if (c.output(0).numel() == 0) return;
  const TensorRef x = self.ref();
  check::index_range(c, index.ref(), d, x.size(d));
  Grid<3> threads = grid<3>({out.ref(), index.ref(), x}, out.ref());
  threads.set_stride(2, d, 0, bp::sdk::dtype_size(x.dtype()));
  bp::sdk::visit_dtype(x.dtype(), [&](auto tag) { lookup<decltype(tag)>(threads, x.stride(d)); });
}

void index_select_kernel(const KernelCall& c) {
  const int d = check::index_select(c);
  const TensorDesc self(c.input(0)), index(c.input(1)), out(c.output(0));
  if (c.output(0).numel() == 0) return;
  const TensorRef x = self.ref(), idx = index.ref();
  check::index_range(c, idx, d, x.size(d));
  // The index varies along d only; self stays at the start of its line.
  Grid<3> threads = grid<3>({out.ref(), idx, x}, out.ref());
  for (int k = 0; k < out.ndim(); ++k)
    threads.set_stride(1, k, k == d ? idx.stride(0) : 0, sizeof(int64_t));
  threads.set_stride(2, d, 0, bp::sdk::dtype_size(x.dtype()));
  bp::sdk::visit_dtype(x.dtype(), [&](auto tag) { lookup<decltype(tag)>(threads, x.stride(d)); });
}

// out[index[e] along d] = src[e] (reduction 0) or += src[e] (1); out is
// updated in place.
void scatter_kernel(const KernelCall& c) {
  const check::ScatterArgs args = check::scatter(c);
  const int d = args.dim;
  const TensorDesc index(c.input(0)), src(c.input(1)), out(c.output(0));
  if (c.input(0).numel() == 0) return;
  const TensorRef idx = index.ref(), s = src.ref(), o = out.ref();
  check::index_range(c, idx, d, o.size(d));
  // One thread per line of the index along d; out stays at its line's start.
  Grid<3> lines = grid<3>({idx, s, o}, idx);
  lines.shape[d] = 1;
  lines.set_stride(2, d, 0, bp::sdk::dtype_size(o.dtype()));
  const int64_t n = idx.size(d), si = idx.stride(d), ss = s.stride(d), so = o.stride(d);
  bp::sdk::visit_dtype(o.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch(lines.numel(), [&](int64_t i) {
      const auto p = lines.at(i);
      const int64_t* at_index = &ref<int64_t>(p[0]);
      const T* values = &ref<T>(p[1]);
      T* line = &ref<T>(p[2]);
      for (int64_t k = 0; k < n; ++k) {
        T& dst = line[at_index[k * si] * so];
        dst = args.reduction == 0 ? values[k * ss]
                                  : fn::combine<fn::Reduction::sum>(dst, values[k * ss]);
      }
    });
  });
}

// Element k of out in row-major order is Philox value (seed, offset + k).
void random_kernel(const KernelCall& c) {
  const check::RandomArgs args = check::random(c);
  const TensorRef out = c.output(0);
  const Grid<1> threads = grid<1>({out}, out);
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      launch(threads.numel(), [&](int64_t k) {
        ref<T>(threads.at(k)[0]) = fn::random_value<T>(args.distribution, args.seed,
                                                       args.offset + static_cast<uint64_t>(k));
      });
    } else {
      bp::sdk::unsupported(c, out.dtype());
    }
  });
}

}  // namespace

void register_index_kernels(Registrar& r) {
  using bp::sdk::kBaseDtypes, bp::sdk::kFloatDtypes;
  r.add<&gather_kernel>(BP_OP_GATHER, kBaseDtypes, BP_ORIGIN);
  r.add<&scatter_kernel>(BP_OP_SCATTER, kBaseDtypes, BP_ORIGIN);
  r.add<&index_select_kernel>(BP_OP_INDEX_SELECT, kBaseDtypes, BP_ORIGIN);
  r.add<&random_kernel>(BP_OP_RANDOM, kFloatDtypes, BP_ORIGIN);
}

}  // namespace bp::sim
