// The report as JSON (the keys are listed in docs/conformance.md and checked
// by check_report.py).
#include <backplane/conformance/report.h>

#include <cstdio>
#include <fstream>

#include "text_util.h"

namespace bp::conformance {

namespace {

std::string number(double v, const char* format = "%.6g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string strings(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + json_quote(v[i]);
  return out + "]";
}

std::string summary_json(const Summary& s) {
  return "{\"passed\": " + std::to_string(s.passed) + ", \"failed\": " + std::to_string(s.failed) +
         ", \"unsupported\": " + std::to_string(s.unsupported) +
         ", \"skipped\": " + std::to_string(s.skipped) + "}";
}

}  // namespace

std::string json_quote(std::string_view text) {
  const std::string s = valid_utf8(text);
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
  std::string j = "{\n";
  j += "  \"backend\": " + json_quote(report.backend) + ",\n";
  j += "  \"device\": " + json_quote(report.device) + ",\n";
  j += "  \"device_name\": " + json_quote(report.device_name) + ",\n";
  j += "  \"plugin\": {\"name\": " + json_quote(report.backend) +
       ", \"version\": " + json_quote(report.plugin_version) + ", \"abi\": " +
       json_quote(std::to_string(report.abi_major) + "." + std::to_string(report.abi_minor)) +
       ", \"path\": " + json_quote(report.plugin_path) +
       ", \"sha256\": " + json_quote(report.plugin_sha256) + "},\n";
  j += "  \"date\": " + json_quote(report.date) + ",\n";
  j += "  \"machine\": " + json_quote(report.machine) + ",\n";
  j += "  \"core_version\": " + json_quote(report.core_version) + ",\n";
  j += "  \"contract\": " + json_quote(kContractPath) + ",\n";
  j += "  \"compare_to\": " + json_quote(report.compare_to) + ",\n";
  j += "  \"compare_device\": " + json_quote(report.compare_device) + ",\n";
  j += "  \"compare_plugin\": {\"name\": " + json_quote(report.compare_to) +
       ", \"version\": " + json_quote(report.compare_version) +
       ", \"path\": " + json_quote(report.compare_path) + "},\n";
  j += "  \"seed\": " + std::to_string(report.seed) + ",\n";
  j += "  \"isolation\": " + json_quote(report.isolated ? "process" : "none") + ",\n";
  j += "  \"timeout_s\": " + number(report.timeout_s) + ",\n";
  j += "  \"fallback\": \"deny\",\n";
  j += "  \"filters\": " + strings(report.filters) + ",\n";
  j += "  \"tolerances\": [";
  for (std::size_t i = 0; i < report.tolerances.size(); ++i) {
    const auto& t = report.tolerances[i];
    j += (i ? ",\n    " : "\n    ");
    j += "{\"backend\": " + json_quote(t.backend) + ", \"op\": " + json_quote(t.op) +
         ", \"dtype\": " + json_quote(t.dtype) + ", \"rtol\": " + number(t.rtol) +
         ", \"atol\": " + number(t.atol) + "}";
  }
  j += report.tolerances.empty() ? "],\n" : "\n  ],\n";
  j += "  \"missing_ops\": [";
  for (std::size_t i = 0; i < report.missing_ops.size(); ++i) {
    const auto& m = report.missing_ops[i];
    j += (i ? ",\n    " : "\n    ");
    j += "{\"op\": " + json_quote(m.op) + ", \"dtypes\": " + strings(m.dtypes) + "}";
  }
  j += report.missing_ops.empty() ? "],\n" : "\n  ],\n";
  j += "  \"cases\": [";
  for (std::size_t i = 0; i < report.results.size(); ++i) {
    const auto& r = report.results[i];
    j += i ? ",\n    {" : "\n    {";
    j += "\"name\": " + json_quote(r.c->name) + ", \"spec\": " + strings(r.c->spec) +
         ", \"category\": " + json_quote(r.c->category) +
         ", \"status\": " + json_quote(to_string(r.status)) +
         ", \"duration_ms\": " + number(r.duration_ms, "%.3f") +
         ", \"message\": " + json_quote(r.message) + ", \"missing\": " + strings(r.missing) +
         ", \"kernels\": " + strings(r.kernels) +
         ", \"empty\": " + (r.c->empty ? "true" : "false") + "}";
  }
  j += report.results.empty() ? "],\n" : "\n  ],\n";
  j += "  \"summary\": " + summary_json(report.summary()) + ",\n";
  auto coverage = [&](const char* key, const std::vector<std::pair<std::string, Summary>>& v) {
    j += std::string("  \"") + key + "\": [";
    for (std::size_t i = 0; i < v.size(); ++i)
      j += (i ? ",\n    " : "\n    ") + std::string("{\"name\": ") + json_quote(v[i].first) +
           ", \"status\": " + json_quote(coverage_status(v[i].second)) +
           ", \"counts\": " + summary_json(v[i].second) + "}";
    j += v.empty() ? "],\n" : "\n  ],\n";
  };
  coverage("categories", category_coverage(report));
  coverage("rules", rule_coverage(report));
  const Certification& c = report.certification;
  j += "  \"certification\": {\"profile\": " + json_quote(c.profile) +
       ", \"certified\": " + (c.certified ? "true" : "false") +
       ", \"complete\": " + (c.complete ? "true" : "false") +
       ", \"required_kernels\": " + std::to_string(c.required_kernels) +
       ", \"missing_kernels\": " + strings(c.missing_kernels) +
       ", \"blocked_cases\": " + strings(c.blocked_cases) +
       ", \"uncovered_kernels\": " + strings(c.uncovered_kernels) +
       ", \"unsupported_outside_profile\": " + std::to_string(c.unsupported) +
       ", \"skipped\": " + std::to_string(c.skipped) +
       ", \"verdict\": " + json_quote(c.profile.empty() ? "" : certification_line(report)) + "},\n";
  const std::vector<KernelFailures> ranked = failures_by_kernel(report);
  j += "  \"failures_by_kernel\": [";
  for (std::size_t i = 0; i < ranked.size(); ++i)
    j += (i ? ",\n    " : "\n    ") + std::string("{\"kernel\": ") + json_quote(ranked[i].kernel) +
         ", \"failed\": " + std::to_string(ranked[i].cases.size()) +
         ", \"passed\": " + std::to_string(ranked[i].passed) +
         ", \"score\": " + number(ranked[i].score, "%.4f") +
         ", \"cases\": " + strings(ranked[i].cases) + "}";
  j += ranked.empty() ? "],\n" : "\n  ],\n";
  j += "  \"duration_ms\": " + number(report.duration_ms, "%.3f") + "\n}\n";
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
