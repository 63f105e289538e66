// The fuzzing loop: cases in order until a limit, progress every few
// seconds, each failure counted by kind, and the first few failures of each
// kind shrunk; a reproducer is printed for each distinct shrunk failure.
#include <backplane/debug.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "fuzz_internal.h"

namespace bp::conformance::fuzz {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::vector<bp_tolerance> declared_tolerances(const Options& o) {
  std::vector<bp_tolerance> t = PluginLoader::instance().by_id(o.device.backend)->tolerances();
  if (o.reference.backend != o.device.backend) {
    const auto r = PluginLoader::instance().by_id(o.reference.backend)->tolerances();
    t.insert(t.end(), r.begin(), r.end());
  }
  return t;
}

// Failures of one family share a root cause as far as the fuzzer can tell:
// the same check on the same op, or, for raised errors, the same message with
// op names, shapes and numbers left out (one bug often shows in many ops).
bool error_kind(const std::string& kind) {
  return kind == "unexpected-error" || kind == "reference-error" || kind == "wrong-error" ||
         kind == "fuzzer-error";
}

// How a gradient is wrong: NaN or inf, a whole multiple of the right one
// (counted twice through overlapping views), zero, or otherwise.
std::string gradient_class(const std::string& message) {
  double a = 0, n = 0;
  const auto at = message.find("analytic gradient ");
  if (at == std::string::npos ||
      std::sscanf(message.c_str() + at, "analytic gradient %lf, numerical %lf", &a, &n) != 2)
    return "other";
  if (!std::isfinite(a)) return "analytic nan/inf";
  if (a == 0) return "analytic 0";
  if (n != 0 && std::fabs(a / n) >= 1.5 && std::fabs(a / n - std::round(a / n)) < 1e-3)
    return "analytic a multiple";
  return "other";
}

std::string family(const Outcome& o) {
  if (o.kind == "grad-mismatch") return o.kind + " " + gradient_class(o.message);
  if (o.kind == "missing-error") return o.kind + " " + o.op + ": " + o.message;
  if (!error_kind(o.kind)) return o.kind + " " + o.op;
  std::istringstream words(o.message);
  std::string m;
  for (std::string w; words >> w;) {
    if (w.find_first_of("0123456789[]:") != std::string::npos || w == "bool" || w == "bool,")
      continue;
    m += " " + w;
    if (m.size() > 100) break;
  }
  return o.kind + ":" + m;
}

}  // namespace

Outcome run_case(const Case& c, const Env& env) {
  Transcript tr;
  tr.echo = env.echo;
  Outcome o;
  try {
    switch (c.kind) {
      case CaseKind::View:
        run_view_case(c, env, tr);
        break;
      case CaseKind::Op:
        run_op_case(c, env, tr);
        break;
      case CaseKind::Inplace:
        run_inplace_case(c, env, tr);
        break;
      case CaseKind::Grad:
        run_grad_case(c, env, tr);
        break;
    }
  } catch (const Failure& f) {
    o.verdict = Verdict::Fail;
    o.kind = f.kind;
    o.op = f.op;
    o.message = f.message;
  } catch (const Unsupported& u) {
    o.verdict = Verdict::Unsupported;
    o.message = u.message;
  } catch (const NotImplementedError& e) {
    o.verdict = Verdict::Unsupported;
    o.message = e.what();
  } catch (const std::exception& e) {
    o.verdict = Verdict::Fail;
    o.kind = "fuzzer-error";
    o.op = "?";
    o.message = std::string("[fuzz] an exception escaped the case: ") + e.what();
  }
  o.transcript = tr.lines();
  return o;
}

