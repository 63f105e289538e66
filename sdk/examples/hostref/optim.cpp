// The core's fused optimiser updates (core::sgd_step, core::adam_step) as
// the SDK's loops (backplane/sdk/optim_loops.hpp), one call each over the
// whole parameter. Operands of different layouts are declined and the core
// runs its composite; the conformance case composite.overrides_match
// compares the two.
#include <backplane/sdk/nn_loops.hpp>
#include <backplane/sdk/optim_loops.hpp>

#include "hostref.h"

namespace hostref {

namespace {

namespace optim = bp::sdk::optim;

void sgd_step(const KernelCall& c) {
  optim::check::flat_update(c, "core::sgd_step");
  bp::sdk::nn::visit_floating(c, c.input(0).dtype(), [&](auto t) {
    optim::sgd_block(optim::sgd_args<decltype(t)>(c), 0, c.input(0).numel());
  });
}

void adam_step(const KernelCall& c) {
  optim::check::flat_update(c, "core::adam_step");
  bp::sdk::nn::visit_floating(c, c.input(0).dtype(), [&](auto t) {
    optim::adam_block(optim::adam_args<decltype(t)>(c), 0, c.input(0).numel());
  });
}

}  // namespace

void register_optim_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;
  r.add_named<&sgd_step>("core::sgd_step", BP_SCHEMA_CORE_SGD_STEP, kFloatDtypes, BP_ORIGIN);
  r.add_named<&adam_step>("core::adam_step", BP_SCHEMA_CORE_ADAM_STEP, kFloatDtypes, BP_ORIGIN);
}

}  // namespace hostref
