// `backplane new-plugin NAME [--dir DIR]`: writes a plugin project that
// builds against an installed SDK (find_package(Backplane) and
// backplane_add_plugin), loads, and runs the conformance suite: its missing
// ops show as unsupported, and the author fills them in from there.
#include <backplane/backend.h>
#include <backplane/plugin.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "commands.h"

namespace bp::cli {

namespace {

namespace fs = std::filesystem;

const char* kCMakeLists =
    R"TEMPLATE(# The @NAME@ backend for Backplane, built against an installed SDK:
#   cmake -S . -B build -DCMAKE_PREFIX_PATH=<backplane install prefix>
#   cmake --build build
cmake_minimum_required(VERSION 3.25)
project(@NAME@ LANGUAGES CXX)

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

find_package(Backplane CONFIG REQUIRED)

# -> build/lib/backplane/libbackplane_@NAME@.so; one source file per op family.
backplane_add_plugin(@NAME@ SOURCES plugin.cpp copy.cpp)

# `ctest --test-dir build` runs the conformance suite with the installed program.
enable_testing()
add_test(NAME @NAME@.conformance
  COMMAND Backplane::backplane --backend $<TARGET_FILE:backplane_plugin_@NAME@> conformance)
)TEMPLATE";

const char* kPluginCpp =
    R"TEMPLATE(// The @NAME@ backend: its name, its device and memory, and its kernels.
// Host memory by default (bp::sdk::Plugin's allocator and copies); a device
// with its own memory overrides allocate, deallocate, copy_*, memset and
// device_props (with host_addressable = 0).
#include <backplane/sdk/plugin.hpp>

namespace @NS@ {

void register_copy_kernels(bp::sdk::Registrar& r);  // copy.cpp

class @CLASS@ final : public bp::sdk::Plugin {
 public:
  // The name users type after --backend: [a-z0-9_]+, unique per process.
  const char* name() const override { return "@NAME@"; }
  const char* version() const override { return "0.1.0"; }

  void device_props(int32_t device, bp_device_props& props) const override {
    (void)device;
    std::snprintf(props.name, sizeof(props.name), "%s", "@NAME@ device (host memory)");
    props.host_addressable = 1;
  }

  // One call per op family; each family registers its ops and dtypes.
  void register_kernels(bp::sdk::Registrar& r) override { register_copy_kernels(r); }
};

}  // namespace @NS@

// The library's one exported symbol, bp_plugin_init.
BP_SDK_PLUGIN(@NS@::@CLASS@)
)TEMPLATE";

const char* kCopyCpp =
    R"TEMPLATE(// FILL and COPY for float32: enough to make float32 tensors and read them
// back. Register more dtypes and ops (see `backplane ops`) as they are written.
// check:: tests a call against its op's contract in backplane/plugin.h;
// map1 and the strided walker run the loop over any layout.
#include <backplane/sdk/checks.hpp>
#include <backplane/sdk/loops.hpp>
#include <backplane/sdk/plugin.hpp>

#include <type_traits>

namespace @NS@ {

namespace {

namespace check = bp::sdk::check;

// out[0] = scalars[0], over any strides.
void fill_f32(const bp::sdk::KernelCall& c) {
  check::fill(c);
  const float v = bp::sdk::scalar_as<float>(c.scalar(0));
  bp::sdk::for_each_row<1>({c.output(0)}, [&](auto p, auto s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) bp::sdk::at<float>(p[0], s[0], i) = v;
  });
}

// out[0] = cast(in[0]) for a float32 input and an output of any dtype.
void copy_f32(const bp::sdk::KernelCall& c) {
  check::copy(c);
  if (c.input(0).dtype() != BP_DTYPE_FLOAT32) bp::sdk::unsupported(c, c.input(0).dtype());
  bp::sdk::visit_dtype(c.output(0).dtype(), [&](auto tag) {
    using To = decltype(tag);
    bp::sdk::map1<To, float>(c.output(0), c.input(0), [](float x) {
      if constexpr (std::is_same_v<To, bool>)
        return x != 0.0f;
      else
        return static_cast<To>(x);
    });
  });
}

}  // namespace

