// Comparing values: tolerances per op and dtype (a few ulps for floats,
// scaled by accumulated terms, loosened only by what a backend declares;
// exact for integers and bool), and the messages that say what differs.
#include <cmath>
#include <iostream>
#include <sstream>

#include "fuzz_internal.h"

namespace bp::conformance::fuzz {

namespace {

using K = OpKind;

// The primitive whose declared tolerance applies to an op.
std::optional<Op> primitive(OpKind k) {
  switch (k) {
    case K::Neg:
    case K::NegI:
      return Op::Neg;
    case K::Abs:
    case K::AbsI:
      return Op::Abs;
    case K::Exp:
    case K::ExpI:
      return Op::Exp;
    case K::Log:
    case K::LogI:
      return Op::Log;
    case K::Sqrt:
    case K::SqrtI:
      return Op::Sqrt;
    case K::Sigmoid:
    case K::SigmoidI:
    case K::Silu:  // sigmoid then a product: sigmoid's tolerance
      return Op::Sigmoid;
    case K::Tanh:
    case K::TanhI:
      return Op::Tanh;
    case K::Erf:
      return Op::Erf;
    case K::Relu:
    case K::ReluI:
      return Op::Relu;
    case K::Clamp:
    case K::ClampI:
      return Op::Clamp;
    case K::Add:
    case K::AddI:
      return Op::Add;
    case K::Sub:
    case K::SubI:
      return Op::Sub;
    case K::Mul:
    case K::MulI:
      return Op::Mul;
    case K::Div:
    case K::DivI:
      return Op::Div;
    case K::Pow:
    case K::PowI:
      return Op::Pow;
    case K::Maximum:
      return Op::Maximum;
    case K::Minimum:
      return Op::Minimum;
    case K::Sum:
    case K::Mean:
      return Op::Sum;
    case K::Prod:
      return Op::Prod;
    case K::Max:
    case K::MaxDim:
      return Op::Max;
    case K::Min:
    case K::MinDim:
      return Op::Min;
    case K::Softmax:
      return Op::Softmax;
    case K::LogSoftmax:
      return Op::LogSoftmax;
    case K::Cumsum:
      return Op::Cumsum;
    case K::Matmul:
    case K::SparseMm:
    case K::Conv2d:  // a matmul of its windows, on the composite path
    case K::ConvTranspose2d:
      return Op::Matmul;
    case K::AvgPool2d:
    case K::BatchNorm:
      return Op::Sum;
    case K::MaxPool2d:
      return Op::Max;
    default:
      return std::nullopt;
  }
}

bool same_value(double got, double want, double allowed) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  return std::fabs(got - want) <= allowed;
}

std::string index_of(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return shape_str(idx);
}

}  // namespace

// --- comparisons -----------------------------------------------------------------

Tolerance tolerance_for(const Env& env, OpKind op, DType dtype) {
  Tolerance t;
  if (dtype == DType::Float32) t = {1e-5, 1e-6};
  if (dtype == DType::Float64) t = {1e-12, 1e-12};
  if (!is_floating(dtype)) return t;
  const auto prim = primitive(op);
  for (const bp_tolerance& d : env.tolerances)
    if (prim && d.op == static_cast<int>(*prim) && d.dtype == static_cast<int>(dtype)) {
      t.rtol = std::max(t.rtol, d.rtol);
      t.atol = std::max(t.atol, d.atol);
    }
  return t;
}

std::string values_str(const std::vector<double>& v, std::size_t limit) {
  std::ostringstream os;
  os.precision(9);
  os << '[';
  for (std::size_t i = 0; i < v.size() && i < limit; ++i) os << (i ? ", " : "") << v[i];
  if (v.size() > limit) os << ", ... (" << v.size() << " values)";
  os << ']';
  return os.str();
}

std::string compare_values(const std::vector<double>& got, const std::vector<double>& want,
                           const std::vector<int64_t>& shape, DType dtype, Tolerance tol,
                           double scale, double magnitude) {
  std::ostringstream os;
  os.precision(9);
  if (got.size() != want.size()) {
    os << got.size() << " values, expected " << want.size();
    return os.str();
  }
  int64_t bad = 0;
  std::ostringstream where;
  where.precision(9);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double allowed = scale * (tol.atol + tol.rtol * std::max(std::fabs(want[i]), magnitude));
    if (same_value(got[i], want[i], allowed)) continue;
    if (++bad <= 3)
      where << "; at " << index_of(static_cast<int64_t>(i), shape) << ": got " << got[i]
            << ", expected " << want[i];
  }
  if (bad == 0) return {};
  os << bad << " of " << got.size() << " elements differ (" << name(dtype) << " "
     << shape_str(shape);
  if (is_floating(dtype))
    os << ", rtol " << tol.rtol << ", atol " << tol.atol
       << (scale > 1 ? " times " + std::to_string(int64_t(scale)) : "");
  else
    os << ", compared exactly";
  os << ")" << where.str() << "; got " << values_str(got) << ", expected " << values_str(want);
  return os.str();
}

void Transcript::add(const std::string& line) {
  lines_.push_back(line);
  if (echo) *echo << "  " << line << std::endl;  // flushed: a crash must not eat it
}

}  // namespace bp::conformance::fuzz
