// One case in a child process (bp::run_child): the program itself, started
// afresh with a hidden flag that runs one case and writes the result to
// fd 3; when the child dies without a result, the tail of its output goes
// into the message.
#include <backplane/child_process.h>
#include <backplane/conformance/runner.h>

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
    death = "killed by signal " + std::to_string(child.signal) + " (" + signal_name(child.signal) +
            ")";
  else if (!reported)
    death = "exited with status " + std::to_string(child.exit_status) +
            " without reporting a result";
  if (death.empty()) return r;

  std::string message = death;
  if (reported)
    message += " after the case reported " + std::string(to_string(r.status)) +
               (r.message.empty() ? "" : ": " + r.message);
  const std::string tail = output_tail(valid_utf8(child.output), kOutputTail);
  if (!tail.empty()) message += "\noutput of the case's process (last lines):\n" + tail;
  r.status = Status::Failed;
  r.message = message;
  r.missing.clear();
  return r;
}

}  // namespace bp::conformance
