// The oracle of view, op and in-place cases: a host shadow of every block of
// memory a case creates, the layout each view addresses in it (the model of
// fuzz_model.cpp), and the expected effect of each step:
//   a view     must address the modelled positions and read their values;
//   an op      must give what the reference device computes from contiguous
//              copies of its inputs (built from the shadow, not read through
//              the views under test), and leave its inputs alone;
//   an in-place op must change the base exactly as the shadow does (values
//              from the out-of-place op on contiguous copies), return self and
//              bump the version once; or, where the contract demands an error,
//              raise one and change nothing.
#include <backplane/debug.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>

#include "case_util.h"
#include "fuzz_internal.h"

namespace bp::conformance::fuzz {

namespace {

using K = OpKind;

// The out-of-place op whose result an in-place op writes.
OpKind twin(OpKind k) {
  switch (k) {
    case K::AddI:
      return K::Add;
    case K::SubI:
      return K::Sub;
    case K::MulI:
      return K::Mul;
    case K::DivI:
      return K::Div;
    case K::ClampI:
      return K::Clamp;
    case K::ReluI:
      return K::Relu;
    case K::NegI:
      return K::Neg;
    case K::AbsI:
      return K::Abs;
    case K::ExpI:
      return K::Exp;
    case K::LogI:
      return K::Log;
    case K::SqrtI:
      return K::Sqrt;
    case K::SigmoidI:
      return K::Sigmoid;
    case K::TanhI:
      return K::Tanh;
    case K::PowI:
      return K::Pow;
    default:
      return k;
  }
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v)
    if (std::isfinite(x)) m = std::max(m, std::fabs(x));
  return m;
}

std::vector<int64_t> sizes_of(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

// Whether the host shadow holds these values exactly: int64 beyond 2^53 does
// not fit a double, and a case goes no further than that.
bool exact(const std::vector<double>& v, DType dtype) {
  if (dtype != DType::Int64) return true;
  return std::all_of(v.begin(), v.end(), [](double x) { return std::fabs(x) < 0x1p53; });
}

// Whether a floating product of these values may overflow or underflow on
// the way in some order of accumulation but not in another (then 0 * inf and
// inf * 0 give different answers, both right).
bool order_dependent_product(const std::vector<double>& v, DType dtype) {
  const double limit = dtype == DType::Float32 ? 87 : 708;  // ln of the largest finite value
  double up = 0, down = 0;
  for (double x : v)
    if (std::isfinite(x) && x != 0) (std::fabs(x) > 1 ? up : down) += std::log(std::fabs(x));
  return up > limit || down < -limit;
}

// One block of memory the case made: the device tensor that owns it
// (contiguous, from offset 0) and the host shadow of its values.
struct Storage {
  Tensor owner;
  std::string name;
  std::vector<double> values;
  DType dtype = DType::Float32;
};

// A tensor of the case: its device handle, its name in the transcript, and
// where the model says it lies.
struct Var {
  Tensor t;
  std::string name;
  int storage = 0;
  Layout layout;
};

class Machine {
 public:
  Machine(const Env& env, Transcript& tr) : env_(env), tr_(tr) {}

  Var add_base(const BaseSpec& base) {
    const std::string name = tr_.fresh();
    Tensor t = guarded("unexpected-error", "from_vector",
                       [&] { return build_base(base, env_.device, false, tr_, name); });
    return add_storage(t, name, make_values(base.values, numel(base.shape)));
  }

  // A fresh, contiguous tensor as a storage of its own.
  Var add_storage(const Tensor& t, const std::string& name, std::vector<double> values) {
    storages_.push_back({t, name, std::move(values), t.dtype()});
    return {t, name, static_cast<int>(storages_.size()) - 1, contiguous_layout(sizes_of(t))};
  }

  Storage& storage(const Var& v) { return storages_[static_cast<std::size_t>(v.storage)]; }
  int64_t capacity(const Var& v) { return static_cast<int64_t>(storage(v).values.size()); }
  std::vector<double> logical(const Var& v) {
    return v.layout.numel()
               ? gather(storage(v).values, v.layout.sizes, v.layout.strides, v.layout.offset)
               : std::vector<double>{};
  }

  // Applies one view step to `v`. False when the step had to raise (and did):
  // nothing may use its result.
  bool step(Var& v, const ViewStep& s) {
    const ResolvedView rv = resolve_view(s, v.layout, capacity(v));
    if (rv.skip) return true;
    const std::string op(view_name(rv.kind)), name = tr_.fresh();
    const std::string line = "auto " + name + " = " + v.name + view_cpp(rv) + ";";
    if (!rv.error.empty()) {
      tr_.add(line + "  // must raise: " + rv.error);
      expect_error(op, rv.error, [&] { apply_view(rv, v.t); });
      return false;
    }
    tr_.add(line);
    Tensor out = guarded("unexpected-error", op, [&] { return apply_view(rv, v.t); });
    const Tensor& owner = storage(v).owner;
    if (rv.copies) {
      if (out.shares_storage(owner))
        throw Failure{"view-layout", op,
                      "returned a view of " + storage(v).name + ", yet no strides can view " +
                          shape_str(v.layout.sizes) + " strides " + shape_str(v.layout.strides) +
                          " as " + shape_str(rv.out.sizes) + ": it must copy"};
      v = add_storage(out, name, logical(v));
    } else {
      if (!out.shares_storage(owner) || !out.is_view() || !out.base().is_same(owner))
        throw Failure{"view-layout", op,
                      "the result is not a view of " + storage(v).name +
                          " (shares memory: " + (out.shares_storage(owner) ? "yes" : "no") +
                          ", is_view: " + (out.is_view() ? "yes" : "no") + ") (VW-1, VW-3)"};
      v = {out, name, v.storage, rv.out};
    }
    check_view(v, op);
    return true;
  }

  // The view's metadata against the model, and its values against the shadow.
  void check_view(const Var& v, const std::string& op) {
    const std::vector<int64_t> sizes = sizes_of(v.t);
    if (sizes != v.layout.sizes)
      throw Failure{"view-layout", op,
                    "shape " + shape_str(sizes) + ", expected " + shape_str(v.layout.sizes)};
    Layout actual;
    actual.sizes = sizes;
    actual.strides.assign(v.t.strides().begin(), v.t.strides().end());
    actual.offset = v.t.storage_offset();
    if (v.layout.numel() > 0 && layout_positions(actual) != layout_positions(v.layout))
      throw Failure{"view-layout", op,
                    "strides " + shape_str(actual.strides) + " offset " +
                        std::to_string(actual.offset) +
                        " address other memory than the expected strides " +
                        shape_str(v.layout.strides) + " offset " + std::to_string(v.layout.offset)};
    if (v.t.is_contiguous() != contiguous(v.layout))
      throw Failure{"view-layout", op,
                    std::string("is_contiguous() is ") + (v.t.is_contiguous() ? "true" : "false") +
                        " for shape " + shape_str(sizes) + " strides " + shape_str(actual.strides)};
    const std::vector<double> got =
        guarded("unexpected-error", op + " (reading it)", [&] { return v.t.to_vector<double>(); });
    const std::string diff = compare_values(got, logical(v), sizes, v.t.dtype(), {});
    if (!diff.empty()) throw Failure{"view-values", op, "reading the view: " + diff};
  }

  // The storage read back from the device must match its shadow.
  void check_storage(int s, const std::string& kind, const std::string& op, Tolerance tol,
                     const std::string& context) {
    Storage& st = storages_[static_cast<std::size_t>(s)];
    const std::vector<double> got =
        guarded("unexpected-error", op, [&] { return st.owner.to_vector<double>(); });
    const std::string diff = compare_values(got, st.values, sizes_of(st.owner), st.dtype, tol);
    if (!diff.empty()) throw Failure{kind, op, context + st.name + " " + diff};
    st.values = got;  // within tolerance: carry on from what the device holds
  }
  std::size_t num_storages() const { return storages_.size(); }

  // An operand on the device under test, and its host values.
  BuiltOperand operand(const OperandPlan& plan, const Var& primary) {
    if (plan.source == Source::Self)
      return {primary.t, primary.name, logical(primary), primary.t, primary.name};
    Storage& s = storage(primary);
    return guarded("unexpected-error", "building an operand", [&] {
      return build_operand(plan, env_.device, tr_, &s.owner, s.name, &s.values);
    });
  }

  const Env& env() const { return env_; }
  Transcript& tr() { return tr_; }

 private:
  const Env& env_;
  Transcript& tr_;
  std::vector<Storage> storages_;
};

TensorOptions ref_options(const Env& env, DType d) {
  return TensorOptions(d).device(env.reference);
}

// The op computed on the reference device from contiguous copies.
std::vector<Tensor> on_reference(const Env& env, const ResolvedOp& op,
                                 const std::vector<double>& primary,
                                 const std::vector<int64_t>& shape, DType dtype,
                                 const std::vector<BuiltOperand>& others) {
  try {
    Tensor p = from_vector(primary, shape, ref_options(env, dtype));
    std::vector<Tensor> o;
    for (std::size_t i = 0; i < op.operands.size(); ++i) {
      const OperandPlan& plan = op.operands[i];
      o.push_back(plan.source == Source::Self
                      ? p
                      : from_vector(others[i].values, plan.shape, ref_options(env, plan.dtype)));
    }
    std::vector<Tensor> out = run_op(op, p, o);
    for (Tensor& t : out) t = t.contiguous();
    return out;
  } catch (const NotImplementedError& e) {
    throw Unsupported{std::string("the reference lacks it: ") + e.what()};
  } catch (const std::exception& e) {
    throw Failure{"reference-error", op.info->name,
                  std::string("the reference device raised: ") + e.what()};
  }
}

// Under --poison: the op runs twice more, the device's allocations filled
// with 0x00 bytes and then with 0xFF, and every result element must come out
// the same in both (NaN matching NaN): one that differs holds what the
// memory held, not what the kernel wrote. The poison is off again before
// the reference and the other checks run.
void check_all_written(const Env& env, const ResolvedOp& op, Tensor& self,
                       const std::vector<Tensor>& operands, const std::vector<std::string>& outs) {
  const std::string what = op.info->name;
  struct Off {
    int backend;
    ~Off() { debug::set_poison(backend, -1); }
  } off{env.device.backend};
  auto run_with = [&](int byte) {
    debug::set_poison(env.device.backend, byte);
    std::vector<Tensor> r =
        guarded("unexpected-error", what, [&] { return run_op(op, self, operands); });
    std::vector<std::vector<double>> v;
    for (const Tensor& t : r)
      v.push_back(guarded("unexpected-error", what, [&] { return t.to_vector<double>(); }));
    return std::make_pair(std::move(r), std::move(v));
  };
  const auto [zeros, first] = run_with(0x00);
  const auto [ones, second] = run_with(0xFF);
  for (std::size_t i = 0; i < first.size() && i < second.size(); ++i)
    for (std::size_t j = 0; j < first[i].size() && j < second[i].size(); ++j) {
      const double a = first[i][j], b = second[i][j];
      if (a == b || (std::isnan(a) && std::isnan(b))) continue;
      std::ostringstream os;
      os << (i < outs.size() ? outs[i] : "result") << " = " << what << ": element " << j
         << " (row-major) of " << shape_str(sizes_of(zeros[i])) << " is " << a
         << " when the memory was filled with 0x00 bytes and " << b
         << " with 0xFF: the kernel left it unwritten";
      throw Failure{"unwritten-result", what, os.str()};
    }
}

std::vector<Tensor> device_tensors(const std::vector<BuiltOperand>& b) {
  std::vector<Tensor> out;
  for (const auto& o : b) out.push_back(o.t);
  return out;
}

std::vector<std::string> names(const std::vector<BuiltOperand>& b) {
  std::vector<std::string> out;
  for (const auto& o : b) out.push_back(o.name);
  return out;
}

}  // namespace

// --- the executors ------------------------------------------------------------------

void run_view_case(const Case& c, const Env& env, Transcript& tr) {
  Machine m(env, tr);
  Var v = m.add_base(c.base);
  for (const Segment& s : c.segments) {
    for (const ViewStep& step : s.views)
      if (!m.step(v, step)) return;
    if (!s.op) continue;
    ResolvedOp op = resolve_op(*s.op, {v.layout, v.t.dtype(), m.capacity(v), false});
    const std::vector<double> want = m.logical(v);
    if (op.kind == K::ToDtype && is_integral(op.to_dtype) && is_floating(v.t.dtype()) &&
        std::any_of(want.begin(), want.end(), [](double x) { return !(std::fabs(x) < 2e9); }))
      op.to_dtype = DType::Float64;  // NaN, inf or huge into an integer is undefined
    const std::string out_name = tr.fresh(), what = op.info->name;
    tr.add(op_cpp(op, v.name, {}, {out_name}));
    const Tensor out = guarded("unexpected-error", what, [&] { return run_op(op, v.t, {}).at(0); });
    const std::vector<int64_t> sizes = v.layout.sizes;
    const DType dt = op.kind == K::ToDtype ? op.to_dtype : v.t.dtype();
    std::vector<double> expected = want;
    for (double& x : expected) x = cast_value(x, dt);
    if (out.dtype() != dt || sizes_of(out) != sizes)
      throw Failure{"read-layout", what,
                    "gave " + std::string(name(out.dtype())) + " " + shape_str(sizes_of(out)) +
                        ", expected " + std::string(bp::name(dt)) + " " + shape_str(sizes)};
    const bool keeps = (op.kind == K::Contiguous && contiguous(v.layout)) ||
                       (op.kind == K::ToDtype && op.to_dtype == v.t.dtype());
    if (keeps != out.is_same(v.t))
      throw Failure{"read-layout", what,
                    keeps ? "must return the tensor itself when nothing changes (VW-2, DV-1)"
                          : "returned the tensor itself, but it had to copy"};
    if (!keeps && out.shares_storage(v.t))
      throw Failure{"read-layout", what, "the copy shares memory with its source (CP-1)"};
    if (op.kind != K::Clone && op.kind != K::ToDtype && !out.is_contiguous())
      throw Failure{"read-layout", what, "the result is not contiguous"};
    if (op.kind == K::Clone && out.numel() > 0) {
      // CP-1: a dense source keeps its strides, any other becomes contiguous.
      Layout got{sizes, {out.strides().begin(), out.strides().end()}, 0};
      const bool dense = non_overlapping_and_dense(v.layout);
      bool ok = dense ? true : out.is_contiguous();
      for (std::size_t d = 0; dense && d < sizes.size(); ++d)
        ok = ok && (sizes[d] <= 1 || got.strides[d] == v.layout.strides[d]);
      if (!ok)
        throw Failure{"read-layout", what,
                      "strides " + shape_str(got.strides) + " for a source with strides " +
                          shape_str(v.layout.strides) +
                          (dense ? " (dense: keep them)" : " (not dense: contiguous)")};
    }
    const std::vector<double> got =
        guarded("unexpected-error", what, [&] { return out.to_vector<double>(); });
    const std::string diff = compare_values(got, expected, sizes, dt, {});
    if (!diff.empty()) throw Failure{"read-values", what, diff};
  }
}

void run_op_case(const Case& c, const Env& env, Transcript& tr) {
  Machine m(env, tr);
  Var cur = m.add_base(c.base);
  for (const Segment& s : c.segments) {
    for (const ViewStep& step : s.views)
      if (!m.step(cur, step)) return;
    if (!s.op) continue;
    const ResolvedOp op = resolve_op(*s.op, {cur.layout, cur.t.dtype(), m.capacity(cur), false});
    if (op.skip) continue;
    std::vector<BuiltOperand> others;
    for (const OperandPlan& plan : op.operands) others.push_back(m.operand(plan, cur));
    std::vector<std::string> outs = {tr.fresh()};
    if (two_outputs(op.kind)) outs.push_back(tr.fresh());
    const std::string what = op.info->name;
    std::vector<Tensor> operands = device_tensors(others);
    if (!op.error.empty()) {
      tr.add(op_cpp(op, cur.name, names(others), outs) + "  // must raise: " + op.error);
      expect_error(what, op.error, [&] { run_op(op, cur.t, operands); });
      return;
    }
    tr.add(op_cpp(op, cur.name, names(others), outs));
    const std::vector<double> input = m.logical(cur);
    std::vector<Tensor> got =
        guarded("unexpected-error", what, [&] { return run_op(op, cur.t, operands); });
    if (env.poison) check_all_written(env, op, cur.t, operands, outs);
    const std::vector<Tensor> want =
        on_reference(env, op, input, cur.layout.sizes, cur.t.dtype(), others);
    double magnitude = max_abs(input);
    if (op.kind == K::Matmul || op.kind == K::SparseMm || op.kind == K::Conv2d ||
        op.kind == K::ConvTranspose2d)
      magnitude *= max_abs(others[0].values);
    std::vector<double> first;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const std::string label = outs[i] + " = " + what + ": ";
      if (got[i].dtype() != want[i].dtype() || sizes_of(got[i]) != sizes_of(want[i]))
        throw Failure{"op-values", what,
                      label + std::string(name(got[i].dtype())) + " " +
                          shape_str(sizes_of(got[i])) + ", expected " +
                          std::string(name(want[i].dtype())) + " " + shape_str(sizes_of(want[i]))};
      if (got[i].shares_storage(cur.t))
        throw Failure{"op-values", what, label + "the result shares memory with its input (IP-1)"};
      const std::vector<double> g =
          guarded("unexpected-error", what, [&] { return got[i].to_vector<double>(); });
      const Tolerance tol = tolerance_for(env, op.kind, want[i].dtype());
      const std::string diff =
          compare_values(g, want[i].to_vector<double>(), sizes_of(want[i]), want[i].dtype(), tol,
                         static_cast<double>(op.terms), op.accumulates ? magnitude : 0);
      const bool any_order = op.kind == K::Prod && is_floating(want[i].dtype()) &&
                             order_dependent_product(input, want[i].dtype());
      if (!diff.empty() && !any_order) throw Failure{"op-values", what, label + diff};
      if (i == 0) first = g;
    }
    // Out of place: the inputs are untouched (IP-1).
    m.check_storage(cur.storage, "input-modified", what, {}, "the op changed its input's memory: ");
    Tensor next = got[0];
    std::string next_name = outs[0];
    if (!next.is_contiguous() || next.storage_offset() != 0) {
      next_name = tr.fresh();
      tr.add("auto " + next_name + " = " + outs[0] + ".contiguous();");
      next = guarded("unexpected-error", "contiguous", [&] { return got[0].contiguous(); });
    }
    if (!exact(first, next.dtype())) return;
    cur = m.add_storage(next, next_name, first);
  }
}

