// SUM over the dims where the output has size 1. Large contiguous float32
// goes to oneDNN's reduction; everything else accumulates in double (floats)
// or int64 (bool and integers) through a strided walk in which the output's
// reduced dims have stride 0, so reductions become the inner rows.
#include <vector>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

template <class Acc, class T>
Acc sum_row(const T* x, int64_t sx, int64_t len) {
  if (sx != 1) {
    Acc s = 0;
    for (int64_t i = 0; i < len; ++i) s += static_cast<Acc>(x[i * sx]);
    return s;
  }
  // Independent partial sums: floating-point adds are not reassociated by
  // the compiler, and one chain would be bound by the add latency.
  Acc p[8] = {};
  int64_t i = 0;
  for (; i + 8 <= len; i += 8)
    for (int j = 0; j < 8; ++j) p[j] += static_cast<Acc>(x[i + j]);
  Acc s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
  for (; i < len; ++i) s += static_cast<Acc>(x[i]);
  return s;
}

template <class Acc, class T>
void accumulate_row(char* acc, const char* in, int64_t sa_bytes, int64_t sx_bytes, int64_t len) {
  Acc* a = reinterpret_cast<Acc*>(acc);
  const T* x = reinterpret_cast<const T*>(in);
  const int64_t sa = sa_bytes / int64_t(sizeof(Acc)), sx = sx_bytes / int64_t(sizeof(T));
  if (sa == 0) {
    *a += sum_row<Acc>(x, sx, len);
  } else if (sa == 1 && sx == 1) {
    for (int64_t i = 0; i < len; ++i) a[i] += static_cast<Acc>(x[i]);
  } else {
    for (int64_t i = 0; i < len; ++i) a[i * sa] += static_cast<Acc>(x[i * sx]);
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

// acc (contiguous over out's shape) += the reduction of `in`.
template <class Acc, class T>
void reduce_into(Acc* acc, const TensorRef& out, const TensorRef& in) {
  const int nd = in.ndim();
  std::array<int64_t, BP_MAX_DIMS> acc_strides{};
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; --d) {
    acc_strides[d] = out.size(d) == in.size(d) ? s : 0;
    s *= out.size(d);
  }
  const auto L = bp::sdk::make_layout<2>(nd, in.shape(), {acc_strides.data(), in.strides()},
                                         {int64_t(sizeof(Acc)), int64_t(sizeof(T))});
  const int outer = L.ndim - 1;
  const int64_t inner = L.shape[outer];
  const int64_t sa = L.strides[0][outer], sx = L.strides[1][outer];
  int64_t rows = 1;
  bool rows_disjoint = true;  // no two rows add into the same acc element
  for (int d = 0; d < outer; ++d) {
    rows *= L.shape[d];
    if (L.strides[0][d] == 0) rows_disjoint = false;
  }
  const std::array<char*, 2> base{reinterpret_cast<char*>(acc), static_cast<char*>(in.base())};
  auto row = [&](std::array<char*, 2> p) { accumulate_row<Acc, T>(p[0], p[1], sa, sx, inner); };
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
  std::vector<Acc> partial(static_cast<size_t>(out_n) * nt, Acc(0));
  const bool split_inner = rows == 1;
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    char* mine = reinterpret_cast<char*>(partial.data() + t * out_n);
    if (split_inner) {
      const int64_t b = inner * t / team, e = inner * (t + 1) / team;
      if (b < e) accumulate_row<Acc, T>(mine + b * sa, base[1] + b * sx, sa, sx, e - b);
    } else {
      const int64_t b = rows * t / team, e = rows * (t + 1) / team;
      walk_rows(L, {mine, base[1]}, b, e,
                [&](std::array<char*, 2> p) { accumulate_row<Acc, T>(p[0], p[1], sa, sx, inner); });
    }
  }
  for (int t = 0; t < nt; ++t)
    for (int64_t i = 0; i < out_n; ++i) acc[i] += partial[t * out_n + i];
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
  dnnl::engine& eng = dnnl_engine();
  dnnl::memory src(src_md, eng, in.base());
  dnnl::memory dst(dst_md, eng, out.base());
  prim.execute(dnnl_stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  return true;
}

template <class T, class Out, class Acc>
void sum_typed(const TensorRef& out, const TensorRef& in) {
  const int64_t out_n = out.numel();
  if (out_n == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (in.numel() >= kDnnlMinElements && try_dnnl_sum(out, in)) return;
  }
  // A small accumulator lives on the stack: most sums reduce to a few values.
  Acc small[64];
  std::vector<Acc> large;
  Acc* acc = small;
  if (out_n > 64) {
    large.assign(static_cast<size_t>(out_n), Acc(0));
    acc = large.data();
  } else {
    for (int64_t i = 0; i < out_n; ++i) small[i] = Acc(0);
  }
  if (in.numel() > 0) reduce_into<Acc, T>(acc, out, in);
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

void sum_kernel(const KernelCall& c) {
  BP_CHECK(c.num_inputs() == 1 && c.num_outputs() == 1, "sum",
           "expected 1 input and 1 output, got " << c.num_inputs() << " and " << c.num_outputs());
  const TensorRef in = c.input(0), out = c.output(0);
  BP_CHECK(in.ndim() == out.ndim(), "sum",
           "the output must keep the input's rank " << in.ndim() << ", got " << out.ndim());
  for (int d = 0; d < in.ndim(); ++d)
    BP_CHECK(out.size(d) == in.size(d) || out.size(d) == 1, "sum",
             "output dim " << d << " must be " << in.size(d) << " or 1, got " << out.size(d));
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Out = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    BP_CHECK(out.dtype() == bp::sdk::dtype_of<Out>::value, "sum",
             "a " << bp::sdk::dtype_name(in.dtype()) << " sum is "
                  << bp::sdk::dtype_name(bp::sdk::dtype_of<Out>::value) << ", the output is "
                  << bp::sdk::dtype_name(out.dtype()));
    sum_typed<T, Out, Acc>(out, in);
  });
}

}  // namespace

void register_reduce_kernels(Registrar& r) {
  r.add<&sum_kernel>(
      BP_OP_SUM,
      {BP_DTYPE_BOOL, BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64},
      BP_ORIGIN);
}

}  // namespace bp::cpu
