// `backplane launch --nproc N [--nnodes M --node-rank K --master ADDR:PORT]
// -- PROGRAM [ARGS...]`: starts N copies of a program on this machine with
// the environment torchrun gives its workers (RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT) and supervises
// them: when one exits with a failure or is killed, the others are stopped
// (SIGTERM, then SIGKILL after --grace seconds) and the launcher exits 1
// naming the rank and how it ended. SIGINT, SIGTERM and SIGHUP sent to the
// launcher are passed on to every rank (those the launcher was started
// with ignored, e.g. under nohup, stay ignored). Each rank runs in a
// process group of its own, so that stopping it stops what it started, and
// reads its standard input from /dev/null (a background process group that
// read the terminal would stop).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"

extern char** environ;

namespace bp::cli {

namespace {

using Clock = std::chrono::steady_clock;

// OpenMP threads for each of `nproc` ranks on `cores` cores: a share of the
// cores, less one where at least 3 are left, for the rank's communication
// (Gloo's I/O and the gradient buckets' reductions, which overlap backward:
// with every core computing, a data-parallel step of 2 ranks on 16 cores
// took 10.5 ms, with 7 threads each 5.9 ms).
long threads_per_rank(long cores, long nproc) {
  const long share = cores / nproc;
  return share >= 4 ? share - 1 : std::max(1L, share);
}

// The cores this process may run on (its affinity mask, as `nproc` counts
// them: a container's or taskset's share), else the machine's online cores.
long usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return sysconf(_SC_NPROCESSORS_ONLN);
}

// A free TCP port on the loopback interface, for a one-machine run.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigdescr_np(sig);
    return "was killed by signal " + std::to_string(sig) +
           (name ? std::string(" (") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

struct Rank {
  int global = 0, local = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
};

constexpr double kMaxGrace = 1e6;  // seconds: about eleven days

Clock::time_point after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// The signals passed on to the ranks: those of SIGINT, SIGTERM and SIGHUP
// that the launcher was not started with ignored.
std::vector<int> forwarded_signals() {
  std::vector<int> out;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    out.push_back(sig);
  }
  return out;
}

class LaunchCommand : public Command {
 public:
  const char* name() const override { return "launch"; }
  const char* summary() const override {
    return "Start a program once per rank, with the distributed environment, and supervise it";
  }
  const char* usage() const override { return "--nproc N [options] -- PROGRAM [ARGS...]"; }
  const char* details() const override {
    return "Each of the --nproc processes started on this machine (its ranks) gets, besides\n"
           "the launcher's own environment:\n"
           "  RANK              node-rank * nproc + local rank (0 .. WORLD_SIZE - 1)\n"
           "  LOCAL_RANK        its index on this machine (0 .. nproc - 1)\n"
           "  WORLD_SIZE        nnodes * nproc; LOCAL_WORLD_SIZE  nproc\n"
           "  GROUP_RANK        --node-rank\n"
           "  MASTER_ADDR, MASTER_PORT   where rank 0 listens (--master; on one machine by\n"
           "                    default 127.0.0.1 and a port that was free at start)\n"
           "as torchrun sets them for its workers' env:// rendezvous.\n"
           "On several machines, run the launcher on each with the same --nproc, --nnodes\n"
           "and --master, and its own --node-rank.\n\n"
           "Supervision: when a rank exits with a non-zero status or is killed, the launcher\n"
           "names it on stderr, sends SIGTERM to the other ranks (each runs in a process group\n"
           "of its own, so their children stop too), SIGKILL to those still running after\n"
           "--grace seconds, and exits 1. SIGINT, SIGTERM and SIGHUP sent to the launcher are\n"
           "passed on to every rank (unless the launcher was started with them ignored, as\n"
           "under nohup), and the launcher exits 128 + the signal's number, or 1 when a rank\n"
           "had failed before. When every rank exits 0, so does the launcher; a program that\n"
           "cannot be started is exit 2. Ranks read their standard input from /dev/null. With\n"
           "more than one rank and OMP_NUM_THREADS unset, each rank gets OMP_NUM_THREADS =\n"
           "the machine's cores / nproc, less one where that leaves 3 or more (a core for the\n"
           "rank's communication threads), at least 1, so that the ranks do not oversubscribe\n"
           "the cores.\n\n"
           "Examples:\n"
           "  backplane launch --nproc 2 -- ./my_training --epochs 3\n"
           "  backplane launch --nproc 4 --nnodes 2 --node-rank 0 --master 10.0.0.1:29500 -- "
           "./train\n"
           "  backplane launch --nproc 2 -- sh -c 'echo rank $RANK of $WORLD_SIZE'\n";
  }
  po::options_description options() override {
    po::options_description own("Options");
    own.add_options()("nproc", po::value(&nproc_),
                      "processes (ranks) to start on this machine (required)")(
        "nnodes", po::value(&nnodes_)->default_value(1),
        "machines taking part, each running a launcher")("node-rank",
                                                         po::value(&node_rank_)->default_value(0),
                                                         "this machine's index (0 .. nnodes - 1)")(
        "master", po::value(&master_),
        "ADDR:PORT where rank 0 listens (required with --nnodes above 1; by default 127.0.0.1 "
        "and a free port)")(
        "grace", po::value(&grace_)->default_value(10.0),
        "seconds between SIGTERM and SIGKILL when ranks are stopped (0 to 1e6)");
    return own;
  }
  po::options_description hidden_options() override {
    po::options_description h;
    h.add_options()("program", po::value(&program_)->multitoken(), "");
    return h;
  }
  po::positional_options_description positional() override {
    po::positional_options_description p;
    p.add("program", -1);
    return p;
  }

