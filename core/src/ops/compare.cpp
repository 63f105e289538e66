// Comparisons, logical ops and where: bool results.
#include "../autograd/graph.h"
#include "elementwise.h"

namespace bp {

using detail::cast_to;

namespace {

// Compares in the promoted dtype; the result is bool.
Tensor compare(Op op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op).data();
  const DimVector shape = detail::broadcast_all(name, {&a, &b});
  const DType dt = detail::result_type({&a, &b});
  Tensor out = detail::make_empty(shape, DType::Bool, a);
  Tensor ha, hb;
  const Tensor &ca = cast_to(a, dt, ha), &cb = cast_to(b, dt, hb);
  detail::run_elementwise(op, out, {&ca, &cb}, detail::make_attrs());
  return out;
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare(Op::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(Op::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(Op::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(Op::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(Op::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(Op::Ge, a, b); }
Tensor eq(const Tensor& a, const Scalar& b) { return eq(a, detail::wrap_scalar(a, b)); }
Tensor ne(const Tensor& a, const Scalar& b) { return ne(a, detail::wrap_scalar(a, b)); }
Tensor lt(const Tensor& a, const Scalar& b) { return lt(a, detail::wrap_scalar(a, b)); }
Tensor le(const Tensor& a, const Scalar& b) { return le(a, detail::wrap_scalar(a, b)); }
Tensor gt(const Tensor& a, const Scalar& b) { return gt(a, detail::wrap_scalar(a, b)); }
Tensor ge(const Tensor& a, const Scalar& b) { return ge(a, detail::wrap_scalar(a, b)); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return compare(Op::LogicalAnd, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return compare(Op::LogicalOr, a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  BP_CHECK_TYPE(cond.dtype() == DType::Bool, "[where] the condition must be a bool tensor, got ",
                detail::describe_tensor(cond), "; compare first, e.g. where(x > 0, ...)");
  const DimVector shape = detail::broadcast_all("where", {&cond, &a, &b});
  const DType dt = detail::result_type({&a, &b});
  Tensor out = detail::make_empty(shape, dt, a);
  Tensor ha, hb;
  const Tensor &ca = cast_to(a, dt, ha), &cb = cast_to(b, dt, hb);
  detail::run_elementwise(Op::Where, out, {&cond, &ca, &cb}, detail::make_attrs(), 1);
  if (autograd::needs_grad({&a, &b})) {
    const DimVector sa(a.sizes()), sb(b.sizes());
    const DType da = a.dtype(), db = b.dtype();
    auto node = autograd::make_node(
        "WhereBackward0", {&a, &b}, [=](autograd::FunctionNode& n, std::vector<Tensor>& g) {
          const Tensor c = n.saved(0);
          const Tensor zero = zeros({}, TensorOptions(g[0].dtype()).device(g[0].device()));
          Tensor ga, gb;
          if (n.needs_grad(0)) ga = autograd::sum_to(where(c, g[0], zero), sa).to(da);
          if (n.needs_grad(1)) gb = autograd::sum_to(where(c, zero, g[0]), sb).to(db);
          return std::vector<Tensor>{ga, gb};
        });
    node->save(cond);
    autograd::set_history(out, node.get());
  }
  return out;
}

}  // namespace bp
