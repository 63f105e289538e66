// Running a suite: selecting cases, running each one (in a child process by
// default, so that a plugin that crashes or hangs fails one case instead of
// ending the run), and collecting what the report shows.
#pragma once

#include <backplane/conformance/case.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bp::conformance {

enum class Status { Passed, Failed, Unsupported, Skipped };
std::string_view to_string(Status s);

struct CaseResult {
  const Case* c = nullptr;
  Status status = Status::Passed;
  std::string message;               // why it failed, was unsupported or skipped
  double duration_ms = 0;            // the case itself; for a crash or a timeout, until then
  std::vector<std::string> missing;  // unsupported: "add (float32)", from the error
  // The kernels the case reached on the backend under test, "add (float32)",
  // in the order first reached (debug::KernelRecording).
  std::vector<std::string> kernels;
};

struct Summary {
  int passed = 0, failed = 0, unsupported = 0, skipped = 0;
  int total() const { return passed + failed + unsupported + skipped; }
  void add(Status s);
};

// A looser tolerance a backend declares for one op and dtype (bp_tolerance).
struct DeclaredTolerance {
  std::string backend, op, dtype;
  double rtol = 0, atol = 0;
};

// An op the backend under test lacks for some dtypes the reference has.
struct MissingOp {
  std::string op;
  std::vector<std::string> dtypes;
};

// The verdict for a certification profile (profile.h).
struct Certification {
  std::string profile;                       // core | training | full
  bool complete = false;                     // the whole suite ran (no --filter)
  int required_kernels = 0;                  // how many the profile requires
  std::vector<std::string> missing_kernels;  // required, not registered: "add (int64)"
  std::vector<std::string> blocked_cases;  // "case: add (int64)": unsupported for a required kernel
  // Required and registered, yet reached by no passed, non-empty case.
  std::vector<std::string> uncovered_kernels;
  int failed = 0;
  // Cases that did not run for a kernel the profile does not require (a
  // dtype or an op outside it), and cases skipped: they do not count
  // against the profile, and the verdict says how many there were.
  int unsupported = 0, skipped = 0;
  bool certified = false;
};

// The failed cases that reached one kernel on the backend under test.
struct KernelFailures {
  std::string kernel;              // "add (float32)"
  std::vector<std::string> cases;  // the failed cases that reached it
  int passed = 0;                  // passed cases that reached it
  double score = 0;                // Ochiai: 1 = reached by every failure and no pass
};

struct Report {
  std::string backend;      // the backend's name
  std::string device;       // "cpu_onednn:0"
  std::string device_name;  // the plugin's words: "x86_64 CPU (2 threads)"
  std::string plugin_version, plugin_path;
  std::string plugin_sha256;  // of the plugin file: ties the report to the binary
  std::string date;           // when the run ended, UTC, ISO 8601
  std::string machine;        // host name, OS, architecture
  uint32_t abi_major = 0, abi_minor = 0;
  std::string core_version;
  std::string compare_to;      // the reference backend's name
  std::string compare_device;  // "cpu_onednn:0"; "dup#2:0" for a second file named dup
  std::string compare_version, compare_path;  // the reference's plugin and its file
  uint64_t seed = 0;
  bool isolated = true;  // a child process per case
  double timeout_s = 0;  // per case, when isolated
  std::vector<std::string> filters;
  std::vector<DeclaredTolerance> tolerances;
  std::vector<MissingOp> missing_ops;
  std::vector<CaseResult> results;
  double duration_ms = 0;  // the whole run
  Certification certification;
  Summary summary() const;
};

// How a case runs in a child process: `command` is a program and its
// arguments; the runner appends `--result-fd 3 --run-one NAME`, and the child
// calls child_main, which runs that case and writes the result to fd 3.
struct Isolation {
  std::vector<std::string> command;
  double timeout_s = 60;
};
inline constexpr int kResultFd = 3;

struct RunOptions {
  // Shell-style globs (fnmatch); a case runs when one of them matches its
  // name, its category or one of its IDs. Empty: every case.
  std::vector<std::string> filters;
  // Absent: every case runs in this process (--no-isolate).
  std::optional<Isolation> isolation;
  // Called before each case with its position (from 1) among those selected.
  std::function<void(std::size_t index, std::size_t total, const Case&)> on_start;
};

// The cases `filters` select, in suite order.
std::vector<const Case*> select_cases(const Suite& suite, const std::vector<std::string>& filters);

// Bytes of guard after each allocation a case makes (backplane/debug.h).
inline constexpr std::size_t kGuardBytes = 64;

// Runs one case in this process and classifies what it threw; a write past
// the end of an allocation the case made fails it ("out of bounds: ...").
CaseResult run_case(const Case& c, const Context& ctx);
// Runs one case in a child process (see Isolation): a crash, an abort or a
// hang past the time limit becomes a failed result naming the signal or the
// limit.
CaseResult run_isolated(const Case& c, const Isolation& isolation);
// The child's side of run_isolated: writes `r` to file descriptor `fd`.
void write_result(int fd, const CaseResult& r);
// The whole child (what the program runs for `--run-one NAME --result-fd FD`,
// before anything else): loads `backend` and `compare_to` (load_pair), runs
// the case `name` of `suite` with the seed in this process, and writes its
// result to `result_fd`; then exits at once, without returning, so that
// unloading the plugins cannot change the outcome. With result_fd -1 it
// prints the result instead and returns 1 when the case failed, else 0.
int child_main(const Suite& suite, const std::string& name, const std::string& backend,
               const std::string& compare_to, uint64_t seed, int result_fd);

// Runs the selected cases on the device of `ctx`; fills the results, seed and
// isolation fields of the report (the others describe the backends: see
// describe_backends).
Report run_suite(const Suite& suite, const Context& ctx, const RunOptions& options = {});

// Fills the report's description of the backend under test and the
// reference: names, versions, ABI, device name, declared tolerances, and the
// ops the backend lacks that the reference has (from the kernel registry).
void describe_backends(Report& report, const Context& ctx);

// The kernels the failed cases reached, ranked by how much they stand out
// in the failures: by the Ochiai score failed(k) / sqrt(F * (failed(k) +
// passed(k))), F the failed cases in all. A kernel only failing cases reach
// (the broken one, typically) scores 1 when every failure reaches it, and
// a kernel nearly every case reaches, passing or not (fill, copy), scores
// low however many failures reach it. Ties: more failed cases, fewer passed
// cases, then by name.
std::vector<KernelFailures> failures_by_kernel(const Report& report);

// "add (float32)" from "[add] not implemented for dtype float32 on backend 'x'...".
std::vector<std::string> missing_from_message(std::string_view message);

}  // namespace bp::conformance
