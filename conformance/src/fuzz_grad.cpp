// Gradient cases: a random chain of views and differentiable ops (in-place
// ones included, on a clone, AG-9) over float64 leaves, whose gradients
// bp::gradcheck compares with central differences (AG-10: eps 1e-6, atol
// 1e-5, rtol 1e-3, PyTorch's). Values stay away from the points where an op
// is not differentiable (log and sqrt see x*x + 0.5; leaves have no exact
// zeros unless every op is smooth there). Two rules finite differences
// cannot see are checked directly: a result with an integer or bool dtype
// never requires grad (AG-1), and max()/min() of a tensor holding NaN send
// the gradient to the NaN (PyTorch's evenly_distribute_backward).
#include <algorithm>
#include <cmath>
#include <iostream>

#include "case_util.h"
#include "fuzz_internal.h"

namespace bp::conformance::fuzz {

namespace {

struct State {
  Tensor t;
  std::string name;
  Layout layout;
  int64_t capacity = 0;
};

template <class F>
auto run(const std::string& op, F&& f) {
  return guarded("unexpected-error", op, std::forward<F>(f));
}

// as_strided's gradient is defined only for memory its input covers (PyTorch
// treats the rest as constants): it applies to inputs that tile their memory.
bool strided_ok(const ViewStep& s, const Layout& l, int64_t capacity) {
  return s.kind != ViewKind::AsStrided || (l.numel() == capacity && non_overlapping_and_dense(l));
}

// A tensor with memory of its own, as it is laid out (an op's result may keep
// its input's strides).
State fresh_state(const Tensor& t, const std::string& name) {
  Layout l;
  l.sizes.assign(t.sizes().begin(), t.sizes().end());
  l.strides.assign(t.strides().begin(), t.strides().end());
  l.offset = t.storage_offset();
  const auto pos = layout_positions(l);
  const int64_t capacity = pos.empty() ? 0 : *std::max_element(pos.begin(), pos.end()) + 1;
  return {t, name, l, capacity};
}

// The chain of a grad case, run once to record it (and make the operands'
// leaves and constants), then once per gradcheck evaluation.
class Chain {
 public:
  Chain(const Case& c, const Env& env, Transcript& tr) : c_(c), env_(env), tr_(tr) {}

  std::vector<Tensor> leaves;
  std::vector<std::string> leaf_names;
  std::vector<std::string> body;  // the lambda's statements
  std::string result_name;
  bool finite = true;  // every result of the first run was a finite number

