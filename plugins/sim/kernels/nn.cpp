// The core's nn composites as sim kernels, one thread per independent item
// (an output plane, an input plane, a channel) running the SDK's plain
// loops (backplane/sdk/nn_loops.hpp): conv2d and its backward, max_pool2d,
// avg_pool2d and its backward, batch_norm (training, inference, backward).
#include <backplane/sdk/nn_loops.hpp>

#include "grid.h"

namespace bp::sim {

namespace {

namespace nn = bp::sdk::nn;

// One thread per item of [0, n).
template <class F>
void per_item(int64_t n, F&& f) {
  launch(n, [&](int64_t i) { f(i, i + 1); });
}

void conv2d_kernel(const KernelCall& c) {
  const auto a = check::conv2d(c, "core::conv2d");
  nn::visit_floating(c, c.input(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    per_item(a.n * a.o, [&](int64_t b, int64_t e) {
      nn::conv2d<T>(a, c.input(0), c.input(1), c.input(2), c.output(0), b, e);
    });
  });
}

void conv2d_backward_kernel(const KernelCall& c) {
  const auto a = check::conv2d(c, "core::conv2d_backward");
  nn::visit_floating(c, c.input(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (a.output_mask & 1)
      per_item(a.n * a.c, [&](int64_t b, int64_t e) {
        nn::conv2d_backward_input<T>(a, c.input(0), c.input(2), c.output(0), b, e);
      });
    if (a.output_mask & 2)
      per_item(a.o, [&](int64_t b, int64_t e) {
        nn::conv2d_backward_weight<T>(a, c.input(0), c.input(1), c.output(1), b, e);
      });
  });
}

void max_pool2d_kernel(const KernelCall& c) {
  const auto p = check::pool2d(c, "core::max_pool2d");
  nn::visit_floating(c, c.input(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    per_item(p.n * p.c, [&](int64_t b, int64_t e) {
      nn::max_pool2d<T>(p, c.input(0), c.output(0), c.output(1), b, e);
    });
  });
}

void avg_pool2d_kernel(const KernelCall& c) {
  const auto p = check::pool2d(c, "core::avg_pool2d");
  nn::visit_floating(c, c.input(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    per_item(p.n * p.c,
             [&](int64_t b, int64_t e) { nn::avg_pool2d<T>(p, c.input(0), c.output(0), b, e); });
  });
}

void avg_pool2d_backward_kernel(const KernelCall& c) {
  const auto p = check::pool2d(c, "core::avg_pool2d_backward");
  nn::visit_floating(c, c.input(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    per_item(p.n * p.c, [&](int64_t b, int64_t e) {
      nn::avg_pool2d_backward<T>(p, c.input(0), c.output(0), b, e);
    });
  });
}

void batch_norm_kernel(const KernelCall& c) {
  const auto a = check::batch_norm(c, "core::batch_norm");
  nn::visit_floating(c, c.input(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    per_item(a.c, [&](int64_t b, int64_t e) {
      nn::batch_norm<T>(a, c.input(0), c.input(1), c.input(2), c.output(0), c.output(1),
                        c.output(2), b, e);
    });
  });
}

void batch_norm_inference_kernel(const KernelCall& c) {
  const auto a = check::batch_norm(c, "core::batch_norm_inference");
  nn::visit_floating(c, c.input(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    per_item(a.c, [&](int64_t b, int64_t e) {
      nn::batch_norm_inference<T>(a, c.input(0), c.input(1), c.input(2), c.input(3), c.input(4),
                                  c.output(0), b, e);
    });
  });
}

void batch_norm_backward_kernel(const KernelCall& c) {
  const auto a = check::batch_norm(c, "core::batch_norm_backward");
  nn::visit_floating(c, c.input(1).dtype(), [&](auto tag) {
    using T = decltype(tag);
    per_item(a.c, [&](int64_t b, int64_t e) {
      nn::batch_norm_backward<T>(a, c.input(0), c.input(1), c.input(2), c.input(3), c.input(4),
                                 c.output(0), c.output(1), c.output(2), b, e);
    });
  });
}

}  // namespace

void register_nn_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;
  const auto f = bp::sdk::kFloatDtypes;
  r.add_named<&conv2d_kernel>("core::conv2d", BP_SCHEMA_CORE_CONV2D, f, BP_ORIGIN);
  r.add_named<&conv2d_backward_kernel>("core::conv2d_backward", BP_SCHEMA_CORE_CONV2D_BACKWARD, f,
                                       BP_ORIGIN);
  r.add_named<&max_pool2d_kernel>("core::max_pool2d", BP_SCHEMA_CORE_MAX_POOL2D, f, BP_ORIGIN);
  r.add_named<&avg_pool2d_kernel>("core::avg_pool2d", BP_SCHEMA_CORE_AVG_POOL2D, f, BP_ORIGIN);
  r.add_named<&avg_pool2d_backward_kernel>("core::avg_pool2d_backward",
                                           BP_SCHEMA_CORE_AVG_POOL2D_BACKWARD, f, BP_ORIGIN);
  r.add_named<&batch_norm_kernel>("core::batch_norm", BP_SCHEMA_CORE_BATCH_NORM, f, BP_ORIGIN);
  r.add_named<&batch_norm_inference_kernel>("core::batch_norm_inference",
                                            BP_SCHEMA_CORE_BATCH_NORM_INFERENCE, f, BP_ORIGIN);
  r.add_named<&batch_norm_backward_kernel>("core::batch_norm_backward",
                                           BP_SCHEMA_CORE_BATCH_NORM_BACKWARD, f, BP_ORIGIN);
}

}  // namespace bp::sim
