// The core's fused optimiser updates (kernels/optim.cl): core::sgd_step and
// core::adam_step, one work-item per element, for float32 and float64 (where
// the device has it). Operands must be dense with one layout; others are
// declined before anything is enqueued, and the composite runs. The
// constants are the SDK's (backplane/sdk/optim_loops.hpp), worked out on
// the host and passed as kernel arguments.
#include <backplane/sdk/optim_loops.hpp>

#include "opencl_backend.h"
#include "registration.h"

namespace bp::opencl {

namespace {

namespace optim = bp::sdk::optim;

cl_long offset_of(const TensorRef& t) { return static_cast<cl_long>(t.raw().byte_offset); }

// Runs f(T{}) with T cl_float or cl_double for the call's dtype.
template <class F>
void visit(bp_dtype d, F&& f) {
  if (d == BP_DTYPE_FLOAT64)
    f(cl_double{});
  else
    f(cl_float{});
}

// The kernel `name` for the call's dtype, after the checks; null when
// there is nothing to do.
cl_kernel prepare(const KernelCall& c, const char* op, const char* name) {
  check_dtype(c.device(), c.dtype());
  optim::check::flat_update(c, op);
  if (c.input(0).numel() == 0) return nullptr;
  return kernel(c.device(), ProgramSpec{"optim", {{"T", c.dtype()}}, {}}, name);
}

void sgd_step(const KernelCall& c) {
  OpScope scope("core::sgd_step");
  cl_kernel k = prepare(c, "core::sgd_step", "sgd_step");
  if (!k) return;
  const TensorRef g = c.input(0), p = c.output(0), buf = c.output(1);
  visit(c.dtype(), [&](auto tag) {
    const auto a = optim::sgd_constants<decltype(tag)>(c);
    Args(k).mem(p.raw().data).mem(buf.raw().data).mem(g.raw().data)
        << offset_of(p) << offset_of(buf) << offset_of(g) << static_cast<cl_long>(g.numel()) << a.lr
        << a.momentum << a.keep << cl_int{a.nesterov} << cl_int{a.negate} << cl_int{a.first};
  });
  launch(resolve(c.device(), c.stream()), k, static_cast<std::size_t>(g.numel()));
}

void adam_step(const KernelCall& c) {
  OpScope scope("core::adam_step");
  cl_kernel k = prepare(c, "core::adam_step", "adam_step");
  if (!k) return;
  const TensorRef g = c.input(0), p = c.output(0), m = c.output(1), v = c.output(2);
  visit(c.dtype(), [&](auto tag) {
    const auto a = optim::adam_constants<decltype(tag)>(c);
    Args(k).mem(p.raw().data).mem(m.raw().data).mem(v.raw().data).mem(g.raw().data)
        << offset_of(p) << offset_of(m) << offset_of(v) << offset_of(g)
        << static_cast<cl_long>(g.numel()) << a.b1 << a.b2 << a.one_b1 << a.one_b2 << a.eps
        << a.bc2_sqrt << a.step_size << cl_int{a.negate};
  });
  launch(resolve(c.device(), c.stream()), k, static_cast<std::size_t>(g.numel()));
}

}  // namespace

void register_optim_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;
  // float32, and float64 where a device has it (one without declines).
  const uint32_t mask =
      dtype_mask(kFloating) & (BP_DTYPE_BIT(BP_DTYPE_FLOAT32) | BP_DTYPE_BIT(BP_DTYPE_FLOAT64));
  r.add_named_raw("core::sgd_step", BP_SCHEMA_CORE_SGD_STEP, mask, &bp::sdk::kernel_thunk<sgd_step>,
                  nullptr, BP_ORIGIN);
  r.add_named_raw("core::adam_step", BP_SCHEMA_CORE_ADAM_STEP, mask,
                  &bp::sdk::kernel_thunk<adam_step>, nullptr, BP_ORIGIN);
}

}  // namespace bp::opencl
