// run_child: posix_spawn, two pipes polled until both close or the time
// limit passes, then the exit status (SIGKILL on time-out).
#include <backplane/child_process.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

extern char** environ;

namespace bp {

namespace {

using Clock = std::chrono::steady_clock;

// A pipe whose ends are above any result_fd a caller uses, so that dup2()
// onto it in the child never finds the source already there (which would
// keep CLOEXEC set).
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
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
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
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

}  // namespace

ChildOutcome run_child(const std::vector<std::string>& argv_in, double timeout_s, int result_fd,
                       const std::vector<std::string>& extra_env) {
  ChildOutcome out;
  const auto t0 = Clock::now();
  Pipe result, output;
  if (!result.ok() || !output.ok()) {
    out.error = std::string("cannot create a pipe: ") + std::strerror(errno);
    return out;
  }
  std::vector<std::string> args = argv_in;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings(extra_env);
  for (char** e = environ; e && *e; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, output.write, 1);
  posix_spawn_file_actions_adddup2(&actions, output.write, 2);
  posix_spawn_file_actions_adddup2(&actions, result.write, result_fd);
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
  const int rc = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  result.close_write();
  output.close_write();
  if (rc != 0) {
    out.error = "cannot start '" + args[0] + "': " + std::strerror(rc);
    return out;
  }
  out.started = true;

  const auto deadline =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  fcntl(result.read, F_SETFL, O_NONBLOCK);
  fcntl(output.read, F_SETFL, O_NONBLOCK);
  while (result.read >= 0 || output.read >= 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      out.timed_out = true;
      break;
    }
    pollfd fds[2] = {{result.read, POLLIN, 0}, {output.read, POLLIN, 0}};
    const int n = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (fds[0].revents && !drain(result.read, out.report)) result.close_read();
    if (fds[1].revents && !drain(output.read, out.output)) output.close_read();
  }

  // Both pipes are closed: the child is exiting (or hangs on its way out).
  int wstatus = 0;
  while (!out.timed_out) {
    const pid_t w = waitpid(pid, &wstatus, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (Clock::now() >= deadline) {
      out.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (out.timed_out) {
    kill(pid, SIGKILL);
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  } else if (WIFSIGNALED(wstatus)) {
    out.signal = WTERMSIG(wstatus);
  } else if (WIFEXITED(wstatus)) {
    out.exit_status = WEXITSTATUS(wstatus);
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGHUP:
      return "SIGHUP";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGSYS:
      return "SIGSYS";
    case SIGALRM:
      return "SIGALRM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
  }
  return "signal " + std::to_string(sig);
}

std::string output_tail(const std::string& s, std::size_t max_bytes) {
  std::string out = s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
  for (char& ch : out) {
    if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') ch = '?';
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool write_all(int fd, const std::string& text) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace bp
