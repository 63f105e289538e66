// SUM, PROD, MAX and MIN over the dims where the output has size 1. Large
// contiguous float32 SUM goes to oneDNN's reduction; everything else runs a
// strided walk in which the output's reduced dims have stride 0, so
// reductions become the inner rows. Sums and products accumulate in double
// (floats) or int64 (bool and integers), so PROD stays on the loops, where
// an f32 partial product could underflow or overflow; oneDNN's max and min
// drop NaN, which must propagate here.
#include <algorithm>
#include <limits>
#include <memory>
#include <type_traits>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

using Red = bp::sdk::fn::Reduction;

// The SDK's identities and steps: sums and products wrap, max and min
// propagate NaN.
template <Red R, class Acc>
struct Reducer {
  static Acc identity() { return bp::sdk::fn::identity<R, Acc>(); }
  static Acc combine(Acc a, Acc b) { return bp::sdk::fn::combine<R, Acc>(a, b); }
};

template <Red R, class Acc, class T>
Acc reduce_row(const T* x, int64_t sx, int64_t len) {
  using Op = Reducer<R, Acc>;
  if (sx != 1) {
    Acc s = Op::identity();
    for (int64_t i = 0; i < len; ++i) s = Op::combine(s, static_cast<Acc>(x[i * sx]));
    return s;
  }
  // Independent partial results: floating-point ops are not reassociated by
  // the compiler, and one chain would be bound by the op's latency.
  Acc p[8];
  for (int j = 0; j < 8; ++j) p[j] = Op::identity();
  int64_t i = 0;
  for (; i + 8 <= len; i += 8)
    for (int j = 0; j < 8; ++j) p[j] = Op::combine(p[j], static_cast<Acc>(x[i + j]));
  Acc s = Op::combine(Op::combine(Op::combine(p[0], p[1]), Op::combine(p[2], p[3])),
                      Op::combine(Op::combine(p[4], p[5]), Op::combine(p[6], p[7])));
  for (; i < len; ++i) s = Op::combine(s, static_cast<Acc>(x[i]));
  return s;
}

template <Red R, class Acc, class T>
void accumulate_row(char* acc, const char* in, int64_t sa_bytes, int64_t sx_bytes, int64_t len) {
  using Op = Reducer<R, Acc>;
  Acc* a = reinterpret_cast<Acc*>(acc);
  const T* x = reinterpret_cast<const T*>(in);
  const int64_t sa = sa_bytes / int64_t(sizeof(Acc)), sx = sx_bytes / int64_t(sizeof(T));
  if (sa == 0) {
    *a = Op::combine(*a, reduce_row<R, Acc>(x, sx, len));
  } else if (sa == 1 && sx == 1) {
    for (int64_t i = 0; i < len; ++i) a[i] = Op::combine(a[i], static_cast<Acc>(x[i]));
  } else {
    for (int64_t i = 0; i < len; ++i)
      a[i * sa] = Op::combine(a[i * sa], static_cast<Acc>(x[i * sx]));
  }
}

