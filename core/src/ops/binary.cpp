// Elementwise binary ops: add, sub, mul, div, out-of-place and in place,
// with broadcasting and dtype promotion.
#include <backplane/ops.h>

#include "../internal.h"

namespace bp {

namespace {

// PyTorch's rule: a 0-d tensor only decides the dtype when it is of a higher
// category than the dimensioned operand (like a Python scalar).
DType binary_result_type(const Tensor& a, const Tensor& b) {
  const bool a0 = a.dim() == 0, b0 = b.dim() == 0;
  if (a0 == b0) return promote_types(a.dtype(), b.dtype());
  const DType dimmed = a0 ? b.dtype() : a.dtype();
  const DType zero_d = a0 ? a.dtype() : b.dtype();
  if (category(zero_d) <= category(dimmed)) return dimmed;
  return promote_types(dimmed, zero_d);
}

DType compute_type(Op op, DType promoted) {
  // True division of integers gives the default float dtype.
  if (op == Op::Div && !is_floating(promoted)) return kDefaultFloat;
  return promoted;
}

// Runs `op` into `out` (whose shape is the broadcast shape and whose dtype
// is the compute dtype). Inputs of another dtype are cast first.
void run_binary(Op op, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  const DType dt = out.dtype();
  // Refer to the operands rather than copy handles: each handle copy is an
  // atomic increment and decrement on the hot path.
  Tensor cast_a, cast_b;
  const Tensor& ca = a.dtype() == dt ? a : (cast_a = a.to(dt));
  const Tensor& cb = b.dtype() == dt ? b : (cast_b = b.to(dt));
  Backend& be = detail::backend_of(out.device());
  const int32_t dl = be.dl_device_type();
  const DimVector& shape = out.impl()->sizes;
  // Operands already of the output's shape (the common case) need no
  // broadcast strides.
  DimVector sa, sb;
  const DimVector& a_strides = ca.impl()->sizes == shape
                                   ? ca.impl()->strides
                                   : (sa = broadcast_strides(ca.sizes(), ca.strides(), shape));
  const DimVector& b_strides = cb.impl()->sizes == shape
                                   ? cb.impl()->strides
                                   : (sb = broadcast_strides(cb.sizes(), cb.strides(), shape));
  const bp_tensor in[2] = {detail::describe_as(ca, shape, a_strides, dl),
                           detail::describe_as(cb, shape, b_strides, dl)};
  const bp_tensor o = detail::describe(out, dl);
  bp_attrs attrs = detail::make_attrs();
  attrs.num_scalars = 1;
  attrs.scalars[0] = alpha.to_abi();
  call_kernel(op, dt, out.device(), in, {&o, 1}, attrs);
}

Tensor binary(Op op, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  const char* name = op_name(op).data();
  detail::check_same_device(name, a, b);
  const DType dt = compute_type(op, binary_result_type(a, b));
  Tensor out = a.sizes().size() == b.sizes().size() &&
                       std::equal(a.sizes().begin(), a.sizes().end(), b.sizes().begin())
                   ? detail::make_empty(a.sizes(), dt, a.device())
                   : detail::make_empty(broadcast_shapes(a.sizes(), b.sizes(), name), dt,
                                        a.device());
  run_binary(op, out, a, b, alpha);
  return out;
}

Tensor& binary_(Op op, Tensor& self, const Tensor& other, const Scalar& alpha) {
  static const char* names[] = {"fill_", "copy_", "add_", "sub_", "mul_", "div_"};
  const char* name = names[static_cast<int>(op)];
  detail::check_same_device(name, self, other);
  detail::check_writable(name, self);
  const DimVector shape = broadcast_shapes(self.sizes(), other.sizes(), name);
  BP_CHECK(shape == DimVector(self.sizes()), "[", name, "] the result of broadcasting ",
           self.sizes(), " with ", other.sizes(), " has shape ", shape,
           ", which differs from self's shape ", self.sizes(),
           "; an in-place op never changes self's shape (IP-4)");
  const DType dt = compute_type(op, binary_result_type(self, other));
  BP_CHECK_TYPE(category(dt) <= category(self.dtype()), "[", name, "] the result type ", dt,
                " cannot be cast to self's dtype ", self.dtype(),
                " in place; use the out-of-place form, or convert self with .to(", dt, ") first");
  detail::check_no_partial_overlap(name, self, other);
  if (dt == self.dtype()) {
    run_binary(op, self, self, other, alpha);
  } else {
    Tensor tmp = detail::make_empty(self.sizes(), dt, self.device());
    run_binary(op, tmp, self, other, alpha);
    detail::copy_into(self, tmp);
  }
  self.impl()->version->bump();
  return self;
}

// The other operand of `t op scalar`, as a 0-d tensor on t's device.
Tensor wrap(const Tensor& t, const Scalar& s) {
  return scalar_tensor(s, TensorOptions(result_type(t.dtype(), s)).device(t.device()));
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return binary(Op::Add, a, b, alpha);
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return binary(Op::Sub, a, b, alpha);
}
Tensor mul(const Tensor& a, const Tensor& b) { return binary(Op::Mul, a, b, 1); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(Op::Div, a, b, 1); }
Tensor add(const Tensor& a, const Scalar& b) { return add(a, wrap(a, b)); }
Tensor sub(const Tensor& a, const Scalar& b) { return sub(a, wrap(a, b)); }
Tensor mul(const Tensor& a, const Scalar& b) { return mul(a, wrap(a, b)); }
Tensor div(const Tensor& a, const Scalar& b) { return div(a, wrap(a, b)); }

void add_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  detail::check_same_device("add_out", a, b);
  detail::check_same_device("add_out", out, a);
  detail::check_writable("add_out", out);
  const DimVector shape = broadcast_shapes(a.sizes(), b.sizes(), "add_out");
  BP_CHECK(shape == DimVector(out.sizes()), "[add_out] out has shape ", out.sizes(),
           " but the result has shape ", shape);
  BP_CHECK_TYPE(out.dtype() == binary_result_type(a, b), "[add_out] out has dtype ", out.dtype(),
                " but the result has dtype ", binary_result_type(a, b));
  detail::check_no_partial_overlap("add_out", out, a);
  detail::check_no_partial_overlap("add_out", out, b);
  run_binary(Op::Add, out, a, b, alpha);
  out.impl()->version->bump();
}

Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const { return bp::add(*this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const { return bp::sub(*this, o, alpha); }
Tensor Tensor::mul(const Tensor& o) const { return bp::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return bp::div(*this, o); }

Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) { return binary_(Op::Add, *this, o, alpha); }
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) { return binary_(Op::Sub, *this, o, alpha); }
Tensor& Tensor::mul_(const Tensor& o) { return binary_(Op::Mul, *this, o, 1); }
Tensor& Tensor::div_(const Tensor& o) { return binary_(Op::Div, *this, o, 1); }
Tensor& Tensor::add_(const Scalar& o) { return add_(wrap(*this, o)); }
Tensor& Tensor::sub_(const Scalar& o) { return sub_(wrap(*this, o)); }
Tensor& Tensor::mul_(const Scalar& o) { return mul_(wrap(*this, o)); }
Tensor& Tensor::div_(const Scalar& o) { return div_(wrap(*this, o)); }

}  // namespace bp
