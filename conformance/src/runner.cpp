// Selecting cases, running them (in this process or one child process per
// case) and classifying what they threw.
#include <backplane/conformance/runner.h>
#include <backplane/debug.h>
#include <cxxabi.h>
#include <fnmatch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <typeinfo>

namespace bp::conformance {

namespace {

// "bp::ValueError" rather than the mangled "N2bp10ValueErrorE", so a failure
// names the error class a reader can grep for.
std::string type_name(const std::type_info& info) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(info.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(info.name());
}

bool glob(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

bool selected(const Case& c, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  for (const auto& f : filters) {
    if (glob(f, c.name) || glob(f, c.category)) return true;
    for (const auto& id : c.spec)
      if (glob(f, id)) return true;
  }
  return false;
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

uint64_t Context::case_seed(std::string_view case_name) const {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char ch : case_name) h = (h ^ ch) * 0x100000001b3ull;
  return mix(seed_ ^ h);
}

void Suite::add(Case c) {
  BP_CHECK(find(c.name) == nullptr, "[conformance] two cases are named '", c.name, "'");
  BP_CHECK(static_cast<bool>(c.run), "[conformance] case '", c.name, "' has no function");
  cases_.push_back(std::move(c));
}

const Case* Suite::find(std::string_view name) const {
  for (const auto& c : cases_)
    if (c.name == name) return &c;
  return nullptr;
}

Suite default_suite() {
  Suite suite;
  add_inplace_cases(suite);
  add_view_cases(suite);
  add_construction_cases(suite);
  add_random_cases(suite);
  add_inplace_rule_cases(suite);
  add_view_rule_cases(suite);
  add_view_op_cases(suite);
  add_copy_cases(suite);
  add_device_cases(suite);
  add_op_cases(suite);
  add_autograd_cases(suite);
  add_limit_cases(suite);
  add_lifecycle_cases(suite);
  add_dlpack_cases(suite);
  add_composite_cases(suite);
  add_nn_cases(suite);
  add_sort_cases(suite);
  add_sparse_cases(suite);
  add_model_cases(suite);
  add_stream_cases(suite);
  add_dtype_cases(suite);
  return suite;
}

std::string_view to_string(Status s) {
  switch (s) {
    case Status::Passed:
      return "passed";
    case Status::Failed:
      return "failed";
    case Status::Unsupported:
      return "unsupported";
    case Status::Skipped:
      return "skipped";
  }
  return "unknown";
}

void Summary::add(Status s) {
  switch (s) {
    case Status::Passed:
      ++passed;
      break;
    case Status::Failed:
      ++failed;
      break;
    case Status::Unsupported:
      ++unsupported;
      break;
    case Status::Skipped:
      ++skipped;
      break;
  }
}

Summary Report::summary() const {
  Summary s;
  for (const auto& r : results) s.add(r.status);
  return s;
}

std::vector<std::string> missing_from_message(std::string_view message) {
  // The dispatcher's words: "[add] not implemented for dtype float32 on backend 'x'; ...".
  static constexpr std::string_view kMiddle = "] not implemented for dtype ";
  std::vector<std::string> out;
  if (message.empty() || message[0] != '[') return out;
  auto close = message.find(kMiddle);
  if (close == std::string_view::npos) return out;
  std::string_view op = message.substr(1, close - 1);
  std::string_view rest = message.substr(close + kMiddle.size());
  std::string_view dtype = rest.substr(0, rest.find(' '));
  out.push_back(std::string(op) + " (" + std::string(dtype) + ")");
  return out;
}

CaseResult run_case(const Case& c, const Context& ctx) {
  CaseResult r;
  r.c = &c;
  const auto t0 = std::chrono::steady_clock::now();
  // Every allocation the case makes carries a guard after its end, checked
  // when it is freed (backplane/debug.h): a kernel that writes past the end
  // of its output fails the case on any device.
  debug::set_guard_bytes(c.unguarded ? 0 : kGuardBytes);
  (void)debug::take_guard_violations();
  debug::KernelRecording recording;
  try {
    c.run(ctx);
    r.status = Status::Passed;
  } catch (const CaseFailure& e) {
    r.status = Status::Failed;
    r.message = e.what();
  } catch (const CaseSkipped& e) {
    r.status = Status::Skipped;
    r.message = e.what();
  } catch (const NotImplementedError& e) {
    // A backend may leave ops out (DV-2); that is reported, not held against it.
    r.status = Status::Unsupported;
    r.message = e.what();
    r.missing = missing_from_message(r.message);
  } catch (const std::exception& e) {
    r.status = Status::Failed;
    r.message = type_name(typeid(e)) + ": " + e.what();
  } catch (...) {
    r.status = Status::Failed;
    r.message = "an exception of an unknown type";
  }
  debug::set_guard_bytes(0);
  for (const debug::ReachedKernel& k : recording.kernels())
    if (k.backend == ctx.backend().label()) r.kernels.push_back(k.op + " (" + k.dtype + ")");
  const std::vector<debug::GuardViolation> overwritten = debug::take_guard_violations();
  if (!overwritten.empty()) {
    std::string m = "out of bounds: " + debug::describe(overwritten.front());
    if (overwritten.size() > 1)
      m += " (and " + std::to_string(overwritten.size() - 1) + " more allocation(s))";
    if (r.status == Status::Passed) {
      r.status = Status::Failed;
      r.message = m;
    } else if (r.status == Status::Failed) {
      r.message += "\n" + m;
    }
  }
  r.duration_ms = ms_since(t0);
  return r;
}

std::vector<KernelFailures> failures_by_kernel(const Report& report) {
  std::vector<KernelFailures> out;
  auto entry = [&](const std::string& kernel) -> KernelFailures& {
    for (KernelFailures& k : out)
      if (k.kernel == kernel) return k;
    return out.emplace_back(KernelFailures{kernel, {}, 0, 0});
  };
  int failed = 0;
  for (const CaseResult& r : report.results)
    if (r.status == Status::Failed) {
      ++failed;
      for (const std::string& k : r.kernels) entry(k).cases.push_back(r.c->name);
    }
  for (const CaseResult& r : report.results)
    if (r.status == Status::Passed)
      for (const std::string& k : r.kernels)
        for (KernelFailures& f : out)
          if (f.kernel == k) ++f.passed;
  for (KernelFailures& k : out) {
    const double f = static_cast<double>(k.cases.size());
    k.score = f / std::sqrt(static_cast<double>(failed) * (f + k.passed));
  }
  std::stable_sort(out.begin(), out.end(), [](const KernelFailures& a, const KernelFailures& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.cases.size() != b.cases.size()) return a.cases.size() > b.cases.size();
    if (a.passed != b.passed) return a.passed < b.passed;
    return a.kernel < b.kernel;
  });
  return out;
}

std::vector<const Case*> select_cases(const Suite& suite, const std::vector<std::string>& filters) {
  std::vector<const Case*> out;
  for (const auto& c : suite.cases())
    if (selected(c, filters)) out.push_back(&c);
  return out;
}

Report run_suite(const Suite& suite, const Context& ctx, const RunOptions& options) {
  Report report;
  report.backend = ctx.backend().name();
  report.device = to_string(ctx.device());
  report.compare_to = ctx.reference().name();
  report.compare_device = to_string(ctx.reference_device());
  report.seed = ctx.seed();
  report.isolated = options.isolation.has_value();
  report.timeout_s = report.isolated ? options.isolation->timeout_s : 0;
  report.filters = options.filters;
  const std::vector<const Case*> cases = select_cases(suite, options.filters);
  report.results.reserve(cases.size());
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (options.on_start) options.on_start(i + 1, cases.size(), *cases[i]);
    CaseResult r =
        report.isolated ? run_isolated(*cases[i], *options.isolation) : run_case(*cases[i], ctx);
    r.c = cases[i];
    report.results.push_back(std::move(r));
  }
  report.duration_ms = ms_since(t0);
  return report;
}

}  // namespace bp::conformance