void run_inplace_case(const Case& c, const Env& env, Transcript& tr) {
  Machine m(env, tr);
  const Var base = m.add_base(c.base);
  for (const Segment& s : c.segments) {
    Var v = base;
    bool ok = true;
    for (const ViewStep& step : s.views)
      if (!(ok = m.step(v, step))) break;
    if (!ok || !s.op) continue;
    ResolvedOp op = resolve_op(*s.op, {v.layout, v.t.dtype(), m.capacity(v), false});
    if (op.skip) continue;
    std::vector<BuiltOperand> others;
    for (const OperandPlan& plan : op.operands) others.push_back(m.operand(plan, v));
    const std::string what = op.info->name;
    std::string error = op.error;
    if (error.empty() && v.layout.numel() > 1 && self_overlapping(v.layout))
      error = "self has elements that share memory (IP-6)";
    for (const OperandPlan& plan : op.operands)
      if (error.empty() && plan.source == Source::Alias && partially_overlaps(v.layout, plan.alias))
        error = "the input partially overlaps self in memory (IP-6)";
    std::vector<Tensor> operands = device_tensors(others);
    const uint32_t version = v.t.version();
    if (!error.empty()) {
      tr.add(op_cpp(op, v.name, names(others), {}) + "  // must raise: " + error);
      expect_error(what, error, [&] { run_op(op, v.t, operands); });
      // A failed op leaves every input unchanged.
      for (std::size_t i = 0; i < m.num_storages(); ++i)
        m.check_storage(static_cast<int>(i), "not-atomic", what, {}, "the op raised but changed ");
      if (v.t.version() != version)
        throw Failure{"not-atomic", what, "the op raised but bumped the version counter"};
      continue;
    }
    tr.add(op_cpp(op, v.name, names(others), {}));
    // What the written elements must become, from contiguous copies.
    const std::vector<int64_t>& shape = v.layout.sizes;
    const DType dt = v.t.dtype();
    std::vector<double> expected;
    if (op.kind == K::FillI || op.kind == K::ZeroI) {
      expected.assign(static_cast<std::size_t>(v.layout.numel()),
                      cast_value(op.kind == K::ZeroI ? 0 : op.scalar.to_double(), dt));
      if (op.kind == K::FillI && op.scalar.is_bool())
        expected.assign(expected.size(), op.scalar.to<bool>());
    } else if (op.kind == K::CopyI) {
      expected = broadcast_values(others[0].values, op.operands[0].shape, shape);
      for (double& x : expected) x = cast_value(x, dt);
    } else {
      ResolvedOp out_of_place = op;
      out_of_place.kind = twin(op.kind);
      out_of_place.info = &op_info(out_of_place.kind);
      const std::vector<Tensor> r =
          on_reference(env, out_of_place, m.logical(v), shape, dt, others);
      expected = broadcast_values(r[0].to_vector<double>(), sizes_of(r[0]), shape);
      for (double& x : expected) x = cast_value(x, dt);
    }
    std::vector<Tensor> result =
        guarded("unexpected-error", what, [&] { return run_op(op, v.t, operands); });
    if (!result.at(0).is_same(v.t))
      throw Failure{"inplace-return", what, "the in-place op did not return self (IP-1)"};
    Storage& st = m.storage(v);
    const std::vector<int64_t> pos = layout_positions(v.layout);
    for (std::size_t i = 0; i < pos.size(); ++i)
      st.values[static_cast<std::size_t>(pos[i])] = expected[i];
    m.check_storage(v.storage, "inplace-values", what, tolerance_for(env, twin(op.kind), dt),
                    "after the op (compared with the host shadow): ");
    if (v.storage != base.storage)
      m.check_storage(base.storage, "inplace-values", what, {}, "after the op: ");
    if (!exact(m.storage(v).values, dt)) return;
    if (v.t.version() != version + 1)
      throw Failure{"version", what,
                    "the version counter went from " + std::to_string(version) + " to " +
                        std::to_string(v.t.version()) + "; an in-place op bumps it once (IP-7)"};
  }
}

}  // namespace bp::conformance::fuzz
