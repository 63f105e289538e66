// Shrinking a failing case and printing its reproducer.
//
// Shrinking is greedy: candidates that are each one simplification of the
// case (a segment, an op or a view step fewer; a dim fewer or smaller;
// plainer values, operands and parameters) are run in turn, and the first
// that still fails with the same kind on the same op replaces the case; this
// repeats until no candidate fails, or the time or try budget is spent.
// Because a case holds parameters that are resolved against the shapes it
// meets, every candidate still resolves to legal calls.
#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>

#include "fuzz_internal.h"

namespace bp::conformance::fuzz {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxTries = 4000;

void simpler_operands(const Case& c, std::vector<Case>& out) {
  for (std::size_t i = 0; i < c.segments.size(); ++i) {
    if (!c.segments[i].op) continue;
    const auto& ops = c.segments[i].op->operands;
    for (std::size_t k = 0; k < ops.size(); ++k) {
      auto variant = [&](auto&& change) {
        Case x = c;
        change(x.segments[i].op->operands[k]);
        out.push_back(std::move(x));
      };
      if (ops[k].strided) variant([](Operand& o) { o.strided = false; });
      if (ops[k].source == Source::Alias || ops[k].source == Source::Self)
        variant([](Operand& o) { o.source = Source::Fresh; });
      if (ops[k].leaf) variant([](Operand& o) { o.leaf = false; });
      if (ops[k].values.kind != ValueKind::Iota && ops[k].source != Source::Scalar &&
          c.kind != CaseKind::Grad)
        variant([](Operand& o) { o.values.kind = ValueKind::Iota; });
      if (ops[k].shape_seed != 0) variant([](Operand& o) { o.shape_seed = 0; });
    }
  }
}

// Each one simplification of `c`, the biggest first.
std::vector<Case> candidates(const Case& c) {
  std::vector<Case> out;
  auto each_segment = [&](auto&& f) {
    for (std::size_t i = 0; i < c.segments.size(); ++i) f(i);
  };
  if (c.segments.size() > 1)
    each_segment([&](std::size_t i) {
      Case x = c;
      x.segments.erase(x.segments.begin() + static_cast<std::ptrdiff_t>(i));
      out.push_back(std::move(x));
    });
  each_segment([&](std::size_t i) {
    if (!c.segments[i].op) return;
    Case x = c;
    x.segments[i].op.reset();
    out.push_back(std::move(x));
  });
  each_segment([&](std::size_t i) {
    for (std::size_t j = 0; j < c.segments[i].views.size(); ++j) {
      Case x = c;
      auto& v = x.segments[i].views;
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(j));
      out.push_back(std::move(x));
    }
  });
  const std::vector<int64_t>& shape = c.base.shape;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    Case x = c;
    x.base.shape.erase(x.base.shape.begin() + static_cast<std::ptrdiff_t>(d));
    out.push_back(std::move(x));
  }
  for (std::size_t d = 0; d < shape.size(); ++d)
    for (int64_t smaller : {int64_t{1}, shape[d] / 2, shape[d] - 1}) {
      if (smaller >= shape[d] || smaller < 1) continue;
      Case x = c;
      x.base.shape[d] = smaller;
      out.push_back(std::move(x));
    }
  if (c.base.values.kind == ValueKind::Special || c.base.values.kind == ValueKind::Zeros) {
    Case x = c;
    x.base.values.kind = ValueKind::Random;
    out.push_back(std::move(x));
  }
  if (c.base.values.kind != ValueKind::Iota && c.kind != CaseKind::Grad) {
    Case x = c;
    x.base.values.kind = ValueKind::Iota;
    out.push_back(std::move(x));
  }
  simpler_operands(c, out);
  each_segment([&](std::size_t i) {
    for (std::size_t j = 0; j < c.segments[i].views.size(); ++j) {
      const ViewStep& v = c.segments[i].views[j];
      for (std::size_t k = 0; k < v.p.size(); ++k)
        if (v.p[k] != 0) {
          Case x = c;
          x.segments[i].views[j].p[k] = 0;
          out.push_back(std::move(x));
        }
      if (v.seed != 0) {
        Case x = c;
        x.segments[i].views[j].seed = 0;
        out.push_back(std::move(x));
      }
    }
    if (const auto& op = c.segments[i].op) {
      for (std::size_t k = 0; k < op->p.size(); ++k)
        if (op->p[k] != 0) {
          Case x = c;
          x.segments[i].op->p[k] = 0;
          out.push_back(std::move(x));
        }
    }
  });
  return out;
}

}  // namespace

Shrunk shrink(const Case& c, const Outcome& failure, const Env& env, double seconds) {
  Shrunk s{c, failure};
  Env quiet = env;
  quiet.echo = nullptr;
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  for (bool improved = true; improved;) {
    improved = false;
    for (Case& candidate : candidates(s.c)) {
      if (Clock::now() >= deadline || s.tried >= kMaxTries) return s;
      ++s.tried;
      Outcome o = run_case(candidate, quiet);
      if (o.verdict != Verdict::Fail || o.signature() != failure.signature()) continue;
      s.c = std::move(candidate);
      s.outcome = std::move(o);
      ++s.accepted;
      improved = true;
      break;
    }
  }
  return s;
}

std::string op_set(const Case& c, bool views) {
  std::set<std::string> names;
  for (const Segment& s : c.segments) {
    if (views)
      for (const ViewStep& v : s.views)
        names.insert(std::string(view_name(v.kind)) + (v.probe ? "!" : ""));
    if (s.op) names.insert(op_info(s.op->kind).name);
  }
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

void print_reproducer(std::ostream& os, const Case& original, const Shrunk& s,
                      const std::string& replay_command, int number) {
  const Outcome& o = s.outcome;
  os << "\nFAIL #" << number << " [" << o.kind << "] " << o.op << "  (" << to_string(original.kind)
     << " case " << original.index << " of seed " << original.seed << ")\n"
     << "  replay: " << replay_command << " --seed " << original.seed << " --case "
     << original.index << "\n"
     << "  " << o.message << "\n"
     << "  shrunk in " << s.accepted << " steps (" << s.tried << " candidates tried); reproducer,"
     << " with the same --backend:\n";
  std::string text;
  for (const std::string& line : o.transcript) text += line + "\n";
  for (DType d : {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64}) {
    const std::string v = dtype_cpp(d);
    for (std::size_t at = text.find(v); at != std::string::npos; at = text.find(v, at + 1)) {
      const bool alone = (at == 0 || !std::isalnum(static_cast<unsigned char>(text[at - 1]))) &&
                         !std::isalnum(static_cast<unsigned char>(text[at + v.size()]));
      if (alone) {
        os << "    auto " << v << " = bp::TensorOptions(" << dtype_enum(d) << ");\n";
        break;
      }
    }
  }
  for (const std::string& line : o.transcript) os << "    " << line << "\n";
  os << "    // ^ " << o.kind << ": "
     << (o.message.size() > 240 ? o.message.substr(0, 240) + "..." : o.message) << "\n";
}

}  // namespace bp::conformance::fuzz
