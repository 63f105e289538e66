// The report as JUnit XML, the format CI systems read: a <testsuite> per
// category, a <testcase> per case. Failed cases carry a <failure>;
// unsupported and skipped ones a <skipped> with the reason, so that a
// missing op never reads as a failure.
#include <backplane/conformance/report.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "text_util.h"

namespace bp::conformance {

namespace {

// Escaped for both text and attribute values. XML 1.0 forbids most control
// characters even as references, so they become '?'.
std::string xml_escape(std::string_view text) {
  std::string out;
  for (char ch : valid_utf8(text)) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\n':
        out += "&#10;";
        break;
      case '\t':
        out += "&#9;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default:
        out += static_cast<unsigned char>(ch) < 0x20 ? '?' : ch;
    }
  }
  return out;
}

std::string seconds(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ms / 1000);
  return buf;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string attr(const char* name, const std::string& value) {
  return std::string(" ") + name + "=\"" + xml_escape(value) + "\"";
}

void add_case(std::string& x, const CaseResult& r) {
  x += "    <testcase" + attr("classname", r.c->category) + attr("name", r.c->name) +
       attr("time", seconds(r.duration_ms));
  switch (r.status) {
    case Status::Passed:
      x += "/>\n";
      return;
    case Status::Failed:
      x += ">\n      <failure" + attr("message", first_line(r.message)) + attr("type", "failed") +
           ">" + xml_escape(r.message) + "</failure>\n";
      break;
    case Status::Unsupported:
      x += ">\n      <skipped" + attr("message", "unsupported: " + first_line(r.message)) + "/>\n";
      break;
    case Status::Skipped:
      x += ">\n      <skipped" + attr("message", "skipped: " + first_line(r.message)) + "/>\n";
      break;
  }
  x += "    </testcase>\n";
}

}  // namespace

std::string to_junit(const Report& report) {
  std::vector<std::string> categories;
  for (const auto& r : report.results)
    if (std::find(categories.begin(), categories.end(), r.c->category) == categories.end())
      categories.push_back(r.c->category);
  Summary all = report.summary();
  const Certification& cert = report.certification;
  const bool has_cert = !cert.profile.empty();
  const int cert_failure = has_cert && !cert.certified ? 1 : 0;
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites" + attr("name", "backplane conformance: " + report.backend) +
       attr("tests", std::to_string(all.total() + (has_cert ? 1 : 0))) +
       attr("failures", std::to_string(all.failed + cert_failure)) + attr("errors", "0") +
       attr("skipped", std::to_string(all.unsupported + all.skipped)) +
       attr("time", seconds(report.duration_ms)) + ">\n";
  // The kernels failed cases reached, those only failures reach first (as
  // the console's "Failures by kernel"): a property of every suite.
  std::string ranked;
  for (const KernelFailures& k : failures_by_kernel(report))
    ranked += (ranked.empty() ? "" : "; ") + k.kernel + ": " + std::to_string(k.cases.size());
  for (const auto& cat : categories) {
    Summary s;
    double ms = 0;
    for (const auto& r : report.results) {
      if (r.c->category != cat) continue;
      s.add(r.status);
      ms += r.duration_ms;
    }
    x += "  <testsuite" + attr("name", cat) + attr("tests", std::to_string(s.total())) +
         attr("failures", std::to_string(s.failed)) + attr("errors", "0") +
         attr("skipped", std::to_string(s.unsupported + s.skipped)) + attr("time", seconds(ms)) +
         ">\n    <properties>\n";
    auto property = [&](const char* name, const std::string& value) {
      x += "      <property" + attr("name", name) + attr("value", value) + "/>\n";
    };
    property("backend", report.backend);
    property("device", report.device);
    property("compare_to", report.compare_to);
    property("compare_path", report.compare_path);
    property("seed", std::to_string(report.seed));
    property("contract", kContractPath);
    property("plugin_path", report.plugin_path);
    property("plugin_sha256", report.plugin_sha256);
    property("core_version", report.core_version);
    property("date", report.date);
    property("machine", report.machine);
    if (!ranked.empty()) property("failures_by_kernel", ranked);
    x += "    </properties>\n";
    for (const auto& r : report.results)
      if (r.c->category == cat) add_case(x, r);
    x += "  </testsuite>\n";
  }
  // The verdict as a test of its own, so that a plugin that is not
  // certified fails the JUnit report even when no case failed.
  if (has_cert) {
    x += "  <testsuite" + attr("name", "certification") + attr("tests", "1") +
         attr("failures", std::to_string(cert_failure)) + attr("errors", "0") +
         attr("skipped", "0") + attr("time", "0") + ">\n";
    x += "    <testcase" + attr("classname", "certification") +
         attr("name", "profile " + cert.profile) + attr("time", "0");
    if (cert.certified) {
      x += "/>\n";
    } else {
      std::string detail = certification_line(report);
      for (const auto& k : cert.missing_kernels) detail += "\nmissing kernel: " + k;
      for (const auto& b : cert.blocked_cases) detail += "\ncould not run: " + b;
      for (const auto& k : cert.uncovered_kernels)
        detail += "\nnever reached by a passing case: " + k;
      x += ">\n      <failure" + attr("message", certification_line(report)) +
           attr("type", "not certified") + ">" + xml_escape(detail) +
           "</failure>\n    </testcase>\n";
    }
    x += "  </testsuite>\n";
  }
  x += "</testsuites>\n";
  return x;
}

void write_junit(const std::string& path, const Report& report) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  BP_CHECK(f.good(), "[conformance] cannot open '", path, "' for writing the JUnit report");
  f << to_junit(report);
  f.close();
  BP_CHECK(!f.fail(), "[conformance] writing the JUnit report to '", path, "' failed");
}

}  // namespace bp::conformance
