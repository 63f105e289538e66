// core::sgd_step and core::adam_step: an optimiser's update of one
// parameter in one pass over memory, for float32 and float64. The
// composite reads and writes the parameter and its state several times
// over (Adam: about ten kernels and three temporaries per parameter); here
// every element is loaded once, updated in registers, and stored once.
// Operands must be dense with one layout (parameter, gradient and state
// alike): each is then walked as one flat block. Other layouts are
// declined before anything is written, and the composite runs.
#include <cmath>
#include <string>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

// Checks that every operand has grad's dtype, shape and layout, and is dense.
void check_flat(const KernelCall& c, const char* op) {
  const TensorRef grad = c.input(0);
  for (int i = 0; i < c.num_outputs(); ++i) {
    const TensorRef t = c.output(i);
    bool same = t.dtype() == grad.dtype() && t.ndim() == grad.ndim();
    for (int d = 0; same && d < t.ndim(); ++d) same = t.size(d) == grad.size(d);
    if (!same) throw bp::sdk::InvalidArgument(std::string("[") + op + "] the parameter and its state must have grad's dtype and shape");
    if (!is_dense(t) || !same_strides(t, grad))
      throw bp::sdk::Unsupported(std::string("[") + op + "] operands of different layouts: the composite runs");
  }
  if (!is_dense(grad)) throw bp::sdk::Unsupported(std::string("[") + op + "] a strided gradient: the composite runs");
}

// The loops are built twice, for AVX2 with FMA and for the baseline, and
// the loader picks one for the machine (GCC's target_clones): the
// composite's kernels are oneDNN's, which choose their instruction set at
// run time too. Not under the sanitizers, whose runtimes start after the
// clones are resolved.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__clang__)
#define BP_OPTIM_CLONES __attribute__((target_clones("arch=haswell", "default")))
#else
#define BP_OPTIM_CLONES
#endif

template <class T>
struct SgdArgs {
  const T* g;
  T *p, *buf;
  T lr, momentum, keep;  // keep = 1 - dampening
  bool nesterov, negate, first;
};

template <class T>
struct AdamArgs {
  const T* g;
  T *p, *m, *v;
  T b1, b2, one_b1, one_b2, eps, bc2_sqrt, step_size;
  bool negate;
};

template <class T>
[[gnu::always_inline]] inline void sgd_block(const SgdArgs<T>& a, int64_t b, int64_t e) {
  const T *g = a.g;
  T *p = a.p, *buf = a.buf;
  const T lr = a.lr, momentum = a.momentum, keep = a.keep;
  const bool nesterov = a.nesterov, negate = a.negate, first = a.first;
#pragma omp simd
  for (int64_t i = b; i < e; ++i) {
    const T d = negate ? -g[i] : g[i];
    const T m = first ? d : buf[i] * momentum + keep * d;
    buf[i] = m;
    p[i] = p[i] - lr * (nesterov ? d + momentum * m : m);
  }
}

template <class T>
[[gnu::always_inline]] inline void adam_block(const AdamArgs<T>& a, int64_t b, int64_t e) {
  const T* g = a.g;
  T *p = a.p, *m = a.m, *v = a.v;
  const T b1 = a.b1, b2 = a.b2, one_b1 = a.one_b1, one_b2 = a.one_b2, eps = a.eps, bc2_sqrt = a.bc2_sqrt,
          step_size = a.step_size;
  const bool negate = a.negate;
#pragma omp simd
  for (int64_t i = b; i < e; ++i) {
    const T gi = negate ? -g[i] : g[i];
    const T mi = m[i] * b1 + one_b1 * gi;
    const T vi = v[i] * b2 + one_b2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] + step_size * (mi / (std::sqrt(vi) / bc2_sqrt + eps));
  }
}

BP_OPTIM_CLONES void sgd_range(const SgdArgs<float>& a, int64_t b, int64_t e) { sgd_block(a, b, e); }
BP_OPTIM_CLONES void sgd_range(const SgdArgs<double>& a, int64_t b, int64_t e) { sgd_block(a, b, e); }
BP_OPTIM_CLONES void adam_range(const AdamArgs<float>& a, int64_t b, int64_t e) { adam_block(a, b, e); }
BP_OPTIM_CLONES void adam_range(const AdamArgs<double>& a, int64_t b, int64_t e) { adam_block(a, b, e); }

template <class T>
void sgd_step(const KernelCall& c) {
  const auto& at = c.attrs();
  const SgdArgs<T> a{c.input(0).data<T>(),
                     c.output(0).data<T>(),
                     c.output(1).data<T>(),
                     static_cast<T>(c.scalar(0).value.f),
                     static_cast<T>(c.scalar(1).value.f),
                     static_cast<T>(1 - c.scalar(2).value.f),
                     at.ints[0] != 0,
                     at.ints[1] != 0,
                     at.ints[2] != 0};
  for_range(c.input(0).numel(), [&](int64_t b, int64_t e) { sgd_range(a, b, e); });
}

template <class T>
void adam_step(const KernelCall& c) {
  const double lr = c.scalar(0).value.f, beta1 = c.scalar(1).value.f, beta2 = c.scalar(2).value.f;
  const auto step = static_cast<double>(c.attrs().ints[0]);
  // As the composite: the bias corrections in double, then the loop in T.
  const AdamArgs<T> a{c.input(0).data<T>(),
                      c.output(0).data<T>(),
                      c.output(1).data<T>(),
                      c.output(2).data<T>(),
                      static_cast<T>(beta1),
                      static_cast<T>(beta2),
                      static_cast<T>(1 - beta1),
                      static_cast<T>(1 - beta2),
                      static_cast<T>(c.scalar(3).value.f),
                      static_cast<T>(std::sqrt(1 - std::pow(beta2, step))),
                      static_cast<T>(-lr / (1 - std::pow(beta1, step))),
                      c.attrs().ints[1] != 0};
  for_range(c.input(0).numel(), [&](int64_t b, int64_t e) { adam_range(a, b, e); });
}

void sgd_step_kernel(const KernelCall& c) {
  check_flat(c, "core::sgd_step");
  if (c.input(0).dtype() == BP_DTYPE_FLOAT32)
    sgd_step<float>(c);
  else
    sgd_step<double>(c);
}

void adam_step_kernel(const KernelCall& c) {
  check_flat(c, "core::adam_step");
  if (c.input(0).dtype() == BP_DTYPE_FLOAT32)
    adam_step<float>(c);
  else
    adam_step<double>(c);
}

}  // namespace

void register_optim_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;
  r.add_named<&sgd_step_kernel>("core::sgd_step", BP_SCHEMA_CORE_SGD_STEP, {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64},
                                BP_ORIGIN);
  r.add_named<&adam_step_kernel>("core::adam_step", BP_SCHEMA_CORE_ADAM_STEP, {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64},
                                 BP_ORIGIN);
}

}  // namespace bp::cpu
