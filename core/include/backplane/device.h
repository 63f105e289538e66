// A device: a loaded backend plus the index of one of its devices.
#pragma once

#include <cstdint>
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

// Parses "NAME", "NAME:INDEX" or a plugin path; loads the backend if needed.
Device device(std::string_view spec);

}  // namespace bp
