// ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, POW. float32 ADD..DIV operands that
// are dense (or dense plus a broadcast second operand) and large go to a
// oneDNN binary primitive; the rest run the plugin's loops. bfloat16 and
// float16 ADD..DIV do the same in their own dtype where the CPU has oneDNN
// support for it. int32 stays on the
// loops too: oneDNN computes binary ops in f32, which is not exact for
// integers beyond 2^24. MAXIMUM and MINIMUM are loops because oneDNN's
// max/min drop a NaN operand instead of propagating it; oneDNN has no binary pow.
#include <atomic>
#include <cmath>
#include <type_traits>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

enum class BinOp { add, sub, mul, div };

// The element values are the SDK's (bp::sdk::fn): integers wrap, bool
// multiplies as "and". Without alpha the multiply by 1 is left out.
template <class T, BinOp Op, bool kAlpha>
struct BinaryFn {
  T alpha;
  T operator()(T x, T y) const {
    if constexpr (Op == BinOp::add)
      return kAlpha ? bp::sdk::fn::add(x, y, alpha) : bp::sdk::fn::add(x, y, T(1));
    else if constexpr (Op == BinOp::sub)
      return kAlpha ? bp::sdk::fn::sub(x, y, alpha) : bp::sdk::fn::sub(x, y, T(1));
    else if constexpr (Op == BinOp::mul)
      return bp::sdk::fn::mul(x, y);
    else
      return bp::sdk::fn::div(x, y);
  }
};

dnnl::memory::dims to_dims(const int64_t* v, int n) { return dnnl::memory::dims(v, v + n); }

// Contiguous strides for `dims`.
void contiguous_strides(const int64_t* dims, int n, int64_t* strides) {
  int64_t s = 1;
  for (int d = n - 1; d >= 0; --d) {
    strides[d] = s;
    s *= dims[d] > 0 ? dims[d] : 1;
  }
}

// Maps a broadcast operand (stride 0 on broadcast dims, contiguous over the
// rest) onto oneDNN's "dim of size 1" broadcasting. False for other layouts.
bool broadcast_dims(const TensorRef& t, int64_t* dims, int64_t* strides) {
  const int n = t.ndim();
  for (int d = 0; d < n; ++d) dims[d] = t.stride(d) == 0 ? 1 : t.size(d);
  contiguous_strides(dims, n, strides);
  for (int d = 0; d < n; ++d)
    if (dims[d] != 1 && t.stride(d) != strides[d]) return false;
  return true;
}

// Runs a float32, float16 or bfloat16 binary through oneDNN when the
// layout allows and oneDNN has an optimised implementation; false otherwise.
bool try_dnnl_binary(BinOp op, const TensorRef& out, const TensorRef& a, const TensorRef& b,
                     float alpha, bp_dtype dtype = BP_DTYPE_FLOAT32) {
  const int64_t n = out.numel();
  PrimitiveKey key{};
  key.kind = 1;
  key.dtype = dtype;
  // The scale is given at execution (a runtime argument): a learning rate
  // that changes every step uses one primitive, not one per value.
  key.scale1 = alpha == 1.0f ? 1.0f : 0.0f;
  const void* src0 = a.base();
  const void* src1 = b.base();
  if (is_dense(out) && same_strides(out, a) && same_strides(out, b)) {
    key.ndim = 1;  // one flat array for all three
    key.dims[0][0] = key.dims[1][0] = n;
    key.strides[0][0] = key.strides[1][0] = 1;
  } else {
    if (!out.is_contiguous()) return false;
    key.ndim = out.ndim();
    const bool commutes = op == BinOp::mul || (op == BinOp::add && alpha == 1.0f);
    // src1 is the broadcast one; a broadcast first operand is swapped over
    // only where the op commutes.
    const TensorRef* bcast = &b;
    if (!same_strides(out, a)) {
      if (!commutes || !same_strides(out, b)) return false;
      bcast = &a;
      std::swap(src0, src1);
    }
    for (int d = 0; d < key.ndim; ++d) key.dims[0][d] = out.size(d);
    contiguous_strides(key.dims[0], key.ndim, key.strides[0]);
    if (!broadcast_dims(*bcast, key.dims[1], key.strides[1])) return false;
  }
  dnnl::algorithm alg = op == BinOp::add   ? dnnl::algorithm::binary_add
                        : op == BinOp::sub ? dnnl::algorithm::binary_sub
                        : op == BinOp::mul ? dnnl::algorithm::binary_mul
                                           : dnnl::algorithm::binary_div;
  key.alg = static_cast<int32_t>(alg);
  using dt = dnnl::memory::data_type;
  const dt type = dtype == BP_DTYPE_BFLOAT16  ? dt::bf16
                  : dtype == BP_DTYPE_FLOAT16 ? dt::f16
                                              : dt::f32;
  const dnnl::memory::desc md0(to_dims(key.dims[0], key.ndim), type,
                               to_dims(key.strides[0], key.ndim));
  const dnnl::memory::desc md1(to_dims(key.dims[1], key.ndim), type,
                               to_dims(key.strides[1], key.ndim));
  dnnl::primitive prim = cached_primitive(key, [&]() -> dnnl::primitive {
    dnnl::primitive_attr attr;
    if (alpha != 1.0f) attr.set_scales(DNNL_ARG_SRC_1, 0, {DNNL_RUNTIME_F32_VAL});
    try {
      dnnl::binary::primitive_desc pd(dnnl::binary::desc(alg, md0, md1, md0), attr, dnnl_engine());
      if (is_reference_impl(pd)) return {};
      return dnnl::binary(pd);
    } catch (const dnnl::error&) {
      return {};  // oneDNN refuses the dtype on this CPU (16-bit floats without AVX-512)
    }
  });
  if (!prim) return false;
  dnnl::engine& eng = dnnl_engine();
  dnnl::memory m0(md0, eng, const_cast<void*>(src0));
  dnnl::memory m1(md1, eng, const_cast<void*>(src1));
  dnnl::memory mo(md0, eng, out.base());
  if (alpha == 1.0f) {
    prim.execute(dnnl_stream(), {{DNNL_ARG_SRC_0, m0}, {DNNL_ARG_SRC_1, m1}, {DNNL_ARG_DST, mo}});
    return true;
  }
  static const dnnl::memory::desc scale_md({1}, dt::f32, {1});
  dnnl::memory scale(scale_md, eng, &alpha);
  prim.execute(dnnl_stream(), {{DNNL_ARG_SRC_0, m0},
                               {DNNL_ARG_SRC_1, m1},
                               {DNNL_ARG_DST, mo},
                               {DNNL_ARG_ATTR_INPUT_SCALES | DNNL_ARG_SRC_1, scale}});
  return true;
}

