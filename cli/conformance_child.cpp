// Loading the backends of a conformance run, and the child's side of a case
// run in its own process.
#include "conformance_child.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "commands.h"

namespace bp::cli {

namespace {

}  // namespace

int load_device_or_say(const std::string& spec, const char* command, const char* role, Backend*& out,
                       Device& device) {
  std::string why;
  const int code = load_device(spec, command, role, out, device, why);
  if (code != kExitOk) std::cerr << why << "\n";
  return code;
}

int load_device(const std::string& spec, const char* command, const char* role, Backend*& out,
                Device& device, std::string& why) {
  DeviceSpec parsed;
  try {
    parsed = parse_device_spec(spec);
    out = &PluginLoader::instance().load(parsed.backend);
  } catch (const Error& e) {
    why = std::string("[") + command + "] cannot load the " + role + " '" + spec + "': " + e.what();
    return kExitUsage;
  }
  const int index = parsed.index.value_or(0);
  if (index >= out->device_count()) {
    why = std::string("[") + command + "] the " + role + " " + out->name() + " (" + out->path() +
          ") has no device " + std::to_string(index) + " (it has " +
          std::to_string(out->device_count()) + ")" +
          (out->device_count() == 0
               ? ": " + (out->no_device_reason().empty() ? std::string("the plugin gave no reason")
                                                         : out->no_device_reason())
               : std::string());
    return kExitNoDevice;
  }
  device = Device{static_cast<int16_t>(out->id()), static_cast<int16_t>(index)};
  return kExitOk;
}

namespace {

int load_both(const std::string& backend, const std::string& compare_to, BackendPair& out,
              std::string& why) {
  if (int code = load_device(backend, "conformance", "backend under test", out.dut, out.dut_device, why);
      code != kExitOk)
    return code;
  if (int code = load_device(compare_to, "conformance", "reference backend (--compare-to)", out.ref,
                             out.ref_device, why);
      code != kExitOk)
    return code;
  // A name that found the backend under test, loaded by path from another
  // file of that name (a new build): the name means the file in the plugin
  // folders, the previous build, which loads beside it.
  const DeviceSpec ref_spec = parse_device_spec(compare_to);
  if (out.ref == out.dut && ref_spec.backend.find('/') == std::string::npos &&
      !ref_spec.backend.ends_with(".so")) {
    std::string file;
    try {
      file = PluginLoader::instance().locate(ref_spec.backend);
    } catch (const Error&) {
    }
    std::error_code ec;
    if (!file.empty() && !std::filesystem::equivalent(file, out.dut->path(), ec)) {
      std::string spec = file;
      if (ref_spec.index) spec.append(1, ':').append(std::to_string(*ref_spec.index));
      if (int code = load_device(spec, "conformance", "reference backend (--compare-to)", out.ref,
                                 out.ref_device, why);
          code != kExitOk)
        return code;
    }
  }
  // A plugin compared with itself agrees with itself: its op cases would
  // pass whatever its kernels compute. Only the reference backend, which
  // has nothing to be compared with, is run that way.
  const std::string reference = reference_backend();
  std::error_code ec;
  const bool is_reference = out.dut->name() == reference ||
                            std::filesystem::equivalent(out.dut->path(), reference, ec);
  if (out.dut == out.ref && !is_reference) {
    why = "[conformance] --compare-to names the backend under test itself (" + out.dut->name() +
          ", " + out.dut->path() + "): its op cases would compare it with itself and pass "
          "whatever it computes; compare with the reference backend (the default) or another "
          "backend";
    return kExitUsage;
  }
  return kExitOk;
}

}  // namespace

int load_backends(const std::string& backend, const std::string& compare_to, BackendPair& out) {
  std::string why;
  int code = load_both(backend, compare_to, out, why);
  if (code != kExitOk) std::cerr << why << "\n";
  return code;
}

int run_one_case(const conformance::Suite& suite, const std::string& name,
                 const std::string& backend, const std::string& compare_to, uint64_t seed,
                 int result_fd) {
  if (result_fd >= 0) {
    // A plugin that crashes every case would otherwise leave a core file per
    // case; --no-isolate is the way to debug one.
    rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
  }
  conformance::CaseResult result;
  result.status = conformance::Status::Failed;
  const conformance::Case* c = suite.find(name);
  BackendPair backends;
  std::string why;
  if (c == nullptr) {
    result.message = "[conformance] no case is named '" + name + "'";
  } else if (load_both(backend, compare_to, backends, why) != kExitOk) {
    result.message = why;
  } else {
    conformance::Context ctx(*backends.dut, backends.dut_device, *backends.ref,
                             backends.ref_device, seed);
    ctx.set_own_process(true);
    result = conformance::run_case(*c, ctx);
  }
  if (result_fd < 0) {
    std::cout << name << ": " << conformance::to_string(result.status)
              << (result.message.empty() ? "" : "\n" + result.message) << "\n";
    return result.status == conformance::Status::Failed ? kExitFailed : kExitOk;
  }
  conformance::write_result(result_fd, result);
  std::cout.flush();
  std::fflush(nullptr);
  std::_Exit(kExitOk);
}

}  // namespace bp::cli
