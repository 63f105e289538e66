// One case in a child process, both ends of it. The parent (run_isolated)
// starts the program afresh (bp::run_child) with a hidden flag that calls
// child_main, which runs the one case and writes the result to fd 3; when
// the child dies without a result, the tail of its output goes into the
// message.
#include <backplane/child_process.h>
#include <backplane/conformance/backends.h>
#include <backplane/conformance/runner.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "text_util.h"

namespace bp::conformance {

namespace {

constexpr std::size_t kOutputTail = 2000;

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string item; std::getline(in, item, '\t');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string join_tabs(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "\t" : "") + items[i];
  return out;
}

// The child's report: "status\nduration_ms\nmissing\tmissing\nkernel\tkernel\nmessage...".
bool parse_result(const std::string& text, CaseResult& r) {
  std::istringstream in(text);
  std::string status, duration, missing, kernels;
  if (!std::getline(in, status) || !std::getline(in, duration) || !std::getline(in, missing) ||
      !std::getline(in, kernels))
    return false;
  if (status == "passed")
    r.status = Status::Passed;
  else if (status == "failed")
    r.status = Status::Failed;
  else if (status == "unsupported")
    r.status = Status::Unsupported;
  else if (status == "skipped")
    r.status = Status::Skipped;
  else
    return false;
  r.duration_ms = std::strtod(duration.c_str(), nullptr);
  r.missing = split_tabs(missing);
  r.kernels = split_tabs(kernels);
  std::size_t header = status.size() + duration.size() + missing.size() + kernels.size() + 4;
  r.message = header <= text.size() ? text.substr(header) : std::string();
  return true;
}

// A sanitizer's report in the child's output ("==123==ERROR: AddressSanitizer:
// heap-buffer-overflow on address ..."): its first line without the pid,
// and its first lines up to the shadow memory dump, with its SUMMARY line.
// Its tail is the dump and the legend, which name neither the error nor the
// kernel; nothing when the output has no report.
bool sanitizer_report(const std::string& output, std::string& headline, std::string& lines) {
  std::size_t at = output.find("ERROR: AddressSanitizer");
  if (at == std::string::npos) at = output.find("ERROR: LeakSanitizer");
  if (at == std::string::npos) return false;
  const std::size_t start = output.rfind('\n', at);
  std::istringstream in(output.substr(start == std::string::npos ? 0 : start + 1));
  std::string line, summary;
  constexpr int kLines = 8;  // the error, the access, the first frames
  int n = 0;
  while (std::getline(in, line)) {
    if (line.rfind("SUMMARY: ", 0) == 0) {
      summary = line;
      break;
    }
    if (line.rfind("Shadow bytes", 0) == 0) break;
    if (n == 0) {
      const std::size_t err = line.find("ERROR: ");
      headline = line.substr(err + 7);
    }
    if (n++ < kLines) lines += line + "\n";
  }
  if (summary.empty())
    while (std::getline(in, line))
      if (line.rfind("SUMMARY: ", 0) == 0) {
        summary = line;
        break;
      }
  if (!summary.empty()) lines += (n > kLines ? "...\n" : "") + summary + "\n";
  while (!lines.empty() && lines.back() == '\n') lines.pop_back();
  return true;
}

std::string format_seconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

}  // namespace

void write_result(int fd, const CaseResult& r) {
  std::string text = std::string(to_string(r.status)) + "\n" + std::to_string(r.duration_ms) + "\n";
  text += join_tabs(r.missing) + "\n" + join_tabs(r.kernels) + "\n" + r.message;
  (void)write_all(fd, text);  // false: the parent is gone; nobody is left to tell
}

CaseResult run_isolated(const Case& c, const Isolation& iso) {
  CaseResult r;
  r.c = &c;
  r.status = Status::Failed;
  std::vector<std::string> args = iso.command;
  args.insert(args.end(), {"--result-fd", std::to_string(kResultFd), "--run-one", c.name});
  const ChildOutcome child = run_child(args, iso.timeout_s, kResultFd);
  if (!child.started) {
    r.message = "[conformance] " + child.error;
    return r;
  }
  const std::string& result_text = child.report;
  const bool reported = parse_result(result_text, r);
  if (!reported) r.duration_ms = child.seconds * 1000;
  std::string death;
  if (child.timed_out)
    death = "timed out after " + format_seconds(iso.timeout_s) + " s (killed with SIGKILL)";
  else if (child.signal != 0)
    death =
        "killed by signal " + std::to_string(child.signal) + " (" + signal_name(child.signal) + ")";
  else if (!reported)
    death =
        "exited with status " + std::to_string(child.exit_status) + " without reporting a result";
  if (death.empty()) return r;

  std::string message = death;
  if (reported)
    message += " after the case reported " + std::string(to_string(r.status)) +
               (r.message.empty() ? "" : ": " + r.message);
  const std::string output = valid_utf8(child.output);
  std::string headline, report;
  if (sanitizer_report(output, headline, report)) {
    message = headline + " (the case's process " + message +
              ")\nthe sanitizer's report (first lines):\n" + report;
  } else {
    const std::string tail = output_tail(output, kOutputTail);
    if (!tail.empty()) message += "\noutput of the case's process (last lines):\n" + tail;
  }
  r.status = Status::Failed;
  r.message = message;
  r.missing.clear();
  return r;
}

int child_main(const Suite& suite, const std::string& name, const std::string& backend,
               const std::string& compare_to, uint64_t seed, int result_fd) {
  if (result_fd >= 0) {
    // A plugin that crashes every case would otherwise leave a core file per
    // case; --no-isolate is the way to debug one.
    rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
  }
  CaseResult result;
  result.status = Status::Failed;
  const Case* c = suite.find(name);
  BackendPair backends;
  std::string why;
  if (c == nullptr) {
    result.message = "[conformance] no case is named '" + name + "'";
  } else if (load_pair(backend, compare_to, backends, why) != LoadStatus::Ok) {
    result.message = why;
  } else {
    Context ctx(*backends.dut, backends.dut_device, *backends.ref, backends.ref_device, seed);
    ctx.set_own_process(true);
    result = run_case(*c, ctx);
  }
  if (result_fd < 0) {
    std::cout << name << ": " << to_string(result.status)
              << (result.message.empty() ? "" : "\n" + result.message) << "\n";
    return result.status == Status::Failed ? 1 : 0;
  }
  write_result(result_fd, result);
  std::cout.flush();
  std::fflush(nullptr);
  std::_Exit(0);
}

}  // namespace bp::conformance
