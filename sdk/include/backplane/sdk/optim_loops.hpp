// Loops for the core's fused optimiser updates (plugin.h: core::sgd_step,
// core::adam_step), for a plugin whose memory the host can address (or
// whose device runs host code). The operands (gradient, parameter, state)
// must share dtype, shape and a dense layout; each is then one flat block
// of numel() elements, walked once: every element is loaded once, updated
// in registers and stored once. check::flat_update declines any other
// layout before anything is written, and the core's composite then runs.
// The step's constants (bias corrections) are worked out in double, as the
// composite does, and the loop runs in T.
//
//   void adam(const bp::sdk::KernelCall& c) {  // registered for float32 and float64
//     namespace optim = bp::sdk::optim;
//     optim::check::flat_update(c, "core::adam_step");
//     const int64_t n = c.input(0).numel();  // or a range [b, e) per thread
//     if (c.input(0).dtype() == BP_DTYPE_FLOAT32)
//       optim::adam_block(optim::adam_args<float>(c), 0, n);
//     else
//       optim::adam_block(optim::adam_args<double>(c), 0, n);
//   }
#pragma once

#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/tensor.hpp>
#include <cmath>
#include <cstdint>
#include <string>

// The loops ask for vectorisation where OpenMP is on (-fopenmp); define
// BP_SDK_OMP_SIMD first to choose otherwise (e.g. under -fopenmp-simd).
#ifndef BP_SDK_OMP_SIMD
#if defined(_OPENMP)
#define BP_SDK_OMP_SIMD _Pragma("omp simd")
#else
#define BP_SDK_OMP_SIMD
#endif
#endif

namespace bp::sdk::optim {

namespace check {

// Refuses (InvalidArgument) a parameter or state whose dtype or shape is not
// the gradient's; declines (Unsupported) operands that are not dense with
// one layout, before anything is written.
inline void flat_update(const KernelCall& c, const char* op) {
  const TensorRef grad = c.input(0);
  for (int i = 0; i < c.num_outputs(); ++i) {
    const TensorRef t = c.output(i);
    bool same = t.dtype() == grad.dtype() && t.ndim() == grad.ndim();
    for (int d = 0; same && d < t.ndim(); ++d) same = t.size(d) == grad.size(d);
    if (!same)
      throw InvalidArgument(std::string("[") + op +
                            "] the parameter and its state must have grad's dtype and shape");
    if (!is_dense(t) || !same_strides(t, grad))
      throw Unsupported(std::string("[") + op +
                        "] operands of different layouts: the composite runs");
  }
  if (!is_dense(grad))
    throw Unsupported(std::string("[") + op + "] a strided gradient: the composite runs");
}

}  // namespace check

// core::sgd_step's constants: its scalars lr, momentum, dampening and its
// ints nesterov, maximize, first_step.
template <class T>
struct SgdConstants {
  T lr, momentum, keep;  // keep = 1 - dampening
  bool nesterov, negate, first;
};

// core::adam_step's constants: from its scalars lr, beta1, beta2, eps and
// its ints step (from 1), maximize.
template <class T>
struct AdamConstants {
  T b1, b2, one_b1, one_b2, eps;
  T bc2_sqrt;   // sqrt(1 - beta2^step)
  T step_size;  // -lr / (1 - beta1^step)
  bool negate;
};

// The constants of a call (for a kernel that runs elsewhere, e.g. a
// device's, they are its arguments).
template <class T>
SgdConstants<T> sgd_constants(const KernelCall& c) {
  const auto& at = c.attrs();
  return SgdConstants<T>{static_cast<T>(c.scalar(0).value.f),
                         static_cast<T>(c.scalar(1).value.f),
                         static_cast<T>(1 - c.scalar(2).value.f),
                         at.ints[0] != 0,
                         at.ints[1] != 0,
                         at.ints[2] != 0};
}

template <class T>
AdamConstants<T> adam_constants(const KernelCall& c) {
  const double lr = c.scalar(0).value.f, beta1 = c.scalar(1).value.f, beta2 = c.scalar(2).value.f;
  const auto step = static_cast<double>(c.attrs().ints[0]);
  return AdamConstants<T>{static_cast<T>(beta1),
                          static_cast<T>(beta2),
                          static_cast<T>(1 - beta1),
                          static_cast<T>(1 - beta2),
                          static_cast<T>(c.scalar(3).value.f),
                          static_cast<T>(std::sqrt(1 - std::pow(beta2, step))),
                          static_cast<T>(-lr / (1 - std::pow(beta1, step))),
                          c.attrs().ints[1] != 0};
}

// A call's operands (host-addressable) and constants.
template <class T>
struct SgdArgs {
  const T* g;
  T *p, *buf;
  SgdConstants<T> k;
};

template <class T>
struct AdamArgs {
  const T* g;
  T *p, *m, *v;
  AdamConstants<T> k;
};

template <class T>
SgdArgs<T> sgd_args(const KernelCall& c) {
  return SgdArgs<T>{c.input(0).data<T>(), c.output(0).data<T>(), c.output(1).data<T>(),
                    sgd_constants<T>(c)};
}

template <class T>
AdamArgs<T> adam_args(const KernelCall& c) {
  return AdamArgs<T>{c.input(0).data<T>(), c.output(0).data<T>(), c.output(1).data<T>(),
                     c.output(2).data<T>(), adam_constants<T>(c)};
}

// Elements [b, e) of an SGD (momentum) step.
template <class T>
[[gnu::always_inline]] inline void sgd_block(const SgdArgs<T>& a, int64_t b, int64_t e) {
  const T* g = a.g;
  T *p = a.p, *buf = a.buf;
  const T lr = a.k.lr, momentum = a.k.momentum, keep = a.k.keep;
  const bool nesterov = a.k.nesterov, negate = a.k.negate, first = a.k.first;
  BP_SDK_OMP_SIMD
  for (int64_t i = b; i < e; ++i) {
    const T d = negate ? -g[i] : g[i];
    const T m = first ? d : buf[i] * momentum + keep * d;
    buf[i] = m;
    p[i] = p[i] - lr * (nesterov ? d + momentum * m : m);
  }
}

// Elements [b, e) of an Adam step.
template <class T>
[[gnu::always_inline]] inline void adam_block(const AdamArgs<T>& a, int64_t b, int64_t e) {
  const T* g = a.g;
  T *p = a.p, *m = a.m, *v = a.v;
  const T b1 = a.k.b1, b2 = a.k.b2, one_b1 = a.k.one_b1, one_b2 = a.k.one_b2, eps = a.k.eps,
          bc2_sqrt = a.k.bc2_sqrt, step_size = a.k.step_size;
  const bool negate = a.k.negate;
  BP_SDK_OMP_SIMD
  for (int64_t i = b; i < e; ++i) {
    const T gi = negate ? -g[i] : g[i];
    const T mi = m[i] * b1 + one_b1 * gi;
    const T vi = v[i] * b2 + one_b2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] + step_size * (mi / (std::sqrt(vi) / bc2_sqrt + eps));
  }
}

}  // namespace bp::sdk::optim
