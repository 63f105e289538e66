// RELU. Large dense float32 goes to oneDNN's eltwise primitive; the rest
// (and int32, which oneDNN would round through f32) runs the plugin's loops.
#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

template <class T>
inline T relu(T x) {
  // Written so that NaN passes through, as max(x, 0) does in other frameworks.
  return x < T(0) ? T(0) : x;
}

bool try_dnnl_relu(const TensorRef& out, const TensorRef& in) {
  if (!is_dense(out) || !same_strides(out, in)) return false;
  const int64_t n = out.numel();
  PrimitiveKey key{};
  key.kind = 2;
  key.alg = static_cast<int32_t>(dnnl::algorithm::eltwise_relu);
  key.dtype = BP_DTYPE_FLOAT32;
  key.ndim = 1;
  key.dims[0][0] = n;
  const dnnl::memory::desc md({n}, dnnl::memory::data_type::f32, dnnl::memory::dims{1});
  dnnl::primitive prim = cached_primitive(key, [&]() -> dnnl::primitive {
    dnnl::eltwise_forward::primitive_desc pd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference,
                                    dnnl::algorithm::eltwise_relu, md, 0.0f, 0.0f),
        dnnl_engine());
    if (is_reference_impl(pd)) return {};
    return dnnl::eltwise_forward(pd);
  });
  if (!prim) return false;
  dnnl::engine& eng = dnnl_engine();
  dnnl::memory src(md, eng, in.base());
  dnnl::memory dst(md, eng, out.base());
  prim.execute(dnnl_stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  return true;
}

template <class T>
void relu_typed(const TensorRef& out, const TensorRef& in) {
  const int64_t n = out.numel();
  if (n == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (n >= kDnnlMinElements && try_dnnl_relu(out, in)) return;
  }
  if ((out.is_contiguous() && in.is_contiguous()) || (is_dense(out) && same_strides(out, in))) {
    T* o = out.data<T>();
    const T* x = in.data<T>();
    for_range(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = relu(x[i]);
    });
    return;
  }
  for_each_row_parallel<2>(
      {out, in}, [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t len) {
        T* o = reinterpret_cast<T*>(p[0]);
        const T* x = reinterpret_cast<const T*>(p[1]);
        const int64_t so = s[0] / int64_t(sizeof(T)), sx = s[1] / int64_t(sizeof(T));
        if (so == 1 && sx == 1) {
          for (int64_t i = 0; i < len; ++i) o[i] = relu(x[i]);
        } else {
          for (int64_t i = 0; i < len; ++i) o[i * so] = relu(x[i * sx]);
        }
      });
}

void relu_kernel(const KernelCall& c) {
  BP_CHECK(c.num_inputs() == 1 && c.num_outputs() == 1, "relu",
           "expected 1 input and 1 output, got " << c.num_inputs() << " and " << c.num_outputs());
  const TensorRef out = c.output(0), in = c.input(0);
  BP_CHECK(in.dtype() == out.dtype(), "relu",
           "input is " << bp::sdk::dtype_name(in.dtype()) << " but the output is "
                       << bp::sdk::dtype_name(out.dtype()));
  BP_CHECK(in.ndim() == out.ndim(), "relu",
           "input rank " << in.ndim() << " differs from output rank " << out.ndim());
  for (int d = 0; d < out.ndim(); ++d)
    BP_CHECK(in.size(d) == out.size(d), "relu",
             "input has size " << in.size(d) << " in dim " << d << ", the output " << out.size(d));
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw bp::sdk::Unsupported("[relu] not implemented for bool");
    } else {
      relu_typed<T>(out, in);
    }
  });
}

}  // namespace

void register_unary_kernels(Registrar& r) {
  r.add<&relu_kernel>(
      BP_OP_RELU, {BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}, BP_ORIGIN);
}

}  // namespace bp::cpu
