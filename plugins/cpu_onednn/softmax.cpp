// SOFTMAX and LOG_SOFTMAX along one dim, stable (the line's max is
// subtracted first). Large dense float32 goes to oneDNN's softmax and
// logsoftmax primitives unless the input holds a NaN or +inf: oneDNN turns
// such a line into finite values, where the loops (and other frameworks)
// give NaN. The loops exponentiate in the input's type and sum in double.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

// `len` lines, line j starting at x + j*sx (o + j*so), each of n elements
// sdx (sdo) apart. Every element is read before it is written, and never
// read again, so o may be x (in place).
template <bool kLog, class T>
void softmax_lines(T* o, int64_t so, int64_t sdo, const T* x, int64_t sx, int64_t sdx, int64_t n,
                   int64_t len) {
  if (len == 1 || std::abs(sdx) <= std::abs(sx)) {
    for (int64_t j = 0; j < len; ++j) {
      const T* xl = x + j * sx;
      T* ol = o + j * so;
      T m = xl[0];
      for (int64_t k = 1; k < n; ++k) m = xl[k * sdx] > m ? xl[k * sdx] : m;
      double sum = 0;
      if constexpr (kLog) {
        for (int64_t k = 0; k < n; ++k) sum += std::exp(xl[k * sdx] - m);
        const T lse = static_cast<T>(std::log(sum));
        for (int64_t k = 0; k < n; ++k) ol[k * sdo] = (xl[k * sdx] - m) - lse;
      } else {
        for (int64_t k = 0; k < n; ++k) {
          const T e = std::exp(xl[k * sdx] - m);
          ol[k * sdo] = e;
          sum += e;
        }
        const T inv = static_cast<T>(1.0 / sum);
        for (int64_t k = 0; k < n; ++k) ol[k * sdo] *= inv;
      }
    }
    return;
  }
  // The lines lie closer together than the elements of one line: walk a
  // block of lines side by side so that every load is near the previous one.
  constexpr int64_t kBlock = 128;
  T m[kBlock];
  double sum[kBlock];
  for (int64_t j0 = 0; j0 < len; j0 += kBlock) {
    const int64_t nb = std::min(kBlock, len - j0);
    const T* xb = x + j0 * sx;
    T* ob = o + j0 * so;
    for (int64_t j = 0; j < nb; ++j) {
      m[j] = xb[j * sx];
      sum[j] = 0;
    }
    for (int64_t k = 1; k < n; ++k)
      for (int64_t j = 0; j < nb; ++j)
        m[j] = xb[k * sdx + j * sx] > m[j] ? xb[k * sdx + j * sx] : m[j];
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < nb; ++j) {
        const T e = std::exp(xb[k * sdx + j * sx] - m[j]);
        if constexpr (!kLog) ob[k * sdo + j * so] = e;
        sum[j] += e;
      }
    for (int64_t j = 0; j < nb; ++j)
      sum[j] = kLog ? std::log(sum[j]) : 1.0 / sum[j];  // now lse or 1/sum
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < nb; ++j) {
        T& out = ob[k * sdo + j * so];
        if constexpr (kLog)
          out = (xb[k * sdx + j * sx] - m[j]) - static_cast<T>(sum[j]);
        else
          out *= static_cast<T>(sum[j]);
      }
  }
}

// True when no element is NaN or +inf (one flat pass over dense memory).
bool below_inf(const float* x, int64_t n) {
  std::atomic<bool> bad{false};
  for_range(n, [&](int64_t b, int64_t e) {
    bool ok = true;
    for (int64_t i = b; i < e; ++i) ok &= x[i] < std::numeric_limits<float>::infinity();
    if (!ok) bad.store(true, std::memory_order_relaxed);
  });
  return !bad.load();
}

template <bool kLog>
bool try_dnnl_softmax(const TensorRef& out, const TensorRef& in, int dim) {
  if (!is_dense(out) || !same_strides(out, in) || !below_inf(in.data<float>(), in.numel()))
    return false;
  PrimitiveKey key{};
  key.kind = 5;
  key.alg = kLog ? 1 : 0;
  key.dtype = BP_DTYPE_FLOAT32;
  key.ndim = in.ndim();
  // A size-1 dim's stride is arbitrary; give it the span so oneDNN sees a
  // plain (possibly permuted) dense layout.
  int64_t span = 1;
  for (int d = 0; d < key.ndim; ++d) {
    key.dims[0][d] = in.size(d);
    key.strides[0][d] = in.stride(d);
    if (in.size(d) != 1) span = std::max(span, in.stride(d) * in.size(d));
  }
  for (int d = 0; d < key.ndim; ++d)
    if (key.dims[0][d] == 1) key.strides[0][d] = span;
  key.dims[1][0] = dim;
  const dnnl::memory::desc md(dnnl::memory::dims(key.dims[0], key.dims[0] + key.ndim),
                              dnnl::memory::data_type::f32,
                              dnnl::memory::dims(key.strides[0], key.strides[0] + key.ndim));
  dnnl::primitive prim = cached_primitive(key, [&]() -> dnnl::primitive {
    const auto prop = dnnl::prop_kind::forward_inference;
    if constexpr (kLog) {
      dnnl::logsoftmax_forward::primitive_desc pd(dnnl::logsoftmax_forward::desc(prop, md, dim),
                                                  dnnl_engine());
      if (is_reference_impl(pd)) return {};
      return dnnl::logsoftmax_forward(pd);
    } else {
      dnnl::softmax_forward::primitive_desc pd(dnnl::softmax_forward::desc(prop, md, dim),
                                               dnnl_engine());
      if (is_reference_impl(pd)) return {};
      return dnnl::softmax_forward(pd);
    }
  });
  if (!prim) return false;
  execute_src_dst(prim, md, in.base(), md, out.base());
  return true;
}

template <bool kLog>
void softmax_kernel(const KernelCall& c) {
  const int d = check::softmax(c);
  const TensorRef in = c.input(0), out = c.output(0);
  const bp_dtype dt = in.dtype();
  if (out.numel() == 0) return;
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_floating_point_v<T>) {
      bp::sdk::unsupported(c, dt);
    } else {
      if constexpr (std::is_same_v<T, float>) {
        if (in.ndim() > 0 && out.numel() >= kDnnlMinElements && try_dnnl_softmax<kLog>(out, in, d))
          return;
      }
      // 0-d operands are walked as [1]; both views keep one element per line.
      TensorDesc o(out), x(in);
      const int64_t n = x.size(d), sdo = o.stride(d), sdx = x.stride(d);
      o.size(d) = x.size(d) = 1;
      for_each_row_parallel<2>(
          {o.ref(), x.ref()},
          [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t len) {
            constexpr int64_t sz = sizeof(T);
            softmax_lines<kLog>(reinterpret_cast<T*>(p[0]), s[0] / sz, sdo,
                                reinterpret_cast<const T*>(p[1]), s[1] / sz, sdx, n, len);
          },
          n);
    }
  });
}

}  // namespace

void register_softmax_kernels(Registrar& r) {
  r.add<&softmax_kernel<false>>(BP_OP_SOFTMAX, kFloatDtypes, BP_ORIGIN);
  r.add<&softmax_kernel<true>>(BP_OP_LOG_SOFTMAX, kFloatDtypes, BP_ORIGIN);
}

}  // namespace bp::cpu
