// The two sides of `backplane conformance` that both the parent and the
// child process of a case need: loading the backend under test and the
// reference, and running one case for the parent (--run-one).
#pragma once

#include <backplane/conformance.h>

#include <cstdint>
#include <string>

namespace bp::cli {

struct BackendPair {
  Backend* dut = nullptr;  // the backend under test
  Backend* ref = nullptr;  // the reference it is compared with
  Device dut_device, ref_device;
};

// Loads the backend of `spec` (NAME, NAME:N, PATH or PATH:N) and picks its
// device (0 without an index). On failure `why` says why ("[fuzz] the
// backend cuda (...) has no device 0: it has 0: <the plugin's reason>"), and
// kExitUsage (cannot load, bad index) or kExitNoDevice is returned.
int load_device(const std::string& spec, const char* command, const char* role, Backend*& out,
                Device& device, std::string& why);

// load_device, printing why on stderr when it fails.
int load_device_or_say(const std::string& spec, const char* command, const char* role, Backend*& out,
                       Device& device);

// Loads both backends. When one cannot be loaded or has no device, prints
// why on stderr and returns kExitUsage or kExitNoDevice; else kExitOk.
int load_backends(const std::string& backend, const std::string& compare_to, BackendPair& out);

// Runs the case `name` in this process and writes its result to `result_fd`
// (conformance::write_result), or prints it when result_fd is -1. Does not
// return when it wrote to result_fd: the process exits at once, so that
// unloading the plugins cannot change the outcome.
int run_one_case(const conformance::Suite& suite, const std::string& name,
                 const std::string& backend, const std::string& compare_to, uint64_t seed,
                 int result_fd);

}  // namespace bp::cli
