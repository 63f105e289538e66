// softmax and log_softmax along one dim.
#include <backplane/nn_ops.h>
#include <backplane/ops.h>

#include "../autograd/graph.h"
#include "../internal.h"

namespace bp {

namespace {
Tensor softmax_like(Op op, const char* name, const Tensor& a, int64_t dim) {
  BP_CHECK_TYPE(is_floating(a.dtype()), "[", name, "] needs a floating input, got ",
                detail::describe_tensor(a), "; convert it first with .to(float32)");
  const int64_t d = wrap_dim(dim, a.dim(), name);
  Tensor out = detail::make_empty(a.sizes(), a.dtype(), a);
  if (out.numel() != 0) {  // an empty result still joins the graph below
    bp_attrs attrs = detail::make_attrs();
    attrs.num_ints = 1;
    attrs.ints[0] = a.dim() == 0 ? 0 : d;
    Backend& b = detail::backend_of(a);
    // A 0-d input is treated as one element along a dim of size 1.
    const Tensor in = a.dim() == 0 ? a.reshape({1}) : a;
    const Tensor o1 = a.dim() == 0 ? out.view({1}) : out;
    const bp_tensor i = detail::abi_descriptor(in, b.dl_device_type());
    const bp_tensor o = detail::abi_descriptor(o1, b.dl_device_type());
    call_kernel(op, a.dtype(), a.device(), {&i, 1}, {&o, 1}, attrs);
  }
  if (autograd::needs_grad({&a})) {
    const int64_t rd = a.dim() == 0 ? -1 : d;
    const bool log = op == Op::LogSoftmax;
    auto node = autograd::make_node(
        log ? "LogSoftmaxBackward0" : "SoftmaxBackward0", {&a},
        [rd, log](autograd::FunctionNode& n, std::vector<Tensor>& g) {
          const Tensor y = n.saved(0);
          if (y.dim() == 0) return std::vector<Tensor>{zeros_like(g[0])};
          if (log)  // g - softmax * sum(g)
            return std::vector<Tensor>{g[0].sub(exp(y).mul(g[0].sum({rd}, true)))};
          // y * (g - sum(g * y))
          return std::vector<Tensor>{y.mul(g[0].sub(g[0].mul(y).sum({rd}, true)))};
        });
    node->save(out);
    autograd::set_history(out, node.get());
  }
  return out;
}
}  // namespace

Tensor softmax(const Tensor& a, int64_t dim) {
  return softmax_like(Op::Softmax, "softmax", a, dim);
}
Tensor log_softmax(const Tensor& a, int64_t dim) {
  return softmax_like(Op::LogSoftmax, "log_softmax", a, dim);
}
Tensor softmax(const Tensor& a, int64_t dim, DType dtype) {
  BP_CHECK_TYPE(is_floating(dtype), "[softmax] dtype must be a floating type, got ", dtype);
  return softmax(a.dtype() == dtype ? a : a.to(dtype), dim);
}
Tensor log_softmax(const Tensor& a, int64_t dim, DType dtype) {
  BP_CHECK_TYPE(is_floating(dtype), "[log_softmax] dtype must be a floating type, got ", dtype);
  return log_softmax(a.dtype() == dtype ? a : a.to(dtype), dim);
}
Tensor Tensor::softmax(int64_t dim) const { return bp::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return bp::log_softmax(*this, dim); }

}  // namespace bp
