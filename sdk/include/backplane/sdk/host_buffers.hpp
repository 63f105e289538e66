// The pinned host buffers a plugin handed out (host_alloc), so that
// copy_from_host can tell them from the caller's own memory. Part of the
// SDK's plugin layer (plugin.hpp includes it).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

namespace bp::sdk {

// The host_alloc buffers a plugin handed out, so that copy_from_host can
// tell them (whose reads may be deferred) from the caller's own memory.
class HostBuffers {
 public:
  void add(const void* p, std::size_t n) {
    std::lock_guard lock(mu_);
    sizes_[static_cast<const char*>(p)] = n;
  }
  void remove(const void* p) {
    std::lock_guard lock(mu_);
    sizes_.erase(static_cast<const char*>(p));
  }
  // True when [p, p + n) lies in one of them.
  bool contains(const void* p, std::size_t n) const {
    const char* c = static_cast<const char*>(p);
    std::lock_guard lock(mu_);
    auto it = sizes_.upper_bound(c);
    if (it == sizes_.begin()) return false;
    --it;
    return c >= it->first && c + n <= it->first + it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<const char*, std::size_t> sizes_;
};

}  // namespace bp::sdk
