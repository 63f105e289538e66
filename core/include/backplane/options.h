// The command-line flags every program built on Backplane shares:
//   --backend NAME[:N]|PATH[:N]  the default backend and device (default cpu_onednn, device 0)
//   --plugin-path DIR     a folder searched for plugins first (repeatable)
//   --fallback POLICY     deny | warn | allow: run ops the backend lacks on
//                         the reference backend (default deny)
//   --reference NAME|PATH the reference backend (default: BACKPLANE_REFERENCE,
//                         else cpu_onednn): the fallback's, and what
//                         conformance and fuzz compare with
//   --probe MODE          on | off | fresh: load each plugin file in a child
//                         process first (default: BACKPLANE_PROBE, else on)
//   --backend-option K=V  an option for the --backend plugin's entry point
//                         (repeatable; `backplane devices --verbose` lists them)
#pragma once

#include <backplane/backend.h>

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/variables_map.hpp>
#include <string>
#include <vector>

namespace bp {

struct BackendFlags {
  std::string backend = "cpu_onednn";  // NAME, NAME:N, PATH or PATH:N
  std::vector<std::string> plugin_paths;
  std::string fallback = "deny";     // deny | warn | allow (see fallback.h)
  std::string reference;             // empty: BACKPLANE_REFERENCE, else cpu_onednn
  std::string probe;                 // on | off | fresh; empty: BACKPLANE_PROBE, else on
  std::vector<std::string> options;  // --backend-option KEY=VALUE, for the --backend plugin
};

// "on", "off", "fresh" as a ProbeMode; ValueError naming the choices otherwise.
ProbeMode parse_probe_mode(const std::string& s);

// The flags as a Program_options group bound to `flags`.
boost::program_options::options_description backend_options(BackendFlags& flags);

// The flags' help, as `--help` prints it ("Backend selection:\n  --backend ...").
std::string backend_options_help();

// Checks the flags' values (a ValueError names the flag and the choices),
// registers the plugin folders and makes flags.backend the default device
// (loaded on first use).
void apply_backend_flags(const BackendFlags& flags);

// Takes the flags out of argv (anywhere, also as --backend=X), leaving the
// other arguments in order for the program's own parsing, and returns them;
// applies nothing. A flag without its value is a ValueError.
BackendFlags parse_backend_args(int& argc, char** argv);

struct InitOptions {
  // --help or -h: print the backend options and exit 0. When false, print
  // them and leave the flag for the program's own help.
  bool exit_on_help = true;
  // Load the backend now, so that a misspelt name or a missing device stops
  // the program at start-up rather than at its first tensor op.
  bool load_backend = true;
  // At exit, print the ops that ran on the reference backend (--fallback
  // warn|allow), as the backplane program does. BACKPLANE_FALLBACK_SUMMARY=0
  // turns it off too.
  bool fallback_summary = true;
};

// For any program: parse_backend_args, then apply_backend_flags, then load.
// A bad flag or a backend that cannot be loaded prints one line
// ("prog: [--fallback] 'sometimes' is not a fallback policy: ...") and
// exits 2; a backend without the device asked for exits 3 with the reason.
BackendFlags init_from_args(int& argc, char** argv, const InitOptions& options = {});

}  // namespace bp
