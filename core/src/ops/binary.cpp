// Elementwise arithmetic: add, sub, mul, div, maximum, minimum, pow, out of
// place and in place, with broadcasting and dtype promotion.
#include "../autograd/graph.h"
#include "elementwise.h"

namespace bp {

using detail::cast_to;

namespace {

// True division of integers gives the default float dtype.
DType compute_type(Op op, DType promoted) {
  return op == Op::Div && !is_floating(promoted) ? kDefaultFloat : promoted;
}

bp_attrs alpha_attrs(const Scalar& alpha) {
  bp_attrs attrs = detail::make_attrs();
  attrs.num_scalars = 1;
  attrs.scalars[0] = alpha.to_abi();
  return attrs;
}

// Gradients of the arithmetic ops (AG-10), reduced to each input's shape
// and dtype (AG-11). Only what an input needing a gradient uses is saved.
void record_binary(Op op, const Tensor& a, const Tensor& b, const Scalar& alpha,
                   const Tensor& out) {
  using autograd::FunctionNode;
  const DType da = a.dtype(), db = b.dtype();
  auto reduce = [](const Tensor& g, IntArrayRef shape, DType dtype) {
    if (!g.defined()) return g;
    Tensor r = autograd::sum_to(g, shape);
    return r.dtype() == dtype ? r : r.to(dtype);
  };
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  // Slots 0 and 1 are a and b; unneeded ones hold an empty tensor.
  auto record = [&](const char* name, auto&& backward) {
    auto node = autograd::make_node(name, {&a, &b}, std::move(backward));
    const bool save_a = (op == Op::Mul && need_b) || op == Op::Div || op == Op::Maximum ||
                        op == Op::Minimum || op == Op::Pow;
    const bool save_b = (op == Op::Mul && need_a) || op == Op::Div || op == Op::Maximum ||
                        op == Op::Minimum || op == Op::Pow;
    if (save_a || save_b) {  // add and sub save nothing
      node->save(save_a ? a : Tensor());
      node->save(save_b ? b : Tensor());
    }
    if (op == Op::Pow) node->save(out);
    autograd::set_history(out, std::move(node));
  };
  if (op == Op::Add || op == Op::Sub) {
    const char* name = op == Op::Add ? "AddBackward0" : "SubBackward0";
    const double sign = op == Op::Add ? alpha.to_double() : -alpha.to_double();
    if (a.sizes().equals(out.sizes()) && b.sizes().equals(out.sizes()))
      // Nothing broadcast: both shapes are the output's, kept by the node.
      return record(name, [=](FunctionNode& n, std::vector<Tensor>& g) {
        const IntArrayRef shape = n.outputs[0].shape;
        return std::vector<Tensor>{need_a ? reduce(g[0], shape, da) : Tensor(),
                                   need_b ? reduce(g[0].mul(sign), shape, db) : Tensor()};
      });
    return record(name, [=, sa = DimVector(a.sizes()), sb = DimVector(b.sizes())](
                            FunctionNode&, std::vector<Tensor>& g) {
      return std::vector<Tensor>{need_a ? reduce(g[0], sa, da) : Tensor(),
                                 need_b ? reduce(g[0].mul(sign), sb, db) : Tensor()};
    });
  }
  const DimVector sa(a.sizes()), sb(b.sizes());
  switch (op) {
    case Op::Mul:
      return record("MulBackward0", [=](FunctionNode& n, std::vector<Tensor>& g) {
        return std::vector<Tensor>{need_a ? reduce(g[0].mul(n.saved(1)), sa, da) : Tensor(),
                                   need_b ? reduce(g[0].mul(n.saved(0)), sb, db) : Tensor()};
      });
    case Op::Div:
      return record("DivBackward0", [=](FunctionNode& n, std::vector<Tensor>& g) {
        const Tensor bv = n.saved(1);
        Tensor ga, gb;
        if (need_a) ga = reduce(g[0].div(bv), sa, da);
        if (need_b) gb = reduce(g[0].neg().mul(n.saved(0)).div(bv.mul(bv)), sb, db);
        return std::vector<Tensor>{ga, gb};
      });
    case Op::Maximum:
    case Op::Minimum:
      return record(op == Op::Maximum ? "MaximumBackward0" : "MinimumBackward0",
                    [=](FunctionNode& n, std::vector<Tensor>& g) {
                      // Each side gets the gradient unless it lost; ties split it evenly,
                      // and a NaN (which neither wins nor loses) sends it to both, as in
                      // PyTorch (AG-16).
                      const Tensor av = n.saved(0), bv = n.saved(1);
                      const DType dt = g[0].dtype();
                      const Tensor a_lost = op == Op::Maximum ? lt(av, bv) : gt(av, bv);
                      const Tensor b_lost = op == Op::Maximum ? gt(av, bv) : lt(av, bv);
                      const Tensor tie = eq(av, bv).to(dt).mul(0.5);
                      const Tensor wa = ones_like(tie).sub(a_lost.to(dt)).sub(tie);
                      const Tensor wb = ones_like(tie).sub(b_lost.to(dt)).sub(tie);
                      return std::vector<Tensor>{need_a ? reduce(g[0].mul(wa), sa, da) : Tensor(),
                                                 need_b ? reduce(g[0].mul(wb), sb, db) : Tensor()};
                    });
    case Op::Pow:
      return record("PowBackward0", [=](FunctionNode& n, std::vector<Tensor>& g) {
        // PyTorch's corners (AG-16): x^0 has gradient 0 even at x = 0 (not
        // 0 * 0^-1), and d/de x^e is 0 at x = 0 for e >= 0 (not 0 * log 0).
        const Tensor av = n.saved(0), ev = n.saved(1);
        Tensor ga, ge_;
        if (need_a) {
          const Tensor d = ev.mul(pow(av, ev.sub(1)));
          ga = reduce(g[0].mul(where(eq(ev, 0), zeros_like(d), d)), sa, da);
        }
        if (need_b) {
          const Tensor d = n.saved(2).mul(log(av));
          ge_ =
              reduce(g[0].mul(where(logical_and(eq(av, 0), ge(ev, 0)), zeros_like(d), d)), sb, db);
        }
        return std::vector<Tensor>{ga, ge_};
      });
    default:
      return;
  }
}

Tensor binary(Op op, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  const char* name = op_name(op).data();
  const DimVector shape = detail::broadcast_all(name, {&a, &b});
  const DType dt = compute_type(op, detail::result_type({&a, &b}));
  Tensor out = detail::make_empty(shape, dt, a);
  Tensor ha, hb;
  const Tensor &ca = cast_to(a, dt, ha), &cb = cast_to(b, dt, hb);
  detail::run_elementwise(op, out, {&ca, &cb}, alpha_attrs(alpha));
  if (__builtin_expect(autograd::needs_grad({&a, &b}), 0)) record_binary(op, a, b, alpha, out);
  return out;
}

Tensor& binary_(Op op, const char* name, Tensor& self, const Tensor& other, const Scalar& alpha) {
  const DType dt = compute_type(op, detail::result_type({&self, &other}));
  detail::check_inplace(name, self, {&other}, dt);
  // add_ and sub_ need no old values for their gradients: written in place,
  // recorded with self as input and output.
  if ((op == Op::Add || op == Op::Sub) && dt == self.dtype() &&
      autograd::record_inplace_direct(
          name, self, {&other},
          [&] {
            Tensor ho;
            const Tensor& co = cast_to(other, dt, ho);
            detail::run_elementwise(op, self, {&self, &co}, alpha_attrs(alpha));
          },
          [&](Tensor& s) { record_binary(op, s, other, alpha, s); }))
    return self;
  if (autograd::record_inplace(name, self, {&other},
                               [&](const Tensor& old) { return binary(op, old, other, alpha); }))
    return self;
  if (dt == self.dtype()) {
    Tensor ho;
    const Tensor& co = cast_to(other, dt, ho);
    detail::run_elementwise(op, self, {&self, &co}, alpha_attrs(alpha));
  } else {
    // A lower-category result (int into float self): compute, then cast in (IP-5).
    Tensor tmp = binary(op, self, other, alpha);
    detail::copy_into(self, tmp);
  }
  self.impl()->version->bump();
  return self;
}

// `a op s` for ADD, SUB, MUL and DIV: the scalar is an attribute of the
// kernel call where the backend takes one (run_with_scalar), and a constant
// of the gradient: a's is g, g * s or g / s; nothing is saved.
void record_scalar(Op op, const Tensor& a, const Scalar& s, const Tensor& out) {
  const DType da = a.dtype();
  const char* name = op == Op::Add   ? "AddBackward0"
                     : op == Op::Sub ? "SubBackward0"
                     : op == Op::Mul ? "MulBackward0"
                                     : "DivBackward0";
  auto node = autograd::make_node(name, {&a}, [=](autograd::FunctionNode&, std::vector<Tensor>& g) {
    Tensor r = g[0];
    if (r.defined()) {
      if (op == Op::Mul) r = r.mul(s);
      if (op == Op::Div) r = r.div(s);
      if (r.dtype() != da) r = r.to(da);
    }
    return std::vector<Tensor>{r};
  });
  autograd::set_history(out, node.get());
}

Tensor binary_scalar(Op op, const Tensor& a, const Scalar& s) {
  const DType dt = compute_type(op, bp::result_type(a.dtype(), s));
  Tensor out = detail::make_empty(a.sizes(), dt, a);
  Tensor ha;
  detail::run_with_scalar(op, out, cast_to(a, dt, ha), s, alpha_attrs(1));
  if (__builtin_expect(autograd::needs_grad({&a}), 0)) record_scalar(op, a, s, out);
  return out;
}

Tensor& binary_scalar_(Op op, const char* name, Tensor& self, const Scalar& s) {
  const DType dt = compute_type(op, bp::result_type(self.dtype(), s));
  // A result of another dtype: the tensor path refuses it (IP-5) or casts.
  if (dt != self.dtype()) return binary_(op, name, self, detail::wrap_scalar(self, s), 1);
  detail::check_inplace(name, self, {}, dt);
  const auto apply = [&] { detail::run_with_scalar(op, self, self, s, alpha_attrs(1)); };
  // Its gradient needs neither old nor new values: written in place.
  if (autograd::record_inplace_direct(name, self, {}, apply,
                                      [&](Tensor& t) { record_scalar(op, t, s, t); }))
    return self;
  if (autograd::record_inplace(name, self, {},
                               [&](const Tensor& old) { return binary_scalar(op, old, s); }))
    return self;
  apply();
  self.impl()->version->bump();
  return self;
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
Tensor add(const Tensor& a, const Scalar& b) { return binary_scalar(Op::Add, a, b); }
Tensor sub(const Tensor& a, const Scalar& b) { return binary_scalar(Op::Sub, a, b); }
Tensor mul(const Tensor& a, const Scalar& b) { return binary_scalar(Op::Mul, a, b); }
Tensor div(const Tensor& a, const Scalar& b) { return binary_scalar(Op::Div, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(Op::Maximum, a, b, 1); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(Op::Minimum, a, b, 1); }
Tensor pow(const Tensor& a, const Tensor& e) { return binary(Op::Pow, a, e, 1); }
Tensor pow(const Tensor& a, const Scalar& e) { return pow(a, detail::wrap_scalar(a, e)); }

void add_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  const DimVector shape = detail::broadcast_all("add_out", {&a, &b});
  detail::check_same_device("add_out", out, a);
  detail::check_writable("add_out", out);
  BP_CHECK(shape == out.impl()->sizes, "[add_out] out has shape ", out.sizes(),
           " but the result has shape ", shape);
  const DType dt = detail::result_type({&a, &b});
  BP_CHECK_TYPE(out.dtype() == dt, "[add_out] out has dtype ", out.dtype(),
                " but the result has dtype ", dt);
  detail::check_no_partial_overlap("add_out", out, a);
  detail::check_no_partial_overlap("add_out", out, b);
  Tensor ha, hb;
  const Tensor &ca = cast_to(a, dt, ha), &cb = cast_to(b, dt, hb);
  detail::run_elementwise(Op::Add, out, {&ca, &cb}, alpha_attrs(alpha));
  out.impl()->version->bump();
}

Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const { return bp::add(*this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const { return bp::sub(*this, o, alpha); }
Tensor Tensor::mul(const Tensor& o) const { return bp::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return bp::div(*this, o); }
Tensor Tensor::pow(const Scalar& e) const { return bp::pow(*this, e); }
Tensor Tensor::add(const Scalar& o) const { return bp::add(*this, o); }
Tensor Tensor::sub(const Scalar& o) const { return bp::sub(*this, o); }
Tensor Tensor::mul(const Scalar& o) const { return bp::mul(*this, o); }
Tensor Tensor::div(const Scalar& o) const { return bp::div(*this, o); }

Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) {
  return binary_(Op::Add, "add_", *this, o, alpha);
}
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) {
  return binary_(Op::Sub, "sub_", *this, o, alpha);
}
Tensor& Tensor::mul_(const Tensor& o) { return binary_(Op::Mul, "mul_", *this, o, 1); }
Tensor& Tensor::div_(const Tensor& o) { return binary_(Op::Div, "div_", *this, o, 1); }
Tensor& Tensor::add_(const Scalar& o) { return binary_scalar_(Op::Add, "add_", *this, o); }
Tensor& Tensor::sub_(const Scalar& o) { return binary_scalar_(Op::Sub, "sub_", *this, o); }
Tensor& Tensor::mul_(const Scalar& o) { return binary_scalar_(Op::Mul, "mul_", *this, o); }
Tensor& Tensor::div_(const Scalar& o) { return binary_scalar_(Op::Div, "div_", *this, o); }
Tensor& Tensor::pow_(const Scalar& e) {
  return binary_(Op::Pow, "pow_", *this, detail::wrap_scalar(*this, e), 1);
}

}  // namespace bp