  int run(const BackendFlags&) override {
    if (int code = check(); code != kExitOk) return code;
    return supervise();
  }

 private:
  int check() {
    if (nproc_ < 1)
      return usage_error_of("launch", "--nproc: the number of processes to start, at least 1");
    if (nnodes_ < 1)
      return usage_error_of("launch", "--nnodes '" + std::to_string(nnodes_) + "': at least 1");
    if (node_rank_ < 0 || node_rank_ >= nnodes_)
      return usage_error_of("launch", "--node-rank '" + std::to_string(node_rank_) +
                                          "': between 0 and " + std::to_string(nnodes_ - 1) +
                                          " for --nnodes " + std::to_string(nnodes_));
    if (!(grace_ >= 0 && grace_ <= kMaxGrace))
      return usage_error_of("launch", "--grace: seconds, from 0 to 1e6");
    if (program_.empty())
      return usage_error_of("launch",
                            "no program to start: put it after '--', e.g. "
                            "'backplane launch --nproc 2 -- ./train'");
    if (master_.empty()) {
      if (nnodes_ > 1)
        return usage_error_of("launch",
                              "--master ADDR:PORT is required with --nnodes above 1: every "
                              "machine must name the same rank 0");
      const int port = free_port();
      if (port < 0)
        return usage_error_of("launch", "found no free port on 127.0.0.1; give --master ADDR:PORT");
      addr_ = "127.0.0.1";
      port_ = std::to_string(port);
    } else {
      const auto colon = master_.rfind(':');
      const std::string port = colon == std::string::npos ? "" : master_.substr(colon + 1);
      const bool digits =
          !port.empty() && port.size() <= 5 &&
          std::all_of(port.begin(), port.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      const long p = digits ? std::stol(port) : -1;
      if (colon == 0 || colon == std::string::npos || p < 1 || p > 65535)
        return usage_error_of("launch",
                              "--master '" + master_ + "': ADDR:PORT, the port 1 to 65535");
      addr_ = master_.substr(0, colon);
      if (addr_.size() > 2 && addr_.front() == '[' && addr_.back() == ']')
        addr_ = addr_.substr(1, addr_.size() - 2);
      port_ = port;
    }
    return kExitOk;
  }

  // The environment of local rank `local`: the launcher's, with the
  // distributed variables replaced.
  std::vector<std::string> environment(int local) const {
    std::vector<std::pair<std::string, std::string>> set = {
        {"RANK", std::to_string(node_rank_ * nproc_ + local)},
        {"LOCAL_RANK", std::to_string(local)},
        {"WORLD_SIZE", std::to_string(nnodes_ * nproc_)},
        {"LOCAL_WORLD_SIZE", std::to_string(nproc_)},
        {"GROUP_RANK", std::to_string(node_rank_)},
        {"MASTER_ADDR", addr_},
        {"MASTER_PORT", port_}};
    const char* omp = std::getenv("OMP_NUM_THREADS");
    if (nproc_ > 1 && (omp == nullptr || *omp == '\0'))  // unset or empty
      set.emplace_back("OMP_NUM_THREADS", std::to_string(threads_per_rank(usable_cores(), nproc_)));
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string entry(*e);
      bool replaced = false;
      for (const auto& [k, v] : set) replaced = replaced || entry.rfind(k + "=", 0) == 0;
      if (!replaced) env.push_back(entry);
    }
    for (const auto& [k, v] : set) env.push_back(k + "=" + v);
    return env;
  }

  // Starts local rank `r.local` in a process group of its own, with the
  // signals the launcher blocks unblocked and at their defaults.
  bool spawn(Rank& r) {
    std::vector<std::string> env = environment(r.local);
    std::vector<char*> envp, argv;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    for (auto& a : program_) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGCHLD);
    for (int sig : forwarded_) sigaddset(&defaults, sig);  // an ignored one stays ignored
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    pid_t pid = -1;
    const int err = posix_spawnp(&pid, argv[0], &files, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&files);
    posix_spawnattr_destroy(&attr);
    if (err != 0) {
      std::cerr << "[launch] could not start rank " << r.global << ": '" << program_[0]
                << "': " << std::strerror(err) << "\n";
      return false;
    }
    r.pid = pid;
    r.running = true;
    return true;
  }

