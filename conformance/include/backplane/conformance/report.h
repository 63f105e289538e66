// The report of a run: tables for people, JSON and JUnit XML for tools.
#pragma once

#include <backplane/conformance/runner.h>

#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bp::conformance {

// Where the rule IDs that cases name are defined (relative to the source
// tree); every report names it.
inline constexpr const char* kContractPath = "docs/semantics.md";

struct ConsoleStyle {
  bool colour = false;   // ANSI colours (a terminal, and NO_COLOR unset)
  bool verbose = false;  // a line for every case, passed ones included
};
// True when `fd` is a terminal and NO_COLOR is unset or empty.
bool wants_colour(int fd);

// A table of counts per category (in the order categories first appear),
// then every case that did not pass with its message, the rule IDs,
// declared tolerances, missing ops and the summary line.
void print_report(std::ostream& os, const Report& report, const ConsoleStyle& style = {});
// "cpu_onednn: 40 passed, 1 failed, 2 unsupported, 0 skipped (43 cases)".
std::string summary_line(const Report& report);

// A rule ID's (or category's) standing from the counts of its cases:
// "failed" (any failed), "partial" (any unsupported or skipped: not all of
// it was checked), "passed", or "not checked" (no case ran).
std::string_view coverage_status(const Summary& s);
// The rule IDs the cases name, in first-seen order, each with its counts.
std::vector<std::pair<std::string, Summary>> rule_coverage(const Report& report);
// The categories, in first-seen order, each with its counts.
std::vector<std::pair<std::string, Summary>> category_coverage(const Report& report);
// "certified for profile core (36 required kernels)" or "NOT certified for
// profile core: ..." with the first reasons.
std::string certification_line(const Report& report);

// The "[37/120] view.expand" line rewritten in place on a terminal while the
// suite runs; does nothing when `fd` is not a terminal.
class ProgressLine {
 public:
  // `os` writes to file descriptor `fd` (std::cout and 1).
  ProgressLine(std::ostream& os, int fd);
  ~ProgressLine() { clear(); }
  void update(std::size_t index, std::size_t total, const Case& c);
  // Erases the line (before the report is printed).
  void clear();

 private:
  std::ostream& os_;
  int fd_;
  bool active_;
  bool shown_ = false;
};

// The kernels `backend` registered, from the kernel registry: a row per op,
// a column per dtype (bool i32 i64 f32 f64), a mark where one is registered.
void print_capability_matrix(std::ostream& os, const Backend& backend);

// The report as JSON (docs/conformance.md lists the keys).
std::string to_json(const Report& report);
// `s` as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);
// The report as JUnit XML: a <testsuite> per category, a <testcase> per case
// (classname = category), <failure> for failed, <skipped> for unsupported and
// skipped cases.
std::string to_junit(const Report& report);

// Write to_json / to_junit to `path`; throw ValueError naming the path when
// they cannot.
void write_json(const std::string& path, const Report& report);
void write_junit(const std::string& path, const Report& report);

}  // namespace bp::conformance
