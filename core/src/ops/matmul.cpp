// matmul with numpy's rules for 1-D operands and broadcast batch dims.
#include <backplane/ops.h>

#include "../autograd/graph.h"
#include "../internal.h"

namespace bp {

namespace {
Tensor matmul_forward(const Tensor& a_in, const Tensor& b_in, DimVector& out_shape) {
  detail::check_same_device("matmul", a_in, b_in);
  BP_CHECK(a_in.dim() >= 1 && b_in.dim() >= 1, "[matmul] both operands need at least 1 dim, got ",
           detail::describe_tensor(a_in), " and ", detail::describe_tensor(b_in));
  const DType dt = promote_types(a_in.dtype(), b_in.dtype());
  // 1-D operands become a row (left) or a column (right), removed at the end.
  const bool a_vec = a_in.dim() == 1, b_vec = b_in.dim() == 1;
  Tensor a = a_vec ? a_in.unsqueeze(0) : a_in;
  Tensor b = b_vec ? b_in.unsqueeze(1) : b_in;
  if (a.dtype() != dt) a = a.to(dt);
  if (b.dtype() != dt) b = b.to(dt);
  const int64_t m = a.size(-2), k = a.size(-1), k2 = b.size(-2), n = b.size(-1);
  BP_CHECK(k == k2, "[matmul] shapes ", a_in.sizes(), " and ", b_in.sizes(),
           " cannot be multiplied (", k, " != ", k2, ")");
  const DimVector batch_a(IntArrayRef(a.sizes()).first(a.dim() - 2));
  const DimVector batch_b(IntArrayRef(b.sizes()).first(b.dim() - 2));
  DimVector batch = broadcast_shapes(batch_a, batch_b, "matmul");
  DimVector a_shape = batch, b_shape = batch;
  out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  a_shape.push_back(m);
  a_shape.push_back(k);
  b_shape.push_back(k);
  b_shape.push_back(n);
  Tensor out = detail::make_empty(out_shape, dt, a);
  if (out.numel() > 0) {
    if (k == 0) {
      out.zero_();
    } else {
      Backend& be = detail::backend_of(a);
      const int32_t dl = be.dl_device_type();
      const DimVector sa = broadcast_strides(a.sizes(), a.strides(), a_shape);
      const DimVector sb = broadcast_strides(b.sizes(), b.strides(), b_shape);
      const bp_tensor in[2] = {detail::abi_descriptor_as(a, a_shape, sa, dl),
                               detail::abi_descriptor_as(b, b_shape, sb, dl)};
      const bp_tensor o = detail::abi_descriptor(out, dl);
      call_kernel(Op::Matmul, dt, a.device(), in, {&o, 1}, detail::make_attrs());
    }
  }
  if (a_vec || b_vec) {
    DimVector shape = batch;
    if (!a_vec) shape.push_back(m);
    if (!b_vec) shape.push_back(n);
    detail::reshape_fresh(out, std::move(shape));
  }
  return out;
}
}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  DimVector full_out;
  Tensor out;
  {
    NoGradGuard no_grad;
    out = matmul_forward(a_in, b_in, full_out);
  }
  if (autograd::needs_grad({&a_in, &b_in})) {
    // With the 1-D operands as a row / column: gA = G @ B^T, gB = A^T @ G,
    // summed over broadcast batch dims, then back to each input's shape.
    const bool a_vec = a_in.dim() == 1, b_vec = b_in.dim() == 1;
    const DimVector sa(a_in.sizes()), sb(b_in.sizes());
    DimVector sa2 = sa, sb2 = sb;  // as matrices
    if (a_vec) sa2.insert(0, 1);
    if (b_vec) sb2.push_back(1);
    const DType da = a_in.dtype(), db = b_in.dtype();
    // A 2-D operand stored column by column (a transposed matrix: Linear's
    // weight.t()) gets its gradient in the same layout, as PyTorch's mm
    // backward does: (B G^T)^T instead of G B^T. The gradient then reaches
    // the weight through the transpose already row by row, and its
    // accumulator takes it without a transposing copy.
    const auto column_major = [&](const Tensor& t) {
      return a_in.dim() == 2 && b_in.dim() == 2 && t.size(0) > 1 && t.size(1) > 1 &&
             t.stride(0) == 1 && t.stride(1) == t.size(0);
    };
    const bool a_cols = column_major(a_in), b_cols = column_major(b_in);
    auto node = autograd::make_node(
        "MmBackward0", {&a_in, &b_in}, [=](autograd::FunctionNode& n, std::vector<Tensor>& g) {
          const Tensor G = g[0].reshape(full_out);
          Tensor ga, gb;
          if (n.needs_grad(0)) {
            const Tensor B = n.saved(1).reshape(sb2);
            ga = a_cols ? bp::matmul(B, G.transpose(0, 1)).transpose(0, 1)
                        : autograd::sum_to(bp::matmul(G, B.transpose(-1, -2)), sa2).reshape(sa);
            if (ga.dtype() != da) ga = ga.to(da);
          }
          if (n.needs_grad(1)) {
            const Tensor A = n.saved(0).reshape(sa2);
            gb = b_cols ? bp::matmul(G.transpose(0, 1), A).transpose(0, 1)
                        : autograd::sum_to(bp::matmul(A.transpose(-1, -2), G), sb2).reshape(sb);
            if (gb.dtype() != db) gb = gb.to(db);
          }
          return std::vector<Tensor>{ga, gb};
        });
    node->save(b_in.requires_grad() ? a_in : Tensor());
    node->save(a_in.requires_grad() ? b_in : Tensor());
    autograd::set_history(out, node.get());
  }
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  BP_CHECK(a.dim() == 3 && b.dim() == 3, "[bmm] expects two 3-D tensors, got ",
           detail::describe_tensor(a), " and ", detail::describe_tensor(b),
           "; use matmul for other ranks and broadcasting");
  BP_CHECK(a.size(0) == b.size(0), "[bmm] batch sizes differ: ", a.size(0), " and ", b.size(0));
  return matmul(a, b);
}

Tensor Tensor::matmul(const Tensor& other) const { return bp::matmul(*this, other); }

}  // namespace bp
