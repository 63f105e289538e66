// The command-line flags every program built on Backplane shares:
//   --backend NAME|PATH   the default backend (default cpu_onednn)
//   --plugin-path DIR     a folder searched for plugins first (repeatable)
//   --fallback POLICY     deny | warn | allow: run ops the backend lacks on
//                         the reference backend (default deny)
//   --reference NAME|PATH the reference backend (default: BACKPLANE_REFERENCE,
//                         else cpu_onednn): the fallback's, and what
//                         conformance and fuzz compare with
//   --probe MODE          on | off | fresh: load each plugin file in a child
//                         process first (default: BACKPLANE_PROBE, else on)
#pragma once

#include <backplane/backend.h>

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/variables_map.hpp>

#include <string>
#include <vector>

namespace bp {

struct BackendFlags {
  std::string backend = "cpu_onednn";
  std::vector<std::string> plugin_paths;
  std::string fallback = "deny";  // deny | warn | allow (see fallback.h)
  std::string reference;          // empty: BACKPLANE_REFERENCE, else cpu_onednn
  std::string probe;              // on | off | fresh; empty: BACKPLANE_PROBE, else on
};

// "on", "off", "fresh" as a ProbeMode; ValueError naming the choices otherwise.
ProbeMode parse_probe_mode(const std::string& s);

// The two flags as a Program_options group bound to `flags`.
boost::program_options::options_description backend_options(BackendFlags& flags);

// Registers the plugin folders and makes flags.backend the default backend
// (loaded on first use).
void apply_backend_flags(const BackendFlags& flags);

// For any program: finds --backend/--plugin-path/--fallback/--reference/--probe (also as --backend=X)
// anywhere in argv, removes them, applies them, and returns them. Other
// arguments are left, in order, for the program's own parsing.
BackendFlags init_from_args(int& argc, char** argv);

}  // namespace bp
