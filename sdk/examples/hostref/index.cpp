// GATHER, SCATTER (reduction 0: last write wins, 1: add) and INDEX_SELECT,
// for every dtype. Every index is checked before anything is written. The
// lookups walk views in which the indexed dim has stride 0, so that each
// element finds the start of its line and the index picks the position.
#include "hostref.h"

namespace hostref {

namespace {

// out[e] = src_line(e)[index[e] * sd] for every element e of out; the three
// views share out's shape and src has stride 0 on the indexed dim.
template <class T>
void lookup(const TensorRef& out, const TensorRef& index, const TensorRef& src, int64_t sd) {
  bp::sdk::for_each_row<3>({out, index, src}, [&](auto p, auto s, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      at<T>(p[0], s[0], i) = (&at<T>(p[2], s[2], i))[at<int64_t>(p[1], s[1], i) * sd];
  });
}

// out[i][j] = in0[in1[i][j]][j] (dim 0; likewise for the others).
void gather_kernel(const KernelCall& c) {
  const int d = check::gather(c);
  const TensorRef self = c.input(0), index = c.input(1), out = c.output(0);
  TensorDesc x(self), o(out), idx(index);
  if (out.numel() == 0) return;
  check::index_range(c, idx.ref(), d, x.size(d));
  const int64_t sd = x.stride(d);
  for (int k = 0; k < o.ndim(); ++k) x.size(k) = o.size(k);
  x.stride(d) = 0;
  bp::sdk::visit_dtype(self.dtype(),
                       [&](auto tag) { lookup<decltype(tag)>(o.ref(), idx.ref(), x.ref(), sd); });
}

// out = in0 with positions in1 (1-D) along dim ints[0].
void index_select_kernel(const KernelCall& c) {
  const int d = check::index_select(c);
  const TensorRef self = c.input(0), index = c.input(1), out = c.output(0);
  TensorDesc x(self), o(out), flat(index);
  const int64_t m = flat.size(0);
  if (out.numel() == 0) return;
  check::index_range(c, flat.ref(), d, x.size(d));
  // The index seen with out's shape: stride 0 everywhere but along d.
  TensorDesc idx(index, o.ref());
  idx.stride(d) = flat.stride(0);
  const int64_t sd = x.stride(d);
  x.size(d) = m;
  x.stride(d) = 0;
  bp::sdk::visit_dtype(self.dtype(),
                       [&](auto tag) { lookup<decltype(tag)>(o.ref(), idx.ref(), x.ref(), sd); });
}

// out[in0[i] along d] = in1[i] (reduction 0) or += in1[i] (reduction 1);
// out is self, updated in place; in1 has in0's shape (stride 0 for a value).
void scatter_kernel(const KernelCall& c) {
  const bp::sdk::check::ScatterArgs args = check::scatter(c);
  const int d = args.dim;
  const int64_t reduction = args.reduction;
  const TensorRef index = c.input(0), out = c.output(0);
  TensorDesc o(out), idx(index), s(c.input(1));
  if (index.numel() == 0) return;
  check::index_range(c, idx.ref(), d, o.size(d));
  // Walk the first element of each line along d; within a line, positions
  // go in order, so with duplicates the last write wins.
  const int64_t n = idx.size(d), sdi = idx.stride(d), sds = s.stride(d), sdo = o.stride(d);
  for (int k = 0; k < o.ndim(); ++k) o.size(k) = idx.size(k);
  o.size(d) = idx.size(d) = s.size(d) = 1;
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    bp::sdk::for_each_row<3>({idx.ref(), s.ref(), o.ref()}, [&](auto p, auto st, int64_t len) {
      for (int64_t j = 0; j < len; ++j) {
        const int64_t* ip = &at<int64_t>(p[0], st[0], j);
        const T* sp = &at<T>(p[1], st[1], j);
        T* op = &at<T>(p[2], st[2], j);
        for (int64_t k = 0; k < n; ++k) {
          T& dst = op[ip[k * sdi] * sdo];
          const T v = sp[k * sds];
          dst = reduction == 0 ? v : fn::combine<fn::Reduction::sum>(dst, v);  // bool: or
        }
      }
    });
  });
}

}  // namespace

void register_index_kernels(Registrar& r) {
  r.add<&gather_kernel>(BP_OP_GATHER, kBaseDtypes, BP_ORIGIN);
  r.add<&scatter_kernel>(BP_OP_SCATTER, kBaseDtypes, BP_ORIGIN);
  r.add<&index_select_kernel>(BP_OP_INDEX_SELECT, kBaseDtypes, BP_ORIGIN);
}

}  // namespace hostref
