// The oneDNN engine, per-thread streams, and the primitive cache that keeps
// primitive creation (tens of microseconds) off the hot path.
#include <cstdint>
#include <cstring>
#include <list>
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

// The bytes of a key that can differ: the header and, per operand, the
// first ndim dims and strides (the rest are zero), so a 1-d key hashes 48
// bytes rather than 408.
size_t hash_key(const PrimitiveKey& k) noexcept {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over 64-bit words
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  uint64_t head[3];
  std::memcpy(head, &k, sizeof head);  // kind, alg, dtype, ndim, scale0, scale1
  for (uint64_t v : head) mix(v);
  const int n = k.ndim < 0 ? 0 : k.ndim > BP_MAX_DIMS ? BP_MAX_DIMS : k.ndim;
  for (int o = 0; o < 3; ++o)
    for (int d = 0; d < n; ++d) {
      mix(static_cast<uint64_t>(k.dims[o][d]));
      mix(static_cast<uint64_t>(k.strides[o][d]));
    }
  return static_cast<size_t>(h ^ (h >> 29));
}
static_assert(sizeof(PrimitiveKey) >= 24, "the header is six 32-bit fields");

struct KeyHash {
  size_t operator()(const PrimitiveKey& k) const noexcept { return hash_key(k); }
};
struct KeyEqual {
  bool operator()(const PrimitiveKey& a, const PrimitiveKey& b) const noexcept {
    return std::memcmp(&a, &b, sizeof(a)) == 0;
  }
};

// Sharded by hash, so that threads running different shapes take different
// locks; each shard is an LRU of at most kShardCapacity primitives, so that
// a program sweeping many shapes evicts the least recently used rather than
// growing without bound (or dropping every primitive at once).
constexpr size_t kShards = 16;
constexpr size_t kShardCapacity = 64;  // 1024 in all

struct Shard {
  std::mutex mutex;
  std::list<std::pair<PrimitiveKey, dnnl::primitive>> lru;  // most recent first
  std::unordered_map<PrimitiveKey, decltype(lru)::iterator, KeyHash, KeyEqual> map;
};

Shard& shard_of(size_t hash) {
  static auto* shards = new Shard[kShards];  // leaked: see dnnl_engine()
  return shards[(hash >> 7) % kShards];
}

}  // namespace

dnnl::primitive cached_primitive(const PrimitiveKey& key,
                                 const std::function<dnnl::primitive()>& make) {
  const size_t hash = hash_key(key);
  Shard& s = shard_of(hash);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.map.find(key);
    if (it != s.map.end()) {
      if (it->second != s.lru.begin()) s.lru.splice(s.lru.begin(), s.lru, it->second);
      return it->second->second;
    }
  }
  // Built outside the lock: creation is slow and other shapes should not wait.
  dnnl::primitive p;
  try {
    p = make();
  } catch (const dnnl::error&) {
    p = dnnl::primitive();  // unsupported combination: remember and fall back
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  if (auto it = s.map.find(key); it != s.map.end()) return it->second->second;  // raced
  s.lru.emplace_front(key, p);
  s.map.emplace(key, s.lru.begin());
  if (s.lru.size() > kShardCapacity) {
    s.map.erase(s.lru.back().first);
    s.lru.pop_back();
  }
  return p;
}

void execute_src_dst(const dnnl::primitive& prim, const dnnl::memory::desc& src_md, void* src,
                     const dnnl::memory::desc& dst_md, void* dst) {
  dnnl::engine& eng = dnnl_engine();
  dnnl::memory s(src_md, eng, src), d(dst_md, eng, dst);
  prim.execute(dnnl_stream(), {{DNNL_ARG_SRC, s}, {DNNL_ARG_DST, d}});
}

}  // namespace bp::cpu