void register_copy_kernels(bp::sdk::Registrar& r) {
  r.add<&fill_f32>(BP_OP_FILL, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
  r.add<&copy_f32>(BP_OP_COPY, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
}

}  // namespace @NS@
)TEMPLATE";

const char* kReadme = R"TEMPLATE(# @NAME@: a Backplane backend

Written by `backplane new-plugin @NAME@`. It builds against an installed
Backplane SDK and starts with FILL and COPY for float32.

## Build

```sh
cmake -S . -B build -DCMAKE_PREFIX_PATH=@PREFIX@
cmake --build build
```

The plugin is `build/lib/backplane/libbackplane_@NAME@.so`.

## Run

```sh
backplane --backend build/lib/backplane/libbackplane_@NAME@.so devices
backplane --backend build/lib/backplane/libbackplane_@NAME@.so conformance
```

`devices` shows that it loads (name, version, ABI, device). `conformance`
(also `ctest --test-dir build`) runs every case: the ones that need an op or
dtype this plugin does not register are reported as `unsupported`, not
failed. The run exits 0 only once the plugin is certified for its profile
(`--profile core`, the default): every kernel the profile requires
registered, every case run and passed. A fresh plugin has no failure and is
not certified yet; `backplane conformance --list-profile core` lists what is
required, and the report's "required kernels missing" line what is left.
`backplane ops --only-backend --backend <the .so>` lists the primitive ops
and what this plugin registers for each.

## Next

- Add kernels: one file per op family (`binary.cpp`, `unary.cpp`, ...), each
  with a `register_*_kernels(Registrar&)` called from `plugin.cpp`. The
  contract of every op is written beside its `bp_op` value in
  `backplane/plugin.h`.
- Debug a failed case: `backplane --backend <the .so> conformance --seed N
  --filter CASE --no-isolate` replays it in one process, under a debugger.
- A complete example with every op: `sdk/examples/hostref` in the Backplane
  sources; the walk-through: `docs/plugin-guide.md`.
)TEMPLATE";

// Replaces every @KEY@ in `text`.
std::string expand(std::string text, const std::vector<std::pair<std::string, std::string>>& vars) {
  for (const auto& [key, value] : vars) {
    const std::string pattern = "@" + key + "@";
    for (std::size_t at = text.find(pattern); at != std::string::npos;
         at = text.find(pattern, at + value.size()))
      text.replace(at, pattern.size(), value);
  }
  return text;
}

// "my_dev" -> "MyDevPlugin"; a leading digit gets a prefix to stay an identifier.
std::string class_name(const std::string& name) {
  std::string out;
  bool upper = true;
  for (char ch : name) {
    if (ch == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch))) : ch;
    upper = false;
  }
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "Backend" + out;
  return out + "Plugin";
}

// The prefix this program was installed to, when it holds the CMake package.
std::string install_prefix() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "<backplane install prefix>";
  const fs::path prefix = exe.parent_path().parent_path();
  for (const char* lib : {"lib", "lib64"})
    if (fs::exists(prefix / lib / "cmake" / "Backplane" / "BackplaneConfig.cmake", ec))
      return prefix.string();
  return "<backplane install prefix>";
}

class NewPluginCommand : public Command {
 public:
  const char* name() const override { return "new-plugin"; }
  const char* summary() const override {
    return "Write a plugin project (CMake, plugin class, one kernel file) to start from";
  }
  const char* usage() const override { return "NAME [--dir DIR]"; }
  const char* details() const override {
    return "Writes into DIR (default ./NAME):\n"
           "  CMakeLists.txt  find_package(Backplane) + backplane_add_plugin(NAME ...)\n"
           "  plugin.cpp      a bp::sdk::Plugin subclass exported with BP_SDK_PLUGIN\n"
           "  copy.cpp        FILL and COPY kernels for float32\n"
           "  README.md       how to build it and run the conformance suite on it\n"
           "NAME is the backend's name ([a-z0-9_]+): the library is libbackplane_NAME.so.\n"
           "DIR must not exist or be empty; nothing is written otherwise.\n\n"
           "Examples:\n"
           "  backplane new-plugin mydev\n"
           "  backplane new-plugin mydev --dir ~/src/mydev\n"
           "  cmake -S mydev -B mydev/build -DCMAKE_PREFIX_PATH=<prefix> && cmake --build "
           "mydev/build\n"
           "  backplane --backend mydev/build/lib/backplane/libbackplane_mydev.so conformance\n";
  }