template <class T, BinOp Op>
void binary_typed(const KernelCall& c) {
  const TensorRef out = c.output(0), a = c.input(0), b = c.input(1);
  const int64_t n = out.numel();
  if (n == 0) return;
  T alpha = T(1);
  if constexpr (Op == BinOp::add || Op == BinOp::sub) {
    if (c.attrs().num_scalars > 0) alpha = bp::sdk::scalar_as<T>(c.scalar(0));
  }
  if constexpr (std::is_same_v<T, float>) {
    if (n >= kDnnlBinaryMinElements && try_dnnl_binary(Op, out, a, b, alpha)) return;
  }
  if (alpha != T(1)) {
    binary_map<T, T>(out, a, b, BinaryFn<T, Op, true>{alpha});
  } else {
    binary_map<T, T>(out, a, b, BinaryFn<T, Op, false>{alpha});
  }
}

template <BinOp Op>
void binary_kernel(const KernelCall& c) {
  check::elementwise(c, 2, false);
  const TensorRef out = c.output(0);
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr bool ok = Op == BinOp::div   ? std::is_floating_point_v<T>
                        : Op == BinOp::mul ? true
                                           : !std::is_same_v<T, bool>;
    if constexpr (ok) {
      binary_typed<T, Op>(c);
    } else {
      bp::sdk::unsupported(c, out.dtype());
    }
  });
}

// float16 and bfloat16 ADD..DIV, registered where oneDNN has an optimised
// binary primitive for the dtype on this CPU (native16_binary): dense large
// operands go to it, which computes in float32 and rounds once; everything
// else runs the float32 kernel on widened copies (bp::sdk::run_widened),
// which gives the same values.
template <BinOp Op>
void binary16_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 2, false);
  const TensorRef out = c.output(0), a = c.input(0), b = c.input(1);
  if (out.numel() == 0) return;
  float alpha = 1.0f;
  if constexpr (Op == BinOp::add || Op == BinOp::sub) {
    if (c.attrs().num_scalars > 0) alpha = bp::sdk::scalar_as<float>(c.scalar(0));
  }
  if (out.numel() >= kDnnlMinElements && try_dnnl_binary(Op, out, a, b, alpha, dt)) return;
  char buf[512] = {0};
  bp_error err{sizeof(bp_error), buf, sizeof(buf)};
  const bp::sdk::WideKernel wide{&bp::sdk::kernel_thunk<&binary_kernel<Op>>, nullptr};
  if (bp::sdk::run_widened(wide, c.raw(), &err) != BP_STATUS_OK)
    throw bp::sdk::InvalidArgument(buf[0] ? buf : "[binary] the float32 kernel failed");
}

