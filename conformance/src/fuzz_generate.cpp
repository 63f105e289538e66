// Generation: case K of seed S drawn from a generator seeded with (S, K)
// alone, and the tensors a case describes built on a device with the C++
// that builds them.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "case_util.h"
#include "fuzz_internal.h"

namespace bp::conformance::fuzz {

namespace {

using K = OpKind;

// --skip names beyond kinds, ops and views.
const std::vector<std::pair<std::string, std::string>> kFeatures = {
    {"probe", "view steps with arguments the contract rejects (they must raise)"},
    {"overflow", "probes whose sizes overflow int64 (expand, as_strided)"},
    {"rank9", "probes that would make a 9th dim (unsqueeze, unfold, expand)"},
    {"zero-size", "dims of size 0 in base shapes"},
    {"special", "NaN, inf, -0 and huge values in floating tensors"},
    {"alias", "operands that are views of the primary operand's memory"},
    {"grad-overlap", "expand, unfold and as_strided in gradient chains"},
    {"grad-zeros", "exact zeros in the leaves of smooth gradient chains (prod, pow)"},
    {"nan-grad", "the NaN rule of max/min gradients"},
    {"int-grad", "the check that integer and bool results never require grad"},
};

template <class T>
struct Weighted {
  T value;
  int weight;
  std::string_view name;
};

// A weighted pick among the entries `config` does not skip; nullopt when all are.
template <class T>
std::optional<T> pick(Rng& g, const std::vector<Weighted<T>>& items, const GenConfig& config) {
  int total = 0;
  for (const auto& i : items)
    if (!config.skipped(i.name)) total += i.weight;
  if (total == 0) return std::nullopt;
  int64_t at = g.uniform_int(0, total - 1);
  for (const auto& i : items) {
    if (config.skipped(i.name)) continue;
    if ((at -= i.weight) < 0) return i.value;
  }
  return std::nullopt;
}

std::vector<int64_t> random_case_shape(Rng& g, const GenConfig& config, int64_t max_numel) {
  static const int rank_weights[kMaxDims + 1] = {6, 12, 16, 16, 12, 8, 5, 3, 3};
  int64_t at = g.uniform_int(0, 80);
  int rank = 0;
  while (rank < kMaxDims && (at -= rank_weights[rank]) >= 0) ++rank;
  std::vector<int64_t> shape(static_cast<std::size_t>(rank));
  for (int64_t& n : shape)
    n = !config.skipped("zero-size") && g.chance(0.03) ? 0 : g.uniform_int(1, 5);
  for (;;) {
    int64_t n = 1;
    for (int64_t s : shape) n *= std::max<int64_t>(s, 1);
    if (n <= max_numel) break;
    --*std::max_element(shape.begin(), shape.end());
  }
  return shape;
}

DType random_dtype(Rng& g) {
  static const DType ds[] = {DType::Float32, DType::Float32, DType::Float32, DType::Float64,
                             DType::Int32,   DType::Int64,   DType::Bool};
  return ds[g.uniform_int(0, 6)];
}

ValuesSpec random_values_spec(Rng& g, DType dtype, Domain domain, const GenConfig& config) {
  ValuesSpec v{dtype, domain, ValueKind::Random, g.next()};
  const double u = g.uniform(0, 1);
  if (u < 0.08) v.kind = ValueKind::Iota;
  if (u > 0.9 && is_floating(dtype) && !config.skipped("special")) v.kind = ValueKind::Special;
  return v;
}

ViewStep random_view(Rng& g, const GenConfig& config, bool grad, bool allow_probe) {
  static const std::vector<Weighted<ViewKind>> kinds = {
      {ViewKind::Narrow, 3, "narrow"},
      {ViewKind::Slice, 3, "slice"},
      {ViewKind::Select, 2, "select"},
      {ViewKind::Transpose, 3, "transpose"},
      {ViewKind::T, 1, "t"},
      {ViewKind::Permute, 2, "permute"},
      {ViewKind::Expand, 2, "expand"},
      {ViewKind::Unfold, 2, "unfold"},
      {ViewKind::AsStrided, 1, "as_strided"},
      {ViewKind::Squeeze, 1, "squeeze"},
      {ViewKind::SqueezeDim, 1, "squeeze(dim)"},
      {ViewKind::Unsqueeze, 2, "unsqueeze"},
      {ViewKind::Diagonal, 1, "diagonal"},
      {ViewKind::View, 2, "view"},
      {ViewKind::Reshape, 1, "reshape"},
      {ViewKind::Flatten, 1, "flatten"},
  };
  ViewStep s;
  GenConfig c = config;
  if (grad && config.skipped("grad-overlap")) c.skip.insert({"expand", "unfold", "as_strided"});
  s.kind = pick(g, kinds, c).value_or(ViewKind::Transpose);
  s.p = {g.uniform_int(0, 7), g.uniform_int(-6, 6), g.uniform_int(0, 5)};
  s.seed = g.next();
  switch (s.kind) {
    case ViewKind::Narrow:
      s.p[1] = g.uniform_int(-4, 5);
      break;
    case ViewKind::Slice:
      s.p[2] = g.uniform_int(-6, 8);
      break;
    case ViewKind::Unfold:
      s.p = {s.p[0], g.uniform_int(0, 4), g.uniform_int(1, 3)};
      break;
    case ViewKind::Diagonal:
      s.p[2] = g.uniform_int(-3, 3);
      break;
    default:
      break;
  }
  s.probe = allow_probe && !config.skipped("probe") && g.chance(0.03);
  const bool rank9 =
      s.kind == ViewKind::Unsqueeze || s.kind == ViewKind::Unfold || s.kind == ViewKind::Expand;
  const bool overflow = s.kind == ViewKind::Expand || s.kind == ViewKind::AsStrided;
  if (s.probe && ((rank9 && config.skipped("rank9")) || (overflow && config.skipped("overflow"))))
    s.probe = false;
  return s;
}

std::vector<ViewStep> random_views(Rng& g, const GenConfig& config, int max, bool grad) {
  std::vector<ViewStep> v;
  const int n = static_cast<int>(g.uniform_int(0, max));
  for (int i = 0; i < n; ++i) {
    v.push_back(random_view(g, config, grad, !grad));
    if (v.back().probe) break;  // nothing follows an error
  }
  return v;
}

Operand random_operand(Rng& g, const GenConfig& config, DType primary, bool grad, Domain domain) {
  Operand o;
  const double u = g.uniform(0, 1);
  o.source = u < 0.6    ? Source::Fresh
             : u < 0.7  ? Source::Self
             : u < 0.85 ? Source::Alias
                        : Source::Scalar;
  if (o.source == Source::Alias && (grad || config.skipped("alias"))) o.source = Source::Fresh;
  const DType dtype = grad ? DType::Float64 : g.chance(0.7) ? primary : random_dtype(g);
  o.shape_seed = g.next();
  o.values = random_values_spec(g, dtype, domain, config);
  if (o.source == Source::Scalar) {
    const double k = g.uniform(0, 1);
    o.values.dtype = k < 0.1 && !grad ? DType::Bool : k < 0.5 ? DType::Int64 : DType::Float64;
  }
  if (grad) o.values.kind = ValueKind::Random;
  o.layout_seed = g.next();
  o.strided = g.chance(0.5);
  o.leaf = grad && g.chance(0.6);
  return o;
}

std::vector<Weighted<OpKind>> ops_of(OpClass a, OpClass b = OpClass::IntResult) {
  std::vector<Weighted<OpKind>> out;
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpInfo& i = op_info(static_cast<OpKind>(k));
    if ((i.cls == a || i.cls == b) && i.cls != OpClass::IntResult)
      out.push_back({i.kind, i.cls == OpClass::Reduce || i.cls == OpClass::Binary ? 2 : 1, i.name});
  }
  return out;
}

// The value domain an op's operands come from, so that most results are
// numbers (and products neither overflow nor vanish).
Domain domain_for(OpKind k, bool divisor) {
  if (divisor) return Domain::NonZero;
  switch (k) {
    case K::Log:
    case K::Sqrt:
    case K::LogI:
    case K::SqrtI:
      return Domain::Positive;
    case K::Prod:
      return Domain::NearOne;
    default:
      return Domain::Any;
  }
}

OpStep random_op(Rng& g, const GenConfig& config, OpKind kind, DType primary, bool grad) {
  OpStep op;
  op.kind = kind;
  op.p = {g.uniform_int(0, 7), g.uniform_int(0, 1), g.uniform_int(0, 5)};
  op.seed = g.next();
  const OpInfo& info = op_info(kind);
  const bool divides = kind == K::Div || kind == K::DivI;
  // In grad chains every operand keeps away from 0: exact zeros make ties
  // (max, minimum) and kinks (relu, abs) where differences mean nothing.
  auto add = [&](Domain d) {
    op.operands.push_back(
        random_operand(g, config, primary, grad, grad && d == Domain::Any ? Domain::NearOne : d));
  };
  switch (info.cls) {
    case OpClass::Binary:
    case OpClass::Matmul:
      add(domain_for(kind, divides));
      break;
    case OpClass::Nn:
      // conv2d's weight; the gradient of an optimiser step
      if (kind == K::Conv2d || kind == K::ConvTranspose2d || kind == K::SgdStep ||
          kind == K::AdamStep)
        add(Domain::Any);
      break;
    case OpClass::Where:
      add(Domain::Any);
      add(Domain::Any);
      break;
    case OpClass::Inplace:
      if (kind == K::FillI || kind == K::PowI || kind == K::AddI || kind == K::SubI ||
          kind == K::MulI || kind == K::DivI || kind == K::CopyI) {
        add(domain_for(kind, divides));
        if (kind == K::FillI || kind == K::PowI) op.operands[0].source = Source::Scalar;
        if (kind == K::CopyI && op.operands[0].source == Source::Scalar)
          op.operands[0].source = Source::Fresh;
        if (divides && op.operands[0].source == Source::Self && grad)
          op.operands[0].source = Source::Fresh;
      }
      break;
    default:
      break;
  }
  return op;
}

bool smooth(OpKind k) {
  switch (k) {
    case K::Abs:
    case K::Relu:
    case K::Clamp:
    case K::Maximum:
    case K::Minimum:
    case K::Max:
    case K::Min:
    case K::MaxDim:
    case K::MinDim:
    case K::AbsI:
    case K::ReluI:
    case K::ClampI:
    case K::Where:
    case K::Div:
    case K::DivI:
    case K::Log:
    case K::Sqrt:
    case K::LogI:
    case K::SqrtI:
      return false;
    default:
      return true;
  }
}

}  // namespace

