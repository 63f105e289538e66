// A device: a loaded backend plus the index of one of its devices.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace bp {

struct Device {
  int16_t backend = -1;  // id of a loaded backend (PluginLoader), -1 = not set
  int16_t index = 0;     // device index within that backend

  bool operator==(const Device&) const = default;
};

// "cpu_onednn:0".
std::string to_string(Device d);
std::ostream& operator<<(std::ostream& os, Device d);

// Parses "NAME", "NAME:INDEX", a plugin path or "PATH:INDEX"; loads the
// backend if needed. An index the backend lacks is an IndexError.
Device device(std::string_view spec);

// The parts of such a spec, without loading anything: the backend's name or
// path, and the device index when one is given. ValueError for an index
// that is not a number in [0, 32767].
struct DeviceSpec {
  std::string backend;
  std::optional<int16_t> index;
};
DeviceSpec parse_device_spec(std::string_view spec);

}  // namespace bp
