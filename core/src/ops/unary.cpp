// Elementwise unary ops: neg, abs, exp, log, sqrt, sigmoid, tanh, relu,
// clamp, logical_not, out of place and in place.
#include "../autograd/graph.h"
#include "elementwise.h"

namespace bp {

namespace {

// What an op's result dtype is.
enum class Result {
  Same,      // the input's (neg, abs, relu, clamp)
  Floating,  // the input's when floating, else the default float (exp, log, ...)
  Bool,      // bool (logical_not)
};

DType result_dtype(Result r, DType in) {
  switch (r) {
    case Result::Same:
      return in;
    case Result::Floating:
      return is_floating(in) ? in : kDefaultFloat;
    case Result::Bool:
      return DType::Bool;
  }
  return in;
}

// Gradients of the unary ops in terms of the input `x` (slot 0) and the
// result `y` (slot 1).
void record_unary(Op op, const Tensor& a, const Tensor& out, const bp_attrs& attrs) {
  using autograd::FunctionNode;
  const DType da = a.dtype();
  auto cast = [da](Tensor g) { return g.dtype() == da ? g : g.to(da); };
  // Each case's backward is its own closure type, kept inside the node
  // (make_node): no second allocation for it.
  auto record = [&](const char* name, bool save_x, bool save_y, auto&& backward) {
    auto node = autograd::make_node(name, {&a}, std::forward<decltype(backward)>(backward));
    node->save(save_x ? a : Tensor());
    node->save(save_y ? out : Tensor());
    autograd::set_history(out, std::move(node));
  };
  switch (op) {
    case Op::Neg:
      return record("NegBackward0", false, false, [=](FunctionNode&, std::vector<Tensor>& g) {
        return std::vector<Tensor>{cast(g[0].neg())};
      });
    case Op::Abs:
      return record("AbsBackward0", true, false, [=](FunctionNode& n, std::vector<Tensor>& g) {
        const Tensor x = n.saved(0);
        const Tensor sign = gt(x, 0).to(g[0].dtype()).sub(lt(x, 0).to(g[0].dtype()));
        return std::vector<Tensor>{cast(g[0].mul(sign))};
      });
    case Op::Exp:
      return record("ExpBackward0", false, true, [=](FunctionNode& n, std::vector<Tensor>& g) {
        return std::vector<Tensor>{cast(g[0].mul(n.saved(1)))};
      });
    case Op::Log:
      return record("LogBackward0", true, false, [=](FunctionNode& n, std::vector<Tensor>& g) {
        return std::vector<Tensor>{cast(g[0].div(n.saved(0)))};
      });
    case Op::Sqrt:
      return record("SqrtBackward0", false, true, [=](FunctionNode& n, std::vector<Tensor>& g) {
        return std::vector<Tensor>{cast(g[0].div(n.saved(1).mul(2)))};
      });
    case Op::Sigmoid:
      return record("SigmoidBackward0", false, true, [=](FunctionNode& n, std::vector<Tensor>& g) {
        const Tensor y = n.saved(1);
        return std::vector<Tensor>{cast(g[0].mul(y).mul(sub(ones_like(y), y)))};
      });
    case Op::Tanh:
      return record("TanhBackward0", false, true, [=](FunctionNode& n, std::vector<Tensor>& g) {
        const Tensor y = n.saved(1);
        return std::vector<Tensor>{cast(g[0].mul(sub(ones_like(y), y.mul(y))))};
      });
    case Op::Erf:
      return record("ErfBackward0", true, false, [=](FunctionNode& n, std::vector<Tensor>& g) {
        // d/dx erf(x) = 2/sqrt(pi) exp(-x^2)
        const Tensor x = n.saved(0);
        return std::vector<Tensor>{cast(g[0].mul(exp(x.mul(x).neg()).mul(1.1283791670955126)))};
      });
    case Op::Relu:
      return record("ReluBackward0", false, true, [=](FunctionNode& n, std::vector<Tensor>& g) {
        return std::vector<Tensor>{cast(g[0].mul(gt(n.saved(1), 0).to(g[0].dtype())))};
      });
    case Op::Clamp: {
      // Which bounds were given, and the bounds (not all of bp_attrs).
      const auto which = attrs.ints[0];
      const bp_scalar lo = attrs.scalars[0], hi = attrs.scalars[1];
      return record("ClampBackward1", true, false, [=](FunctionNode& n, std::vector<Tensor>& g) {
        // The gradient passes where the input was inside [lo, hi].
        const Tensor x = n.saved(0);
        Tensor inside = ones_like(x, TensorOptions(DType::Bool));
        auto bound = [](const bp_scalar& b) {
          return b.dtype == BP_DTYPE_FLOAT64 ? Scalar(b.value.f) : Scalar(b.value.i);
        };
        if (which & 1) inside = logical_and(inside, ge(x, bound(lo)));
        if (which & 2) inside = logical_and(inside, le(x, bound(hi)));
        return std::vector<Tensor>{cast(g[0].mul(inside.to(g[0].dtype())))};
      });
    }
    default:
      return;
  }
}

Tensor unary(Op op, const Tensor& a, Result r, const bp_attrs& attrs = detail::make_attrs()) {
  const DType out_dtype = result_dtype(r, a.dtype());
  Tensor holder;
  // Floating ops compute in the output's dtype; the others on the input's.
  const Tensor& in = r == Result::Floating ? detail::cast_to(a, out_dtype, holder) : a;
  Tensor out = detail::make_empty(a.sizes(), out_dtype, a);
  detail::run_elementwise(op, out, {&in}, attrs);
  if (autograd::needs_grad({&a})) record_unary(op, a, out, attrs);
  return out;
}

Tensor& unary_(Op op, const char* name, Tensor& self, Result r,
               const bp_attrs& attrs = detail::make_attrs()) {
  detail::check_inplace(name, self, {}, result_dtype(r, self.dtype()));
  if (autograd::record_inplace(name, self, {},
                               [&](const Tensor& old) { return unary(op, old, r, attrs); }))
    return self;
  detail::run_elementwise(op, self, {&self}, attrs);
  self.impl()->version->bump();
  return self;
}

bp_attrs clamp_attrs(const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  BP_CHECK(lo || hi, "[clamp] at least one of min and max must be given");
  bp_attrs attrs = detail::make_attrs();
  attrs.num_scalars = 2;
  attrs.num_ints = 1;
  attrs.scalars[0] = lo.value_or(Scalar(0)).to_abi();
  attrs.scalars[1] = hi.value_or(Scalar(0)).to_abi();
  attrs.ints[0] = (lo ? 1 : 0) | (hi ? 2 : 0);
  return attrs;
}

// The dtype clamp's result takes: a floating bound on an integer tensor
// promotes, as in PyTorch.
DType clamp_dtype(const Tensor& a, const std::optional<Scalar>& lo,
                  const std::optional<Scalar>& hi) {
  DType d = a.dtype();
  if (lo) d = result_type(d, *lo);
  if (hi) d = result_type(d, *hi);
  return d;
}

}  // namespace

Tensor neg(const Tensor& a) { return unary(Op::Neg, a, Result::Same); }
Tensor abs(const Tensor& a) { return unary(Op::Abs, a, Result::Same); }
Tensor exp(const Tensor& a) { return unary(Op::Exp, a, Result::Floating); }
Tensor log(const Tensor& a) { return unary(Op::Log, a, Result::Floating); }
Tensor sqrt(const Tensor& a) { return unary(Op::Sqrt, a, Result::Floating); }
Tensor sigmoid(const Tensor& a) { return unary(Op::Sigmoid, a, Result::Floating); }
Tensor tanh(const Tensor& a) { return unary(Op::Tanh, a, Result::Floating); }
Tensor erf(const Tensor& a) { return unary(Op::Erf, a, Result::Floating); }
Tensor relu(const Tensor& a) { return unary(Op::Relu, a, Result::Same); }
Tensor logical_not(const Tensor& a) { return unary(Op::LogicalNot, a, Result::Bool); }

Tensor clamp(const Tensor& a, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  const bp_attrs attrs = clamp_attrs(lo, hi);
  Tensor holder;
  return unary(Op::Clamp, detail::cast_to(a, clamp_dtype(a, lo, hi), holder), Result::Same, attrs);
}

Tensor Tensor::neg() const { return bp::neg(*this); }
Tensor Tensor::abs() const { return bp::abs(*this); }
Tensor Tensor::exp() const { return bp::exp(*this); }
Tensor Tensor::log() const { return bp::log(*this); }
Tensor Tensor::sqrt() const { return bp::sqrt(*this); }
Tensor Tensor::sigmoid() const { return bp::sigmoid(*this); }
Tensor Tensor::tanh() const { return bp::tanh(*this); }
Tensor Tensor::relu() const { return bp::relu(*this); }
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const {
  return bp::clamp(*this, lo, hi);
}

Tensor& Tensor::neg_() { return unary_(Op::Neg, "neg_", *this, Result::Same); }
Tensor& Tensor::abs_() { return unary_(Op::Abs, "abs_", *this, Result::Same); }
Tensor& Tensor::exp_() { return unary_(Op::Exp, "exp_", *this, Result::Floating); }
Tensor& Tensor::log_() { return unary_(Op::Log, "log_", *this, Result::Floating); }
Tensor& Tensor::sqrt_() { return unary_(Op::Sqrt, "sqrt_", *this, Result::Floating); }
Tensor& Tensor::sigmoid_() { return unary_(Op::Sigmoid, "sigmoid_", *this, Result::Floating); }
Tensor& Tensor::tanh_() { return unary_(Op::Tanh, "tanh_", *this, Result::Floating); }
Tensor& Tensor::relu_() { return unary_(Op::Relu, "relu_", *this, Result::Same); }
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  const bp_attrs attrs = clamp_attrs(lo, hi);
  detail::check_inplace("clamp_", *this, {}, clamp_dtype(*this, lo, hi));
  if (autograd::record_inplace("clamp_", *this, {},
                               [&](const Tensor& old) { return bp::clamp(old, lo, hi); }))
    return *this;
  detail::run_elementwise(Op::Clamp, *this, {this}, attrs);
  impl()->version->bump();
  return *this;
}

}  // namespace bp
