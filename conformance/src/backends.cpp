// Loading the backend under test and the reference of a conformance run.
#include <backplane/conformance/backends.h>

#include <filesystem>

namespace bp::conformance {

LoadStatus load_device(const std::string& spec, const char* command, const char* role,
                       Backend*& out, Device& device, std::string& why) {
  DeviceSpec parsed;
  try {
    parsed = parse_device_spec(spec);
    out = &PluginLoader::instance().load(parsed.backend);
  } catch (const Error& e) {
    why = std::string("[") + command + "] cannot load the " + role + " '" + spec + "': " + e.what();
    return LoadStatus::Unusable;
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
    return LoadStatus::NoDevice;
  }
  device = Device{static_cast<int16_t>(out->id()), static_cast<int16_t>(index)};
  return LoadStatus::Ok;
}

LoadStatus load_pair(const std::string& backend, const std::string& compare_to, BackendPair& out,
                     std::string& why) {
  if (LoadStatus s =
          load_device(backend, "conformance", "backend under test", out.dut, out.dut_device, why);
      s != LoadStatus::Ok)
    return s;
  if (LoadStatus s = load_device(compare_to, "conformance", "reference backend (--compare-to)",
                                 out.ref, out.ref_device, why);
      s != LoadStatus::Ok)
    return s;
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
      if (LoadStatus s = load_device(spec, "conformance", "reference backend (--compare-to)",
                                     out.ref, out.ref_device, why);
          s != LoadStatus::Ok)
        return s;
    }
  }
  // A plugin compared with itself agrees with itself: its op cases would
  // pass whatever its kernels compute. Only the reference backend, which
  // has nothing to be compared with, is run that way.
  const std::string reference = reference_backend();
  std::error_code ec;
  const bool is_reference =
      out.dut->name() == reference || std::filesystem::equivalent(out.dut->path(), reference, ec);
  if (out.dut == out.ref && !is_reference) {
    why = "[conformance] --compare-to names the backend under test itself (" + out.dut->name() +
          ", " + out.dut->path() +
          "): its op cases would compare it with itself and pass "
          "whatever it computes; compare with the reference backend (the default) or another "
          "backend";
    return LoadStatus::Unusable;
  }
  return LoadStatus::Ok;
}

}  // namespace bp::conformance