std::string_view to_string(CaseKind kind) {
  switch (kind) {
    case CaseKind::View:
      return "view";
    case CaseKind::Op:
      return "op";
    case CaseKind::Inplace:
      return "inplace";
    case CaseKind::Grad:
      return "grad";
  }
  return "?";
}

uint64_t mix(uint64_t a, uint64_t b) {
  Rng r(a ^ (b * 0xd1b54a32d192ed03ull));
  r.next();
  return r.next();
}

std::vector<double> make_values(const ValuesSpec& spec, int64_t n) {
  std::vector<double> v;
  Rng g(spec.seed);
  switch (spec.kind) {
    case ValueKind::Iota: {
      // Divisors, logs and products start at 1.
      const bool from_one = spec.domain == Domain::NonZero || spec.domain == Domain::Positive ||
                            spec.domain == Domain::NearOne;
      const bool small = spec.domain == Domain::Small;  // exponents: 0, 1, 2, 3, 0, ...
      v.resize(static_cast<std::size_t>(std::max<int64_t>(n, 0)));
      for (int64_t i = 0; i < n; ++i)
        v[i] = spec.dtype == DType::Bool ? (from_one || i != 0)
                                         : static_cast<double>(small ? i % 4 : i + from_one);
      return v;
    }
    case ValueKind::Random:
      return random_values(g, spec.domain, spec.dtype, n);
    case ValueKind::Zeros:
      v = random_values(g, spec.domain, spec.dtype, n);
      for (double& x : v)
        if (g.chance(0.33)) x = 0;
      return v;
    case ValueKind::Special: {
      // No huge or tiny values: whether a product overflows would depend on
      // the order it is accumulated in.
      static const double specials[] = {0.0, -0.0, NAN, INFINITY, -INFINITY, 1.0, -1.0, 3.5};
      v = random_values(g, spec.domain, spec.dtype, n);
      for (double& x : v)
        if (g.chance(0.5))
          x = is_floating(spec.dtype)
                  ? specials[g.uniform_int(0, 7)]
                  : cast_value(static_cast<double>(g.uniform_int(-1, 1)), spec.dtype);
      return v;
    }
  }
  return v;
}

