// What a plugin reports about itself at load (name, version, devices,
// device properties, tolerances, options), each value checked and copied before the
// core uses it; see docs/plugin-abi.md, "What the host checks".
#include <backplane/backend.h>

#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include "../abi_tensor.h"
#include "../named_dispatch.h"
#include "../printing.h"
#include "boundary.h"
#include "plugin_probe.h"

namespace bp::detail {

namespace {

constexpr std::size_t kMaxStringBytes = 256;  // names and versions, NUL included
constexpr int32_t kMaxTolerances = 4096;
constexpr int32_t kMaxOptions = 256;
constexpr std::size_t kMaxDescriptionBytes = 1024;

}  // namespace

// A throw of anything, in words.
std::string exception_words(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return std::string("threw a C++ exception (") + x.what() + ")";
  } catch (...) {
    return "threw a C++ exception that is not a std::exception";
  }
}

std::string read_facts(const bp_plugin* api, PluginFacts& facts) {
  const std::optional<std::string> name = detail::bounded_string(api->name, kMaxStringBytes);
  if (!name)
    return "its name is not NUL-terminated within " + std::to_string(kMaxStringBytes) + " bytes";
  if (!detail::is_plain_name(*name))
    return "its name '" + *name + "' is not a valid backend name ([a-z0-9_]+)";
  facts.name = *name;
  const std::optional<std::string> version =
      api->version ? detail::bounded_string(api->version, kMaxStringBytes) : std::string("unknown");
  if (!version)
    return "its version is not NUL-terminated within " + std::to_string(kMaxStringBytes) + " bytes";
  facts.version = *version;

  detail::load_phase("device_count");
  detail::BasicErrorBuffer<512> reason;
  std::exception_ptr thrown;
  int32_t n = 0;
  try {
    n = api->device_count(api->ctx, reason.get()->message, reason.get()->capacity);
  } catch (...) {
    thrown = std::current_exception();
  }
  if (thrown) return "device_count " + exception_words(thrown);
  if (reason.overrun())
    return "device_count wrote past the end of its " + std::to_string(reason.get()->capacity) +
           "-byte reason buffer";
  if (n < 0 || n > kMaxDevicesPerBackend)
    return "device_count returned " + std::to_string(n) + " (0 to " +
           std::to_string(kMaxDevicesPerBackend) + " devices are accepted)";
  facts.device_count = n;
  if (n == 0)
    facts.no_device_reason =
        reason.empty() ? "the plugin reported no device and gave no reason" : reason.message();

  detail::load_phase("device_props");
  for (int d = 0; d < n; ++d) {
    detail::GuardedStruct<bp_device_props> props;
    detail::ErrorBuffer err;
    const bp_status st = detail::guarded(
        err.get(), [&] { return api->device_props(api->ctx, d, &props.value, err.get()); });
    if (!props.intact()) return "device_props wrote past the end of bp_device_props";
    if (st != BP_STATUS_OK)
      return "device_props failed for device " + std::to_string(d) + ": " + err.message();
    if (err.overrun()) return "device_props " + err.message();
    const std::size_t cap = sizeof props.value.name;
    if (strnlen(props.value.name, cap) == cap)
      return "device_props gave device " + std::to_string(d) +
             " a name that is not NUL-terminated within " + std::to_string(cap) + " bytes";
    props.value.struct_size = sizeof(bp_device_props);
    facts.props.push_back(props.value);
  }

  if (BP_HAS_FIELD(api, bp_plugin, num_tolerances) && api->tolerances != nullptr) {
    if (api->num_tolerances < 0 || api->num_tolerances > kMaxTolerances)
      return "num_tolerances is " + std::to_string(api->num_tolerances) + " (0 to " +
             std::to_string(kMaxTolerances) + " are accepted)";
    facts.tolerances.assign(api->tolerances, api->tolerances + api->num_tolerances);
  }
  if (BP_HAS_FIELD(api, bp_plugin, num_options) && api->num_options != 0) {
    if (api->num_options < 0 || api->num_options > kMaxOptions || api->options == nullptr)
      return "num_options is " + std::to_string(api->num_options) +
             (api->options == nullptr ? " with no options array" : "") + " (0 to " +
             std::to_string(kMaxOptions) + " are accepted)";
    for (int32_t i = 0; i < api->num_options; ++i) {
      const bp_option_info& o = api->options[i];
      const std::optional<std::string> key = detail::bounded_string(o.key, kMaxStringBytes);
      const std::optional<std::string> text =
          o.description ? detail::bounded_string(o.description, kMaxDescriptionBytes)
                        : std::string();
      if (!key || !detail::is_plain_name(*key))
        return "option " + std::to_string(i) + "'s key is not a name ([a-z0-9_]+, NUL-terminated)";
      if (!text)
        return "option '" + *key + "' has a description not NUL-terminated within " +
               std::to_string(kMaxDescriptionBytes) + " bytes";
      facts.options.emplace_back(*key, *text);
    }
  }
  return "";
}

}  // namespace bp::detail
