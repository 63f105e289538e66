// The default backend and the reference backend, device specs
// ("NAME:N", "PATH:N") and how a Device prints.
#include <backplane/backend.h>
#include <backplane/error.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <ostream>

#include "internal.h"

namespace bp {

namespace {
std::mutex g_default_mu;
std::string g_default_spec = kDefaultBackend;
// The default device, resolved: backend id << 16 | index; -1 until then.
std::atomic<int32_t> g_default_device{-1};
}  // namespace

void forget_default_backend() { g_default_device.store(-1, std::memory_order_release); }

void set_default_backend(std::string_view spec) {
  parse_device_spec(spec);  // a bad device index is refused here, not at the first op
  std::lock_guard lock(g_default_mu);
  g_default_spec = std::string(spec);
  g_default_device.store(-1, std::memory_order_release);
}

namespace {
std::mutex g_reference_mu;
std::optional<std::string> g_reference_spec;  // unset: the environment, else the default
}  // namespace

void set_reference_backend(std::string_view name_or_path) {
  std::lock_guard lock(g_reference_mu);
  if (name_or_path.empty())
    g_reference_spec.reset();
  else
    g_reference_spec = std::string(name_or_path);
}

std::string reference_backend() {
  std::lock_guard lock(g_reference_mu);
  if (g_reference_spec) return *g_reference_spec;
  const char* env = std::getenv(kReferenceEnv);
  return env != nullptr && *env != '\0' ? env : kDefaultBackend;
}

Device default_device() {
  const int32_t packed = g_default_device.load(std::memory_order_acquire);
  if (__builtin_expect(packed >= 0, 1))
    return Device{static_cast<int16_t>(packed >> 16), static_cast<int16_t>(packed & 0xffff)};
  std::lock_guard lock(g_default_mu);
  const DeviceSpec spec = parse_device_spec(g_default_spec);
  // Without an index, device 0 even when the backend has none (the first
  // op says why); with one, the backend must have that device.
  const Device d =
      spec.index
          ? device(g_default_spec)
          : Device{static_cast<int16_t>(PluginLoader::instance().load(spec.backend).id()), 0};
  g_default_device.store(int32_t{d.backend} << 16 | d.index, std::memory_order_release);
  return d;
}

DeviceSpec parse_device_spec(std::string_view spec) {
  DeviceSpec out{std::string(spec), std::nullopt};
  const auto colon = spec.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return out;
  const std::string idx(spec.substr(colon + 1));
  const bool digits = !idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos;
  if (!digits) {
    // A path may hold a colon; a name may not.
    BP_CHECK(detail::looks_like_path(spec), "[device] '", spec,
             "' has an invalid device index; expected NAME, NAME:INDEX, PATH or PATH:INDEX");
    return out;
  }
  BP_CHECK(idx.size() <= 5 && std::stol(idx) < 32768, "[device] '", spec,
           "' has an invalid device index; expected a number from 0 to 32767");
  out.backend = std::string(spec.substr(0, colon));
  out.index = static_cast<int16_t>(std::stol(idx));
  return out;
}

Device device(std::string_view spec) {
  const DeviceSpec parsed = parse_device_spec(spec);
  Backend& b = PluginLoader::instance().load(parsed.backend);
  const int16_t index = parsed.index.value_or(0);
  BP_CHECK_INDEX(index < b.device_count(), "[device] backend '", b.name(), "' has no device ",
                 index, " (it has ", b.device_count(), ")",
                 b.device_count() == 0 ? ": " + b.no_device_reason() : std::string());
  return Device{static_cast<int16_t>(b.id()), index};
}

std::string to_string(Device d) {
  const IntrusivePtr<Backend> b = PluginLoader::instance().acquire(d.backend);
  return (b ? b->label() : "backend#" + std::to_string(d.backend)) + ":" + std::to_string(d.index);
}

std::ostream& operator<<(std::ostream& os, Device d) { return os << to_string(d); }

}  // namespace bp
