// Running an op the selected backend lacks on the reference CPU backend.
//
// Works on descriptors, below the front-end: every storage the call touches
// is copied (the byte range its operands reach) into host memory of the CPU
// backend, operands that share a storage keep sharing it there (so in-place
// ops stay in place), the CPU kernel runs, and the ranges of the storages
// that outputs live in are copied back.
#include <backplane/fallback.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <tuple>

#include "internal.h"

namespace bp {

namespace {

std::atomic<FallbackPolicy> g_policy{FallbackPolicy::Deny};
std::mutex g_mu;
std::map<std::tuple<std::string, int, std::string>, uint64_t> g_counts;

// The byte range [lo, hi) of `t` relative to t.data.
std::pair<int64_t, int64_t> byte_range(const bp_tensor& t) {
  const int64_t item = t.dtype.bits / 8 * t.dtype.lanes;
  int64_t lo = static_cast<int64_t>(t.byte_offset), hi = lo;
  bool empty = false;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] == 0) empty = true;
    const int64_t span = (t.shape[d] - 1) * t.strides[d] * item;
    (span < 0 ? lo : hi) += span;
  }
  if (empty) return {lo, lo};
  return {lo, hi + item};
}

struct HostCopy {
  void* device_data;  // the storage's handle on the device
  int64_t lo = 0, hi = 0;
  bool written = false;
  void* host = nullptr;      // the reference backend's handle
  void* host_ptr = nullptr;  // its host address
  std::size_t nbytes = 0;
};

}  // namespace

void set_fallback_policy(FallbackPolicy p) { g_policy.store(p, std::memory_order_relaxed); }
FallbackPolicy fallback_policy() { return g_policy.load(std::memory_order_relaxed); }

FallbackPolicy parse_fallback_policy(std::string_view t) {
  if (t == "deny") return FallbackPolicy::Deny;
  if (t == "warn") return FallbackPolicy::Warn;
  if (t == "allow") return FallbackPolicy::Allow;
  throw ValueError("[fallback] unknown policy '" + std::string(t) +
                   "'; expected deny, warn or allow");
}

std::string_view to_string(FallbackPolicy p) {
  switch (p) {
    case FallbackPolicy::Deny:
      return "deny";
    case FallbackPolicy::Warn:
      return "warn";
    case FallbackPolicy::Allow:
      return "allow";
  }
  return "deny";
}

std::vector<FallbackRecord> fallback_records() {
  std::lock_guard lock(g_mu);
  std::vector<FallbackRecord> out;
  for (const auto& [key, n] : g_counts)
    out.push_back({std::get<0>(key), static_cast<DType>(std::get<1>(key)), std::get<2>(key), n});
  return out;
}

void reset_fallback_records() {
  std::lock_guard lock(g_mu);
  g_counts.clear();
}

void print_fallback_summary(std::ostream& os) {
  const std::vector<FallbackRecord> records = fallback_records();
  if (records.empty()) return;
  os << "[fallback] ops run on " << reference_backend()
     << " because the backend lacks them (--fallback " << to_string(fallback_policy()) << "):\n";
  for (const auto& r : records)
    os << "  " << r.op << " (" << r.dtype << ") on " << r.backend << ": " << r.count
       << (r.count == 1 ? " call" : " calls") << "\n";
}

namespace detail {

bool try_fallback(Op op, DType dtype, Device device, std::span<const bp_tensor> inputs,
                  std::span<const bp_tensor> outputs, const bp_attrs& attrs) {
  const FallbackPolicy policy = fallback_policy();
  if (policy == FallbackPolicy::Deny || op == Op::Fill || op == Op::Random) return false;
  const IntrusivePtr<Backend> src_ref = acquire_backend(device);
  Backend& src = *src_ref;
  Backend& cpu = PluginLoader::instance().load(reference_backend());
  if (&cpu == &src) return false;
  BP_CHECK(cpu.device_count() > 0 && cpu.host_addressable(0), "[fallback] the reference backend '",
           cpu.name(), "' cannot run ", op_name(op), " for ", src.name(),
           ": it has no device that addresses host memory; choose one with --reference or ",
           kReferenceEnv);
  const KernelEntry& k = KernelRegistry::instance().lookup(op, cpu.id(), dtype);
  if (k.fn == nullptr) return false;

  // One host copy per device storage the call touches.
  std::vector<HostCopy> copies;
  auto copy_for = [&](const bp_tensor& t, bool written) -> HostCopy& {
    auto [lo, hi] = byte_range(t);
    for (auto& c : copies)
      if (c.device_data == t.data) {
        c.lo = std::min(c.lo, lo);
        c.hi = std::max(c.hi, hi);
        c.written |= written;
        return c;
      }
    copies.push_back(HostCopy{t.data, lo, hi, written});
    return copies.back();
  };
  for (const auto& t : inputs) copy_for(t, false);
  for (const auto& t : outputs) copy_for(t, true);
  struct Release {
    Backend& cpu;
    std::vector<HostCopy>& copies;
    ~Release() {
      for (auto& c : copies)
        if (c.host) cpu.deallocate(0, c.host, c.nbytes, nullptr);
    }
  } release{cpu, copies};
  const bp_stream stream = current_stream_of(device);
  for (auto& c : copies) {
    c.nbytes = static_cast<std::size_t>(std::max<int64_t>(c.hi - c.lo, 1));
    c.host = cpu.allocate(0, c.nbytes);
    c.host_ptr = cpu.host_pointer(0, c.host, 0);
    if (c.hi > c.lo)
      src.copy_to_host(device.index, stream, c.host_ptr, c.device_data, static_cast<uint64_t>(c.lo),
                       c.hi - c.lo);
  }
  src.stream_synchronize(device.index, stream);
  auto rebase = [&](const bp_tensor& t) {
    bp_tensor r = t;
    for (const auto& c : copies)
      if (c.device_data == t.data) {
        // The host buffer holds bytes [c.lo, c.hi) of the device storage.
        r.data = c.host;
        r.byte_offset = t.byte_offset - static_cast<uint64_t>(c.lo);
      }
    r.device = {cpu.dl_device_type(), 0};
    return r;
  };
  std::vector<bp_tensor> in, out;
  for (const auto& t : inputs) in.push_back(rebase(t));
  for (const auto& t : outputs) out.push_back(rebase(t));
  const Device ref{static_cast<int16_t>(cpu.id()), 0};
  call_kernel(op, dtype, ref, in, out, attrs);
  cpu.stream_synchronize(0, current_stream_of(ref));
  for (const auto& c : copies)
    if (c.written && c.hi > c.lo)
      src.copy_from_host(device.index, stream, c.device_data, static_cast<uint64_t>(c.lo),
                         c.host_ptr, c.hi - c.lo);

  bool first = false;
  {
    std::lock_guard lock(g_mu);
    first = g_counts[{std::string(op_name(op)), static_cast<int>(dtype), src.label()}]++ == 0;
  }
  if (first && policy == FallbackPolicy::Warn)
    std::cerr << "[fallback] " << op_name(op) << " for " << dtype << " is not implemented on '"
              << src.label() << "' (no kernel, or its kernel declined the call); running it on "
              << cpu.name() << " (--fallback warn)\n";
  return true;
}

}  // namespace detail
}  // namespace bp
