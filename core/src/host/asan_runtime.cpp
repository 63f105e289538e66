// Plugins built with AddressSanitizer: which runtime a plugin file needs
// (its DT_NEEDED entries, or the __asan_* symbols it imports), where that
// runtime lies, and whether this process has one already.
#include <backplane/backend.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>

#include "boundary.h"
#include "plugin_files.h"

namespace fs = std::filesystem;

namespace bp {

namespace {

bool is_asan_runtime(const std::string& lib) {
  return lib.rfind("libasan.so", 0) == 0 || lib.rfind("libclang_rt.asan", 0) == 0;
}

// The compiler's answer to `gcc -print-file-name=NAME`: a path when it has
// the file, NAME itself when not.
std::string compiler_file(const std::string& name) {
  for (const char* cc : {"gcc", "cc"}) {
    const std::string cmd = std::string(cc) + " -print-file-name=" + name + " 2>/dev/null";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    if (pipe == nullptr) continue;
    std::array<char, 4096> buf{};
    std::string out;
    while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) out += buf.data();
    ::pclose(pipe);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    std::error_code ec;
    if (out.find('/') != std::string::npos && fs::exists(out, ec))
      return fs::weakly_canonical(out, ec).string();
  }
  return {};
}

// The folders the dynamic loader searches by default for a library name.
constexpr const char* kLibraryDirs[] = {"/lib/x86_64-linux-gnu",
                                        "/usr/lib/x86_64-linux-gnu",
                                        "/lib/aarch64-linux-gnu",
                                        "/usr/lib/aarch64-linux-gnu",
                                        "/lib64",
                                        "/usr/lib64",
                                        "/lib",
                                        "/usr/lib",
                                        "/usr/local/lib64",
                                        "/usr/local/lib"};

}  // namespace

std::optional<AsanRuntime> asan_runtime_needed(const std::string& plugin_path) {
  AsanRuntime rt;
  try {
    const std::vector<std::string> needed = detail::needed_libraries(plugin_path);
    const auto it = std::find_if(needed.begin(), needed.end(), is_asan_runtime);
    if (it != needed.end()) {
      rt.needed = *it;
    } else {
      const std::vector<std::string> imported = detail::imported_symbols(plugin_path);
      if (!std::binary_search(imported.begin(), imported.end(), "__asan_init") &&
          std::none_of(imported.begin(), imported.end(), [](const std::string& s) {
            return s.rfind("__asan_version_mismatch_check", 0) == 0;
          }))
        return std::nullopt;
    }
  } catch (const std::exception&) {
    return std::nullopt;  // not ELF: the loader says so when it opens the file
  }
  // A file the plugin names: in the default folders, else the compiler's.
  // One that names none (a clang build with the runtime left to the
  // program): GCC's libasan.so.
  const std::string name = rt.needed.empty() ? "libasan.so" : rt.needed;
  if (!rt.needed.empty() && rt.needed.find('/') == std::string::npos) {
    for (const char* dir : kLibraryDirs) {
      std::error_code ec;
      const fs::path p = fs::path(dir) / name;
      if (fs::exists(p, ec)) {
        rt.path = p.string();
        rt.found = std::string("in ") + dir;
        return rt;
      }
    }
  }
  rt.path = compiler_file(name);
  rt.found = rt.path.empty()
                 ? "not in the default library folders, and 'gcc -print-file-name=" + name +
                       "' does not know it"
                 : "gcc -print-file-name=" + name;
  return rt;
}

bool asan_runtime_loaded() { return ::dlsym(RTLD_DEFAULT, "__asan_init") != nullptr; }

std::string asan_environment(const AsanRuntime& runtime) {
  return "LD_PRELOAD=" +
         (runtime.path.empty()
              ? (runtime.needed.empty() ? std::string("/path/to/libasan.so") : runtime.needed)
              : runtime.path) +
         " ASAN_OPTIONS=" + kAsanOptions;
}

}  // namespace bp
