// One case in a child process. The runner never fork()s itself: a process
// that has loaded oneDNN or OpenMP may deadlock in a forked child (their
// locks and thread pools do not survive fork). It posix_spawn()s the program
// afresh instead, with a hidden flag that runs one case, and reads the
// result from a pipe on fd 3; the child's stdout and stderr go to a second
// pipe whose tail is shown when the child dies without a result.
#include <backplane/conformance/runner.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

#include "text_util.h"

extern char** environ;

namespace bp::conformance {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kOutputTail = 2000;

// A pipe whose ends are above kResultFd, so that dup2() onto fd 3 in the
// child never finds the source already there (which would keep CLOEXEC set).
struct Pipe {
  int read = -1, write = -1;
  Pipe() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    read = fcntl(fds[0], F_DUPFD_CLOEXEC, 10);
    write = fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
    ::close(fds[0]);
    ::close(fds[1]);
  }
  ~Pipe() {
    close_read();
    close_write();
  }
  void close_read() {
    if (read >= 0) ::close(read);
    read = -1;
  }
  void close_write() {
    if (write >= 0) ::close(write);
    write = -1;
  }
  bool ok() const { return read >= 0 && write >= 0; }
};

// Reads what is available; false at end of file.
bool drain(int fd, std::string& into) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

// The last lines of the child's output, without control characters.
std::string printable_tail(const std::string& s) {
  std::string out = valid_utf8(s.size() > kOutputTail ? s.substr(s.size() - kOutputTail) : s);
  for (char& ch : out)
    if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') ch = '?';
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// The child's report: "status\nduration_ms\nmissing\tmissing\nmessage...".
bool parse_result(const std::string& text, CaseResult& r) {
  std::istringstream in(text);
  std::string status, duration, missing;
  if (!std::getline(in, status) || !std::getline(in, duration) || !std::getline(in, missing))
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
  std::istringstream m(missing);
  for (std::string op; std::getline(m, op, '\t');)
    if (!op.empty()) r.missing.push_back(op);
  std::size_t header = status.size() + duration.size() + missing.size() + 3;
  r.message = header <= text.size() ? text.substr(header) : std::string();
  return true;
}

std::string format_seconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

}  // namespace

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGALRM: return "SIGALRM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
  }
  return "signal " + std::to_string(sig);
}

void write_result(int fd, const CaseResult& r) {
  std::string text = std::string(to_string(r.status)) + "\n" + std::to_string(r.duration_ms) + "\n";
  for (std::size_t i = 0; i < r.missing.size(); ++i) text += (i ? "\t" : "") + r.missing[i];
  text += "\n" + r.message;
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone; nobody is left to tell
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

CaseResult run_isolated(const Case& c, const Isolation& iso) {
  CaseResult r;
  r.c = &c;
  r.status = Status::Failed;
  const auto t0 = Clock::now();
  auto elapsed_ms = [&] {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };

  Pipe result, output;
  if (!result.ok() || !output.ok()) {
    r.message = std::string("[conformance] cannot create a pipe: ") + std::strerror(errno);
    return r;
  }
  std::vector<std::string> args = iso.command;
  args.insert(args.end(), {"--result-fd", std::to_string(kResultFd), "--run-one", c.name});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, output.write, 1);
  posix_spawn_file_actions_adddup2(&actions, output.write, 2);
  posix_spawn_file_actions_adddup2(&actions, result.write, kResultFd);
  // The child starts with default signal handling whatever the parent set.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigfillset(&defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  result.close_write();
  output.close_write();
  if (rc != 0) {
    r.message = "[conformance] cannot start '" + args[0] + "': " + std::strerror(rc);
    return r;
  }

  const auto deadline =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(iso.timeout_s));
  fcntl(result.read, F_SETFL, O_NONBLOCK);
  fcntl(output.read, F_SETFL, O_NONBLOCK);
  std::string result_text, output_text;
  bool timed_out = false;
  while (result.read >= 0 || output.read >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{result.read, POLLIN, 0}, {output.read, POLLIN, 0}};
    int n = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (fds[0].revents && !drain(result.read, result_text)) result.close_read();
    if (fds[1].revents && !drain(output.read, output_text)) output.close_read();
  }

  // Both pipes are closed: the child is exiting (or hangs on its way out).
  int wstatus = 0;
  while (!timed_out) {
    pid_t w = waitpid(pid, &wstatus, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (Clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (timed_out) {
    kill(pid, SIGKILL);
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  }

  const bool reported = parse_result(result_text, r);
  if (!reported) r.duration_ms = elapsed_ms();
  std::string death;
  if (timed_out)
    death = "timed out after " + format_seconds(iso.timeout_s) + " s (killed with SIGKILL)";
  else if (WIFSIGNALED(wstatus))
    death = "killed by signal " + std::to_string(WTERMSIG(wstatus)) + " (" +
            signal_name(WTERMSIG(wstatus)) + ")";
  else if (!reported)
    death = "exited with status " + std::to_string(WEXITSTATUS(wstatus)) +
            " without reporting a result";
  if (death.empty()) return r;

  std::string message = death;
  if (reported)
    message += " after the case reported " + std::string(to_string(r.status)) +
               (r.message.empty() ? "" : ": " + r.message);
  std::string tail = printable_tail(output_text);
  if (!tail.empty()) message += "\noutput of the case's process (last lines):\n" + tail;
  r.status = Status::Failed;
  r.message = message;
  r.missing.clear();
  return r;
}

}  // namespace bp::conformance
