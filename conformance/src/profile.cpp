// The profiles' kernel lists, and the verdict: certified when every required
// kernel is registered and reached by a passed case whose tensors are not
// empty, every case ran that needed only them, and no case failed.
#include <backplane/conformance/profile.h>
#include <backplane/dispatcher.h>

#include <algorithm>
#include <initializer_list>

namespace bp::conformance {

namespace {

bool has(const Backend& b, Op op, DType d) {
  return KernelRegistry::instance().lookup(op, b.id(), d).fn != nullptr;
}

std::string kernel_name(Op op, DType d) {
  return std::string(op_name(op)) + " (" + std::string(name(d)) + ")";
}

// The core profile's ops, for float32 and int64.
constexpr Op kCoreOps[] = {Op::Fill, Op::Copy, Op::Add,   Op::Sub, Op::Mul, Op::Div,
                           Op::Neg,  Op::Abs,  Op::Eq,    Op::Ne,  Op::Lt,  Op::Le,
                           Op::Gt,   Op::Ge,   Op::Where, Op::Sum, Op::Max, Op::Min};
// Gradient checks run in float64: the ops whose backward they exercise.
constexpr Op kTrainingF64Ops[] = {
    Op::Fill,  Op::Copy,    Op::Add,     Op::Sub,  Op::Mul,     Op::Div,     Op::Neg,
    Op::Abs,   Op::Exp,     Op::Log,     Op::Sqrt, Op::Sigmoid, Op::Tanh,    Op::Relu,
    Op::Pow,   Op::Sum,     Op::Max,     Op::Min,  Op::Matmul,  Op::Softmax, Op::LogSoftmax,
    Op::Where, Op::Gt,      Op::Lt,      Op::Eq,   Op::Gather,  Op::Scatter, Op::IndexSelect,
    Op::Clamp, Op::Maximum, Op::Minimum, Op::Erf};

std::vector<std::pair<Op, DType>> candidates(const std::string& profile) {
  std::vector<std::pair<Op, DType>> out;
  for (Op op : kCoreOps)
    for (DType d : {DType::Float32, DType::Int64}) out.emplace_back(op, d);
  if (profile == "core") return out;
  if (profile == "training") {
    for (int op = 0; op < kNumOps; ++op) out.emplace_back(static_cast<Op>(op), DType::Float32);
    for (Op op : kTrainingF64Ops) out.emplace_back(op, DType::Float64);
    // Masks and comparisons' results.
    for (Op op : {Op::Fill, Op::Copy, Op::LogicalNot, Op::LogicalAnd, Op::LogicalOr})
      out.emplace_back(op, DType::Bool);
    for (Op op : {Op::Gather, Op::Scatter, Op::IndexSelect}) out.emplace_back(op, DType::Int64);
    return out;
  }
  for (int op = 0; op < kNumOps; ++op)
    for (DType d : kAllDTypes) out.emplace_back(static_cast<Op>(op), d);
  return out;
}

std::vector<std::pair<Op, DType>> required(const std::string& profile, const Backend& reference) {
  std::vector<std::pair<Op, DType>> out;
  for (const auto& k : candidates(profile))
    if (has(reference, k.first, k.second) && std::find(out.begin(), out.end(), k) == out.end())
      out.push_back(k);
  return out;
}

}  // namespace

bool is_profile(const std::string& name) {
  return std::find(std::begin(kProfiles), std::end(kProfiles), name) != std::end(kProfiles);
}

std::vector<std::string> required_kernels(const std::string& profile, const Backend& reference) {
  std::vector<std::string> out;
  for (const auto& [op, d] : required(profile, reference)) out.push_back(kernel_name(op, d));
  return out;
}

void certify(Report& report, const std::string& profile, const Backend& backend,
             const Backend& reference, bool complete) {
  Certification& c = report.certification;
  c = Certification{};
  c.profile = profile;
  c.complete = complete;
  const std::vector<std::string> need = required_kernels(profile, reference);
  c.required_kernels = static_cast<int>(need.size());
  for (const auto& [op, d] : required(profile, reference))
    if (!has(backend, op, d)) c.missing_kernels.push_back(kernel_name(op, d));
  for (const CaseResult& r : report.results) {
    if (r.status == Status::Skipped) ++c.skipped;
    if (r.status != Status::Unsupported) continue;
    bool blocked = false;
    for (const std::string& m : r.missing)
      if (std::find(need.begin(), need.end(), m) != need.end()) {
        c.blocked_cases.push_back(r.c->name + ": " + m);
        blocked = true;
        break;
      }
    if (!blocked) ++c.unsupported;
  }
  // A kernel is covered once a case passed that reached it with tensors that
  // are not empty (an empty case may pass without the kernel computing
  // anything).
  std::vector<std::string> covered;
  for (const CaseResult& r : report.results)
    if (r.status == Status::Passed && !r.c->empty)
      covered.insert(covered.end(), r.kernels.begin(), r.kernels.end());
  for (const std::string& k : need)
    if (std::find(c.missing_kernels.begin(), c.missing_kernels.end(), k) ==
            c.missing_kernels.end() &&
        std::find(covered.begin(), covered.end(), k) == covered.end())
      c.uncovered_kernels.push_back(k);
  c.failed = report.summary().failed;
  c.certified = complete && c.missing_kernels.empty() && c.blocked_cases.empty() &&
                c.uncovered_kernels.empty() && c.failed == 0;
}

}  // namespace bp::conformance
