// The conformance suite: cases that check a backend against SEMANTICS.md,
// and the runner that reports which pass.
//
// A case is a name, the SEMANTICS.md IDs it checks, a category and a
// function of a Context (the device under test). It fails by throwing
// CaseFailure (the BP_EXPECT* macros below do this with expected and actual
// values in the message); a NotImplementedError escaping it marks it
// unsupported, CaseSkipped marks it skipped, and any other exception fails
// it with the exception's type and message.
#pragma once

#include <backplane/backplane.h>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace bp::conformance {

// The device under test, handed to every case.
class Context {
 public:
  Context(Backend& backend, Device device) : backend_(&backend), device_(device) {}

  Device device() const { return device_; }
  Backend& backend() const { return *backend_; }
  // Options that put a tensor of `dtype` on the device under test.
  TensorOptions options(DType dtype = kDefaultFloat) const {
    return TensorOptions(dtype).device(device_);
  }

 private:
  Backend* backend_;
  Device device_;
};

// Thrown by the check macros: the case broke the rule it checks.
class CaseFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown by a case that cannot run here (a missing capability that is not an
// op, such as host-addressable memory); reported as skipped.
class CaseSkipped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Case {
  std::string name;               // "inplace.zero_.float32": category first
  std::vector<std::string> spec;  // SEMANTICS.md IDs: {"IP-2"}
  std::string category;           // "inplace", "view", ...
  std::function<void(const Context&)> run;
};

// An ordered list of cases. Registration is explicit: each cases_*.cpp file
// has one add_*_cases(Suite&) function.
class Suite {
 public:
  // Throws ValueError when a case of that name is already there.
  void add(Case c);
  const std::vector<Case>& cases() const { return cases_; }

 private:
  std::vector<Case> cases_;
};

void add_inplace_cases(Suite& suite);
void add_view_cases(Suite& suite);
// Every case of the library.
Suite default_suite();

// --- running and reporting -------------------------------------------------

enum class Status { Passed, Failed, Unsupported, Skipped };
std::string_view to_string(Status s);

struct CaseResult {
  const Case* c = nullptr;
  Status status = Status::Passed;
  std::string message;  // why it failed, was unsupported or skipped
};

struct Summary {
  int passed = 0, failed = 0, unsupported = 0, skipped = 0;
  int total() const { return passed + failed + unsupported + skipped; }
};

struct Report {
  std::string backend;  // the backend's name
  std::string device;   // "cpu_onednn:0"
  std::vector<CaseResult> results;
  Summary summary() const;
};

struct RunOptions {
  // When set, only cases whose name, category or one of whose IDs contains
  // this text run; the others are reported as skipped.
  std::string filter;
};

// Runs one case and classifies what it threw.
CaseResult run_case(const Case& c, const Context& ctx);
// Runs every case of `suite` in order on the device of `ctx`.
Report run_suite(const Suite& suite, const Context& ctx, const RunOptions& options = {});

// One table per category (in the order categories first appear), then the
// summary line.
void print_report(std::ostream& os, const Report& report);
// "cpu_onednn: 40 passed, 1 failed, 2 unsupported, 0 skipped (43 cases)".
std::string summary_line(const Report& report);
// The report as JSON:
// {"backend": ..., "cases": [{"name", "spec", "category", "status",
//  "message"}...], "summary": {"passed", "failed", "unsupported", "skipped"}}
std::string to_json(const Report& report);
// Writes to_json(report) to `path`; throws ValueError naming the path when
// it cannot.
void write_json(const std::string& path, const Report& report);
// `s` as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);

// --- checks -------------------------------------------------------------------

namespace detail {

template <class T>
void format_value(std::ostream& os, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "true" : "false");
  } else if constexpr (requires {
                         v.begin();
                         v.end();
                       } &&
                       !std::is_convertible_v<T, std::string_view>) {
    os << '[';
    std::size_t i = 0;
    for (const auto& e : v) {
      if (i) os << ", ";
      if (i == 64) {
        os << "...";
        break;
      }
      format_value(os, e);
      ++i;
    }
    os << ']';
  } else {
    os << v;
  }
}

