// The options a user gives a plugin at load (`--backend-option KEY=VALUE`,
// ABI 2.1), as the SDK hands them to a plugin class: see Options.
#pragma once

#include <backplane/plugin.h>

#include <backplane/sdk/tensor.hpp>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <string>

namespace bp::sdk {

// The options the user gave the plugin (`--backend-option KEY=VALUE`), from
// bp_host (ABI 2.1; none from an older core). A plugin whose class has a
// constructor taking `const bp::sdk::Options&` gets them from BP_SDK_PLUGIN,
// and lists the keys it takes in Plugin::options(); the core refuses any
// other key before the plugin is used. Bad values: the getters throw
// InvalidArgument naming the option, and the load fails with that message.
class Options {
 public:
  Options() = default;
  explicit Options(const bp_host* host) {
    if (host == nullptr || !BP_HAS_FIELD(host, bp_host, num_options) || host->options == nullptr)
      return;
    for (int32_t i = 0; i < host->num_options; ++i)
      values_[host->options[i].key] = host->options[i].value;
  }

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  std::string get(const std::string& key, const std::string& fallback) const {
    auto it = values_.find(key);
    return it == values_.end() ? fallback : it->second;
  }
  // An integer in [lo, hi]; `fallback` when the option is not given.
  long long get_int(const std::string& key, long long fallback, long long lo, long long hi) const {
    auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || errno != 0 || v < lo || v > hi)
      throw InvalidArgument("[--backend-option] " + key + "=" + it->second +
                            ": expected an integer from " + std::to_string(lo) + " to " +
                            std::to_string(hi));
    return v;
  }
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace bp::sdk
