// The digits data set of `backplane train` (train_data.h).
#include "train_data.h"

#include <backplane/error.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

namespace bp::cli {

namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw ValueError("[train] '" + path + "': " + what);
}

bool is_gzip(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  unsigned char magic[2] = {0, 0};
  f.read(reinterpret_cast<char*>(magic), 2);
  return f.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

// The output of `gzip -dc -- path`, run without a shell. The pipe is
// close-on-exec (no other child inherits it) and the child is always reaped,
// also when reading throws.
std::string gunzip(const std::string& path) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    bad(path, std::string("cannot run gzip: ") + std::strerror(errno));
  struct Child {
    int fd;
    pid_t pid = -1;
    ~Child() {
      if (fd >= 0) ::close(fd);
      if (pid > 0) {
        int st = 0;
        while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
      }
    }
  } child{fds[0]};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);  // dup2 clears close-on-exec
  char* const argv[] = {const_cast<char*>("gzip"), const_cast<char*>("-dc"),
                        const_cast<char*>("--"), const_cast<char*>(path.c_str()), nullptr};
  const int spawned = ::posix_spawnp(&child.pid, "gzip", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (spawned != 0) {
    child.pid = -1;
    bad(path, spawned == ENOENT ? std::string("gzip, needed to read it, is not installed")
                                : std::string("cannot run gzip: ") + std::strerror(spawned));
  }
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(child.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) bad(path, std::string("reading gzip's output failed: ") + std::strerror(errno));
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  int status = 0;
  pid_t waited;
  while ((waited = ::waitpid(child.pid, &status, 0)) < 0 && errno == EINTR) {
  }
  child.pid = -1;
  if (waited < 0)
    bad(path, std::string("cannot tell whether gzip succeeded: ") + std::strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    bad(path, WIFEXITED(status) && WEXITSTATUS(status) == 127
                  ? "gzip, needed to read it, is not installed"
                  : "gzip could not decompress it (corrupt or truncated)");
  return out;
}

}  // namespace

Dataset read_digits(const std::string& path) {
  std::ifstream probe(path);
  if (!probe)
    bad(path, std::string(std::strerror(errno)) +
                  ". The digits come with Debian's python3-sklearn (apt-get install "
                  "python3-sklearn puts them at " +
                  kDigitsPath +
                  "); or give a file with --data: rows of 64 pixels 0..16 and a label 0..9, "
                  "comma-separated, "
                  "gzip-compressed or not");
  std::string text;
  if (is_gzip(path)) {
    text = gunzip(path);
  } else {
    std::ostringstream os;
    os << probe.rdbuf();
    text = os.str();
  }
  Dataset d;
  std::istringstream lines(text);
  std::string line;
  int64_t number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::string where = "line " + std::to_string(number);
    std::vector<double> values;
    std::istringstream fields(line);
    std::string field;
    while (std::getline(fields, field, ',')) {
      try {
        std::size_t used = 0;
        values.push_back(std::stod(field, &used));
        if (used != field.size()) throw std::invalid_argument(field);
      } catch (const std::exception&) {
        bad(path, where + ": '" + field + "' is not a number");
      }
    }
    if (values.size() != 65)
      bad(path, where + " has " + std::to_string(values.size()) +
                    " values; a row is 64 pixels and a label");
    for (int i = 0; i < 64; ++i) {
      if (!(values[i] >= 0 && values[i] <= 16))
        bad(path, where + ": pixel " + std::to_string(i) + " is " + std::to_string(values[i]) +
                      ", outside 0..16");
      d.pixels.push_back(static_cast<float>(values[i] / 16.0));
    }
    const double label = values[64];
    if (label != std::floor(label) || label < 0 || label > 9)
      bad(path, where + ": the label is " + std::to_string(label) + ", not a digit 0..9");
    d.labels.push_back(static_cast<int64_t>(label));
  }
  if (d.size() < 10)
    bad(path, "it holds " + std::to_string(d.size()) + " rows; at least 10 are needed");
  return d;
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch) {
  // Fisher-Yates with mt19937_64, whose sequence the standard fixes
  // (std::shuffle and the distributions are left to each library).
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch));
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

void split(const Dataset& all, double test_fraction, uint64_t seed, Dataset& train, Dataset& test) {
  const std::vector<int64_t> order = epoch_order(all.size(), seed, -1);
  const auto held =
      static_cast<int64_t>(std::llround(static_cast<double>(all.size()) * test_fraction));
  train = Dataset{};
  test = Dataset{};
  for (int64_t k = 0; k < all.size(); ++k) {
    Dataset& to = k < all.size() - held ? train : test;
    const int64_t i = order[k];
    to.pixels.insert(to.pixels.end(), all.pixels.begin() + i * 64,
                     all.pixels.begin() + (i + 1) * 64);
    to.labels.push_back(all.labels[i]);
  }
}

}  // namespace bp::cli
