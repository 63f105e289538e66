// The report as tables for people and as JSON for tools.
#include <backplane/conformance.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <ostream>

namespace bp::conformance {

namespace {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

std::string counts(const Summary& s) {
  return std::to_string(s.passed) + " passed, " + std::to_string(s.failed) + " failed, " +
         std::to_string(s.unsupported) + " unsupported, " + std::to_string(s.skipped) + " skipped";
}

void tally(Summary& s, Status status) {
  switch (status) {
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

// Failures are in capitals so they stand out in a long table.
const char* label(Status s) {
  switch (s) {
    case Status::Passed:
      return "passed";
    case Status::Failed:
      return "FAILED";
    case Status::Unsupported:
      return "unsupported";
    case Status::Skipped:
      return "skipped";
  }
  return "?";
}

// One line per SEMANTICS.md ID: it holds on this backend when every case
// that checks it passed.
void print_spec_coverage(std::ostream& os, const Report& report) {
  std::vector<std::string> ids;
  for (const auto& r : report.results)
    for (const auto& id : r.c->spec)
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  if (ids.empty()) return;
  os << "\nSEMANTICS.md IDs\n";
  for (const auto& id : ids) {
    Summary s;
    for (const auto& r : report.results)
      if (std::find(r.c->spec.begin(), r.c->spec.end(), id) != r.c->spec.end()) tally(s, r.status);
    const char* verdict = s.failed ? "FAILED" : s.passed ? "passed" : "not checked";
    os << "  " << std::left << std::setw(12) << id << std::setw(12) << verdict << counts(s) << "\n";
  }
}

}  // namespace

std::string summary_line(const Report& report) {
  Summary s = report.summary();
  return report.backend + ": " + counts(s) + " (" + std::to_string(s.total()) + " cases)";
}

void print_report(std::ostream& os, const Report& report) {
  std::vector<std::string> categories;
  std::size_t width = 0;
  for (const auto& r : report.results) {
    if (std::find(categories.begin(), categories.end(), r.c->category) == categories.end())
      categories.push_back(r.c->category);
    width = std::max(width, r.c->name.size());
  }
  os << "conformance of " << report.backend << " on " << report.device << "\n";
  for (const auto& category : categories) {
    Summary s;
    for (const auto& r : report.results) {
      if (r.c->category == category) tally(s, r.status);
    }
    os << "\n" << category << " (" << s.total() << " cases: " << counts(s) << ")\n";
    for (const auto& r : report.results) {
      if (r.c->category != category) continue;
      os << "  " << std::left << std::setw(12) << label(r.status) << std::setw(int(width) + 2)
         << r.c->name << join(r.c->spec, ",") << "\n";
      if (r.status != Status::Passed && !r.message.empty()) {
        // Every line of a multi-line message stays under its case.
        std::string indent(16, ' ');
        std::string msg = r.message;
        for (std::size_t at = msg.find('\n'); at != std::string::npos; at = msg.find('\n', at + 1))
          msg.insert(at + 1, indent);
        os << indent << msg << "\n";
      }
    }
  }
  print_spec_coverage(os, report);
  os << "\n" << summary_line(report) << "\n";
}

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (unsigned char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (ch < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          out += buf;
        } else {
          out += static_cast<char>(ch);  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
  return out;
}

std::string to_json(const Report& report) {
  std::string j = "{\n  \"backend\": " + json_quote(report.backend) +
                  ",\n  \"device\": " + json_quote(report.device) + ",\n  \"cases\": [";
  for (std::size_t i = 0; i < report.results.size(); ++i) {
    const auto& r = report.results[i];
    std::vector<std::string> ids;
    for (const auto& id : r.c->spec) ids.push_back(json_quote(id));
    j += i ? ",\n    {" : "\n    {";
    j += "\"name\": " + json_quote(r.c->name) + ", \"spec\": [" + join(ids, ", ") +
         "], \"category\": " + json_quote(r.c->category) +
         ", \"status\": " + json_quote(to_string(r.status)) +
         ", \"message\": " + json_quote(r.message) + "}";
  }
  Summary s = report.summary();
  j += report.results.empty() ? "],\n" : "\n  ],\n";
  j += "  \"summary\": {\"passed\": " + std::to_string(s.passed) +
       ", \"failed\": " + std::to_string(s.failed) +
       ", \"unsupported\": " + std::to_string(s.unsupported) +
       ", \"skipped\": " + std::to_string(s.skipped) + "}\n}\n";
  return j;
}

void write_json(const std::string& path, const Report& report) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  BP_CHECK(f.good(), "[conformance] cannot open '", path, "' for writing the JSON report");
  f << to_json(report);
  f.close();
  BP_CHECK(!f.fail(), "[conformance] writing the JSON report to '", path, "' failed");
}

}  // namespace bp::conformance
