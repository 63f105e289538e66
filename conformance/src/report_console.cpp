// The report for people: counts per category, then what did not pass and
// why, the rule IDs, tolerances and missing ops; and the progress
// line while the suite runs.
#include <backplane/conformance/report.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>

namespace bp::conformance {

namespace {

struct Paint {
  bool on;
  std::string operator()(const std::string& text, const char* code) const {
    return on ? std::string("\033[") + code + "m" + text + "\033[0m" : text;
  }
};
constexpr const char* kRed = "1;31";
constexpr const char* kGreen = "32";
constexpr const char* kYellow = "33";
constexpr const char* kDim = "2";
constexpr const char* kBold = "1";

std::string counts(const Summary& s) {
  return std::to_string(s.passed) + " passed, " + std::to_string(s.failed) + " failed, " +
         std::to_string(s.unsupported) + " unsupported, " + std::to_string(s.skipped) + " skipped";
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// Every line of a multi-line message stays under its case.
std::string indented(const std::string& msg, std::size_t by) {
  std::string indent(by, ' ');
  std::string out = indent;
  for (char ch : msg) {
    out += ch;
    if (ch == '\n') out += indent;
  }
  return out;
}

std::vector<std::string> categories(const Report& report) {
  std::vector<std::string> out;
  for (const auto& r : report.results)
    if (std::find(out.begin(), out.end(), r.c->category) == out.end()) out.push_back(r.c->category);
  return out;
}

std::string cell(int n, const char* colour, const Paint& paint, int width) {
  std::ostringstream os;
  os << std::right << std::setw(width) << n;
  return n > 0 && colour ? paint(os.str(), colour) : os.str();
}

void print_table(std::ostream& os, const Report& report, const Paint& paint) {
  std::vector<std::string> cats = categories(report);
  std::size_t w = 8;
  for (const auto& c : cats) w = std::max(w, c.size());
  os << "\n"
     << std::left << std::setw(int(w) + 2) << "category"
     << "  passed  failed  unsupported  skipped   total\n";
  Summary all;
  auto row = [&](const std::string& label, const Summary& s) {
    os << std::left << std::setw(int(w) + 2) << label << cell(s.passed, kGreen, paint, 8)
       << cell(s.failed, kRed, paint, 8) << cell(s.unsupported, kYellow, paint, 13)
       << cell(s.skipped, nullptr, paint, 9) << std::right << std::setw(8) << s.total() << "\n";
  };
  for (const auto& cat : cats) {
    Summary s;
    for (const auto& r : report.results) {
      if (r.c->category != cat) continue;
      s.add(r.status);
      all.add(r.status);
    }
    row(cat, s);
  }
  row("all", all);
}

void print_every_case(std::ostream& os, const Report& report, const Paint& paint) {
  std::size_t width = 0;
  for (const auto& r : report.results) width = std::max(width, r.c->name.size());
  for (const auto& cat : categories(report)) {
    os << "\n" << paint(cat, kBold) << "\n";
    for (const auto& r : report.results) {
      if (r.c->category != cat) continue;
      const char* colour = r.status == Status::Passed        ? kGreen
                           : r.status == Status::Failed      ? kRed
                           : r.status == Status::Unsupported ? kYellow
                                                             : kDim;
      std::ostringstream line;
      line << std::left << std::setw(12)
           << (r.status == Status::Failed ? "FAILED" : to_string(r.status));
      std::ostringstream time;
      time << std::fixed << std::setprecision(1) << r.duration_ms << " ms";
      os << "  " << paint(line.str(), colour) << std::left << std::setw(int(width) + 2) << r.c->name
         << std::setw(18) << join(r.c->spec, ",") << " " << time.str() << "\n";
    }
  }
}

void print_failures(std::ostream& os, const Report& report, const Paint& paint) {
  bool any = false;
  for (const auto& r : report.results) {
    if (r.status != Status::Failed) continue;
    if (!any) os << "\n" << paint("Failed", kRed) << "\n";
    any = true;
    os << "  " << paint(r.c->name, kBold) << "  " << join(r.c->spec, ",") << "\n"
       << indented(r.message, 6) << "\n";
  }
}

// Grouped by the op that is missing, so a plugin that lacks one op for many
// cases and dtypes reads as one line.
void print_unsupported(std::ostream& os, const Report& report, const Paint& paint) {
  struct Gap {
    std::vector<std::string> dtypes, cases;
  };
  std::map<std::string, Gap> by_op;
  std::vector<const CaseResult*> other;
  for (const auto& r : report.results) {
    if (r.status != Status::Unsupported) continue;
    if (r.missing.empty()) other.push_back(&r);
    for (const auto& m : r.missing) {  // "add (float32)"
      const auto paren = m.find(" (");
      Gap& gap = by_op[m.substr(0, paren)];
      std::string dtype =
          paren == std::string::npos ? "" : m.substr(paren + 2, m.size() - paren - 3);
      if (!dtype.empty() &&
          std::find(gap.dtypes.begin(), gap.dtypes.end(), dtype) == gap.dtypes.end())
        gap.dtypes.push_back(dtype);
      gap.cases.push_back(r.c->name);
    }
  }
  if (by_op.empty() && other.empty()) return;
  os << "\n" << paint("Unsupported (the backend lacks an op the case needs)", kYellow) << "\n";
  for (const auto& [op, gap] : by_op) {
    os << "  " << std::left << std::setw(14) << op << join(gap.dtypes, ", ") << "  ("
       << gap.cases.size() << (gap.cases.size() == 1 ? " case: " : " cases, e.g. ")
       << gap.cases.front() << ")\n";
  }
  for (const auto* r : other) os << "  " << r->c->name << "\n" << indented(r->message, 6) << "\n";
}

void print_skipped(std::ostream& os, const Report& report, const Paint& paint) {
  bool any = false;
  for (const auto& r : report.results) {
    if (r.status != Status::Skipped) continue;
    if (!any) os << "\n" << paint("Skipped", kDim) << "\n";
    any = true;
    os << "  " << r.c->name << ": " << r.message << "\n";
  }
}

// One line per rule ID: it holds on this backend when every case that
// checks it ran and passed; "partial" when some could not run.
void print_spec_coverage(std::ostream& os, const Report& report, const Paint& paint) {
  const auto rules = rule_coverage(report);
  if (rules.empty()) return;
  os << "\nRule IDs (defined in " << kContractPath << ")\n";
  for (const auto& [id, s] : rules) {
    const std::string_view status = coverage_status(s);
    std::ostringstream verdict;
    verdict << std::left << std::setw(12)
            << (s.failed ? std::string("FAILED") : std::string(status));
    const char* colour = s.failed              ? kRed
                         : status == "passed"  ? kGreen
                         : status == "partial" ? kYellow
                                               : kDim;
    os << "  " << std::left << std::setw(8) << id << paint(verdict.str(), colour) << counts(s)
       << "\n";
  }
}

void print_certification(std::ostream& os, const Report& report, const Paint& paint) {
  const Certification& c = report.certification;
  if (c.profile.empty()) return;
  os << "\nCertification, profile " << c.profile << " (" << c.required_kernels
     << " required kernels; backplane conformance --list-profile " << c.profile << ")\n";
  os << "  plugin " << report.plugin_path << "\n  sha256 " << report.plugin_sha256 << "\n  core "
     << report.core_version << ", " << report.date << ", " << report.machine << "\n";
  if (!c.missing_kernels.empty()) {
    os << "  required kernels missing (" << c.missing_kernels.size() << "): ";
    for (std::size_t i = 0; i < c.missing_kernels.size() && i < 12; ++i)
      os << (i ? ", " : "") << c.missing_kernels[i];
    if (c.missing_kernels.size() > 12) os << ", ... (" << c.missing_kernels.size() - 12 << " more)";
    os << "\n";
  }
  if (!c.uncovered_kernels.empty() && c.complete) {
    os << "  required kernels never reached by a passing case (" << c.uncovered_kernels.size()
       << "): ";
    for (std::size_t i = 0; i < c.uncovered_kernels.size() && i < 12; ++i)
      os << (i ? ", " : "") << c.uncovered_kernels[i];
    if (c.uncovered_kernels.size() > 12)
      os << ", ... (" << c.uncovered_kernels.size() - 12 << " more)";
    os << "\n";
  }
  if (!c.blocked_cases.empty())
    os << "  cases that could not run for a required kernel: " << c.blocked_cases.size()
       << " (e.g. " << c.blocked_cases.front() << ")\n";
  os << "  " << paint(certification_line(report), c.certified ? kGreen : kRed) << "\n";
}

// The kernels the failed cases reached, most failing first: where to look.
void print_failures_by_kernel(std::ostream& os, const Report& report, const Paint& paint) {
  const std::vector<KernelFailures> ranked = failures_by_kernel(report);
  if (ranked.empty()) return;
  os << "\n"
     << paint("Failures by kernel", kRed)
     << " (the kernels failed cases reached, those only failures reach first)\n";
  for (std::size_t i = 0; i < ranked.size() && i < 10; ++i) {
    const KernelFailures& k = ranked[i];
    os << "  " << k.kernel << ": " << k.cases.size() << " case" << (k.cases.size() == 1 ? "" : "s")
       << " (";
    for (std::size_t j = 0; j < k.cases.size() && j < 3; ++j) os << (j ? ", " : "") << k.cases[j];
    if (k.cases.size() > 3) os << ", ...";
    os << ")";
    if (k.passed) os << "; " << k.passed << " passed";
    os << "; score " << std::fixed << std::setprecision(2) << k.score << std::defaultfloat;
    os << "\n";
  }
  if (ranked.size() > 10) os << "  ... (" << ranked.size() - 10 << " more kernels)\n";
}

void print_backend_notes(std::ostream& os, const Report& report) {
  if (!report.tolerances.empty()) {
    os << "\nDeclared tolerances (looser than the suite's defaults)\n";
    for (const auto& t : report.tolerances)
      os << "  " << t.backend << ": " << t.op << " " << t.dtype << "  rtol " << t.rtol << ", atol "
         << t.atol << "\n";
  }
  if (!report.missing_ops.empty()) {
    os << "\nOps " << report.compare_to << " has and " << report.backend << " lacks\n";
    for (const auto& m : report.missing_ops)
      os << "  " << std::left << std::setw(14) << m.op << join(m.dtypes, ", ") << "\n";
  }
}

}  // namespace

bool wants_colour(int fd) {
  const char* no_colour = std::getenv("NO_COLOR");
  if (no_colour && *no_colour) return false;
  const char* term = std::getenv("TERM");
  if (term && std::string_view(term) == "dumb") return false;
  return isatty(fd) == 1;
}

std::string_view coverage_status(const Summary& s) {
  if (s.failed) return "failed";
  if (s.unsupported || s.skipped) return s.passed ? "partial" : "not checked";
  return s.passed ? "passed" : "not checked";
}

std::vector<std::pair<std::string, Summary>> rule_coverage(const Report& report) {
  std::vector<std::pair<std::string, Summary>> out;
  for (const auto& r : report.results)
    for (const auto& id : r.c->spec) {
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == id; });
      if (it == out.end()) it = out.insert(out.end(), {id, Summary{}});
      it->second.add(r.status);
    }
  return out;
}