// Calls row(ptrs) for rows [b, e) of L (rows = all dims but the innermost).
template <class Row>
void walk_rows(const bp::sdk::StridedLayout<2>& L, std::array<char*, 2> base, int64_t b, int64_t e,
               Row&& row) {
  const int outer = L.ndim - 1;
  std::array<int64_t, BP_MAX_DIMS> idx{};
  int64_t rest = b;
  for (int d = outer - 1; d >= 0; --d) {
    idx[d] = rest % L.shape[d];
    rest /= L.shape[d];
    for (int k = 0; k < 2; ++k) base[k] += idx[d] * L.strides[k][d];
  }
  for (int64_t r = b; r < e; ++r) {
    row(base);
    for (int d = outer - 1; d >= 0; --d) {
      if (++idx[d] < L.shape[d]) {
        for (int k = 0; k < 2; ++k) base[k] += L.strides[k][d];
        break;
      }
      for (int k = 0; k < 2; ++k) base[k] -= L.strides[k][d] * (L.shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// acc (contiguous over out's shape) combined with the reduction of `in`.
template <Red R, class Acc, class T>
void reduce_into(Acc* acc, const TensorRef& out, const TensorRef& in) {
  const int nd = in.ndim();
  std::array<int64_t, BP_MAX_DIMS> acc_strides{};
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; --d) {
    acc_strides[d] = out.size(d) == in.size(d) ? s : 0;
    s *= out.size(d);
  }
  // Walked in the input's memory order (operand 0 orders the dims): with the
  // accumulator first, its stride-0 reduced dims would be the inner rows, and
  // a reduction over a matrix's columns would read one float per cache line.
  const auto L = bp::sdk::make_layout<2>(nd, in.shape(), {in.strides(), acc_strides.data()},
                                         {int64_t(sizeof(T)), int64_t(sizeof(Acc))});
  const int outer = L.ndim - 1;
  const int64_t inner = L.shape[outer];
  const int64_t sx = L.strides[0][outer], sa = L.strides[1][outer];
  int64_t rows = 1;
  bool rows_disjoint = true;  // no two rows add into the same acc element
  for (int d = 0; d < outer; ++d) {
    rows *= L.shape[d];
    if (L.strides[1][d] == 0) rows_disjoint = false;
  }
  const std::array<char*, 2> base{static_cast<char*>(in.base()), reinterpret_cast<char*>(acc)};
  auto row = [&](std::array<char*, 2> p) { accumulate_row<R, Acc, T>(p[1], p[0], sa, sx, inner); };
  if (in.numel() < kParallelMinElements) {
    walk_rows(L, base, 0, rows, row);
    return;
  }
  if (rows_disjoint && rows > 1) {
    parallel_ranges(rows, [&](int64_t b, int64_t e) { walk_rows(L, base, b, e, row); });
    return;
  }
  // Rows share acc elements: each thread fills its own partial buffer.
  const int64_t out_n = out.numel();
  const int nt = omp_get_max_threads();
  // Not a std::vector: Acc may be bool.
  const size_t partial_n = static_cast<size_t>(out_n) * nt;
  std::unique_ptr<Acc[]> partial(new Acc[partial_n]);
  std::fill(partial.get(), partial.get() + partial_n, Reducer<R, Acc>::identity());
  const bool split_inner = rows == 1;
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    char* mine = reinterpret_cast<char*>(partial.get() + t * out_n);
    if (split_inner) {
      const int64_t b = inner * t / team, e = inner * (t + 1) / team;
      if (b < e) accumulate_row<R, Acc, T>(mine + b * sa, base[0] + b * sx, sa, sx, e - b);
    } else {
      const int64_t b = rows * t / team, e = rows * (t + 1) / team;
      walk_rows(L, {base[0], mine}, b, e, [&](std::array<char*, 2> p) {
        accumulate_row<R, Acc, T>(p[1], p[0], sa, sx, inner);
      });
    }
  }
  for (int t = 0; t < nt; ++t)
    for (int64_t i = 0; i < out_n; ++i)
      acc[i] = Reducer<R, Acc>::combine(acc[i], partial[t * out_n + i]);
}

bool try_dnnl_sum(const TensorRef& out, const TensorRef& in) {
  if (!in.is_contiguous() || !out.is_contiguous()) return false;
  PrimitiveKey key{};
  key.kind = 3;
  key.alg = static_cast<int32_t>(dnnl::algorithm::reduction_sum);
  key.dtype = BP_DTYPE_FLOAT32;
  key.ndim = in.ndim();
  for (int d = 0; d < key.ndim; ++d) {
    key.dims[0][d] = in.size(d);
    key.dims[1][d] = out.size(d);
  }
  auto plain_md = [&](const int64_t* dims) {
    dnnl::memory::dims strides(key.ndim);
    int64_t s = 1;
    for (int d = key.ndim - 1; d >= 0; --d) {
      strides[d] = s;
      s *= dims[d];
    }
    return dnnl::memory::desc(dnnl::memory::dims(dims, dims + key.ndim),
                              dnnl::memory::data_type::f32, strides);
  };
  const dnnl::memory::desc src_md = plain_md(key.dims[0]);
  const dnnl::memory::desc dst_md = plain_md(key.dims[1]);
  dnnl::primitive prim = cached_primitive(key, [&]() -> dnnl::primitive {
    dnnl::reduction::primitive_desc pd(
        dnnl::reduction::desc(dnnl::algorithm::reduction_sum, src_md, dst_md, 0.0f, 0.0f),
        dnnl_engine());
    if (is_reference_impl(pd)) return {};
    return dnnl::reduction(pd);
  });
  if (!prim) return false;
  execute_src_dst(prim, src_md, in.base(), dst_md, out.base());
  return true;
}

template <Red R, class T, class Out, class Acc>
void reduce_typed(const TensorRef& out, const TensorRef& in) {
  const int64_t out_n = out.numel();
  if (out_n == 0) return;
  if constexpr (R == Red::sum && std::is_same_v<T, float>) {
    if (in.numel() >= kDnnlMinElements && try_dnnl_sum(out, in)) return;
  }
  // A small accumulator lives on the stack: most reductions give a few values.
  Acc small[64];
  std::unique_ptr<Acc[]> large;
  Acc* acc = small;
  if (out_n > 64) {
    large.reset(new Acc[out_n]);
    acc = large.get();
  }
  std::fill(acc, acc + out_n, Reducer<R, Acc>::identity());
  if (in.numel() > 0) reduce_into<R, Acc, T>(acc, out, in);
  // acc is contiguous over out's shape: write it back through out's strides.
  const int nd = out.ndim();
  std::array<int64_t, BP_MAX_DIMS> idx{};
  Out* o = out.data<Out>();
  for (int64_t i = 0; i < out_n; ++i) {
    int64_t off = 0;
    for (int d = 0; d < nd; ++d) off += idx[d] * out.stride(d);
    o[off] = static_cast<Out>(acc[i]);
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < out.size(d)) break;
      idx[d] = 0;
    }
  }
}

template <Red R>
void reduce_kernel(const KernelCall& c) {
  check::reduce(c);
  const TensorRef in = c.input(0), out = c.output(0);
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Out = typename bp::sdk::fn::ReductionTypes<R, T>::Out;
    using Acc = typename bp::sdk::fn::ReductionTypes<R, T>::Acc;
    reduce_typed<R, T, Out, Acc>(out, in);
  });
}

}  // namespace

void register_reduce_kernels(Registrar& r) {
  r.add<&reduce_kernel<Red::sum>>(BP_OP_SUM, kBaseDtypes, BP_ORIGIN);
  r.add<&reduce_kernel<Red::prod>>(BP_OP_PROD, kBaseDtypes, BP_ORIGIN);
  r.add<&reduce_kernel<Red::max>>(BP_OP_MAX, kBaseDtypes, BP_ORIGIN);
  r.add<&reduce_kernel<Red::min>>(BP_OP_MIN, kBaseDtypes, BP_ORIGIN);
}

}  // namespace bp::cpu
