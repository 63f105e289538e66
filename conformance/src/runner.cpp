// Running cases and classifying what they throw; the host-side checks.
#include <backplane/conformance.h>
#include <cxxabi.h>

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

bool matches(const Case& c, const std::string& filter) {
  if (filter.empty()) return true;
  auto has = [&](const std::string& s) { return s.find(filter) != std::string::npos; };
  if (has(c.name) || has(c.category)) return true;
  for (const auto& id : c.spec)
    if (has(id)) return true;
  return false;
}

std::string base_name(const char* path) {
  std::string_view p(path);
  auto slash = p.find_last_of('/');
  return std::string(slash == std::string_view::npos ? p : p.substr(slash + 1));
}

}  // namespace

void Suite::add(Case c) {
  for (const auto& existing : cases_)
    BP_CHECK(existing.name != c.name, "[conformance] two cases are named '", c.name, "'");
  BP_CHECK(static_cast<bool>(c.run), "[conformance] case '", c.name, "' has no function");
  cases_.push_back(std::move(c));
}

Suite default_suite() {
  Suite suite;
  add_inplace_cases(suite);
  add_view_cases(suite);
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

Summary Report::summary() const {
  Summary s;
  for (const auto& r : results) {
    switch (r.status) {
      case Status::Passed:
        ++s.passed;
        break;
      case Status::Failed:
        ++s.failed;
        break;
      case Status::Unsupported:
        ++s.unsupported;
        break;
      case Status::Skipped:
        ++s.skipped;
        break;
    }
  }
  return s;
}

CaseResult run_case(const Case& c, const Context& ctx) {
  CaseResult r;
  r.c = &c;
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
  } catch (const std::exception& e) {
    r.status = Status::Failed;
    r.message = type_name(typeid(e)) + ": " + e.what();
  } catch (...) {
    r.status = Status::Failed;
    r.message = "an exception of an unknown type";
  }
  return r;
}

Report run_suite(const Suite& suite, const Context& ctx, const RunOptions& options) {
  Report report;
  report.backend = ctx.backend().name();
  report.device = to_string(ctx.device());
  report.results.reserve(suite.cases().size());
  for (const auto& c : suite.cases()) {
    if (!matches(c, options.filter)) {
      report.results.push_back({&c, Status::Skipped, "not selected by --filter " + options.filter});
      continue;
    }
    report.results.push_back(run_case(c, ctx));
  }
  return report;
}

namespace detail {

void fail(const char* file, int line, const std::string& what, const std::string& note) {
  std::string msg = what + " (" + base_name(file) + ":" + std::to_string(line) + ")";
  if (!note.empty()) msg += ": " + note;
  throw CaseFailure(msg);
}

}  // namespace detail

void expect_values(const Tensor& t, const std::vector<double>& expected, const char* expr,
                   const char* file, int line) {
  if (t.numel() != static_cast<int64_t>(expected.size()))
    detail::fail(file, line,
                 std::string(expr) + ": expected " + std::to_string(expected.size()) +
                     " elements, got " + std::to_string(t.numel()) + " (shape " +
                     detail::format(t.sizes()) + ")");
  std::vector<double> actual = t.to_vector<double>();
  if (actual != expected)
    detail::fail(file, line,
                 std::string(expr) + ": expected values " + detail::format(expected) + ", got " +
                     detail::format(actual));
}

void expect_shape(const Tensor& t, const std::vector<int64_t>& expected, const char* expr,
                  const char* file, int line) {
  std::vector<int64_t> actual(t.sizes().begin(), t.sizes().end());
  if (actual != expected)
    detail::fail(file, line,
                 std::string(expr) + ": expected shape " + detail::format(expected) + ", got " +
                     detail::format(actual));
}

void expect_strides(const Tensor& t, const std::vector<int64_t>& expected, const char* expr,
                    const char* file, int line) {
  std::vector<int64_t> actual(t.strides().begin(), t.strides().end());
  bool same = actual.size() == expected.size();
  for (std::size_t i = 0; same && i < actual.size(); ++i)
    same = t.size(static_cast<int64_t>(i)) == 1 || actual[i] == expected[i];
  if (!same)
    detail::fail(file, line,
                 std::string(expr) + ": expected strides " + detail::format(expected) + ", got " +
                     detail::format(actual) + " (shape " + detail::format(t.sizes()) + ")");
}

}  // namespace bp::conformance
