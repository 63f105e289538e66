// The one CPU device: its name from /proc/cpuinfo and the machine's memory.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {
std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  }
  return std::string();
}
}  // namespace

void fill_device_props(int32_t device, bp_device_props& props) {
  BP_SDK_CHECK(device == 0, "device_props", "cpu_onednn has one device (0), got " << device);
  const long threads = sysconf(_SC_NPROCESSORS_ONLN);
  const std::string model = cpu_model_name();
  if (model.empty())
    std::snprintf(props.name, sizeof(props.name), "x86_64 CPU (%ld threads)", threads);
  else
    std::snprintf(props.name, sizeof(props.name), "x86_64 CPU: %s (%ld threads)", model.c_str(),
                  threads);
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  props.total_memory = pages > 0 && page_size > 0
                           ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
                           : 0;
  props.host_addressable = 1;
}

}  // namespace bp::cpu