  // `in`: x0, then the operand leaves. Records only on the first run.
  Tensor forward(const std::vector<Tensor>& in) {
    const bool first = !recorded_;
    auto fresh = [&] { return first ? tr_.fresh() : std::string(); };
    auto emit = [&](const std::string& line) {
      if (!first) return;
      body.push_back(line);
      if (env_.echo) *env_.echo << "    " << line << std::endl;
    };
    State cur{in[0], "in[0]", contiguous_layout(c_.base.shape), numel(c_.base.shape)};
    std::size_t k = 0;  // operands seen, in order
    for (const Segment& seg : c_.segments) {
      const OpStep* step = seg.op ? &*seg.op : nullptr;
      if (step && step->kind == OpKind::IntResult) {
        if (first) check_int_result(*step, cur, fresh, emit);
        continue;
      }
      const bool inplace = step && op_info(step->kind).cls == OpClass::Inplace;
      State whole;
      if (inplace) {
        // In place on a copy (never on a leaf); log_ and sqrt_ on a positive one
        // (shifted out of place: an in-place shift would modify what it saved).
        const bool positive = step->kind == OpKind::LogI || step->kind == OpKind::SqrtI;
        const std::string n = fresh();
        emit("auto " + n + " = " + cur.name +
             (positive ? ".mul(" + cur.name + ").add(0.5);  // positive"
                       : ".clone(bp::MemoryFormat::Contiguous);"));
        cur = fresh_state(run("clone",
                              [&] {
                                return positive ? cur.t.mul(cur.t).add(0.5)
                                                : cur.t.clone(MemoryFormat::Contiguous);
                              }),
                          n);
        whole = cur;
      }
      for (const ViewStep& s : seg.views) {
        const ResolvedView rv = resolve_view(s, cur.layout, cur.capacity);
        if (rv.skip || !rv.error.empty() || !strided_ok(s, cur.layout, cur.capacity)) continue;
        const std::string n = fresh();
        emit("auto " + n + " = " + cur.name + view_cpp(rv) + ";");
        Tensor out = run(std::string(view_name(rv.kind)), [&] { return apply_view(rv, cur.t); });
        cur = rv.copies ? fresh_state(out, n) : State{out, n, rv.out, cur.capacity};
      }
      if (!step) continue;
      const ResolvedOp op = resolve_op(*step, {cur.layout, DType::Float64, cur.capacity, true});
      if (op.skip || !op.error.empty() ||
          (inplace && cur.layout.numel() > 1 && self_overlapping(cur.layout))) {
        if (inplace) cur = whole;
        continue;
      }
      std::vector<Tensor> others;
      std::vector<std::string> names;
      for (const OperandPlan& plan : op.operands) {
        if (plan.source == Source::Self) {
          others.push_back(cur.t);
          names.push_back(cur.name);
          continue;
        }
        others.push_back(operand(plan, k++, in, fresh, emit, names));
      }
      if (op.shift && !inplace) {  // log and sqrt of x*x + 0.5: smooth and defined everywhere
        const std::string n = fresh();
        emit("auto " + n + " = " + cur.name + ".mul(" + cur.name + ").add(0.5);");
        cur = fresh_state(run("mul", [&] { return cur.t.mul(cur.t).add(0.5); }), n);
      }
      std::vector<std::string> outs = {fresh()};
      if (two_outputs(op.kind)) outs.push_back(fresh());
      emit(op_cpp(op, cur.name, names, outs));
      std::vector<Tensor> r = run(op.info->name, [&] { return run_op(op, cur.t, others); });
      if (first) {
        const std::vector<double> v =
            run("reading a result", [&] { return r.at(0).to_vector<double>(); });
        for (double x : v) finite = finite && std::isfinite(x);
      }
      if (inplace) {
        cur = whole;
      } else {
        cur = fresh_state(r.at(0), outs[0]);
        if (!cur.t.is_contiguous() || cur.t.storage_offset() != 0) {
          const std::string n = fresh();
          emit("auto " + n + " = " + outs[0] + ".contiguous();");
          cur = fresh_state(run("contiguous", [&] { return r[0].contiguous(); }), n);
        }
      }
    }
    if (first) result_name = cur.name;
    recorded_ = true;
    return cur.t;
  }

 private:
  // An operand's tensor: its root made on the first run (a leaf, an input
  // of gradcheck, or a constant), then viewed as its plan says.
  template <class Fresh, class Emit>
  Tensor operand(const OperandPlan& plan, std::size_t k, const std::vector<Tensor>& in,
                 Fresh& fresh, Emit& emit, std::vector<std::string>& names) {
    if (k >= roots_.size()) {
      OperandPlan root = plan;
      root.strided = false;
      if (plan.strided) root.shape = plan.alloc;
      BuiltOperand b =
          run("building an operand", [&] { return build_operand(root, env_.device, tr_); });
      roots_.push_back({plan.leaf, b.root, leaves.size()});
      if (plan.leaf) {
        leaves.push_back(b.root);
        leaf_names.push_back(b.name);
      }
      root_names_.push_back(b.name);
    }
    const Root& r = roots_[k];
    const Tensor root = r.leaf && r.input < in.size() ? in[r.input] : r.t;
    std::string name = r.leaf ? "in[" + std::to_string(r.input) + "]" : root_names_[k];
    if (plan.strided) {
      const std::string n = fresh();
      emit("auto " + n + " = " + name + operand_view_cpp(plan) + ";");
      name = n;
    }
    names.push_back(name);
    return run("operand views", [&] { return operand_view(plan, root); });
  }

