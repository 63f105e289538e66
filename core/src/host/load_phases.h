// The phases of loading one plugin file that need nothing of the loader's
// state: open, init and validate (PluginLoader::load_file runs them in that
// order, then registers the backend); not installed.
#pragma once

#include <backplane/backend.h>
#include <backplane/error.h>

#include <memory>
#include <string>

#include "backend_library.h"

namespace bp::detail {

// The error that refuses `path`, saying why.
PluginError refusal(const std::string& path, const std::string& why);

// --- open ----------------------------------------------------------------------
// Refuses a file that does not exist, or that would take this process down
// as it is opened (a plugin built with ASan in a process without the runtime).
void check_openable(const std::string& path);
// Opens the file (RTLD_NOW | RTLD_LOCAL); a failure names the loader's reason.
std::unique_ptr<Backend::Library> open_library(const std::string& path);

// --- init ----------------------------------------------------------------------
// Calls the entry point with this core's bp_host and `options`: the table it
// returns has this core's ABI major and a size its minor can have. Refuses a
// file without the entry point (listing what it exports).
const bp_plugin* init_plugin(Backend::Library& lib, const std::string& path,
                             const BackendOptions& options);
// Once init_plugin accepted a table it is ours to release: calls its destroy,
// then returns the refusal.
PluginError destroy_and_refuse(const bp_plugin* api, const std::string& path,
                               const std::string& why);

// --- validate ------------------------------------------------------------------
// Every required entry point is there, the plugin's facts are sound, and it
// takes every option in `options`; the facts. Destroys the plugin when it
// refuses it.
PluginFacts validate_plugin(const bp_plugin* api, const std::string& path,
                            const BackendOptions& options);

}  // namespace bp::detail
