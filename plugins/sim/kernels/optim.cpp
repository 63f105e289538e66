// The core's fused optimiser updates (core::sgd_step, core::adam_step) as
// sim kernels: one thread per element, each running the SDK's update
// (backplane/sdk/optim_loops.hpp) on its own element of the parameter and
// its state. Operands of different layouts are declined and the composite
// runs.
#include <backplane/sdk/nn_loops.hpp>
#include <backplane/sdk/optim_loops.hpp>

#include "grid.h"

namespace bp::sim {

namespace {

namespace optim = bp::sdk::optim;

void sgd_step_kernel(const KernelCall& c) {
  optim::check::flat_update(c, "core::sgd_step");
  bp::sdk::nn::visit_floating(c, c.input(0).dtype(), [&](auto tag) {
    const auto a = optim::sgd_args<decltype(tag)>(c);
    launch(c.input(0).numel(), [&](int64_t i) { optim::sgd_block(a, i, i + 1); });
  });
}

void adam_step_kernel(const KernelCall& c) {
  optim::check::flat_update(c, "core::adam_step");
  bp::sdk::nn::visit_floating(c, c.input(0).dtype(), [&](auto tag) {
    const auto a = optim::adam_args<decltype(tag)>(c);
    launch(c.input(0).numel(), [&](int64_t i) { optim::adam_block(a, i, i + 1); });
  });
}

}  // namespace

void register_optim_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;
  const auto f = bp::sdk::kFloatDtypes;
  r.add_named<&sgd_step_kernel>("core::sgd_step", BP_SCHEMA_CORE_SGD_STEP, f, BP_ORIGIN);
  r.add_named<&adam_step_kernel>("core::adam_step", BP_SCHEMA_CORE_ADAM_STEP, f, BP_ORIGIN);
}

}  // namespace bp::sim
