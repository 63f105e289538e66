// Loading the backends a command runs on (conformance, fuzz, perf, train),
// with the command's exit codes.
#pragma once

#include <backplane/conformance/backends.h>

#include <string>

namespace bp::cli {

using conformance::BackendPair;

// Loads the backend of `spec` (NAME, NAME:N, PATH or PATH:N) and picks its
// device (0 without an index) (conformance::load_device). On failure prints
// why on stderr ("[fuzz] the backend cuda (...) has no device 0 (it has 0):
// <the plugin's reason>") and returns kExitUsage (cannot load, bad index) or
// kExitNoDevice.
int load_device_or_say(const std::string& spec, const char* command, const char* role,
                       Backend*& out, Device& device);

// Loads the backend under test and the reference of a conformance run
// (conformance::load_pair). When one cannot be loaded or has no device,
// prints why on stderr and returns kExitUsage or kExitNoDevice; else kExitOk.
int load_backends(const std::string& backend, const std::string& compare_to, BackendPair& out);

}  // namespace bp::cli
