// core::sgd_step and core::adam_step: an optimiser's update of one
// parameter in one pass over memory, for float32 and float64. The
// composite reads and writes the parameter and its state several times
// over (Adam: about ten kernels and three temporaries per parameter); here
// every element is loaded once, updated in registers, and stored once.
// The loops and the operand check are the SDK's (backplane/sdk/
// optim_loops.hpp); here they are built for the machine and share the
// elements among the OpenMP threads.
#include <backplane/sdk/optim_loops.hpp>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

namespace optim = bp::sdk::optim;

// The loops are built twice, for AVX2 with FMA and for the baseline, and
// the loader picks one for the machine (BP_CPU_CLONES): the composite's
// kernels are oneDNN's, which choose their instruction set at run time too.
#define BP_OPTIM_CLONES BP_CPU_CLONES("arch=haswell", "default")

BP_OPTIM_CLONES void sgd_range(const optim::SgdArgs<float>& a, int64_t b, int64_t e) {
  optim::sgd_block(a, b, e);
}
BP_OPTIM_CLONES void sgd_range(const optim::SgdArgs<double>& a, int64_t b, int64_t e) {
  optim::sgd_block(a, b, e);
}
BP_OPTIM_CLONES void adam_range(const optim::AdamArgs<float>& a, int64_t b, int64_t e) {
  optim::adam_block(a, b, e);
}
BP_OPTIM_CLONES void adam_range(const optim::AdamArgs<double>& a, int64_t b, int64_t e) {
  optim::adam_block(a, b, e);
}

template <class T>
void sgd_step(const KernelCall& c) {
  const auto a = optim::sgd_args<T>(c);
  for_range(c.input(0).numel(), [&](int64_t b, int64_t e) { sgd_range(a, b, e); });
}

template <class T>
void adam_step(const KernelCall& c) {
  const auto a = optim::adam_args<T>(c);
  for_range(c.input(0).numel(), [&](int64_t b, int64_t e) { adam_range(a, b, e); });
}

void sgd_step_kernel(const KernelCall& c) {
  optim::check::flat_update(c, "core::sgd_step");
  if (c.input(0).dtype() == BP_DTYPE_FLOAT32)
    sgd_step<float>(c);
  else
    sgd_step<double>(c);
}

void adam_step_kernel(const KernelCall& c) {
  optim::check::flat_update(c, "core::adam_step");
  if (c.input(0).dtype() == BP_DTYPE_FLOAT32)
    adam_step<float>(c);
  else
    adam_step<double>(c);
}

}  // namespace

void register_optim_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;
  r.add_named<&sgd_step_kernel>("core::sgd_step", BP_SCHEMA_CORE_SGD_STEP,
                                {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}, BP_ORIGIN);
  r.add_named<&adam_step_kernel>("core::adam_step", BP_SCHEMA_CORE_ADAM_STEP,
                                 {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}, BP_ORIGIN);
}

}  // namespace bp::cpu
