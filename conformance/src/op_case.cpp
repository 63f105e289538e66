// The differential op cases: the same random inputs on the device under test
// (in the layout of the case) and on the reference device (dense), the op on
// both, and the results compared.
#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

#include "random_inputs.h"

namespace bp::conformance {

namespace {

struct Tolerance {
  double rtol = 0, atol = 0;
};

// A few ulps of one rounding; sums and products get `terms` times that.
Tolerance default_tolerance(DType d) {
  if (d == DType::Float32) return {1e-5, 1e-6};
  if (d == DType::Float64) return {1e-12, 1e-12};
  // 16-bit floats: about one rounding of their 11 (float16) and 8
  // (bfloat16) significand bits, as PyTorch's own tests allow.
  if (d == DType::Float16) return {1e-3, 1e-5};
  if (d == DType::BFloat16) return {1.6e-2, 1e-5};
  return {};  // bool and integers: exact
}

// The defaults, loosened (never tightened) by what either backend declares
// for one of the case's ops at the case's dtype or the output's.
Tolerance tolerance_for(const Context& ctx, const OpCaseSpec& spec, DType case_dtype,
                        DType out_dtype) {
  Tolerance t = default_tolerance(out_dtype);
  if (!is_floating(out_dtype)) return t;
  auto loosen = [&](const Backend& b) {
    for (const bp_tolerance& d : b.tolerances())
      for (Op op : spec.ops)
        if (d.op == static_cast<int>(op) &&
            (d.dtype == static_cast<int>(case_dtype) || d.dtype == static_cast<int>(out_dtype))) {
          t.rtol = std::max(t.rtol, d.rtol);
          t.atol = std::max(t.atol, d.atol);
        }
  };
  loosen(ctx.backend());
  if (&ctx.reference() != &ctx.backend()) loosen(ctx.reference());
  return t;
}

std::string index_of(int64_t flat, IntArrayRef shape) {
  std::vector<int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return detail::format(idx);
}

bool same_value(double got, double want, double allowed) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  return std::fabs(got - want) <= allowed;
}

// Empty when `got` matches `want`, else what differs.
std::string compare(const Tensor& got, const Tensor& want, Tolerance tol, int64_t terms) {
  std::ostringstream os;
  if (got.dtype() != want.dtype()) {
    os << "dtype " << got.dtype() << ", expected " << want.dtype();
    return os.str();
  }
  if (!got.sizes().equals(want.sizes())) {
    os << "shape " << got.sizes() << ", expected " << want.sizes();
    return os.str();
  }
  const std::vector<double> g = got.to_vector<double>();
  const std::vector<double> w = want.to_vector<double>();
  const double scale = static_cast<double>(std::max<int64_t>(1, terms));
  int64_t bad = 0;
  std::ostringstream where;
  where.precision(9);
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double allowed = scale * (tol.atol + tol.rtol * std::fabs(w[i]));
    if (same_value(g[i], w[i], allowed)) continue;
    if (++bad <= 3)
      where << "; at " << index_of(static_cast<int64_t>(i), want.sizes()) << ": got " << g[i]
            << ", expected " << w[i];
  }
  if (bad == 0) return {};
  os << bad << " of " << g.size() << " elements differ (" << want.dtype() << " " << want.sizes();
  if (is_floating(want.dtype()))
    os << ", rtol " << tol.rtol << ", atol " << tol.atol << (scale > 1 ? ", times " : "")
       << (scale > 1 ? std::to_string(terms) + " accumulated terms" : "");
  else
    os << ", compared exactly";
  os << ")" << where.str();
  return os.str();
}

// "[1.5, -0.25, 2, ...] (3 of 24)": the first values of `t`, row-major.
std::string first_values(const Tensor& t, std::size_t count = 6) {
  const std::vector<double> v = t.to_vector<double>();
  std::ostringstream os;
  os.precision(9);
  os << "[";
  for (std::size_t i = 0; i < v.size() && i < count; ++i) os << (i ? ", " : "") << v[i];
  if (v.size() > count)
    os << ", ...] (" << count << " of " << v.size() << ")";
  else
    os << "]";
  return os.str();
}

// The output's layout and the inputs' first values, for a value mismatch.
std::string mismatch_details(const Tensor& got, const std::vector<Tensor>& inputs) {
  std::ostringstream os;
  os << "\noutput on the device under test: " << got.dtype() << " " << got.sizes() << " strides "
     << got.strides() << " offset " << got.storage_offset() << "\ninput values:";
  for (std::size_t i = 0; i < inputs.size(); ++i)
    os << (i ? ";" : "") << " input " << i << " " << first_values(inputs[i]);
  return os.str();
}

