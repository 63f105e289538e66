// Loading the backends a command runs on (conformance, fuzz, perf, train),
// with the command's exit codes.
#pragma once

#include <backplane/conformance/backends.h>

#include <string>

namespace bp::cli {

using conformance::BackendPair;

// Loads the backend of `spec` (NAME, NAME:N, PATH or PATH:N) and picks its
// device (0 without an index). On failure `why` says why ("[fuzz] the
// backend cuda (...) has no device 0: it has 0: <the plugin's reason>"), and
// kExitUsage (cannot load, bad index) or kExitNoDevice is returned.
int load_device(const std::string& spec, const char* command, const char* role, Backend*& out,
                Device& device, std::string& why);

// load_device, printing why on stderr when it fails.
int load_device_or_say(const std::string& spec, const char* command, const char* role,
                       Backend*& out, Device& device);

// Loads the backend under test and the reference of a conformance run
// (conformance::load_pair). When one cannot be loaded or has no device,
// prints why on stderr and returns kExitUsage or kExitNoDevice; else kExitOk.
int load_backends(const std::string& backend, const std::string& compare_to, BackendPair& out);

}  // namespace bp::cli
