// The fingerprints of calls, and the message when the ranks' calls differ.
#include <backplane/dtype.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "engine.h"

namespace bp::distributed {

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Product:
      return "product";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Max:
      return "max";
  }
  return "?";
}

namespace detail {

std::string_view call_name(CallKind kind) {
  switch (kind) {
    case CallKind::AllReduce:
      return "all_reduce";
    case CallKind::Broadcast:
      return "broadcast";
    case CallKind::AllGather:
      return "all_gather";
    case CallKind::ReduceScatter:
      return "reduce_scatter";
    case CallKind::Barrier:
      return "barrier";
    case CallKind::Send:
      return "send";
    case CallKind::Recv:
      return "recv";
    case CallKind::Refused:
      return "refused";
  }
  return "unknown call";
}

namespace {

std::string note_of(const Fingerprint& f) {
  return std::string(f.note, strnlen(f.note, sizeof f.note));
}

bool same_call(const Fingerprint& a, const Fingerprint& b) {
  return a.magic == b.magic && a.kind == b.kind && a.dtype == b.dtype && a.reduce == b.reduce &&
         a.count == b.count && a.seq == b.seq && a.root == b.root && a.tag == b.tag &&
         static_cast<CallKind>(a.kind) != CallKind::Refused;
}

}  // namespace

std::string describe(const Fingerprint& f) {
  std::ostringstream os;
  const auto kind = static_cast<CallKind>(f.kind);
  if (f.magic != Fingerprint{}.magic) return "a message that is not a Backplane call";
  if (kind == CallKind::Refused) {
    os << call_name(static_cast<CallKind>(f.reduce)) << " #" << f.seq
       << ", refused by the rank's own checks: " << note_of(f);
    return os.str();
  }
  os << call_name(kind);
  if (kind == CallKind::AllReduce || kind == CallKind::ReduceScatter)
    os << '(' << to_string(static_cast<ReduceOp>(f.reduce)) << ')';
  if (kind == CallKind::Broadcast) os << " from rank " << f.root;
  if (kind == CallKind::Send) os << " to rank " << f.root;
  if (kind == CallKind::Recv) os << " from rank " << f.root;
  if (kind != CallKind::Barrier)
    os << " of " << f.count << ' ' << name(static_cast<DType>(f.dtype));
  if (f.tag != 0) os << " with tag " << f.tag;
  os << " (call #" << f.seq << ')';
  return os.str();
}

uint64_t p2p_slot(const Fingerprint& f, int phase) {
  return (uint64_t{0xB7} << 56) | ((f.seq & 0xFFFFFFFFFFull) << 8) | static_cast<uint64_t>(phase);
}

std::string compare(const std::vector<Fingerprint>& all, int me) {
  bool same = true;
  for (const Fingerprint& f : all) same = same && same_call(f, all[0]);
  if (same) return {};
  // Ranks grouped by what they called, in rank order.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    std::string d = describe(all[r]);
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == d; });
    if (it == groups.end())
      groups.push_back({d, {r}});
    else
      it->second.push_back(r);
  }
  std::ostringstream os;
  os << "the ranks' calls differ (this is rank " << me << "): ";
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (g) os << "; ";
    const auto& ranks = groups[g].second;
    os << (ranks.size() == 1 ? "rank " : "ranks ");
    for (std::size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
    os << " called " << groups[g].first;
  }
  return os.str();
}

}  // namespace detail
}  // namespace bp::distributed
