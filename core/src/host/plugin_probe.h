// Probing a plugin file in a child process before the host loads it (the
// helper backplane-probe, core/probe/main.cpp), and the verdicts it gives;
// not installed.
#pragma once

#include <backplane/backend.h>
#include <backplane/error.h>

#include <exception>
#include <string>

namespace bp::detail {

struct ProbeResult {
  bool passed = false;  // or could not be probed: load in the host process
  PluginVerdict verdict = PluginVerdict::Refused;  // when !passed
  std::string reason;                              // when !passed
  std::string note;  // how the file was vetted, for `backplane devices`
};

// Probes `path` (a plugin file that exists) with the options its entry
// point will get, or takes the cached verdict for its content and those
// options unless `fresh`.
ProbeResult probe_plugin(const std::string& path, const BackendOptions& options, bool fresh);

// The stages of loading a plugin file, which the loader announces to a hook
// (the probe helper writes them to its report, so that the parent can say
// where a probe crashed or hung). No hook: nothing happens.
using PhaseHook = void (*)(const char* phase);
void set_load_phase_hook(PhaseHook hook);
void load_phase(const char* phase);

// Every value the plugin reports about itself at load, checked and copied
// (plugin_facts.cpp). Returns the reason for refusing it, or "" with
// `facts` filled.
std::string read_facts(const bp_plugin* api, PluginFacts& facts);
// "threw a C++ exception (what)" for any thrown object.
std::string exception_words(std::exception_ptr e);

// The report line of a passed probe and the first line of a refused one.
inline constexpr const char* kProbePassed = "passed";
inline constexpr const char* kProbeRefused = "refused";

}  // namespace bp::detail
