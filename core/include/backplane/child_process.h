// Running a program in a child process with a time limit, and reading what
// it reports: how the loader probes a plugin and the conformance runner
// isolates a case. The child is started with posix_spawn (never a bare
// fork: a process that has loaded oneDNN or OpenMP may deadlock in a forked
// child), stdin from /dev/null, stdout and stderr to one pipe, and a second
// pipe on file descriptor `result_fd` for its report.
#pragma once

#include <string>
#include <vector>

namespace bp {

struct ChildOutcome {
  bool started = false;  // false: `error` says why it could not start
  std::string error;
  bool timed_out = false;  // killed with SIGKILL after the time limit
  int signal = 0;          // the signal that ended it, 0 if none
  int exit_status = -1;    // its exit status when it exited
  std::string report;      // what it wrote to result_fd
  std::string output;      // what it wrote to stdout and stderr
  double seconds = 0;      // how long it ran
};

// Runs argv[0] (a path) with `argv`, with the caller's environment plus
// `extra_env` ("NAME=value" entries), for at most `timeout_s` seconds.
ChildOutcome run_child(const std::vector<std::string>& argv, double timeout_s, int result_fd = 3,
                       const std::vector<std::string>& extra_env = {});

// "SIGSEGV" for SIGSEGV, "signal 42" for one without a name here.
std::string signal_name(int sig);

// The last `max_bytes` of a child's output, control characters but tab and
// newline replaced by '?', without trailing newlines: for a message.
std::string output_tail(const std::string& output, std::size_t max_bytes = 2000);

// Writes all of `text` to `fd` (a report on result_fd); false if it could not.
bool write_all(int fd, const std::string& text);

}  // namespace bp
