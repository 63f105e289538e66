// Loading the backends of a command, with its exit codes.
#include "device_loading.h"

#include <iostream>

#include "commands.h"

namespace bp::cli {

namespace {

int exit_code(conformance::LoadStatus s) {
  switch (s) {
    case conformance::LoadStatus::Ok:
      return kExitOk;
    case conformance::LoadStatus::NoDevice:
      return kExitNoDevice;
    case conformance::LoadStatus::Unusable:
      break;
  }
  return kExitUsage;
}

}  // namespace

int load_device_or_say(const std::string& spec, const char* command, const char* role,
                       Backend*& out, Device& device) {
  std::string why;
  const int code = exit_code(conformance::load_device(spec, command, role, out, device, why));
  if (code != kExitOk) std::cerr << why << "\n";
  return code;
}

int load_backends(const std::string& backend, const std::string& compare_to, BackendPair& out) {
  std::string why;
  const int code = exit_code(conformance::load_pair(backend, compare_to, out, why));
  if (code != kExitOk) std::cerr << why << "\n";
  return code;
}

}  // namespace bp::cli
