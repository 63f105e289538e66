// Loading what a conformance run compares: the backend under test and the
// reference, each with its device. Both ends of a case run in its own
// process load them this way (the parent once, each child again).
#pragma once

#include <backplane/backplane.h>

#include <string>

namespace bp::conformance {

struct BackendPair {
  Backend* dut = nullptr;  // the backend under test
  Backend* ref = nullptr;  // the reference it is compared with
  Device dut_device, ref_device;
};

enum class LoadStatus {
  Ok,
  Unusable,  // cannot be loaded, a bad device index, or not a fair comparison
  NoDevice,  // loaded, but without the device asked for
};

// Loads the backend of `spec` (NAME, NAME:N, PATH or PATH:N) and picks its
// device (0 without an index). Otherwise `why` says why ("[fuzz] the
// backend cuda (...) has no device 0 (it has 0): <the plugin's reason>");
// `command` and `role` name the caller and the backend in it.
LoadStatus load_device(const std::string& spec, const char* command, const char* role,
                       Backend*& out, Device& device, std::string& why);

// Loads the backend under test and the reference (--compare-to). A name that
// finds the backend under test, loaded by path from a new build, means the
// file of that name in the plugin folders; a backend other than the
// reference compared with itself is refused (its op cases would pass
// whatever it computes).
LoadStatus load_pair(const std::string& backend, const std::string& compare_to, BackendPair& out,
                     std::string& why);

}  // namespace bp::conformance
