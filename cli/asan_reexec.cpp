// --asan: this program again, with the ASan runtime a plugin needs preloaded.
#include "asan_reexec.h"

#include <backplane/backend.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "commands.h"

namespace bp::cli {

namespace {

// Set in the started program, so that a preload that did not take is an
// error there instead of a loop.
constexpr const char* kRestartedEnv = "BACKPLANE_ASAN_RESTARTED";

// ASAN_OPTIONS as the user set it, with each of `ours` whose key it lacks.
std::string merged_options(const char* user, const std::string& ours) {
  std::string out = user ? user : "";
  std::vector<std::string> keys;
  {
    std::string item;
    std::istringstream in(out);
    while (std::getline(in, item, ':'))
      if (const auto eq = item.find('='); eq != std::string::npos)
        keys.push_back(item.substr(0, eq));
  }
  std::istringstream in(ours);
  for (std::string item; std::getline(in, item, ':');) {
    const std::string key = item.substr(0, item.find('='));
    bool set = false;
    for (const auto& k : keys) set |= k == key;
    if (!set) out += (out.empty() ? "" : ":") + item;
  }
  return out;
}

// This process's arguments, from /proc/self/cmdline.
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::string> args;
  for (std::size_t at = 0; at < all.size();) {
    const std::size_t end = all.find('\0', at);
    args.push_back(all.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return args;
}

std::string shell_quoted(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-+=/.,:@%") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::optional<int> restart_with_asan(const char* command, const std::vector<std::string>& specs,
                                     const std::string& more_options) {
  const std::string tag = std::string("[") + command + "] --asan: ";
  // The first plugin that needs a runtime decides which.
  std::optional<AsanRuntime> runtime;
  std::string plugin;
  for (const std::string& spec : specs) {
    std::string path;
    try {
      const std::string backend = parse_device_spec(spec).backend;
      path = backend.find('/') != std::string::npos || backend.ends_with(".so")
                 ? backend
                 : PluginLoader::instance().locate(backend);
    } catch (const Error&) {
      continue;  // loading it says why, later
    }
    if ((runtime = asan_runtime_needed(path))) {
      plugin = path;
      break;
    }
  }
  const std::string options =
      merged_options(std::getenv("ASAN_OPTIONS"),
                     std::string(kAsanOptions) + (more_options.empty() ? "" : ":" + more_options));
  if (asan_runtime_loaded()) {
    // An ASan build, a preload by hand, or the program started again: the
    // case processes get the same options.
    ::setenv("ASAN_OPTIONS", options.c_str(), 1);
    if (std::getenv(kRestartedEnv) == nullptr)
      std::cerr << tag << "the ASan runtime is already in this program; ASAN_OPTIONS=" << options
                << "\n";
    return std::nullopt;
  }
  if (std::getenv(kRestartedEnv) != nullptr) {
    const char* preload = std::getenv("LD_PRELOAD");
    std::cerr << tag << "started again with LD_PRELOAD=" << (preload ? preload : "")
              << ", but the ASan runtime is not in the program\n";
    return kExitUsage;
  }
  if (!runtime) {
    std::cerr << tag
              << "no plugin here was built with AddressSanitizer (none needs an ASan "
                 "runtime); running without one\n";
    return std::nullopt;
  }
  if (runtime->path.empty()) {
    std::cerr << tag << plugin << " needs "
              << (runtime->needed.empty() ? std::string("an ASan runtime") : runtime->needed)
              << ", and no such file was found (" << runtime->found
              << "); install the compiler's ASan runtime, or give it by hand: LD_PRELOAD=/path/to/"
              << (runtime->needed.empty() ? std::string("libasan.so") : runtime->needed)
              << " ASAN_OPTIONS=" << options << " backplane ...\n";
    return kExitUsage;
  }
  // The runtime must come first in the program's libraries.
  const char* preload = std::getenv("LD_PRELOAD");
  const std::string preloads =
      runtime->path + (preload && *preload ? std::string(":") + preload : std::string());
  std::vector<std::string> args = own_arguments();
  if (args.empty()) args.push_back("backplane");
  std::string line =
      "LD_PRELOAD=" + shell_quoted(preloads) + " ASAN_OPTIONS=" + shell_quoted(options);
  for (const auto& a : args) line.append(1, ' ').append(shell_quoted(a));
  std::cerr << tag << plugin << " needs " << runtime->path << " (" << runtime->found
            << "); running again as:\n  " << line << std::endl;
  ::setenv("LD_PRELOAD", preloads.c_str(), 1);
  ::setenv("ASAN_OPTIONS", options.c_str(), 1);
  ::setenv(kRestartedEnv, "1", 1);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv("/proc/self/exe", argv.data());
  std::cerr << tag << "could not start /proc/self/exe again: " << std::strerror(errno) << "\n";
  return kExitInternal;
}

}  // namespace bp::cli