std::vector<std::pair<std::string, Summary>> category_coverage(const Report& report) {
  std::vector<std::pair<std::string, Summary>> out;
  for (const auto& r : report.results) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const auto& e) { return e.first == r.c->category; });
    if (it == out.end()) it = out.insert(out.end(), {r.c->category, Summary{}});
    it->second.add(r.status);
  }
  return out;
}

std::string certification_line(const Report& report) {
  const Certification& c = report.certification;
  if (c.certified) {
    std::string line = report.backend + " is certified for profile " + c.profile + ": all " +
                       std::to_string(c.required_kernels) +
                       " required kernels present and reached by passing cases, no case failed";
    if (c.unsupported)
      line += "; " + std::to_string(c.unsupported) +
              " case(s) unsupported, each for a kernel outside the profile (they count toward a "
              "wider profile, not this one)";
    if (c.skipped) line += "; " + std::to_string(c.skipped) + " case(s) skipped";
    return line;
  }
  std::string why;
  auto add = [&](const std::string& part) { why += (why.empty() ? "" : "; ") + part; };
  if (!c.complete) add("only part of the suite ran (--filter)");
  if (c.failed) add(std::to_string(c.failed) + " case(s) failed");
  if (!c.missing_kernels.empty()) {
    std::string part = std::to_string(c.missing_kernels.size()) + " required kernel(s) missing";
    int narrow = 0;
    for (const std::string& k : c.missing_kernels)
      for (const char* d : {"(float16)", "(bfloat16)", "(int8)", "(uint8)", "(int16)"})
        if (k.ends_with(d)) ++narrow;
    if (narrow)
      part += " (" + std::to_string(narrow) +
              " in the narrow dtypes float16, bfloat16, int8, uint8, int16: register them, or "
              "emulate them with emulate_narrow_dtypes where kernels see host addresses)";
    add(part);
  }
  if (!c.blocked_cases.empty())
    add(std::to_string(c.blocked_cases.size()) + " case(s) could not run for a required kernel");
  if (c.complete && !c.uncovered_kernels.empty())
    add(std::to_string(c.uncovered_kernels.size()) +
        " required kernel(s) never reached by a passing case");
  return report.backend + " is NOT certified for profile " + c.profile + ": " + why;
}

