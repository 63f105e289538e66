// The --backend / --plugin-path flags shared by every program.
#include <backplane/backend.h>
#include <backplane/fallback.h>
#include <backplane/options.h>

#include <boost/program_options.hpp>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string_view>

#include "internal.h"

namespace po = boost::program_options;

namespace bp {

const char* version() { return BACKPLANE_VERSION; }

po::options_description backend_options(BackendFlags& flags) {
  po::options_description d("Backend selection");
  d.add_options()(
      "backend", po::value<std::string>(&flags.backend)->default_value(flags.backend),
      "backend to run on: a name (cpu_onednn, cuda, ...) looked up as "
      "libbackplane_NAME.so in the plugin folders, or a path to a plugin .so; NAME:N or "
      "PATH:N picks its device N (default 0)")(
      "plugin-path", po::value<std::vector<std::string>>(&flags.plugin_paths)->composing(),
      "folder searched for plugins before the default ones (repeatable)")(
      "fallback", po::value<std::string>(&flags.fallback)->default_value(flags.fallback),
      "ops the backend lacks: deny (an error), warn or allow (run them on the reference "
      "backend, copying operands; warn also prints each op once)")(
      "reference", po::value<std::string>(&flags.reference)->value_name("NAME|PATH"),
      "reference backend: where --fallback runs ops, and what conformance and fuzz compare "
      "with (default: $BACKPLANE_REFERENCE, else cpu_onednn)")(
      "probe", po::value<std::string>(&flags.probe)->value_name("on|off|fresh"),
      "load each plugin file in a child process before this one (on), so that a plugin "
      "that crashes, hangs or exits while loading is reported instead of taking the "
      "program down; fresh ignores the verdicts cached by file content; off loads "
      "directly (default: $BACKPLANE_PROBE, else on)")(
      "backend-option",
      po::value<std::vector<std::string>>(&flags.options)->composing()->value_name("KEY=VALUE"),
      "an option for the --backend plugin, given to it when it loads (repeatable); "
      "'backplane devices --verbose' lists the options each plugin takes");
  return d;
}

ProbeMode parse_probe_mode(const std::string& s) {
  if (s == "on") return ProbeMode::On;
  if (s == "off") return ProbeMode::Off;
  if (s == "fresh") return ProbeMode::Fresh;
  throw ValueError("[--probe] '" + s + "' is not a probe mode: on, off or fresh");
}

void apply_backend_flags(const BackendFlags& flags) {
  set_fallback_policy(parse_fallback_policy(flags.fallback));
  if (!flags.probe.empty()) PluginLoader::instance().set_probe_mode(parse_probe_mode(flags.probe));
  for (const auto& p : flags.plugin_paths) PluginLoader::instance().add_search_path(p);
  BackendOptions options;
  for (const auto& o : flags.options) options.push_back(parse_backend_option(o));
  set_default_backend(flags.backend);
  PluginLoader::instance().set_backend_options(parse_device_spec(flags.backend).backend,
                                               std::move(options));
  if (!flags.reference.empty()) set_reference_backend(flags.reference);
}

BackendFlags parse_backend_args(int& argc, char** argv) {
  BackendFlags flags;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto take = [&](std::string_view name, auto&& set) {
      const std::string flag = "--" + std::string(name);
      if (a == flag) {
        BP_CHECK(i + 1 < argc && std::string_view(argv[i + 1]).rfind("--", 0) != 0, "[", flag,
                 "] needs a value");
        set(std::string(argv[++i]));
        return true;
      }
      if (a.rfind(flag + "=", 0) == 0) {
        BP_CHECK(a.size() > flag.size() + 1, "[", flag, "] needs a value");
        set(std::string(a.substr(flag.size() + 1)));
        return true;
      }
      return false;
    };
    if (take("backend", [&](std::string v) { flags.backend = std::move(v); })) continue;
    if (take("plugin-path", [&](std::string v) { flags.plugin_paths.push_back(std::move(v)); }))
      continue;
    if (take("fallback", [&](std::string v) { flags.fallback = std::move(v); })) continue;
    if (take("reference", [&](std::string v) { flags.reference = std::move(v); })) continue;
    if (take("probe", [&](std::string v) { flags.probe = std::move(v); })) continue;
    if (take("backend-option", [&](std::string v) { flags.options.push_back(std::move(v)); }))
      continue;
    argv[out++] = argv[i];
  }
  argc = out;
  argv[argc] = nullptr;
  return flags;
}

std::string backend_options_help() {
  BackendFlags flags;
  std::ostringstream os;
  os << backend_options(flags);
  return os.str();
}

namespace {

std::string program_name(const char* argv0) {
  std::string_view p = argv0 != nullptr ? argv0 : "program";
  if (auto slash = p.rfind('/'); slash != std::string_view::npos) p.remove_prefix(slash + 1);
  return std::string(p);
}

void print_fallback_summary_at_exit() { print_fallback_summary(std::cerr); }

}  // namespace

BackendFlags init_from_args(int& argc, char** argv, const InitOptions& options) {
  const std::string prog = program_name(argc > 0 ? argv[0] : nullptr);
  const auto fail = [&](int code, const std::string& message) {
    std::cerr << prog << ": " << message << "\n";
    if (code == 2) std::cerr << prog << ": run '" << prog << " --help' for the backend options\n";
    std::exit(code);
  };
  BackendFlags flags;
  try {
    flags = parse_backend_args(argc, argv);
  } catch (const Error& e) {
    fail(2, e.what());
  }
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << "Usage: " << prog << " [backend options] [arguments]\n\n"
                << backend_options_help() << "\n";
      if (options.exit_on_help) std::exit(0);
      break;
    }
  }
  try {
    apply_backend_flags(flags);
  } catch (const Error& e) {
    fail(2, e.what());
  }
  if (options.load_backend) {
    try {
      const DeviceSpec spec = parse_device_spec(flags.backend);
      Backend& b = PluginLoader::instance().load(spec.backend);
      if (b.device_count() == 0)
        fail(3, "backend '" + b.name() + "' has no device: " + b.no_device_reason());
      if (spec.index && *spec.index >= b.device_count())
        fail(3, "backend '" + b.name() + "' has no device " + std::to_string(*spec.index) +
                    " (it has " + std::to_string(b.device_count()) + ")");
      default_device();
    } catch (const Error& e) {
      fail(2, e.what());
    }
  }
  const char* env = std::getenv("BACKPLANE_FALLBACK_SUMMARY");
  if (options.fallback_summary && !(env != nullptr && std::string_view(env) == "0")) {
    // Once per process, however often a program calls this.
    static const bool registered = std::atexit(print_fallback_summary_at_exit) == 0;
    (void)registered;
  }
  return flags;
}

}  // namespace bp