  template <class Fresh, class Emit>
  void check_int_result(const OpStep& step, const State& cur, Fresh& fresh, Emit& emit) {
    const ResolvedOp op = resolve_op(step, {cur.layout, DType::Float64, cur.capacity, true});
    if (op.skip || !cur.t.requires_grad()) return;
    const std::string n = fresh();
    emit(op_cpp(op, cur.name, {}, {n}));
    Tensor t = cur.t;
    const Tensor r = run("integer result", [&] { return run_op(op, t, {}).at(0); });
    static const char* kNames[] = {"argmax", "argmin(dim)", "gt",
                                   "eq",     "to(int64)",   "max(dim) indices"};
    if (r.requires_grad())
      throw Failure{"int-requires-grad", kNames[op.dims.at(0)],
                    std::string("a ") + std::string(name(r.dtype())) +
                        " result of an op on a tensor that requires grad requires grad itself (" +
                        r.grad_fn_name() + "); integer and bool tensors never do (AG-1)"};
  }

  struct Root {
    bool leaf;
    Tensor t;
    std::size_t input;
  };
  const Case& c_;
  const Env& env_;
  Transcript& tr_;
  std::vector<Root> roots_;
  std::vector<std::string> root_names_;
  bool recorded_ = false;
};

// max()/min() over views of a leaf holding NaN: the gradient goes to the
// NaN elements (evenly), else to the extremal ones (evenly).
void run_nan_rule(const Case& c, const Env& env, Transcript& tr) {
  const int64_t n = numel(c.base.shape);
  if (n == 0 || c.segments.empty() || !c.segments[0].op) return;
  std::vector<double> values = make_values(c.base.values, n);
  Rng g(c.base.values.seed ^ 0x4e614eull);
  for (int i = 0, k = static_cast<int>(g.uniform_int(1, 2)); i < k; ++i)
    values[static_cast<std::size_t>(g.uniform_int(0, n - 1))] = NAN;
  BaseSpec base = c.base;
  Tensor x0 = guarded("unexpected-error", "from_vector", [&] {
    tr.add("auto x0 = " + values_cpp(values, base.shape, DType::Float64, false, true) + ";");
    return from_vector(values, base.shape,
                       TensorOptions(DType::Float64).device(env.device).requires_grad());
  });
  // Which element of x0 each position of the current storage holds.
  std::vector<int64_t> origin(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) origin[static_cast<std::size_t>(i)] = i;
  State cur{x0, "x0", contiguous_layout(base.shape), n};
  for (const ViewStep& s : c.segments[0].views) {
    const ResolvedView rv = resolve_view(s, cur.layout, cur.capacity);
    if (rv.skip || !rv.error.empty() || !strided_ok(s, cur.layout, cur.capacity)) continue;
    const std::string name = tr.fresh();
    tr.add("auto " + name + " = " + cur.name + view_cpp(rv) + ";");
    Tensor out = guarded("unexpected-error", std::string(view_name(rv.kind)),
                         [&] { return apply_view(rv, cur.t); });
    if (rv.copies) {
      std::vector<int64_t> next;
      for (int64_t p : layout_positions(cur.layout))
        next.push_back(origin[static_cast<std::size_t>(p)]);
      origin = next;
      cur = fresh_state(out, name);
    } else {
      cur = {out, name, rv.out, cur.capacity};
    }
  }
  if (cur.layout.numel() == 0) return;
  const bool is_max = c.segments[0].op->kind == OpKind::Max;
  const std::string y = tr.fresh(), op = is_max ? "max" : "min";
  tr.add("auto " + y + " = bp::" + op + "(" + cur.name + ");");
  tr.add(y + ".backward();");
  const Tensor r =
      guarded("unexpected-error", op, [&] { return is_max ? max(cur.t) : min(cur.t); });
  guarded("unexpected-error", "backward", [&] { r.backward(); });
  std::vector<double> seen;
  std::vector<int64_t> from;
  for (int64_t p : layout_positions(cur.layout)) {
    from.push_back(origin[static_cast<std::size_t>(p)]);
    seen.push_back(values[static_cast<std::size_t>(from.back())]);
  }
  double extremum = seen[0];
  bool nan = false;
  for (double v : seen) {
    nan = nan || std::isnan(v);
    extremum = is_max ? std::max(extremum, v) : std::min(extremum, v);
  }
  std::vector<double> want(static_cast<std::size_t>(n), 0.0);
  int64_t hits = 0;
  for (double v : seen) hits += nan ? std::isnan(v) : v == extremum;
  for (std::size_t i = 0; i < seen.size(); ++i)
    if (nan ? std::isnan(seen[i]) : seen[i] == extremum)
      want[static_cast<std::size_t>(from[i])] += 1.0 / static_cast<double>(hits);
  const Tensor grad = x0.grad();
  const std::vector<double> got =
      grad.defined() ? grad.to_vector<double>() : std::vector<double>(want.size(), 0);
  tr.add("// x0.grad() must be " + values_str(want, want.size()) +
         (nan ? ": the gradient goes to the NaN elements" : ": evenly to the extremal elements"));
  const std::string diff = compare_values(got, want, base.shape, DType::Float64, {1e-12, 1e-12});
  if (!diff.empty())
    throw Failure{"grad-nan-rule", op, "x0.grad() after " + y + ".backward(): " + diff};
}

}  // namespace

void run_grad_case(const Case& c, const Env& env, Transcript& tr) {
  if (c.variant == 1) return run_nan_rule(c, env, tr);
  Tensor x0 = guarded("unexpected-error", "from_vector",
                      [&] { return build_base(c.base, env.device, true, tr, "x0"); });
  Chain chain(c, env, tr);
  chain.leaves.push_back(x0);
  chain.leaf_names.push_back("x0");
  if (env.echo) *env.echo << "  auto fn = [&](const std::vector<bp::Tensor>& in) {" << std::endl;
  auto lambda = [&](const std::vector<std::string>& end) {
    std::ostream* echo = tr.echo;
    tr.echo = nullptr;  // the body was echoed as it ran
    tr.add("auto fn = [&](const std::vector<bp::Tensor>& in) {");
    for (const std::string& line : chain.body) tr.add("  " + line);
    tr.echo = echo;
    for (const std::string& line : end) tr.add(line);
  };
  Tensor out;
  try {
    out = chain.forward({x0});
  } catch (const Failure&) {
    lambda({"  // ^ the last statement fails", "};"});
    throw;
  }
  lambda({"  return " + chain.result_name + ";", "};"});
  std::string inputs;
  for (const std::string& n : chain.leaf_names) inputs += (inputs.empty() ? "" : ", ") + n;
  if (!out.requires_grad())
    throw Failure{"grad-graph", "grad",
                  "the result of differentiable ops on leaves that require grad does not require "
                  "grad (AG-1)"};
  // Central differences say nothing through NaN or inf, and lose the
  // gradient in rounding when the result is large (their error is about
  // 1e-10 times the weighted sum, against an atol of 1e-5).
  const std::vector<double> values =
      guarded("unexpected-error", "reading the result", [&] { return out.to_vector<double>(); });
  double total = 0;
  for (double v : values) total += std::fabs(v);
  if (!chain.finite || !(total <= 1e4)) return;
  tr.add("auto r = bp::gradcheck(fn, {" + inputs + "});  // r.ok must be true (AG-10)");
  GradcheckOptions opts;  // eps 1e-6, atol 1e-5, rtol 1e-3
  opts.seed = mix(c.seed, c.index);
  const GradcheckResult r = guarded("unexpected-error", "gradcheck", [&] {
    return gradcheck([&](const std::vector<Tensor>& in) { return chain.forward(in); }, chain.leaves,
                     opts);
  });
  if (!r.ok) throw Failure{"grad-mismatch", "grad", r.message};
}

}  // namespace bp::conformance::fuzz
