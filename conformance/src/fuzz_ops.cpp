// The fuzzer's ops: which dtypes each computes in, how an op step resolves
// against the shape and dtype of its primary operand (dims, shapes of the
// other operands, scalars), the errors the contract predicts, and how it
// runs and prints.
#include <algorithm>
#include <sstream>

#include "fuzz_internal.h"

namespace bp::conformance::fuzz {

namespace {

constexpr uint8_t kB = dtype_bit(DType::Bool), kI = dtype_bit(DType::Int32),
                  kL = dtype_bit(DType::Int64), kF = dtype_bit(DType::Float32),
                  kD = dtype_bit(DType::Float64);
constexpr uint8_t kAll = kB | kI | kL | kF | kD, kNum = kI | kL | kF | kD, kFloat = kF | kD;

using C = OpClass;
using K = OpKind;
// Indexed by OpKind. `dtypes`: the dtypes the op computes in (its kernels'
// dtypes as the contract lists them; bool arithmetic is left out).
const OpInfo kOps[kNumOpKinds] = {
    {K::Neg, "neg", C::Unary, kNum, true},
    {K::Abs, "abs", C::Unary, kNum, true},
    {K::Exp, "exp", C::Unary, kFloat, true},
    {K::Log, "log", C::Unary, kFloat, true},
    {K::Sqrt, "sqrt", C::Unary, kFloat, true},
    {K::Sigmoid, "sigmoid", C::Unary, kFloat, true},
    {K::Tanh, "tanh", C::Unary, kFloat, true},
    {K::Relu, "relu", C::Unary, kNum, true},
    {K::LogicalNot, "logical_not", C::Unary, kAll, false},
    {K::Clamp, "clamp", C::Unary, kNum, true},
    {K::Silu, "silu", C::Unary, kFloat, true},
    {K::Erf, "erf", C::Unary, kFloat, true},
    {K::Add, "add", C::Binary, kNum, true},
    {K::Sub, "sub", C::Binary, kNum, true},
    {K::Mul, "mul", C::Binary, kAll, true},
    {K::Div, "div", C::Binary, kFloat, true},
    {K::Maximum, "maximum", C::Binary, kAll, true},
    {K::Minimum, "minimum", C::Binary, kAll, true},
    {K::Pow, "pow", C::Binary, kNum, true},
    {K::Eq, "eq", C::Binary, kAll, false},
    {K::Ne, "ne", C::Binary, kAll, false},
    {K::Lt, "lt", C::Binary, kAll, false},
    {K::Le, "le", C::Binary, kAll, false},
    {K::Gt, "gt", C::Binary, kAll, false},
    {K::Ge, "ge", C::Binary, kAll, false},
    {K::LogicalAnd, "logical_and", C::Binary, kAll, false},
    {K::LogicalOr, "logical_or", C::Binary, kAll, false},
    {K::Where, "where", C::Where, kAll, true},
    {K::Sum, "sum", C::Reduce, kAll, true},
    {K::Mean, "mean", C::Reduce, kFloat, true},
    {K::Prod, "prod", C::Reduce, kAll, true},
    {K::Max, "max", C::Reduce, kAll, true},
    {K::Min, "min", C::Reduce, kAll, true},
    {K::Argmax, "argmax", C::Reduce, kAll, false},
    {K::Argmin, "argmin", C::Reduce, kAll, false},
    {K::MaxDim, "max(dim)", C::Reduce, kAll, true},
    {K::MinDim, "min(dim)", C::Reduce, kAll, true},
    {K::Softmax, "softmax", C::Reduce, kFloat, true},
    {K::LogSoftmax, "log_softmax", C::Reduce, kFloat, true},
    {K::Sort, "sort", C::Reduce, kAll, false},  // ties make it non-smooth
    {K::Argsort, "argsort", C::Reduce, kAll, false},
    {K::Cumsum, "cumsum", C::Reduce, kAll, true},
    {K::Matmul, "matmul", C::Matmul, kFloat, true},
    // Not in grad chains: to_sparse drops exact zeros, whose gradient
    // matmul's finite differences would still see.
    {K::SparseMm, "mm(to_sparse)", C::Matmul, kFloat, false},
    {K::Conv2d, "conv2d", C::Nn, kFloat, true},
    {K::ConvTranspose2d, "conv_transpose2d", C::Nn, kFloat, true},
    {K::MaxPool2d, "max_pool2d", C::Nn, kFloat, false},  // ties make it non-smooth
    {K::AvgPool2d, "avg_pool2d", C::Nn, kFloat, true},
    {K::BatchNorm, "batch_norm", C::Nn, kFloat, true},
    {K::SgdStep, "sgd_step", C::Nn, kFloat, false},
    {K::AdamStep, "adam_step", C::Nn, kFloat, false},
    {K::AddI, "add_", C::Inplace, kNum, true},
    {K::SubI, "sub_", C::Inplace, kNum, true},
    {K::MulI, "mul_", C::Inplace, kAll, true},
    {K::DivI, "div_", C::Inplace, kFloat, true},
    {K::FillI, "fill_", C::Inplace, kAll, true},
    {K::ZeroI, "zero_", C::Inplace, kAll, true},
    {K::ClampI, "clamp_", C::Inplace, kNum, true},
    {K::ReluI, "relu_", C::Inplace, kNum, true},
    {K::NegI, "neg_", C::Inplace, kNum, true},
    {K::AbsI, "abs_", C::Inplace, kNum, true},
    {K::ExpI, "exp_", C::Inplace, kFloat, true},
    {K::LogI, "log_", C::Inplace, kFloat, true},
    {K::SqrtI, "sqrt_", C::Inplace, kFloat, true},
    {K::SigmoidI, "sigmoid_", C::Inplace, kFloat, true},
    {K::TanhI, "tanh_", C::Inplace, kFloat, true},
    {K::PowI, "pow_", C::Inplace, kNum, true},
    {K::CopyI, "copy_", C::Inplace, kAll, true},
    {K::Contiguous, "contiguous", C::Read, kAll, false},
    {K::Clone, "clone", C::Read, kAll, false},
    {K::CloneContiguous, "clone(Contiguous)", C::Read, kAll, false},
    {K::ToDtype, "to", C::Read, kAll, false},
    {K::IntResult, "integer result", C::IntResult, kAll, false},
};

int cat(DType d) { return d == DType::Bool ? 0 : is_integral(d) ? 1 : 2; }
int cat(const Scalar& s) { return s.is_bool() ? 0 : s.is_floating() ? 2 : 1; }

// PyTorch's promotion, written out: the higher category wins; within one,
// the wider type.
DType promote(DType a, DType b) {
  if (cat(a) != cat(b)) return cat(a) > cat(b) ? a : b;
  return itemsize(a) >= itemsize(b) ? a : b;
}

// The dtype a scalar takes next to a tensor of `t` (a higher category gives
// the category's default: int64 or float32).
DType scalar_dtype(DType t, const Scalar& s) {
  if (cat(s) <= cat(t)) return t;
  return s.is_floating() ? DType::Float32 : DType::Int64;
}

// The dtype of an op on operands (dtype, is 0-d): a 0-d operand decides only
// when of a higher category than every dimensioned one.
DType result_dtype(const std::vector<std::pair<DType, bool>>& ops) {
  std::optional<DType> dim, zero;
  for (const auto& [d, is0d] : ops) {
    std::optional<DType>& slot = is0d ? zero : dim;
    slot = slot ? promote(*slot, d) : d;
  }
  if (!dim) return *zero;
  if (!zero || cat(*zero) <= cat(*dim)) return *dim;
  return promote(*dim, *zero);
}

bool floating_op(OpKind k) {
  switch (k) {
    case K::Exp:
    case K::Log:
    case K::Sqrt:
    case K::Sigmoid:
    case K::Tanh:
    case K::Erf:
    case K::ExpI:
    case K::LogI:
    case K::SqrtI:
    case K::SigmoidI:
    case K::TanhI:
      return true;
    default:
      return false;
  }
}

Scalar draw_scalar(const ValuesSpec& v, bool exponent) {
  Rng g(v.seed);
  if (v.dtype == DType::Bool) return Scalar(g.chance(0.5));
  if (is_integral(v.dtype)) return Scalar(exponent ? g.uniform_int(0, 3) : g.uniform_int(-4, 4));
  if (exponent) return Scalar(g.pick(std::vector<double>{0, 0.5, 1, 2, 3, -1, 1.5}));
  return Scalar(static_cast<double>(g.uniform_int(-10, 10)) / 4);
}

std::vector<int64_t> reduce_dims(uint64_t seed, int64_t r, int64_t& picked_mask) {
  Rng g(seed);
  std::vector<int64_t> dims;
  picked_mask = 0;
  if (r == 0) {
    if (g.chance(0.5)) dims.push_back(g.chance(0.5) ? 0 : -1);
    return dims;
  }
  std::vector<int64_t> order(static_cast<std::size_t>(r));
  for (int64_t d = 0; d < r; ++d) order[d] = d;
  for (int64_t i = r - 1; i > 0; --i) std::swap(order[i], order[g.uniform_int(0, i)]);
  const int64_t k = g.uniform_int(1, std::min<int64_t>(r, 3));
  for (int64_t i = 0; i < k; ++i) {
    picked_mask |= int64_t{1} << order[i];
    dims.push_back(g.chance(0.3) ? order[i] - r : order[i]);
  }
  return dims;
}

}  // namespace

const OpInfo& op_info(OpKind kind) { return kOps[static_cast<int>(kind)]; }

int result_category(const ResolvedOp& op, DType self, const std::vector<OperandPlan>& others) {
  if (floating_op(op.kind) || op.kind == K::DivI) return 2;
  int c = cat(self);
  if (op.kind == K::ClampI) {
    if (op.lo) c = std::max(c, cat(*op.lo));
    if (op.hi) c = std::max(c, cat(*op.hi));
  } else if (op.kind == K::PowI ||
             ((op.kind == K::AddI || op.kind == K::SubI || op.kind == K::MulI) &&
              op.scalar_other)) {
    c = std::max(c, cat(op.scalar));
  } else if (op.kind == K::AddI || op.kind == K::SubI || op.kind == K::MulI) {
    for (const OperandPlan& o : others) c = std::max(c, cat(o.dtype));
  }
  return c;
}

ResolvedOp resolve_op(const OpStep& step, const PrimaryInfo& p) {
  ResolvedOp op;
  op.kind = step.kind;
  op.info = &op_info(step.kind);
  const std::vector<int64_t>& sizes = p.layout.sizes;
  const int64_t r = static_cast<int64_t>(sizes.size());
  const int64_t n = numel(sizes);
  Rng g(step.seed);
  auto skip = [&] {
    op.skip = true;
    return op;
  };
  auto operand = [&](std::size_t i) -> const Operand& { return step.operands.at(i); };
  const bool inplace = op.info->cls == C::Inplace;
  const int64_t d = r ? ((step.p[0] % r) + r) % r : 0;
  op.dim = r ? (g.chance(0.3) ? d - r : d) : (g.chance(0.5) ? 0 : -1);
  op.keepdim = step.p[1] & 1;
  DType compute = p.dtype;

  switch (op.info->cls) {
    case C::Unary:
    case C::Inplace:
      if (op.kind == K::Clamp || op.kind == K::ClampI) {
        const int mode = static_cast<int>(g.uniform_int(0, 2));
        const bool float_bounds = is_floating(p.dtype) || g.chance(0.15);
        auto bound = [&] {
          return float_bounds ? Scalar(static_cast<double>(g.uniform_int(-8, 8)) / 4)
                              : Scalar(g.uniform_int(-5, 5));
        };
        if (mode != 1) op.lo = bound();
        if (mode != 0) op.hi = bound();
        if (op.lo) compute = scalar_dtype(compute, *op.lo);
        if (op.hi) compute = scalar_dtype(compute, *op.hi);
      }
      if (op.kind == K::PowI || op.kind == K::FillI ||
          ((op.kind == K::AddI || op.kind == K::SubI || op.kind == K::MulI || op.kind == K::DivI) &&
           operand(0).source == Source::Scalar)) {
        op.scalar_other = op.kind != K::FillI;
        op.scalar = draw_scalar(operand(0).values, op.kind == K::PowI);
        if (p.grad && op.kind == K::DivI && op.scalar.to_double() == 0) op.scalar = Scalar(2);
        if (p.grad && op.kind == K::PowI && op.scalar.is_floating())
          op.scalar =
              Scalar(static_cast<int64_t>(op.scalar.to_double() < 0 ? 2 : op.scalar.to_double()));
        if (op.kind != K::FillI) compute = scalar_dtype(compute, op.scalar);
      } else if (op.kind == K::AddI || op.kind == K::SubI || op.kind == K::MulI ||
                 op.kind == K::DivI || op.kind == K::CopyI) {
        // One in eight: an operand whose shape self cannot take (IP-4).
        const uint64_t seed = operand(0).shape_seed;
        op.operands.push_back(plan_operand(
            operand(0),
            (seed & 7) == 0 ? grown_shape(sizes, seed) : related_shape(sizes, seed, false), p));
        const OperandPlan& o = op.operands[0];
        if (op.kind != K::CopyI)
          compute = result_dtype({{p.dtype, r == 0}, {o.dtype, o.shape.empty()}});
        // x.mul_(x) saves x and then changes it: backward must refuse (as PyTorch does).
        if (p.grad && o.source == Source::Self && (op.kind == K::MulI || op.kind == K::DivI))
          return skip();
        // NaN or inf copied into an integer is undefined.
        if (op.kind == K::CopyI && o.source == Source::Fresh && cat(o.dtype) > cat(p.dtype) &&
            o.values.kind == ValueKind::Special)
          op.operands[0].values.kind = ValueKind::Random;
        const auto b = broadcast(sizes, o.shape);
        if (!b || *b != sizes)
          op.error = "the other operand's shape " + shape_str(o.shape) +
                     " does not broadcast to self's " + shape_str(sizes) + " (IP-4)";
      }
      if ((op.kind == K::AddI || op.kind == K::SubI) && !op.scalar_other && step.p[2] % 3 == 1) {
        op.has_alpha = true;
        op.alpha = cat(compute) == 2 ? Scalar(g.pick(std::vector<double>{0.5, -1.5, 2}))
                                     : Scalar(g.uniform_int(-2, 3));
      }
      if (floating_op(op.kind)) compute = is_floating(p.dtype) ? p.dtype : DType::Float32;
      op.shift = p.grad && (op.kind == K::Log || op.kind == K::Sqrt || op.kind == K::LogI ||
                            op.kind == K::SqrtI);
      if (op.kind == K::DivI) compute = cat(compute) == 2 ? compute : DType::Float32;
      if (inplace) {
        if (op.error.empty() && result_category(op, p.dtype, op.operands) > cat(p.dtype))
          op.error = "a result of a higher category than self's " + std::string(name(p.dtype)) +
                     " cannot be written in place (IP-5)";
        const bool has_bool = p.dtype == DType::Bool ||
                              (!op.operands.empty() && op.operands[0].dtype == DType::Bool) ||
                              (op.scalar_other && op.scalar.is_bool());
        // PyTorch refuses subtraction with bool operands; the contract is silent.
        if (op.kind == K::SubI && has_bool) return skip();
        if (op.error.empty() && !(op.info->dtypes & dtype_bit(compute))) return skip();
        if (p.grad && !op.error.empty()) return skip();
      } else if (!(op.info->dtypes & dtype_bit(compute))) {
        return skip();
      }
      break;
    case C::Binary: {
      const Operand& o = operand(0);
      if (o.source == Source::Scalar && op.kind != K::Maximum && op.kind != K::Minimum &&
          op.kind != K::LogicalAnd && op.kind != K::LogicalOr) {
        op.scalar_other = true;
        op.scalar = draw_scalar(o.values, op.kind == K::Pow);
        if (p.grad && op.kind == K::Div && op.scalar.to_double() == 0) op.scalar = Scalar(2);
        if (p.grad && op.kind == K::Pow && op.scalar.is_floating())
          op.scalar =
              Scalar(static_cast<int64_t>(op.scalar.to_double() < 0 ? 2 : op.scalar.to_double()));
        compute = scalar_dtype(p.dtype, op.scalar);
        if (op.kind == K::Sub && (p.dtype == DType::Bool || op.scalar.is_bool())) return skip();
      } else {
        Operand spec = o;
        if (spec.source == Source::Scalar) spec.source = Source::Fresh;
        if (p.grad && op.kind == K::Sub && spec.source == Source::Self) spec.source = Source::Fresh;
        if (p.grad && op.kind == K::Pow) return skip();  // tensor exponents need positive bases
        op.operands.push_back(plan_operand(spec, related_shape(sizes, spec.shape_seed, true), p));
        const OperandPlan& q = op.operands[0];
        op.swap = (step.p[2] & 1) && !(p.grad && op.kind == K::Div);
        if ((op.kind == K::Add || op.kind == K::Sub) && step.p[2] % 3 == 1) op.has_alpha = true;
        compute = result_dtype({{p.dtype, r == 0}, {q.dtype, q.shape.empty()}});
        if (op.kind == K::Sub && (p.dtype == DType::Bool || q.dtype == DType::Bool)) return skip();
        if (op.kind == K::Pow && !is_floating(compute)) {
          // Integers to negative powers are an error: exponents from [0, 3].
          if (op.swap || q.source != Source::Fresh) return skip();
          op.operands[0].values.domain = Domain::Small;
        }
      }
      if (op.kind == K::Div) compute = cat(compute) == 2 ? compute : DType::Float32;
      if (op.has_alpha)
        op.alpha = cat(compute) == 2 ? Scalar(g.pick(std::vector<double>{0.5, -1.5, 2}))
                                     : Scalar(g.uniform_int(-2, 3));
      if (!(op.info->dtypes & dtype_bit(compute))) return skip();
      break;
    }
    case C::Where: {
      Operand cond = operand(0), other = operand(1);
      cond.source = Source::Fresh;
      cond.values.dtype = DType::Bool;
      if (other.source == Source::Scalar) other.source = Source::Fresh;
      // Only the condition may grow the shape: the three must broadcast together.
      op.operands.push_back(plan_operand(cond, related_shape(sizes, cond.shape_seed, true), p));
      op.operands.push_back(plan_operand(other, related_shape(sizes, other.shape_seed, false), p));
      op.operands[0].leaf = false;
      op.swap = step.p[2] & 1;
      break;
    }
    case C::Reduce: {
      const bool softmax = op.kind == K::Softmax || op.kind == K::LogSoftmax;
      // softmax(x, dim, dtype) converts x first (any dtype) and computes in
      // dtype; not in grad chains, whose float64 differences a float32
      // result would swamp.
      if (softmax && !p.grad && step.p[2] % 3 == 0) {
        op.with_dtype = true;
        op.to_dtype = p.dtype == DType::Float32 ? DType::Float64 : DType::Float32;
      }
      const bool float_only = op.kind == K::Mean || (softmax && !op.with_dtype);
      if (float_only && !is_floating(p.dtype)) return skip();
      int64_t mask = 0;
      switch (op.kind) {
        case K::Sum:
        case K::Mean:
          op.all = step.p[2] % 3 == 0;
          if (!op.all) op.dims = reduce_dims(step.seed, r, mask);
          if (op.all || op.dims.empty()) mask = (int64_t{1} << r) - 1;
          break;
        case K::Prod:
          op.all = step.p[2] % 2 == 0;
          mask = op.all ? (int64_t{1} << r) - 1 : (r ? int64_t{1} << d : 0);
          break;
        case K::Max:
        case K::Min:
          op.all = true;
          mask = (int64_t{1} << r) - 1;
          if (n == 0) op.error = "max/min of an empty tensor without a dim";
          break;
        case K::Argmax:
        case K::Argmin:
          op.all = step.p[2] % 2 == 0;
          mask = op.all ? (int64_t{1} << r) - 1 : (r ? int64_t{1} << d : 0);
          if (n == 0 && (op.all || (r && sizes[d] == 0)))
            op.error = "argmax/argmin over no elements";
          break;
        default:  // MaxDim, MinDim, Softmax, LogSoftmax, Sort, Argsort, Cumsum: one dim
          mask = r ? int64_t{1} << d : 0;
          if ((op.kind == K::MaxDim || op.kind == K::MinDim) && r && sizes[d] == 0)
            op.error = "max/min over a dim of size 0";
      }
      for (int64_t k = 0; k < r; ++k)
        if (mask >> k & 1) op.terms *= std::max<int64_t>(sizes[k], 1);
      op.accumulates = op.kind == K::Sum || op.kind == K::Mean || op.kind == K::Cumsum;
      break;
    }
    case C::Matmul: {
      if (r == 0 || (op.kind == K::SparseMm && r != 2)) return skip();
      Operand spec = operand(0);
      if (spec.source != Source::Fresh) spec.source = Source::Fresh;
      const int64_t k = sizes.back(), cols = g.chance(0.08) ? 0 : g.uniform_int(1, 4);
      std::vector<int64_t> shape;
      const int mode = op.kind == K::SparseMm ? 1 : static_cast<int>(g.uniform_int(0, 3));
      if (mode == 0) {
        shape = {k};
      } else if (mode == 1 || r == 1) {
        shape = {k, cols};
        if (r == 1 && mode >= 2) shape.insert(shape.begin(), g.uniform_int(1, 3));
      } else {
        std::vector<int64_t> batch(sizes.begin(), sizes.end() - 2);
        batch = related_shape(batch, spec.shape_seed, true);
        if (batch.size() > static_cast<std::size_t>(kMaxDims - 2)) batch.erase(batch.begin());
        shape = batch;
        shape.push_back(k);
        shape.push_back(cols);
      }
      op.operands.push_back(plan_operand(spec, shape, p));
      compute = promote(p.dtype, op.operands[0].dtype);
      if (!is_floating(compute)) return skip();
      op.terms = std::max<int64_t>(k, 1);
      op.accumulates = true;
      break;
    }
    case C::Nn: {
      if (op.kind == K::SgdStep || op.kind == K::AdamStep) {
        if (!is_floating(p.dtype)) return skip();
        Operand spec = operand(0);
        spec.source = Source::Fresh;
        spec.values.dtype = p.dtype;
        op.operands.push_back(plan_operand(spec, sizes, p));
        op.operands[0].dtype = op.operands[0].values.dtype = p.dtype;
        break;
      }
      if (op.kind == K::BatchNorm) {
        // Batch statistics over all dims but 1; eps 1 keeps a channel of
        // (nearly) equal values from amplifying rounding differences.
        if (r < 2 || !is_floating(p.dtype)) return skip();
        int64_t count = 1;
        for (int d = 0; d < r; ++d) count *= d == 1 ? 1 : sizes[static_cast<std::size_t>(d)];
        if (count * sizes[1] > 0 && count <= 1)
          op.error = "one value per channel in training (NN-4)";
        op.terms = std::max<int64_t>(count, 1);
        op.accumulates = true;
        if (p.grad && !op.error.empty()) return skip();
        break;
      }
      // dims: kernel, stride, padding (at most half the kernel, as pooling
      // requires), and conv2d's groups.
      if (r != 4 || !is_floating(p.dtype)) return skip();
      const int64_t k = 1 + step.p[0] % 3, s = 1 + step.p[1],
                    pad = std::min<int64_t>(step.p[2] % 2, k / 2);
      op.dims = {k, s, pad};
      if (op.kind == K::ConvTranspose2d) {
        // The output: (in - 1) * s - 2 * pad + k + (s - 1) per dim.
        if (sizes[1] == 0)
          op.error = "a weight with no input channels (NN-4)";
        else if (sizes[0] > 0 && sizes[2] * sizes[3] == 0)
          op.error = "an input with no elements per channel (NN-4)";
        else if ((sizes[2] - 1) * s - 2 * pad + k + s - 1 <= 0 ||
                 (sizes[3] - 1) * s - 2 * pad + k + s - 1 <= 0)
          op.error = "an output of no elements per channel (NN-4)";
      } else if (sizes[2] + 2 * pad < k || sizes[3] + 2 * pad < k) {
        op.error = "a kernel larger than the padded input (NN-4)";
      }
      if (op.kind == K::Conv2d || op.kind == K::ConvTranspose2d) {
        const int64_t c = sizes[1], groups = c > 0 && c % 2 == 0 && step.p[2] >= 3 ? 2 : 1;
        op.dims.push_back(groups);
        Operand spec = operand(0);
        spec.source = Source::Fresh;
        spec.values.dtype = p.dtype;
        const int64_t per_group = 1 + step.p[0] % 2;  // output channels per group
        op.operands.push_back(plan_operand(
            spec,
            op.kind == K::Conv2d ? std::vector<int64_t>{groups * per_group, c / groups, k, k}
                                 : std::vector<int64_t>{c, per_group, k, k},
            p));
        op.operands[0].dtype = op.operands[0].values.dtype = p.dtype;
        op.terms = std::max<int64_t>(c / groups * k * k, 1);
        op.accumulates = true;
      } else if (op.kind == K::AvgPool2d) {
        op.terms = k * k;
        op.accumulates = true;
      }
      if (p.grad && !op.error.empty()) return skip();
      break;
    }
    case C::Read:
      // The dtypes of ABI 1 (enum values 0 to 4): the oracle models their
      // arithmetic; the narrow ones have their own conformance cases.
      op.to_dtype = static_cast<DType>(g.uniform_int(0, BP_DTYPE_FLOAT64));
      break;
    case C::IntResult:
      op.dims = {step.p[2] % 6};  // which integer-result op
      if (n == 0 && (op.dims[0] <= 1 || op.dims[0] == 5)) return skip();
      break;
  }
  return op;
}

}  // namespace bp::conformance::fuzz
