// FILL and COPY. Neither maps onto a oneDNN primitive with the right
// semantics (reorder rounds and saturates, COPY must convert like
// static_cast), so both are the plugin's own loops, parallel when large.
#include <cstring>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

using bp::sdk::fn::convert;  // static_cast, but x != 0 for bool

template <class T>
void fill_typed(const TensorRef& out, T value) {
  const int64_t n = out.numel();
  if (n == 0) return;
  if (is_dense(out)) {
    T* o = out.data<T>();
    for_range(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = value;
    });
    return;
  }
  for_each_row_parallel<1>({out},
                           [&](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t len) {
                             T* o = reinterpret_cast<T*>(p[0]);
                             const int64_t so = s[0] / int64_t(sizeof(T));
                             if (so == 1) {
                               for (int64_t i = 0; i < len; ++i) o[i] = value;
                             } else {
                               for (int64_t i = 0; i < len; ++i) o[i * so] = value;
                             }
                           });
}

void fill_kernel(const KernelCall& c) {
  check::fill(c);
  const TensorRef out = c.output(0);
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    fill_typed<T>(out, bp::sdk::scalar_as<T>(c.scalar(0)));
  });
}

template <class To, class From>
void copy_typed(const TensorRef& out, const TensorRef& in) {
  const int64_t n = out.numel();
  if (n == 0) return;
  if (out.base() == in.base() && std::is_same_v<To, From> && same_strides(out, in)) return;
  if (is_dense(out) && same_strides(out, in)) {
    To* o = out.data<To>();
    const From* x = in.data<From>();
    for_range(n, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<To, From>) {
        std::memcpy(o + b, x + b, static_cast<size_t>(e - b) * sizeof(To));
      } else {
        for (int64_t i = b; i < e; ++i) o[i] = convert<To>(x[i]);
      }
    });
    return;
  }
  for_each_row_parallel<2>(
      {out, in}, [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t len) {
        To* o = reinterpret_cast<To*>(p[0]);
        const From* x = reinterpret_cast<const From*>(p[1]);
        const int64_t so = s[0] / int64_t(sizeof(To)), sx = s[1] / int64_t(sizeof(From));
        if (so == 1 && sx == 1) {
          for (int64_t i = 0; i < len; ++i) o[i] = convert<To>(x[i]);
        } else if (so == 1 && sx == 0) {
          const To v = convert<To>(*x);
          for (int64_t i = 0; i < len; ++i) o[i] = v;
        } else {
          for (int64_t i = 0; i < len; ++i) o[i * so] = convert<To>(x[i * sx]);
        }
      });
}

void copy_kernel(const KernelCall& c) {
  check::copy(c);
  const TensorRef in = c.input(0), out = c.output(0);
  if (bp::sdk::is_narrow(out.dtype()) || bp::sdk::is_narrow(in.dtype())) {
    bp::sdk::cast_copy(out, in);  // float16, bfloat16, int8, uint8, int16
    return;
  }
  bp::sdk::visit_dtype(in.dtype(), [&](auto from_tag) {
    bp::sdk::visit_dtype(out.dtype(), [&](auto to_tag) {
      copy_typed<decltype(to_tag), decltype(from_tag)>(out, in);
    });
  });
}

}  // namespace

void register_copy_kernels(Registrar& r) {
  const std::initializer_list<bp_dtype> all = {BP_DTYPE_BOOL, BP_DTYPE_INT32, BP_DTYPE_INT64,
                                               BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64};
  r.add<&fill_kernel>(BP_OP_FILL, all, BP_ORIGIN);
  r.add<&copy_kernel>(BP_OP_COPY, all, BP_ORIGIN);
}

}  // namespace bp::cpu
