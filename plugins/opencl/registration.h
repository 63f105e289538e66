// Registration helpers of the opencl plugin: the dtype sets of the ABI's
// ops, with float64 only where a device has cl_khr_fp64, and float16 and
// bfloat16 flagged as computed in float32 (BP_KERNEL_EMULATED).
#pragma once

#include "opencl_backend.h"

namespace bp::opencl {

enum DtypeSet { kAll, kNumeric, kFloating };

// Whether any device has fp64 (a device without it declines float64 calls).
bool any_fp64();
uint32_t dtype_mask(DtypeSet set);
// Throws Unsupported for a dtype the call's device cannot compute.
void check_dtype(int32_t device, bp_dtype d);

// `flags`: BP_KERNEL_* beside EMULATED, e.g. BP_KERNEL_SCALAR_OPERAND for a
// kernel that reads a scalar operand from scalars[1] itself.
template <bp::sdk::KernelFn Fn>
void add_kernel(Registrar& r, bp_op op, DtypeSet set, const char* origin = nullptr,
                uint32_t flags = 0) {
  const uint32_t mask = dtype_mask(set);
  const uint32_t narrow = BP_DTYPE_BIT(BP_DTYPE_FLOAT16) | BP_DTYPE_BIT(BP_DTYPE_BFLOAT16);
  if (mask & ~narrow)
    r.add_raw(op, mask & ~narrow, &bp::sdk::scoped_kernel_thunk<Fn>, nullptr, origin, flags);
  if (mask & narrow)
    r.add_raw(op, mask & narrow, &bp::sdk::scoped_kernel_thunk<Fn>, nullptr, origin,
              flags | BP_KERNEL_EMULATED);
}

}  // namespace bp::opencl
