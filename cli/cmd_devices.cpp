// `backplane devices`: every plugin the loader can see, whether it was
// accepted, and its devices; for each one that was not, what happened and why.
#include <backplane/backplane.h>
#include <backplane/conformance/report.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <system_error>

#include "commands.h"

namespace bp::cli {

namespace {

namespace fs = std::filesystem;

std::string format_bytes(uint64_t bytes) {
  if (bytes == 0) return "memory unknown";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

// Paths compared as files, so "./lib/x.so" and "/abs/lib/x.so" are one plugin.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  bool same = fs::equivalent(a, b, ec);
  return ec ? a == b : same;
}

void print_backend(const Backend& b) {
  int n = b.device_count();
  std::cout << "    loaded: version " << b.version() << ", ABI " << b.abi_major() << "."
            << b.abi_minor() << ", ";
  if (n == 0) {
    std::cout << "0 devices: "
              << (b.no_device_reason().empty() ? "no reason given" : b.no_device_reason()) << "\n";
    return;
  }
  std::cout << n << (n == 1 ? " device" : " devices") << "\n";
  for (int i = 0; i < n; ++i) {
    bp_device_props p = b.device_props(i);
    std::cout << "    device " << i << ": " << p.name << ", " << format_bytes(p.total_memory)
              << (p.host_addressable ? ", host-addressable" : ", not host-addressable") << "\n";
  }
}

void print_candidate(const PluginCandidate& c, bool verbose, const char* note = "") {
  std::cout << "  " << (c.name.empty() ? "?" : c.name) << "  " << c.path << note << "\n";
  if (c.loaded && c.backend) {
    print_backend(*c.backend);
  } else {
    // refused | crashed | hung | exited, and why.
    std::cout << "    " << to_string(c.verdict) << ": "
              << (c.reason.empty() ? "no reason given" : c.reason) << "\n";
  }
  if (verbose) {
    if (!c.probe.empty()) std::cout << "    vetted: " << c.probe << "\n";
    const std::string sha = file_sha256(c.path);
    if (!sha.empty()) std::cout << "    sha256: " << sha << "\n";
    if (c.loaded && c.backend) {
      const auto& options = c.backend->options();
      std::cout << "    options (--backend-option KEY=VALUE):" << (options.empty() ? " none" : "")
                << "\n";
      for (const auto& [key, text] : options) std::cout << "      " << key << ": " << text << "\n";
      std::cout << "    kernels (x: registered; an op it lacks makes a case unsupported):\n";
      conformance::print_capability_matrix(std::cout, *c.backend);
    }
  }
}

class DevicesCommand : public Command {
 public:
  const char* name() const override { return "devices"; }
  const char* summary() const override {
    return "List the plugins found, their versions, ABI and devices";
  }
  const char* details() const override {
    return "Opens every libbackplane_*.so in the plugin folders (in search order: the\n"
           "--plugin-path folders, BACKPLANE_PLUGIN_PATH, the program's folder, the plugin\n"
           "folder beside libbackplane, the install's plugin folder) and prints, for each,\n"
           "its name, version, ABI and devices (name, memory, whether the host can address\n"
           "it), or what kept it out, or why it has no device. The --backend plugin is\n"
           "loaded too, so a plugin given by path shows even outside those folders; when it\n"
           "cannot be loaded the command prints why and exits 2. --backend NAME:N (or\n"
           "PATH:N) also names device N of it, and exits 2 when the backend lacks it.\n\n"
           "Each file is first loaded in a child process (a probe, see --probe), so a plugin\n"
           "that breaks while loading is listed with what happened, and the command goes on:\n"
           "  refused   its answers broke a rule of the ABI (the reason follows)\n"
           "  crashed   the probe died of a signal (which one, and in which stage of loading)\n"
           "  hung      the probe gave no answer within BACKPLANE_PROBE_TIMEOUT seconds (30)\n"
           "  exited    the probe exited (e.g. the plugin called exit) before answering\n"
           "A verdict is cached by the file's sha256, so a file is probed once.\n\n"
           "--verbose adds how each file was vetted, its sha256 and, for each loaded plugin,\n"
           "the options it takes (--backend-option KEY=VALUE, given to the --backend plugin\n"
           "when it loads) and the kernels it registered: an op x dtype matrix.\n\n"
           "Examples:\n"
           "  backplane devices\n"
           "  backplane devices --verbose\n"
           "  backplane --backend sim --backend-option devices=2 devices\n"
           "  backplane devices --backend ./build/lib/backplane/libbackplane_cuda.so\n"
           "  backplane --plugin-path /opt/plugins devices\n"
           "  backplane --probe fresh devices\n";
  }

  po::options_description options() override {
    po::options_description own("Options");
    own.add_options()("verbose,v", po::bool_switch(&verbose_),
                      "also print the op x dtype matrix of the kernels each plugin registered");
    return own;
  }

  int run(const BackendFlags& flags) override {
    PluginLoader& loader = PluginLoader::instance();
    // Loaded first so that a plugin given by path is listed even when no
    // search folder holds it.
    // NAME:N and PATH:N select a device, as everywhere else: the backend
    // part is loaded, and N must name one of its devices.
    Backend* selected = nullptr;
    std::string selected_error;
    std::optional<int16_t> index;
    try {
      const DeviceSpec spec = parse_device_spec(flags.backend);
      index = spec.index;
      selected = &loader.load(spec.backend);
    } catch (const Error& e) {
      selected_error = e.what();
    }
    std::vector<PluginCandidate> candidates = loader.discover();

    std::cout << "Plugin folders searched, in order:\n";
    for (const auto& dir : loader.search_dirs()) {
      std::error_code ec;
      std::cout << "  " << dir << (fs::is_directory(dir, ec) ? "" : " (missing)") << "\n";
    }
    std::cout << "\nPlugins found:\n";
    bool selected_listed = false;
    for (const auto& c : candidates) {
      print_candidate(c, verbose_);
      if (selected && same_file(c.path, selected->path())) selected_listed = true;
    }
    if (selected && !selected_listed) {
      PluginCandidate c;
      c.path = selected->path();
      c.name = selected->name();
      c.loaded = true;
      c.backend = IntrusivePtr<Backend>(selected);
      print_candidate(c, verbose_, "  (from --backend)");
    } else if (candidates.empty()) {
      std::cout << "  (none)\n";
    }

    std::cout << "\nSelected backend (--backend " << flags.backend << "): ";
    if (!selected) {
      std::cout << "not loaded\n";
      std::cerr << selected_error << "\n";
      return kExitUsage;
    }
    std::cout << selected->name() << ", " << selected->path() << "\n";
    if (index) {
      if (*index >= selected->device_count()) {
        std::cerr << "--backend " << flags.backend << ": " << selected->name() << " has "
                  << selected->device_count() << " device(s)"
                  << (selected->device_count() ? "" : " (" + selected->no_device_reason() + ")")
                  << ", so there is no device " << *index << "\n";
        return kExitUsage;
      }
      std::cout << "Selected device: " << selected->name() << ":" << *index << ", "
                << selected->device_props(*index).name << "\n";
    }
    return kExitOk;
  }

 private:
  bool verbose_ = false;
};

}  // namespace

std::unique_ptr<Command> make_devices_command() { return std::make_unique<DevicesCommand>(); }

}  // namespace bp::cli