class OpCaseRun {
 public:
  OpCaseRun(const Context& ctx, const OpCaseSpec& spec, DType dtype, Layout layout,
            const std::string& name)
      : ctx_(ctx), spec_(spec), dtype_(dtype), layout_(layout), name_(name) {}

  void run() {
    Rng rng(ctx_.case_seed(name_));
    for (int i = 0; i < spec_.samples; ++i) run_sample(rng, i);
  }

 private:
  void run_sample(Rng& rng, int index) {
    rng.set_sample_index(index);
    const Sample sample = spec_.sample(rng, layout_, dtype_);
    OpArgs dut{sample, {}, dtype_, ctx_.options(dtype_)};
    OpArgs ref{sample, {}, dtype_, ctx_.reference_options(dtype_)};
    std::vector<std::string> described;
    for (const InputSpec& in : sample.inputs) {
      BuiltInput b = build_input(ctx_, rng, in, dtype_, layout_);
      dut.inputs.push_back(b.dut);
      ref.inputs.push_back(b.ref);
      described.push_back(b.description);
    }
    context_ = describe_sample(index, sample, described);

    Outputs got;
    try {
      got = spec_.run(dut);
    } catch (const NotImplementedError&) {
      throw;  // unsupported: the backend lacks a kernel
    } catch (const CaseSkipped&) {
      throw;
    } catch (const std::exception& e) {
      throw CaseFailure(std::string("the device under test threw: ") + e.what() + context_);
    }
    Outputs want;
    try {
      want = spec_.run(ref);
    } catch (const NotImplementedError& e) {
      throw CaseSkipped("the reference backend '" + ctx_.reference().name() +
                        "' cannot compute it: " + e.what());
    } catch (const std::exception& e) {
      throw CaseFailure(std::string("the reference backend threw: ") + e.what() + context_);
    }
    if (got.size() != want.size())
      throw CaseFailure("the op gave " + std::to_string(got.size()) + " outputs on the device " +
                        "under test and " + std::to_string(want.size()) + " on the reference");
    // An input the op only reads keeps its values on the device under test
    // (the reference's copy of it holds the same values).
    for (std::size_t i = 0; i < sample.inputs.size(); ++i) {
      if (sample.inputs[i].writable) continue;
      const std::string changed = compare(dut.inputs[i], ref.inputs[i], Tolerance{}, 1);
      if (!changed.empty())
        throw CaseFailure("the op changed input " + std::to_string(i) +
                          ", which it only reads: " + changed + context_);
    }
    for (std::size_t o = 0; o < got.size(); ++o) {
      const Tolerance tol = tolerance_for(ctx_, spec_, dtype_, want[o].dtype());
      std::string diff = compare(got[o], want[o], tol, sample.terms);
      if (!diff.empty())
        throw CaseFailure("output " + std::to_string(o) + ": " + diff +
                          mismatch_details(got[o], ref.inputs) + context_);
    }
  }

  std::string describe_sample(int index, const Sample& sample,
                              const std::vector<std::string>& inputs) const {
    std::ostringstream os;
    os << "\nsample " << index + 1 << " of " << spec_.samples << ": ";
    for (std::size_t i = 0; i < inputs.size(); ++i)
      os << (i ? "; " : "") << "input " << i << " " << inputs[i];
    if (!sample.dims.empty()) os << "; dims " << detail::format(sample.dims);
    if (sample.inputs.empty()) os << "shape " << detail::format(sample.shape);
    os << "\nreplay: backplane conformance --backend " << ctx_.backend().path() << " --compare-to "
       << ctx_.reference().path() << " --seed " << ctx_.seed() << " --filter '" << name_ << "'";
    return os.str();
  }

  const Context& ctx_;
  const OpCaseSpec& spec_;
  DType dtype_;
  Layout layout_;
  const std::string& name_;
  std::string context_;
};

}  // namespace

void add_op_case(Suite& suite, OpCaseSpec op) {
  auto spec = std::make_shared<const OpCaseSpec>(std::move(op));
  for (DType dtype : spec->dtypes)
    for (Layout layout : spec->layouts) {
      std::string name = "op." + spec->name + "." + std::string(bp::name(dtype)) + "." +
                         std::string(to_string(layout));
      std::vector<std::string> ids = {"DV-2"};
      if (layout == Layout::Strided) ids.push_back("VW-4");
      if (layout == Layout::ZeroD || layout == Layout::Empty) ids.push_back("VW-6");
      for (const auto& id : spec->spec)
        if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
      suite.add({name, ids, "op",
                 [spec, dtype, layout, name](const Context& ctx) {
                   OpCaseRun(ctx, *spec, dtype, layout, name).run();
                 },
                 layout == Layout::Empty});
    }
}

}  // namespace bp::conformance
