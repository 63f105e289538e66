// The oneDNN engine, per-thread streams, and the primitive cache that keeps
// primitive creation (tens of microseconds) off the hot path.
#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "cpu_onednn.h"

namespace bp::cpu {

dnnl::engine& dnnl_engine() {
  // Leaked on purpose: destroying it from a static destructor at exit can run
  // after oneDNN's own globals are gone.
  static auto* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& dnnl_stream() {
  thread_local dnnl::stream stream(dnnl_engine());
  return stream;
}

namespace {

struct KeyHash {
  size_t operator()(const PrimitiveKey& k) const noexcept {
    return std::hash<std::string_view>()(
        std::string_view(reinterpret_cast<const char*>(&k), sizeof(k)));
  }
};
struct KeyEqual {
  bool operator()(const PrimitiveKey& a, const PrimitiveKey& b) const noexcept {
    return std::memcmp(&a, &b, sizeof(a)) == 0;
  }
};

// Bounded so that a program that sweeps many shapes does not grow it forever.
constexpr size_t kMaxCachedPrimitives = 1024;

struct PrimitiveCache {
  std::mutex mutex;
  std::unordered_map<PrimitiveKey, dnnl::primitive, KeyHash, KeyEqual> map;
};

PrimitiveCache& cache() {
  static auto* c = new PrimitiveCache();
  return *c;
}

}  // namespace

dnnl::primitive cached_primitive(const PrimitiveKey& key,
                                 const std::function<dnnl::primitive()>& make) {
  PrimitiveCache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.map.find(key);
    if (it != c.map.end()) return it->second;
  }
  // Built outside the lock: creation is slow and other shapes should not wait.
  dnnl::primitive p;
  try {
    p = make();
  } catch (const dnnl::error&) {
    p = dnnl::primitive();  // unsupported combination: remember and fall back
  }
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.map.size() >= kMaxCachedPrimitives) c.map.clear();
  return c.map.emplace(key, p).first->second;
}

void execute_src_dst(const dnnl::primitive& prim, const dnnl::memory::desc& src_md, void* src,
                     const dnnl::memory::desc& dst_md, void* dst) {
  dnnl::engine& eng = dnnl_engine();
  dnnl::memory s(src_md, eng, src), d(dst_md, eng, dst);
  prim.execute(dnnl_stream(), {{DNNL_ARG_SRC, s}, {DNNL_ARG_DST, d}});
}

}  // namespace bp::cpu