// True when oneDNN has an optimised binary primitive for `dt` here (probed
// once with a small add): bfloat16 and float16 need AVX-512 extensions that
// many CPUs lack, and oneDNN 2.6 then refuses or falls back to its reference
// code. Without it the SDK's emulation (float32 kernels) serves the dtype.
bool native16_binary(bp_dtype dt) {
  using mdt = dnnl::memory::data_type;
  const mdt type = dt == BP_DTYPE_BFLOAT16 ? mdt::bf16 : mdt::f16;
  try {
    const dnnl::memory::desc md({kDnnlMinElements}, type, dnnl::memory::format_tag::a);
    dnnl::binary::primitive_desc pd(dnnl::binary::desc(dnnl::algorithm::binary_add, md, md, md),
                                    dnnl_engine());
    return !is_reference_impl(pd);
  } catch (const dnnl::error&) {
    return false;
  }
}

template <class T, bool kMax>
struct MinMaxFn {
  T operator()(T x, T y) const {
    return kMax ? bp::sdk::fn::maximum(x, y) : bp::sdk::fn::minimum(x, y);
  }
};

template <bool kMax>
void minmax_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 2, false);
  if (c.output(0).numel() == 0) return;
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    binary_map<T, T>(c.output(0), c.input(0), c.input(1), MinMaxFn<T, kMax>{});
  });
}

// Scanned before anything is written, so a rejected call leaves out alone.
template <class T>
bool any_negative(const TensorRef& t) {
  std::atomic<bool> found{false};
  for_each_row_parallel<1>({t}, [&](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t len) {
    const T* x = reinterpret_cast<const T*>(p[0]);
    const int64_t sx = s[0] / int64_t(sizeof(T));
    bool neg = false;
    for (int64_t i = 0; i < len; ++i) neg |= x[i * sx] < 0;
    if (neg) found.store(true, std::memory_order_relaxed);
  });
  return found.load();
}

void pow_kernel(const KernelCall& c) {
  const bp_dtype dt = check::elementwise(c, 2, false);
  const TensorRef out = c.output(0), a = c.input(0), b = c.input(1);
  if (out.numel() == 0) return;
  bp::sdk::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      binary_map<T, T>(out, a, b, [](T x, T y) { return bp::sdk::fn::pow(x, y); });
    } else if constexpr (!std::is_same_v<T, bool>) {
      if (any_negative<T>(b))
        throw bp::sdk::InvalidArgument("[pow] integers to negative integer powers are not allowed");
      binary_map<T, T>(out, a, b, [](T x, T y) { return bp::sdk::fn::pow(x, y); });
    } else {
      throw bp::sdk::Unsupported("[pow] not implemented for bool");
    }
  });
}

}  // namespace

void register_binary_kernels(Registrar& r) {
  // Scalars as attributes (BP_KERNEL_SCALAR_OPERAND): the loops and the
  // oneDNN primitive see a broadcast operand in host memory.
  r.add_scalar_operand<&binary_kernel<BinOp::add>>(
      BP_OP_ADD, {BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}, BP_ORIGIN);
  r.add_scalar_operand<&binary_kernel<BinOp::sub>>(
      BP_OP_SUB, {BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}, BP_ORIGIN);
  r.add_scalar_operand<&binary_kernel<BinOp::mul>>(
      BP_OP_MUL,
      {BP_DTYPE_BOOL, BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64},
      BP_ORIGIN);
  r.add_scalar_operand<&binary_kernel<BinOp::div>>(BP_OP_DIV, {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64},
                                                   BP_ORIGIN);
  for (bp_dtype dt : {BP_DTYPE_BFLOAT16, BP_DTYPE_FLOAT16}) {
    if (!native16_binary(dt)) continue;
    r.add_scalar_operand<&binary16_kernel<BinOp::add>>(BP_OP_ADD, {dt}, BP_ORIGIN);
    r.add_scalar_operand<&binary16_kernel<BinOp::sub>>(BP_OP_SUB, {dt}, BP_ORIGIN);
    r.add_scalar_operand<&binary16_kernel<BinOp::mul>>(BP_OP_MUL, {dt}, BP_ORIGIN);
    r.add_scalar_operand<&binary16_kernel<BinOp::div>>(BP_OP_DIV, {dt}, BP_ORIGIN);
  }
  r.add<&minmax_kernel<true>>(BP_OP_MAXIMUM, kBaseDtypes, BP_ORIGIN);
  r.add<&minmax_kernel<false>>(BP_OP_MINIMUM, kBaseDtypes, BP_ORIGIN);
  r.add<&pow_kernel>(BP_OP_POW, kNumericDtypes, BP_ORIGIN);
}

}  // namespace bp::cpu
