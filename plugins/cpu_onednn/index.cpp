// GATHER, SCATTER and INDEX_SELECT: loops only (oneDNN has no indexing
// primitives). Every index is validated before anything is written. The
// lookups walk views in which the indexed dim has stride 0, so each element
// finds its line and the index picks the position along it.
#include <atomic>
#include <type_traits>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

// Throws unless every element of `index` lies in [0, size).
void check_indices(const char* op, const TensorRef& index, int dim, int64_t size) {
  std::atomic<int64_t> lo{0}, hi{0};
  for_each_row_parallel<1>(
      {index}, [&](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t len) {
        const int64_t* x = reinterpret_cast<const int64_t*>(p[0]);
        const int64_t sx = s[0] / 8;
        int64_t mn = 0, mx = 0;
        for (int64_t i = 0; i < len; ++i) {
          const int64_t v = x[i * sx];
          mn = v < mn ? v : mn;
          mx = v > mx ? v : mx;
        }
        for (int64_t cur = lo.load(); mn < cur && !lo.compare_exchange_weak(cur, mn);) {
        }
        for (int64_t cur = hi.load(); mx > cur && !hi.compare_exchange_weak(cur, mx);) {
        }
      });
  const int64_t mn = lo.load(), mx = hi.load();
  if (mn >= 0 && mx < size) return;
  BP_SDK_CHECK(false, op,
               "index " << (mn < 0 ? mn : mx) << " is out of range for dim " << dim << " of size "
                        << size << " (valid range: [0, " << size << "))");
}

// out[e] = src_line(e)[index[e] * sd] for every element e of out, where the
// views share out's shape and src's indexed dim has stride 0.
template <class T>
void lookup(const TensorRef& out, const TensorRef& index, const TensorRef& src, int64_t sd) {
  for_each_row_parallel<3>({out, index, src},
                           [&](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t len) {
                             T* o = reinterpret_cast<T*>(p[0]);
                             const int64_t* idx = reinterpret_cast<const int64_t*>(p[1]);
                             const T* x = reinterpret_cast<const T*>(p[2]);
                             constexpr int64_t sz = sizeof(T);
                             const int64_t so = s[0] / sz, si = s[1] / 8, sx = s[2] / sz;
                             for (int64_t i = 0; i < len; ++i)
                               o[i * so] = x[i * sx + idx[i * si] * sd];
                           });
}

void gather_kernel(const KernelCall& c) {
  const int d = check::gather(c);
  const TensorRef self = c.input(0), index = c.input(1), out = c.output(0);
  TensorDesc x(self), o(out), idx(index);
  if (out.numel() == 0) return;
  check_indices("gather", idx.ref(), d, x.size(d));
  const int64_t sd = x.stride(d);
  for (int k = 0; k < o.ndim(); ++k) x.size(k) = o.size(k);
  x.stride(d) = 0;
  bp::sdk::visit_dtype(self.dtype(),
                       [&](auto tag) { lookup<decltype(tag)>(o.ref(), idx.ref(), x.ref(), sd); });
}

void index_select_kernel(const KernelCall& c) {
  const int d = check::index_select(c);
  const TensorRef self = c.input(0), index = c.input(1), out = c.output(0);
  TensorDesc x(self), o(out), flat(index);
  const int64_t m = flat.size(0);
  if (out.numel() == 0) return;
  check_indices("index_select", flat.ref(), d, x.size(d));
  TensorDesc idx(index, o.ref());  // the index broadcast over out's shape
  idx.stride(d) = flat.stride(0);
  const int64_t sd = x.stride(d);
  x.size(d) = m;
  x.stride(d) = 0;
  bp::sdk::visit_dtype(self.dtype(),
                       [&](auto tag) { lookup<decltype(tag)>(o.ref(), idx.ref(), x.ref(), sd); });
}

void scatter_kernel(const KernelCall& c) {
  const check::ScatterArgs args = check::scatter(c);
  const int d = args.dim;
  const bool accumulate = args.reduction == 1;
  const TensorRef index = c.input(0), src = c.input(1), out = c.output(0);
  TensorDesc o(out), idx(index), s(src);
  if (index.numel() == 0) return;
  check_indices("scatter", idx.ref(), d, o.size(d));
  // One line along d per thread-owned position: positions differ in some
  // other dim, so no two threads write one element, and within a line the
  // later index in order wins, as in a sequential loop.
  const int64_t n = idx.size(d), sdi = idx.stride(d), sds = s.stride(d), sdo = o.stride(d);
  for (int k = 0; k < o.ndim(); ++k) o.size(k) = idx.size(k);
  o.size(d) = idx.size(d) = s.size(d) = 1;
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for_each_row_parallel<3>(
        {idx.ref(), s.ref(), o.ref()},
        [&](std::array<char*, 3> p, std::array<int64_t, 3> st, int64_t len) {
          constexpr int64_t sz = sizeof(T);
          const int64_t* ip = reinterpret_cast<const int64_t*>(p[0]);
          const T* sp = reinterpret_cast<const T*>(p[1]);
          T* op = reinterpret_cast<T*>(p[2]);
          const int64_t si = st[0] / 8, ss = st[1] / sz, so = st[2] / sz;
          for (int64_t j = 0; j < len; ++j)
            for (int64_t k = 0; k < n; ++k) {
              T& dst = op[j * so + ip[j * si + k * sdi] * sdo];
              const T v = sp[j * ss + k * sds];
              if (!accumulate)
                dst = v;
              else if constexpr (std::is_same_v<T, bool>)
                dst = dst || v;
              else
                dst = static_cast<T>(dst + v);
            }
        },
        n);
  });
}

}  // namespace

void register_index_kernels(Registrar& r) {
  r.add<&gather_kernel>(BP_OP_GATHER, kBaseDtypes, BP_ORIGIN);
  r.add<&scatter_kernel>(BP_OP_SCATTER, kBaseDtypes, BP_ORIGIN);
  r.add<&index_select_kernel>(BP_OP_INDEX_SELECT, kBaseDtypes, BP_ORIGIN);
}

}  // namespace bp::cpu