template <class T>
std::string format(const T& v) {
  std::ostringstream os;
  format_value(os, v);
  return os.str();
}

// Throws CaseFailure: "<what> (<file>:<line>)[: <note>]".
[[noreturn]] void fail(const char* file, int line, const std::string& what,
                       const std::string& note = {});

template <class... Args>
std::string note(Args&&... args) {
  if constexpr (sizeof...(Args) == 0) {
    return {};
  } else {
    std::ostringstream os;
    (os << ... << args);
    return os.str();
  }
}

}  // namespace detail

// Host-side checks of a tensor, with the tensor's expression for the message.
// Values are compared exactly through to_vector<double>(): the suite uses
// small integers, which every dtype holds exactly.
void expect_values(const Tensor& t, const std::vector<double>& expected, const char* expr,
                   const char* file, int line);
// Shape equality.
void expect_shape(const Tensor& t, const std::vector<int64_t>& expected, const char* expr,
                  const char* file, int line);
// Stride equality, ignoring dims of size 1 (their stride never addresses
// memory, and backends and PyTorch differ on what to store there).
void expect_strides(const Tensor& t, const std::vector<int64_t>& expected, const char* expr,
                    const char* file, int line);

}  // namespace bp::conformance

// Fails the case unless `cond` holds; extra arguments are streamed into the
// message.
#define BP_EXPECT(cond, ...)                                                         \
  do {                                                                               \
    if (!(cond))                                                                     \
      ::bp::conformance::detail::fail(__FILE__, __LINE__, "expected " #cond,         \
                                      ::bp::conformance::detail::note(__VA_ARGS__)); \
  } while (0)

// Fails unless actual == expected, printing both.
#define BP_EXPECT_EQ(actual, expected, ...)                                                      \
  do {                                                                                           \
    const auto& bp_actual_ = (actual);                                                           \
    const auto& bp_expected_ = (expected);                                                       \
    if (!(bp_actual_ == bp_expected_))                                                           \
      ::bp::conformance::detail::fail(                                                           \
          __FILE__, __LINE__,                                                                    \
          std::string(#actual ": expected ") + ::bp::conformance::detail::format(bp_expected_) + \
              ", got " + ::bp::conformance::detail::format(bp_actual_),                          \
          ::bp::conformance::detail::note(__VA_ARGS__));                                         \
  } while (0)

// Fails unless `expr` throws `ErrorType` (a bp error class, e.g. bp::ValueError).
#define BP_EXPECT_THROWS(expr, ErrorType)                                                        \
  do {                                                                                           \
    bool bp_thrown_ = false;                                                                     \
    try {                                                                                        \
      (void)(expr);                                                                              \
    } catch (const ErrorType&) {                                                                 \
      bp_thrown_ = true;                                                                         \
    }                                                                                            \
    if (!bp_thrown_)                                                                             \
      ::bp::conformance::detail::fail(__FILE__, __LINE__,                                        \
                                      "expected " #expr " to throw " #ErrorType ", it did not"); \
  } while (0)

// BP_EXPECT_VALUES(t, {0, 1, 2}) or BP_EXPECT_VALUES(t, host_vector): every
// element of t, row-major.
#define BP_EXPECT_VALUES(t, ...) \
  ::bp::conformance::expect_values((t), std::vector<double>(__VA_ARGS__), #t, __FILE__, __LINE__)
// BP_EXPECT_SHAPE(t, {3, 3}); BP_EXPECT_SHAPE(t, {}) for 0-d.
#define BP_EXPECT_SHAPE(t, ...) \
  ::bp::conformance::expect_shape((t), std::vector<int64_t>(__VA_ARGS__), #t, __FILE__, __LINE__)
// BP_EXPECT_STRIDES(t, {4, 1}).
#define BP_EXPECT_STRIDES(t, ...) \
  ::bp::conformance::expect_strides((t), std::vector<int64_t>(__VA_ARGS__), #t, __FILE__, __LINE__)

// Marks the running case skipped, with a reason.
#define BP_SKIP(...) \
  throw ::bp::conformance::CaseSkipped(::bp::conformance::detail::note(__VA_ARGS__))
