#include "elementwise.h"

namespace bp::detail {

DType result_type(std::initializer_list<const Tensor*> operands) {
  bool have_dimmed = false, have_zero_d = false;
  DType dimmed = DType::Bool, zero_d = DType::Bool;
  for (const Tensor* t : operands) {
    if (t->dim() == 0) {
      zero_d = have_zero_d ? promote_types(zero_d, t->dtype()) : t->dtype();
      have_zero_d = true;
    } else {
      dimmed = have_dimmed ? promote_types(dimmed, t->dtype()) : t->dtype();
      have_dimmed = true;
    }
  }
  if (!have_dimmed) return zero_d;
  if (!have_zero_d || category(zero_d) <= category(dimmed)) return dimmed;
  return promote_types(dimmed, zero_d);
}

Tensor wrap_scalar(const Tensor& t, const Scalar& s) {
  return full_on({}, s, bp::result_type(t.dtype(), s), t);
}

void run_with_scalar(Op op, const Tensor& out, const Tensor& in, const Scalar& s,
                     const bp_attrs& attrs) {
  if (out.numel() == 0) return;
  const int32_t dl = backend_of(out).dl_device_type();
  bp_attrs with = attrs;
  if (with.num_scalars < 1) with.scalars[0] = Scalar(1).to_abi();
  with.num_scalars = 2;
  with.scalars[1] = s.to_abi();
  const bp_tensor i = abi_descriptor(in, dl), o = abi_descriptor(out, dl);
  if (call_kernel_scalar_form(op, out.dtype(), out.device(), i, o, with)) return;
  const Tensor operand = full_on({}, s, out.dtype(), out);
  run_elementwise(op, out, {&in, &operand}, attrs);
}

DimVector broadcast_all(const char* op, std::initializer_list<const Tensor*> operands) {
  auto it = operands.begin();
  DimVector shape((*it)->sizes());
  for (++it; it != operands.end(); ++it) {
    check_same_device(op, **operands.begin(), **it);
    if (!(shape == (*it)->impl()->sizes)) shape = broadcast_shapes(shape, (*it)->sizes(), op);
  }
  return shape;
}

void run_elementwise(Op op, const Tensor& out, std::initializer_list<const Tensor*> inputs,
                     const bp_attrs& attrs, int dispatch_input) {
  if (out.numel() == 0) return;
  Backend& be = backend_of(out);
  const int32_t dl = be.dl_device_type();
  const DimVector& shape = out.impl()->sizes;
  constexpr int kMaxInputs = 3;
  BP_ASSERT(inputs.size() <= kMaxInputs);
  DimVector strides[kMaxInputs];
  bp_tensor in[kMaxInputs];
  int i = 0;
  for (const Tensor* t : inputs) {
    // Operands already of the output's shape (the common case) need no
    // broadcast strides.
    const DimVector& s = t->impl()->sizes == shape
                             ? t->impl()->strides
                             : (strides[i] = broadcast_strides(t->sizes(), t->strides(), shape));
    in[i] = abi_descriptor_as(*t, shape, s, dl);
    ++i;
  }
  const bp_tensor o = abi_descriptor(out, dl);
  const DType dispatch = (inputs.begin() + dispatch_input)[0]->dtype();
  call_kernel(op, dispatch, out.device(), std::span<const bp_tensor>(in, inputs.size()), {&o, 1},
              attrs);
}

void check_inplace(const char* op, const Tensor& self, std::initializer_list<const Tensor*> others,
                   DType result) {
  check_writable(op, self);
  for (const Tensor* o : others) {
    check_same_device(op, self, *o);
    if (!(o->impl()->sizes == self.impl()->sizes)) {
      const DimVector shape = broadcast_shapes(self.sizes(), o->sizes(), op);
      BP_CHECK(shape == self.impl()->sizes, "[", op, "] the result of broadcasting ", self.sizes(),
               " with ", o->sizes(), " has shape ", shape, ", which differs from self's shape ",
               self.sizes(), "; an in-place op never changes self's shape (IP-4)");
    }
  }
  BP_CHECK_TYPE(category(result) <= category(self.dtype()), "[", op, "] the result type ", result,
                " cannot be cast to self's dtype ", self.dtype(),
                " in place (IP-5); use the out-of-place form, or convert self with .to(", result,
                ") first");
  for (const Tensor* o : others) check_no_partial_overlap(op, self, *o);
}

}  // namespace bp::detail
