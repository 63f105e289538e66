// The core's nn composites as plain loops (backplane/sdk/nn_loops.hpp), one
// call each: conv2d and its backward, max_pool2d, avg_pool2d and its
// backward, batch_norm (training, inference, backward). The core runs them
// in place of its composites, with or without a gradient recorded (their
// gradients are the core's), except batch_norm_inference, which it runs
// when none is; the conformance cases nn.*.override compare them with the
// composites.
#include <backplane/sdk/nn_loops.hpp>

#include "hostref.h"

namespace hostref {

namespace {

namespace nn = bp::sdk::nn;

void conv2d(const KernelCall& c) {
  const auto a = check::conv2d(c, "core::conv2d");
  nn::visit_floating(c, c.input(0).dtype(), [&](auto t) {
    nn::conv2d<decltype(t)>(a, c.input(0), c.input(1), c.input(2), c.output(0), 0, a.n * a.o);
  });
}

void conv2d_backward(const KernelCall& c) {
  const auto a = check::conv2d(c, "core::conv2d_backward");
  nn::visit_floating(c, c.input(0).dtype(), [&](auto t) {
    using T = decltype(t);
    if (a.output_mask & 1)
      nn::conv2d_backward_input<T>(a, c.input(0), c.input(2), c.output(0), 0, a.n * a.c);
    if (a.output_mask & 2)
      nn::conv2d_backward_weight<T>(a, c.input(0), c.input(1), c.output(1), 0, a.o);
  });
}

void max_pool2d(const KernelCall& c) {
  const auto p = check::pool2d(c, "core::max_pool2d");
  nn::visit_floating(c, c.input(0).dtype(), [&](auto t) {
    nn::max_pool2d<decltype(t)>(p, c.input(0), c.output(0), c.output(1), 0, p.n * p.c);
  });
}

void avg_pool2d(const KernelCall& c) {
  const auto p = check::pool2d(c, "core::avg_pool2d");
  nn::visit_floating(c, c.input(0).dtype(), [&](auto t) {
    nn::avg_pool2d<decltype(t)>(p, c.input(0), c.output(0), 0, p.n * p.c);
  });
}

void avg_pool2d_backward(const KernelCall& c) {
  const auto p = check::pool2d(c, "core::avg_pool2d_backward");
  nn::visit_floating(c, c.input(0).dtype(), [&](auto t) {
    nn::avg_pool2d_backward<decltype(t)>(p, c.input(0), c.output(0), 0, p.n * p.c);
  });
}

void batch_norm(const KernelCall& c) {
  const auto a = check::batch_norm(c, "core::batch_norm");
  nn::visit_floating(c, c.input(0).dtype(), [&](auto t) {
    nn::batch_norm<decltype(t)>(a, c.input(0), c.input(1), c.input(2), c.output(0), c.output(1),
                                c.output(2), 0, a.c);
  });
}

void batch_norm_inference(const KernelCall& c) {
  const auto a = check::batch_norm(c, "core::batch_norm_inference");
  nn::visit_floating(c, c.input(0).dtype(), [&](auto t) {
    nn::batch_norm_inference<decltype(t)>(a, c.input(0), c.input(1), c.input(2), c.input(3),
                                          c.input(4), c.output(0), 0, a.c);
  });
}

void batch_norm_backward(const KernelCall& c) {
  const auto a = check::batch_norm(c, "core::batch_norm_backward");
  nn::visit_floating(c, c.input(1).dtype(), [&](auto t) {
    nn::batch_norm_backward<decltype(t)>(a, c.input(0), c.input(1), c.input(2), c.input(3),
                                         c.input(4), c.output(0), c.output(1), c.output(2), 0, a.c);
  });
}

}  // namespace

void register_nn_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;  // a core that takes no named ops
  r.add_named<&conv2d>("core::conv2d", BP_SCHEMA_CORE_CONV2D, kFloatDtypes, BP_ORIGIN);
  r.add_named<&conv2d_backward>("core::conv2d_backward", BP_SCHEMA_CORE_CONV2D_BACKWARD,
                                kFloatDtypes, BP_ORIGIN);
  r.add_named<&max_pool2d>("core::max_pool2d", BP_SCHEMA_CORE_MAX_POOL2D, kFloatDtypes, BP_ORIGIN);
  r.add_named<&avg_pool2d>("core::avg_pool2d", BP_SCHEMA_CORE_AVG_POOL2D, kFloatDtypes, BP_ORIGIN);
  r.add_named<&avg_pool2d_backward>("core::avg_pool2d_backward", BP_SCHEMA_CORE_AVG_POOL2D_BACKWARD,
                                    kFloatDtypes, BP_ORIGIN);
  r.add_named<&batch_norm>("core::batch_norm", BP_SCHEMA_CORE_BATCH_NORM, kFloatDtypes, BP_ORIGIN);
  r.add_named<&batch_norm_inference>("core::batch_norm_inference",
                                     BP_SCHEMA_CORE_BATCH_NORM_INFERENCE, kFloatDtypes, BP_ORIGIN);
  r.add_named<&batch_norm_backward>("core::batch_norm_backward", BP_SCHEMA_CORE_BATCH_NORM_BACKWARD,
                                    kFloatDtypes, BP_ORIGIN);
}

}  // namespace hostref
