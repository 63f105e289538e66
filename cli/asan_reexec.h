// --asan (conformance, fuzz): running a plugin built with AddressSanitizer
// in this program, which is not, by starting it again with the ASan runtime
// preloaded (docs/conformance.md, "Plugins built with AddressSanitizer").
#pragma once

#include <backplane/options.h>

#include <optional>
#include <string>
#include <vector>

namespace bp::cli {

// When a plugin of `specs` (the --backend and --compare-to texts) needs an
// ASan runtime this process lacks, starts this program again with the same
// arguments, LD_PRELOAD set to that runtime and ASAN_OPTIONS completed with
// bp::kAsanOptions (keys the user set are kept), after printing that
// environment line on stderr; it does not return then. Returns nothing to
// go on in this process (the runtime is here already, or no plugin needs
// one; ASAN_OPTIONS is completed for the child processes), or an exit code
// when no runtime can be found or the new start failed. `more_options` are
// ASAN_OPTIONS of the command's own ("abort_on_error=1" for fuzz, whose
// crash handler then names the case).
std::optional<int> restart_with_asan(const char* command, const std::vector<std::string>& specs,
                                     const std::string& more_options = "");

}  // namespace bp::cli
