// Running a resolved op on tensors, and the C++ statement it prints as.
#include <backplane/nn.h>

#include <memory>
#include <sstream>

#include "fuzz_internal.h"

namespace bp::conformance::fuzz {

namespace {
using C = OpClass;
using K = OpKind;
}  // namespace

std::vector<Tensor> run_op(const ResolvedOp& op, Tensor& t, const std::vector<Tensor>& o) {
  auto lhs = [&]() -> const Tensor& { return op.swap ? o[0] : t; };
  auto rhs = [&]() -> const Tensor& { return op.swap ? t : o[0]; };
  auto bin = [&](Tensor (*tt)(const Tensor&, const Tensor&),
                 Tensor (*ts)(const Tensor&, const Scalar&)) {
    return op.scalar_other ? ts(t, op.scalar) : tt(lhs(), rhs());
  };
  switch (op.kind) {
    case K::Neg:
      return {neg(t)};
    case K::Abs:
      return {abs(t)};
    case K::Exp:
      return {exp(t)};
    case K::Log:
      return {log(t)};
    case K::Sqrt:
      return {sqrt(t)};
    case K::Sigmoid:
      return {sigmoid(t)};
    case K::Tanh:
      return {tanh(t)};
    case K::Relu:
      return {relu(t)};
    case K::LogicalNot:
      return {logical_not(t)};
    case K::Clamp:
      return {clamp(t, op.lo, op.hi)};
    case K::Silu:
      return {silu(t)};
    case K::Erf:
      return {erf(t)};
    case K::Add:
      if (op.scalar_other) return {add(t, op.scalar)};
      return {op.has_alpha ? add(lhs(), rhs(), op.alpha) : add(lhs(), rhs())};
    case K::Sub:
      if (op.scalar_other) return {sub(t, op.scalar)};
      return {op.has_alpha ? sub(lhs(), rhs(), op.alpha) : sub(lhs(), rhs())};
    case K::Mul:
      return {bin(mul, mul)};
    case K::Div:
      return {bin(div, div)};
    case K::Maximum:
      return {maximum(lhs(), rhs())};
    case K::Minimum:
      return {minimum(lhs(), rhs())};
    case K::Pow:
      return {bin(pow, pow)};
    case K::Eq:
      return {bin(eq, eq)};
    case K::Ne:
      return {bin(ne, ne)};
    case K::Lt:
      return {bin(lt, lt)};
    case K::Le:
      return {bin(le, le)};
    case K::Gt:
      return {bin(gt, gt)};
    case K::Ge:
      return {bin(ge, ge)};
    case K::LogicalAnd:
      return {logical_and(lhs(), rhs())};
    case K::LogicalOr:
      return {logical_or(lhs(), rhs())};
    case K::Where:
      return {op.swap ? where(o[0], o[1], t) : where(o[0], t, o[1])};
    case K::Sum:
      return {op.all ? sum(t) : sum(t, op.dims, op.keepdim)};
    case K::Mean:
      return {op.all ? mean(t) : mean(t, op.dims, op.keepdim)};
    case K::Prod:
      return {op.all ? prod(t) : prod(t, op.dim, op.keepdim)};
    case K::Max:
      return {max(t)};
    case K::Min:
      return {min(t)};
    case K::Argmax:
      return {op.all ? argmax(t) : argmax(t, op.dim, op.keepdim)};
    case K::Argmin:
      return {op.all ? argmin(t) : argmin(t, op.dim, op.keepdim)};
    case K::MaxDim: {
      auto [v, i] = max(t, op.dim, op.keepdim);
      return {v, i};
    }
    case K::MinDim: {
      auto [v, i] = min(t, op.dim, op.keepdim);
      return {v, i};
    }
    case K::Softmax:
      return {op.with_dtype ? softmax(t, op.dim, op.to_dtype) : softmax(t, op.dim)};
    case K::LogSoftmax:
      return {op.with_dtype ? log_softmax(t, op.dim, op.to_dtype) : log_softmax(t, op.dim)};
    case K::Sort: {
      auto [v, i] = sort(t, op.dim, op.keepdim);
      return {v, i};
    }
    case K::Argsort:
      return {argsort(t, op.dim, op.keepdim)};
    case K::Cumsum:
      return {cumsum(t, op.dim)};
    case K::Matmul:
      return {matmul(t, o[0])};
    case K::SparseMm:
      return {mm(to_sparse(t), o[0])};
    case K::Conv2d:
      return {conv2d(t, o[0], Tensor(), op.dims[1], op.dims[2], 1, op.dims[3])};
    case K::ConvTranspose2d:
      return {
          conv_transpose2d(t, o[0], Tensor(), op.dims[1], op.dims[2], op.dims[1] - 1, op.dims[3])};
    case K::MaxPool2d:
      return {max_pool2d(t, op.dims[0], op.dims[1], op.dims[2])};
    case K::AvgPool2d:
      return {avg_pool2d(t, op.dims[0], op.dims[1], op.dims[2])};
    case K::BatchNorm:
      return {batch_norm(t, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1.0)};
    case K::SgdStep:
    case K::AdamStep: {
      Tensor p = t.detach().clone().requires_grad_();
      std::unique_ptr<optim::Optimizer> opt;
      if (op.kind == K::SgdStep)
        opt = std::make_unique<optim::SGD>(std::vector<Tensor>{p},
                                           optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
      else
        opt = std::make_unique<optim::Adam>(std::vector<Tensor>{p}, optim::AdamOptions{.lr = 0.1});
      for (int i = 0; i < 2; ++i) {
        p.set_grad(o[0].detach());
        opt->step();
      }
      return {p.detach()};
    }
    case K::AddI:
      if (op.scalar_other) return {t.add_(op.scalar)};
      return {op.has_alpha ? t.add_(o[0], op.alpha) : t.add_(o[0])};
    case K::SubI:
      if (op.scalar_other) return {t.sub_(op.scalar)};
      return {op.has_alpha ? t.sub_(o[0], op.alpha) : t.sub_(o[0])};
    case K::MulI:
      return {op.scalar_other ? t.mul_(op.scalar) : t.mul_(o[0])};
    case K::DivI:
      return {op.scalar_other ? t.div_(op.scalar) : t.div_(o[0])};
    case K::FillI:
      return {t.fill_(op.scalar)};
    case K::ZeroI:
      return {t.zero_()};
    case K::ClampI:
      return {t.clamp_(op.lo, op.hi)};
    case K::ReluI:
      return {t.relu_()};
    case K::NegI:
      return {t.neg_()};
    case K::AbsI:
      return {t.abs_()};
    case K::ExpI:
      return {t.exp_()};
    case K::LogI:
      return {t.log_()};
    case K::SqrtI:
      return {t.sqrt_()};
    case K::SigmoidI:
      return {t.sigmoid_()};
    case K::TanhI:
      return {t.tanh_()};
    case K::PowI:
      return {t.pow_(op.scalar)};
    case K::CopyI:
      return {t.copy_(o[0])};
    case K::Contiguous:
      return {t.contiguous()};
    case K::Clone:
      return {t.clone()};
    case K::CloneContiguous:
      return {t.clone(MemoryFormat::Contiguous)};
    case K::ToDtype:
      return {t.to(op.to_dtype)};
    case K::IntResult:
      switch (op.dims[0]) {
        case 0:
          return {argmax(t)};
        case 1:
          return {argmin(t, op.dim, op.keepdim)};
        case 2:
          return {gt(t, 0)};
        case 3:
          return {eq(t, t)};
        case 4:
          return {t.to(DType::Int64)};
        default:
          return {max(t, op.dim, op.keepdim).second};
      }
  }
  return {};
}

std::string op_cpp(const ResolvedOp& op, const std::string& t, const std::vector<std::string>& o,
                   const std::vector<std::string>& outs) {
  std::ostringstream os;
  const std::string out = outs.empty() ? "" : outs[0];
  auto opt = [](const std::optional<Scalar>& s) {
    return s ? scalar_cpp(*s) : std::string("bp::None");
  };
  const std::string lhs = op.swap ? (o.empty() ? t : o[0]) : t;
  const std::string rhs = op.scalar_other ? scalar_cpp(op.scalar)
                          : op.swap       ? t
                                          : (o.empty() ? t : o[0]);
  const std::string name = op.info->name;
  const std::string kd = op.keepdim ? "true" : "false";
  switch (op.info->cls) {
    case C::Unary:
      if (op.kind == K::Clamp)
        os << "auto " << out << " = bp::clamp(" << t << ", " << opt(op.lo) << ", " << opt(op.hi)
           << ");";
      else
        os << "auto " << out << " = bp::" << name << "(" << t << ");";
      break;
    case C::Binary:
      os << "auto " << out << " = bp::" << name << "(" << (op.scalar_other ? t : lhs) << ", " << rhs
         << (op.has_alpha ? ", " + scalar_cpp(op.alpha) : "") << ");";
      break;
    case C::Where:
      os << "auto " << out << " = bp::where(" << o[0] << ", " << (op.swap ? o[1] : t) << ", "
         << (op.swap ? t : o[1]) << ");";
      break;
    case C::Reduce:
      if (op.kind == K::MaxDim || op.kind == K::MinDim) {
        os << "auto [" << outs[0] << ", " << outs[1]
           << "] = bp::" << (op.kind == K::MaxDim ? "max" : "min") << "(" << t << ", " << op.dim
           << ", " << kd << ");";
      } else if (op.kind == K::Sort) {
        os << "auto [" << outs[0] << ", " << outs[1] << "] = bp::sort(" << t << ", " << op.dim
           << ", " << kd << ");";
      } else if (op.kind == K::Argsort) {
        os << "auto " << out << " = bp::argsort(" << t << ", " << op.dim << ", " << kd << ");";
      } else if (op.with_dtype) {
        os << "auto " << out << " = bp::" << name << "(" << t << ", " << op.dim << ", "
           << dtype_enum(op.to_dtype) << ");";
      } else if (op.kind == K::Softmax || op.kind == K::LogSoftmax || op.kind == K::Cumsum) {
        os << "auto " << out << " = bp::" << name << "(" << t << ", " << op.dim << ");";
      } else if (op.all) {
        os << "auto " << out << " = bp::" << name << "(" << t << ");";
      } else if (op.kind == K::Sum || op.kind == K::Mean) {
        os << "auto " << out << " = bp::" << name << "(" << t << ", " << braces(op.dims) << ", "
           << kd << ");";
      } else {
        os << "auto " << out << " = bp::" << name << "(" << t << ", " << op.dim << ", " << kd
           << ");";
      }
      break;
    case C::Matmul:
      if (op.kind == K::SparseMm)
        os << "auto " << out << " = bp::mm(bp::to_sparse(" << t << "), " << o[0] << ");";
      else
        os << "auto " << out << " = bp::matmul(" << t << ", " << o[0] << ");";
      break;
    case C::Nn:
      if (op.kind == K::SgdStep || op.kind == K::AdamStep)
        os << "auto " << out << " = [&] { auto p = " << t << ".detach().clone().requires_grad_(); "
           << (op.kind == K::SgdStep ? "bp::optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9}); "
                                     : "bp::optim::Adam opt({p}, {.lr = 0.1}); ")
           << "for (int i = 0; i < 2; ++i) { p.set_grad(" << o[0] << ".detach()); opt.step(); } "
           << "return p.detach(); }();";
      else if (op.kind == K::BatchNorm)
        os << "auto " << out << " = bp::batch_norm(" << t
           << ", bp::Tensor(), bp::Tensor(), bp::Tensor(), bp::Tensor(), true, 0.1, 1.0);";
      else if (op.kind == K::Conv2d)
        os << "auto " << out << " = bp::conv2d(" << t << ", " << o[0] << ", bp::Tensor(), "
           << op.dims[1] << ", " << op.dims[2] << ", 1, " << op.dims[3] << ");";
      else if (op.kind == K::ConvTranspose2d)
        os << "auto " << out << " = bp::conv_transpose2d(" << t << ", " << o[0]
           << ", bp::Tensor(), " << op.dims[1] << ", " << op.dims[2] << ", " << op.dims[1] - 1
           << ", " << op.dims[3] << ");";
      else
        os << "auto " << out << " = bp::" << name << "(" << t << ", " << op.dims[0] << ", "
           << op.dims[1] << ", " << op.dims[2] << ");";
      break;
    case C::Inplace: {
      const std::string m = name.substr(0, name.size() - 1) + "_";
      if (op.kind == K::ClampI) {
        os << t << ".clamp_(" << opt(op.lo) << ", " << opt(op.hi) << ");";
      } else if (op.kind == K::FillI || op.kind == K::PowI || op.scalar_other) {
        os << t << "." << m << "(" << scalar_cpp(op.scalar) << ");";
      } else if (!o.empty()) {
        os << t << "." << m << "(" << o[0] << (op.has_alpha ? ", " + scalar_cpp(op.alpha) : "")
           << ");";
      } else {
        os << t << "." << m << "();";
      }
      break;
    }
    case C::Read:
      os << "auto " << out << " = " << t;
      if (op.kind == K::Contiguous) os << ".contiguous();";
      if (op.kind == K::Clone) os << ".clone();";
      if (op.kind == K::CloneContiguous) os << ".clone(bp::MemoryFormat::Contiguous);";
      if (op.kind == K::ToDtype) os << ".to(" << dtype_enum(op.to_dtype) << ");";
      break;
    case C::IntResult:
      os << "auto " << out << " = ";
      switch (op.dims[0]) {
        case 0:
          os << "bp::argmax(" << t << ")";
          break;
        case 1:
          os << "bp::argmin(" << t << ", " << op.dim << ", " << kd << ")";
          break;
        case 2:
          os << "bp::gt(" << t << ", 0)";
          break;
        case 3:
          os << "bp::eq(" << t << ", " << t << ")";
          break;
        case 4:
          os << t << ".to(bp::DType::Int64)";
          break;
        default:
          os << "bp::max(" << t << ", " << op.dim << ", " << kd << ").second";
          break;
      }
      os << ";  // must not require grad (AG-1)";
      break;
  }
  return os.str();
}

}  // namespace bp::conformance::fuzz