std::string summary_line(const Report& report) {
  Summary s = report.summary();
  return report.backend + ": " + counts(s) + " (" + std::to_string(s.total()) + " cases)";
}

void print_report(std::ostream& os, const Report& report, const ConsoleStyle& style) {
  Paint paint{style.colour};
  os << "conformance of " << report.backend << " " << report.plugin_version << " (ABI "
     << report.abi_major << "." << report.abi_minor << ") on " << report.device;
  if (!report.device_name.empty()) os << " (" << report.device_name << ")";
  // Two builds of one plugin: which file is which.
  const bool same_name =
      report.compare_to == report.backend && report.compare_path != report.plugin_path;
  if (same_name) os << "\n  from " << report.plugin_path;
  os << "\ncompared with " << report.compare_device;
  if (same_name)
    os << " (" << report.compare_to << " " << report.compare_version << " from "
       << report.compare_path << ")";
  os << ", seed " << report.seed << ", "
     << (report.isolated ? "a process per case" : "in one process");
  if (report.isolated) os << " (limit " << report.timeout_s << " s)";
  os << "\n";
  if (style.verbose) print_every_case(os, report, paint);
  print_table(os, report, paint);
  print_failures(os, report, paint);
  print_unsupported(os, report, paint);
  print_skipped(os, report, paint);
  print_spec_coverage(os, report, paint);
  print_backend_notes(os, report);
  print_certification(os, report, paint);
  Summary s = report.summary();
  std::ostringstream seconds;
  seconds << std::fixed << std::setprecision(1) << report.duration_ms / 1000;
  os << "\n"
     << paint(summary_line(report), s.failed ? kRed : kGreen) << " in " << seconds.str() << " s\n";
  if (s.failed) os << "replay with: --seed " << report.seed << " --filter NAME\n";
  print_failures_by_kernel(os, report, paint);
}

ProgressLine::ProgressLine(std::ostream& os, int fd) : os_(os), fd_(fd), active_(isatty(fd) == 1) {}

void ProgressLine::update(std::size_t index, std::size_t total, const Case& c) {
  if (!active_) return;
  winsize ws{};
  std::size_t columns = ioctl(fd_, TIOCGWINSZ, &ws) == 0 && ws.ws_col ? ws.ws_col : 80;
  std::ostringstream text;
  text << '[' << index << '/' << total << "] " << c.name;
  std::string line = text.str();
  if (line.size() >= columns) line.resize(columns - 1);
  os_ << "\r\033[K" << line << std::flush;
  shown_ = true;
}

void ProgressLine::clear() {
  if (!active_ || !shown_) return;
  os_ << "\r\033[K" << std::flush;
  shown_ = false;
}

}  // namespace bp::conformance