  po::options_description options() override {
    po::options_description own("Options");
    own.add_options()("dir", po::value<std::string>(&dir_)->value_name("DIR"),
                      "folder to write the project into (default ./NAME)");
    return own;
  }
  po::options_description hidden_options() override {
    po::options_description hidden;
    hidden.add_options()("name", po::value<std::string>(&plugin_name_), "the backend's name");
    return hidden;
  }
  po::positional_options_description positional() override {
    po::positional_options_description p;
    p.add("name", 1);
    return p;
  }

  int run(const BackendFlags&) override {
    if (plugin_name_.empty()) return refuse("a plugin name is required: backplane new-plugin NAME");
    if (!std::regex_match(plugin_name_, std::regex("[a-z0-9_]+")))
      return refuse("invalid plugin name '" + plugin_name_ +
                    "': use lower-case letters, digits and '_' ([a-z0-9_]+)");
    // A name a plugin of Backplane or one in the plugin folders already has
    // would replace it when installed (and could not load beside it).
    for (const char* taken : {"cpu_onednn", "cuda", "sim", "opencl", "hostref"})
      if (plugin_name_ == taken)
        return refuse("'" + plugin_name_ +
                      "' is the name of a backend of Backplane; installing "
                      "a plugin of that name would replace it: choose another name");
    for (const std::string& folder : PluginLoader::instance().search_dirs()) {
      const fs::path existing = fs::path(folder) / ("libbackplane_" + plugin_name_ + ".so");
      std::error_code exists_ec;
      if (fs::exists(existing, exists_ec))
        return refuse("a plugin named '" + plugin_name_ +
                      "' is already installed: " + existing.string() + "; choose another name");
    }
    const fs::path dir = fs::absolute(dir_.empty() ? plugin_name_ : dir_).lexically_normal();
    std::error_code ec;
    if (fs::exists(dir, ec)) {
      if (!fs::is_directory(dir, ec)) return refuse(dir.string() + " exists and is not a folder");
      if (!fs::is_empty(dir, ec))
        return refuse(dir.string() + " is not empty; choose another --dir or remove it");
    }
    const std::vector<std::pair<std::string, std::string>> vars = {
        {"NAME", plugin_name_},
        {"NS", "plugin_" + plugin_name_},
        {"CLASS", class_name(plugin_name_)},
        {"PREFIX", install_prefix()}};
    const std::pair<const char*, const char*> files[] = {{"CMakeLists.txt", kCMakeLists},
                                                         {"plugin.cpp", kPluginCpp},
                                                         {"copy.cpp", kCopyCpp},
                                                         {"README.md", kReadme}};
    fs::create_directories(dir, ec);
    if (ec) return refuse("cannot create " + dir.string() + ": " + ec.message());
    std::cout << "Wrote the plugin project '" << plugin_name_ << "':\n";
    for (const auto& [file, text] : files) {
      const fs::path path = dir / file;
      std::ofstream out(path);
      out << expand(text, vars);
      if (!out) {
        std::cerr << "[new-plugin] cannot write " << path.string() << "\n";
        return kExitInternal;
      }
      std::cout << "  " << path.string() << "\n";
    }
    const std::string so =
        (dir / "build/lib/backplane/libbackplane_").string() + plugin_name_ + ".so";
    std::cout << "Next:\n"
              << "  cmake -S " << dir.string() << " -B " << (dir / "build").string()
              << " -DCMAKE_PREFIX_PATH=" << install_prefix() << "\n"
              << "  cmake --build " << (dir / "build").string() << "\n"
              << "  backplane --backend " << so << " conformance\n";
    return kExitOk;
  }

 private:
  static int refuse(const std::string& why) {
    std::cerr << "[new-plugin] " << why << "\n";
    return kExitUsage;
  }

  std::string plugin_name_, dir_;
};

}  // namespace

std::unique_ptr<Command> make_new_plugin_command() { return std::make_unique<NewPluginCommand>(); }

}  // namespace bp::cli