  static void signal_all(std::vector<Rank>& ranks, int sig) {
    for (const Rank& r : ranks)
      if (r.running) kill(-r.pid, sig);
  }

  // Reaps every rank that has ended. While nothing is being stopped, the
  // first that failed is recorded, and its process group (what it started
  // and left behind) gets SIGTERM at once.
  void reap(std::vector<Rank>& ranks, Rank*& failure, bool stopping) {
    for (Rank& r : ranks) {
      if (!r.running) continue;
      int status = 0;
      const pid_t got = waitpid(r.pid, &status, WNOHANG);
      if (got == 0) continue;
      r.running = false;  // ended, or (ECHILD) no longer ours to wait for
      r.status = got == r.pid ? status : 0;
      if (got == r.pid && !stopping && !failure &&
          !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        failure = &r;
        kill(-r.pid, SIGTERM);
      }
    }
  }

  int supervise() {
    // A launcher started with SIGCHLD ignored would have its ranks reaped
    // by the kernel: wait for them itself.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &dfl, nullptr);
    forwarded_ = forwarded_signals();
    // SIGCHLD and the forwarded signals arrive through sigtimedwait.
    sigset_t watched, previous;
    sigemptyset(&watched);
    sigaddset(&watched, SIGCHLD);
    for (int sig : forwarded_) sigaddset(&watched, sig);
    pthread_sigmask(SIG_BLOCK, &watched, &previous);
    std::vector<Rank> ranks(static_cast<std::size_t>(nproc_));
    int not_started = -1;
    for (int i = 0; i < nproc_; ++i) {
      ranks[i].local = i;
      ranks[i].global = node_rank_ * nproc_ + i;
      if (!spawn(ranks[i])) {
        not_started = ranks[i].global;
        break;
      }
    }
    if (not_started < 0)
      std::cerr << "[launch] started ranks " << node_rank_ * nproc_ << ".."
                << node_rank_ * nproc_ + nproc_ - 1 << " of " << nnodes_ * nproc_
                << " (MASTER_ADDR=" << addr_ << " MASTER_PORT=" << port_ << ")\n";
    Rank* failure = nullptr;
    int interrupted = 0;
    bool stopping = not_started >= 0;
    if (stopping) signal_all(ranks, SIGTERM);
    Clock::time_point kill_at = after(grace_);
    auto count_running = [&] {
      int n = 0;
      for (const Rank& r : ranks) n += r.running ? 1 : 0;
      return n;
    };
    while (true) {
      reap(ranks, failure, stopping);
      const int left = count_running();
      if (left == 0) break;
      if (failure && !stopping) {
        std::cerr << "[launch] rank " << failure->global << " (pid " << failure->pid << ") "
                  << describe_status(failure->status) << "; stopping the other " << left
                  << (left == 1 ? " rank" : " ranks") << "\n";
        stopping = true;
        signal_all(ranks, SIGTERM);
        kill_at = after(grace_);
      }
      if (stopping && Clock::now() >= kill_at) {
        for (const Rank& r : ranks)
          if (r.running)
            std::cerr << "[launch] rank " << r.global << " (pid " << r.pid
                      << ") still running after --grace " << grace_ << " s; sending SIGKILL\n";
        signal_all(ranks, SIGKILL);
        kill_at = Clock::time_point::max();
      }
      timespec wait{0, 100'000'000};  // re-check the SIGKILL deadline ten times a second
      const int sig = sigtimedwait(&watched, nullptr, &wait);
      if (sig > 0 && sig != SIGCHLD) {
        if (!interrupted)
          std::cerr << "[launch] SIG" << sigabbrev_np(sig)
                    << " received; passing it on to the ranks\n";
        interrupted = sig;
        signal_all(ranks, sig);
        if (!stopping) {
          stopping = true;
          kill_at = after(grace_);
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    if (not_started >= 0) {
      std::cerr << "[launch] failed: rank " << not_started << " could not be started\n";
      return kExitUsage;
    }
    if (failure) {
      std::cerr << "[launch] failed: rank " << failure->global << " "
                << describe_status(failure->status) << "\n";
      return kExitFailed;
    }
    if (interrupted) {
      std::cerr << "[launch] stopped by SIG" << sigabbrev_np(interrupted) << "\n";
      return 128 + interrupted;
    }
    std::cerr << "[launch] all " << nproc_ << (nproc_ == 1 ? " rank" : " ranks") << " exited 0\n";
    return kExitOk;
  }

  int nproc_ = 0, nnodes_ = 1, node_rank_ = 0;
  double grace_ = 10.0;
  std::string master_, addr_, port_;
  std::vector<std::string> program_;
  std::vector<int> forwarded_;
};

}  // namespace

std::unique_ptr<Command> make_launch_command() { return std::make_unique<LaunchCommand>(); }

}  // namespace bp::cli