Case generate(uint64_t seed, uint64_t index, const GenConfig& config) {
  Rng g(mix(seed, index));
  Case c;
  c.seed = seed;
  c.index = index;
  c.kind = pick<CaseKind>(g,
                          {{CaseKind::View, 2, "view"},
                           {CaseKind::Op, 4, "op"},
                           {CaseKind::Inplace, 3, "inplace"},
                           {CaseKind::Grad, 2, "grad"}},
                          config)
               .value_or(CaseKind::View);
  const bool grad = c.kind == CaseKind::Grad;
  c.base.shape = random_case_shape(g, config, grad ? 24 : 256);
  const DType dtype = grad ? DType::Float64 : random_dtype(g);
  c.base.values = random_values_spec(g, dtype, Domain::Any, config);
  switch (c.kind) {
    case CaseKind::View: {
      Segment s;
      s.views = random_views(g, config, 6, false);
      if (g.chance(0.8))
        if (auto k = pick(g, ops_of(OpClass::Read), config))
          s.op = random_op(g, config, *k, dtype, false);
      c.segments.push_back(std::move(s));
      break;
    }
    case CaseKind::Op:
    case CaseKind::Inplace: {
      const auto kinds = c.kind == CaseKind::Op ? ops_of(OpClass::Unary, OpClass::Binary)
                                                : ops_of(OpClass::Inplace);
      auto more = ops_of(OpClass::Reduce, OpClass::Where);
      auto mm = ops_of(OpClass::Matmul, OpClass::Nn);
      std::vector<Weighted<OpKind>> all = kinds;
      if (c.kind == CaseKind::Op) {
        all.insert(all.end(), more.begin(), more.end());
        all.insert(all.end(), mm.begin(), mm.end());
      }
      const int n = static_cast<int>(g.uniform_int(1, 3));
      DType current = dtype;
      for (int i = 0; i < n; ++i) {
        Segment s;
        s.views = random_views(g, config, i == 0 ? 5 : 3, false);
        if (auto k = pick(g, all, config)) {
          s.op = random_op(g, config, *k, current, false);
          if (domain_for(*k, false) != Domain::Any && i == 0 &&
              c.base.values.kind != ValueKind::Iota)
            c.base.values.domain = domain_for(*k, false);
        }
        c.segments.push_back(std::move(s));
      }
      break;
    }
    case CaseKind::Grad: {
      c.base.values.domain = Domain::NearOne;
      c.base.values.kind =
          ValueKind::Random;  // no NaN, inf or big values: differences must be finite
      if (!config.skipped("nan-grad") && g.chance(0.08)) {
        c.variant = 1;
        Segment s;
        s.views = random_views(g, config, 2, true);
        s.op = random_op(g, config, g.chance(0.5) ? K::Max : K::Min, dtype, true);
        c.segments.push_back(std::move(s));
        break;
      }
      std::vector<Weighted<OpKind>> ops;
      for (int k = 0; k < kNumOpKinds; ++k) {
        const OpInfo& i = op_info(static_cast<OpKind>(k));
        if (i.grad) ops.push_back({i.kind, i.cls == OpClass::Inplace ? 1 : 2, i.name});
      }
      const int n = static_cast<int>(g.uniform_int(1, 4));
      bool all_smooth = true;
      for (int i = 0; i < n; ++i) {
        Segment s;
        s.views = random_views(g, config, 3, true);
        if (auto k = pick(g, ops, config)) {
          s.op = random_op(g, config, *k, dtype, true);
          all_smooth = all_smooth && smooth(*k);
        }
        c.segments.push_back(std::move(s));
        if (!config.skipped("int-grad") && g.chance(0.15)) {
          Segment probe;
          probe.op = random_op(g, config, K::IntResult, dtype, true);
          c.segments.push_back(std::move(probe));
        }
      }
      if (all_smooth && !config.skipped("grad-zeros") && g.chance(0.3))
        c.base.values.kind = ValueKind::Zeros;
      break;
    }
  }
  return c;
}

std::vector<std::pair<std::string, std::string>> skip_names() {
  std::vector<std::pair<std::string, std::string>> out = {{"view", "view cases"},
                                                          {"op", "op cases"},
                                                          {"inplace", "in-place cases"},
                                                          {"grad", "gradient cases"}};
  for (const auto& f : kFeatures) out.push_back(f);
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpInfo& i = op_info(static_cast<OpKind>(k));
    if (i.cls != OpClass::IntResult) out.push_back({i.name, "the op " + std::string(i.name)});
  }
  for (int k = 0; k < kNumViewKinds; ++k) {
    const std::string n(view_name(static_cast<ViewKind>(k)));
    if (std::none_of(out.begin(), out.end(), [&](const auto& e) { return e.first == n; }))
      out.push_back({n, "the view " + n});
  }
  return out;
}

void check_skip_names(const std::vector<std::string>& names) {
  const auto known = skip_names();
  for (const std::string& n : names)
    BP_CHECK(std::any_of(known.begin(), known.end(), [&](const auto& e) { return e.first == n; }),
             "[fuzz] unknown --skip name '", n, "'; 'backplane fuzz --help' lists them");
}

}  // namespace bp::conformance::fuzz
