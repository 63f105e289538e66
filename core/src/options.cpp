// The --backend / --plugin-path flags shared by every program.
#include <backplane/backend.h>
#include <backplane/fallback.h>
#include <backplane/options.h>

#include <boost/program_options.hpp>

#include <cstring>
#include <string_view>

#include "internal.h"

namespace po = boost::program_options;

namespace bp {

const char* version() { return BACKPLANE_VERSION; }

po::options_description backend_options(BackendFlags& flags) {
  po::options_description d("Backend selection");
  d.add_options()
      ("backend", po::value<std::string>(&flags.backend)->default_value(flags.backend),
       "backend to run on: a name (cpu_onednn, cuda, ...) looked up as "
       "libbackplane_NAME.so in the plugin folders, or a path to a plugin .so")
      ("plugin-path", po::value<std::vector<std::string>>(&flags.plugin_paths)->composing(),
       "folder searched for plugins before the default ones (repeatable)")
      ("fallback", po::value<std::string>(&flags.fallback)->default_value(flags.fallback),
       "ops the backend lacks: deny (an error), warn or allow (run them on the reference "
       "backend, copying operands; warn also prints each op once)")
      ("reference", po::value<std::string>(&flags.reference)->value_name("NAME|PATH"),
       "reference backend: where --fallback runs ops, and what conformance and fuzz compare "
       "with (default: $BACKPLANE_REFERENCE, else cpu_onednn)")
      ("probe", po::value<std::string>(&flags.probe)->value_name("on|off|fresh"),
       "load each plugin file in a child process before this one (on), so that a plugin "
       "that crashes, hangs or exits while loading is reported instead of taking the "
       "program down; fresh ignores the verdicts cached by file content; off loads "
       "directly (default: $BACKPLANE_PROBE, else on)");
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
  set_default_backend(flags.backend);
  if (!flags.reference.empty()) set_reference_backend(flags.reference);
}

BackendFlags init_from_args(int& argc, char** argv) {
  BackendFlags flags;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto take = [&](std::string_view name, auto&& set) {
      const std::string flag = "--" + std::string(name);
      if (a == flag) {
        BP_CHECK(i + 1 < argc, "[", flag, "] needs a value");
        set(std::string(argv[++i]));
        return true;
      }
      if (a.rfind(flag + "=", 0) == 0) {
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
    argv[out++] = argv[i];
  }
  argc = out;
  argv[argc] = nullptr;
  apply_backend_flags(flags);
  return flags;
}

}  // namespace bp
