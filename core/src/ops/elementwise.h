// The shared machinery of elementwise ops: result dtypes, output
// allocation with broadcasting, and the kernel call with broadcast strides.
#pragma once

#include <backplane/ops.h>

#include <initializer_list>

#include "../internal.h"

namespace bp::detail {

// PyTorch's rule: a 0-d tensor only decides the dtype when it is of a higher
// category than the dimensioned operands (like a Python scalar).
DType result_type(std::initializer_list<const Tensor*> operands);

// The other operand of `t op scalar`, as a 0-d tensor on t's device.
Tensor wrap_scalar(const Tensor& t, const Scalar& s);

// Calls `op` with `inputs` (already of the compute dtype, any shape that
// broadcasts to out's) writing `out`. Dispatch dtype: inputs[dispatch_input].
void run_elementwise(Op op, const Tensor& out, std::initializer_list<const Tensor*> inputs,
                     const bp_attrs& attrs, int dispatch_input = 0);

// `out = in op s` for ADD, SUB, MUL or DIV (attrs: the op's own, alpha for
// ADD and SUB), `in` of out's shape and dtype. The scalar travels as an
// attribute where the backend's kernel takes one (BP_KERNEL_SCALAR_OPERAND),
// else as a 0-d tensor of out's dtype.
void run_with_scalar(Op op, const Tensor& out, const Tensor& in, const Scalar& s,
                     const bp_attrs& attrs);

// The broadcast shape of all operands (fast path when they already agree).
DimVector broadcast_all(const char* op, std::initializer_list<const Tensor*> operands);

// `t` itself when already of `dtype`, else a cast kept alive in `holder`.
// Returning a reference avoids a handle copy (two atomic operations) on the
// hot path.
inline const Tensor& cast_to(const Tensor& t, DType dtype, Tensor& holder) {
  if (t.dtype() == dtype) return t;
  holder = t.to(dtype);
  return holder;
}

// The in-place checks shared by every `op_`: self is writable, `others`
// broadcast to self's shape (IP-4), the result dtype fits self's (IP-5),
// and no input partially overlaps self (IP-6).
void check_inplace(const char* op, const Tensor& self, std::initializer_list<const Tensor*> others,
                   DType result);

}  // namespace bp::detail