Summary run(const Options& options, std::ostream& out, std::ostream& progress) {
  Env env{options.device, options.reference, declared_tolerances(options), nullptr, options.poison};
  // The device's allocations are poisoned per op case (fuzz_oracle.cpp);
  // whatever happens, nothing stays poisoned after the run.
  struct Unpoison {
    int backend;
    ~Unpoison() {
      if (backend >= 0) debug::set_poison(backend, -1);
    }
  } unpoison{options.poison ? options.device.backend : -1};
  GenConfig config;
  config.skip.insert(options.skip.begin(), options.skip.end());
  std::string replay = options.replay_command;
  if (options.poison) replay += " --poison";
  for (const std::string& s : options.skip) replay += " --skip '" + s + "'";

  Summary summary;
  struct Budget {
    int shrunk = 0, repeats = 0;
  };
  std::map<std::string, Budget> budgets;  // per family
  std::set<std::string> printed;          // signature and op set of the shrunk case
  const auto start = Clock::now();
  auto last_progress = start;

  auto run_one = [&](uint64_t k) {
    if (options.on_case_start) options.on_case_start(k);
    const Case c = generate(options.seed, k, config);
    if (options.verbose) out << "case " << k << " (" << to_string(c.kind) << ")" << std::endl;
    Env e = env;
    if (options.only_case && options.verbose) e.echo = &out;
    const Outcome o = run_case(c, e);
    ++summary.cases;
    if (o.verdict == Verdict::Pass) {
      ++summary.passed;
      return;
    }
    if (o.verdict == Verdict::Unsupported) {
      ++summary.unsupported;
      if (options.verbose) out << "  unsupported: " << o.message << "\n";
      return;
    }
    ++summary.failed;
    ++summary.failures_by_kind[o.signature()];
    if (options.verbose || options.only_case)
      out << "  case " << k << " failed: [" << o.kind << "] " << o.op << ": " << o.message
          << std::endl;
    // A family is shrunk until `shrink_per_family` of its failures in a
    // row shrank to reproducers already printed (one root cause), or 4 times
    // that many were shrunk.
    Budget& budget = budgets[family(o)];
    if (!options.only_case && (budget.repeats >= options.shrink_per_family ||
                               budget.shrunk >= 4 * options.shrink_per_family))
      return;
    ++budget.shrunk;
    const Shrunk s = shrink(c, o, env, options.shrink_seconds);
    // Distinct reproducers differ in their family and in the ops and views
    // left after shrinking; failures of the graph and of the integer and NaN
    // rules turn on ops only, and raised or missing errors on their message.
    const bool by_ops = s.outcome.kind == "grad-graph" || s.outcome.kind == "int-requires-grad" ||
                        s.outcome.kind == "grad-nan-rule";
    const bool by_family = error_kind(s.outcome.kind) || s.outcome.kind == "missing-error";
    const std::string key = family(s.outcome) + (by_family ? "" : " | " + op_set(s.c, !by_ops));
    if (!printed.insert(key).second && !options.only_case) {
      ++budget.repeats;
      if (options.verbose) out << "  (shrinks to a failure already printed)\n";
      return;
    }
    budget.repeats = 0;
    print_reproducer(out, c, s, replay, static_cast<int>(++summary.distinct));
    out.flush();
  };

  if (options.only_case) {
    run_one(*options.only_case);
  } else {
    for (uint64_t k = 0;; ++k) {
      if (options.cases && k >= *options.cases) break;
      if (options.seconds > 0 && since(start) >= options.seconds) break;
      run_one(k);
      if (since(last_progress) >= options.progress_every_s) {
        last_progress = Clock::now();
        const double t = since(start);
        progress << "[fuzz] " << summary.cases << " cases in " << std::fixed << std::setprecision(0)
                 << t << " s (" << static_cast<double>(summary.cases) / t << "/s), "
                 << summary.failed << " failed, " << summary.unsupported
                 << " unsupported; next: case " << k + 1 << std::defaultfloat << std::endl;
      }
    }
  }
  summary.seconds = since(start);
  return summary;
}

void print_summary(std::ostream& os, const Summary& s) {
  os << "\n[fuzz] " << s.cases << " cases in " << std::fixed << std::setprecision(1) << s.seconds
     << " s (" << std::setprecision(0)
     << (s.seconds > 0 ? static_cast<double>(s.cases) / s.seconds : 0.0)
     << " cases/s): " << s.passed << " passed, " << s.failed << " failed, " << s.unsupported
     << " unsupported" << std::defaultfloat << "\n";
  if (s.failures_by_kind.empty()) return;
  os << "failures by kind and op (" << s.distinct << " distinct reproducers printed above):\n";
  for (const auto& [kind, n] : s.failures_by_kind)
    os << "  " << std::setw(7) << n << "  " << kind << "\n";
}

}  // namespace bp::conformance::fuzz
