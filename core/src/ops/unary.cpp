// Elementwise unary ops: relu (out of place and in place).
#include <backplane/ops.h>

#include "../internal.h"

namespace bp {

namespace {
void run_unary(Op op, const Tensor& out, const Tensor& in) {
  Backend& b = detail::backend_of(out.device());
  const bp_tensor i = detail::describe(in, b.dl_device_type());
  const bp_tensor o = detail::describe(out, b.dl_device_type());
  call_kernel(op, in.dtype(), out.device(), {&i, 1}, {&o, 1}, detail::make_attrs());
}
}  // namespace

Tensor relu(const Tensor& a) {
  Tensor out = detail::make_empty(a.sizes(), a.dtype(), a.device());
  if (a.numel()) run_unary(Op::Relu, out, a);
  return out;
}

Tensor Tensor::relu() const { return bp::relu(*this); }

Tensor& Tensor::relu_() {
  detail::check_writable("relu_", *this);
  if (numel()) run_unary(Op::Relu, *this, *this);
  impl_->version->bump();
  return *this;
}

}  // namespace bp
