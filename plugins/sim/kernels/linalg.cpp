// MATMUL (one thread per output element: a dot product over k), SOFTMAX and
// LOG_SOFTMAX (one thread per line along the dim: max, sum of exponentials
// in double, write), and a fused core::layer_norm (one thread per row,
// Welford's mean and variance, any strides of x and out).
#include <cmath>

#include "grid.h"

namespace bp::sim {

namespace {

// out[..., i, j] = sum over p of a[..., i, p] * b[..., p, j], accumulated in
// the operands' type in ascending p; batch dims broadcast with stride 0.
void matmul_kernel(const KernelCall& c) {
  check::matmul(c);
  const TensorRef a = c.input(0), b = c.input(1), out = c.output(0);
  const int nd = out.ndim();
  const int64_t k = a.size(nd - 1);
  // Thread (..., i, j) finds row i of a and column j of b: a stays put along
  // j and b along i.
  Grid<3> threads = grid<3>({out, a, b}, out);
  const std::size_t item = bp::sdk::dtype_size(out.dtype());
  threads.set_stride(1, nd - 1, 0, item);
  threads.set_stride(2, nd - 2, 0, item);
  const int64_t sa = a.stride(nd - 1), sb = b.stride(nd - 2);
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      launch(threads.numel(), [&](int64_t i) {
        const auto p = threads.at(i);
        const T* row = &ref<T>(p[1]);
        const T* col = &ref<T>(p[2]);
        T acc = T(0);
        for (int64_t q = 0; q < k; ++q) acc += row[q * sa] * col[q * sb];
        ref<T>(p[0]) = acc;
      });
    } else {
      bp::sdk::unsupported(c, out.dtype());
    }
  });
}

// Stable: the line's maximum is subtracted before exponentiating. Each
// element is read before its output is written, so out may be the input.
template <bool kLog>
void softmax_kernel(const KernelCall& c) {
  const int d = check::softmax(c);
  if (c.output(0).numel() == 0) return;  // no line, or lines of no element
  const TensorDesc x_desc(c.input(0)), out_desc(c.output(0));
  const TensorRef in = x_desc.ref(), out = out_desc.ref();
  Grid<2> lines = grid<2>({out, in}, out);
  lines.shape[d] = 1;
  const int64_t n = in.size(d), sx = in.stride(d), so = out.stride(d);
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      launch(lines.numel(), [&](int64_t i) {
        const auto p = lines.at(i);
        T* o = &ref<T>(p[0]);
        const T* x = &ref<T>(p[1]);
        T m = x[0];
        for (int64_t q = 1; q < n; ++q) m = fn::maximum(m, x[q * sx]);
        double sum = 0;
        for (int64_t q = 0; q < n; ++q) sum += std::exp(static_cast<double>(x[q * sx] - m));
        const double log_sum = std::log(sum);
        for (int64_t q = 0; q < n; ++q) {
          const double shifted = static_cast<double>(x[q * sx] - m);
          o[q * so] = static_cast<T>(kLog ? shifted - log_sum : std::exp(shifted) / sum);
        }
      });
    } else {
      bp::sdk::unsupported(c, in.dtype());
    }
  });
}

// out = (x - mean) / sqrt(var + eps) * weight + bias over each row of the
// trailing ints[0] dims; weight and bias are contiguous (others are
// declined: the core's composite runs).
void layer_norm_kernel(const KernelCall& c) {
  const check::LayerNormArgs args = check::layer_norm(c);
  const TensorRef x = c.input(0), w = c.input(1), b = c.input(2), out = c.output(0);
  if (!w.is_contiguous() || !b.is_contiguous())
    throw bp::sdk::Unsupported(
        "[core::layer_norm] strided weight or bias: the core's composite runs");
  const int lead = x.ndim() - static_cast<int>(args.normalized_dims);
  // rows: threads over the leading dims; within: the row's own positions.
  Grid<2> rows = grid<2>({out, x}, x), within = rows;
  for (int d = 0; d < x.ndim(); ++d) (d < lead ? within : rows).shape[d] = 1;
  const int64_t n = args.row_size;
  bp::sdk::visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T* ws = w.data<T>();
      const T* bs = b.data<T>();
      launch(n == 0 ? 0 : rows.numel(), [&](int64_t r) {
        const auto p = rows.at(r);
        double mean = 0, m2 = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double v = ref<T>(p[1] + within.offset(1, j)), delta = v - mean;
          mean += delta / static_cast<double>(j + 1);
          m2 += delta * (v - mean);
        }
        const double inv_std = 1.0 / std::sqrt(m2 / static_cast<double>(n) + args.eps);
        for (int64_t j = 0; j < n; ++j) {
          const double v = ref<T>(p[1] + within.offset(1, j));
          ref<T>(p[0] + within.offset(0, j)) = static_cast<T>((v - mean) * inv_std * ws[j] + bs[j]);
        }
      });
    } else {
      bp::sdk::unsupported(c, x.dtype());
    }
  });
}

}  // namespace

void register_linalg_kernels(Registrar& r) {
  using bp::sdk::kFloatDtypes;
  r.add<&matmul_kernel>(BP_OP_MATMUL, kFloatDtypes, BP_ORIGIN);
  r.add<&softmax_kernel<false>>(BP_OP_SOFTMAX, kFloatDtypes, BP_ORIGIN);
  r.add<&softmax_kernel<true>>(BP_OP_LOG_SOFTMAX, kFloatDtypes, BP_ORIGIN);
  if (r.has_named_ops())
    r.add_named<&layer_norm_kernel>(
        "core::layer_norm",
        "(Tensor x, Tensor weight, Tensor bias, int normalized_dims, float eps) -> Tensor",
        kFloatDtypes, BP_ORIGIN);
}

}  // namespace bp::sim
