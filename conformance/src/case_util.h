// Host-side helpers shared by the case files. Expected values are computed
// here from plain host data and hand-written layouts, never by the code
// under test.
#pragma once

#include <backplane/conformance.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <vector>

namespace bp::conformance {

// 0, 1, ..., n-1 on the host.
inline std::vector<double> host_iota(int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<double>(i);
  return v;
}

// A fresh contiguous tensor holding 0, 1, ..., numel-1 (not a view).
inline Tensor iota(const Context& ctx, const std::vector<int64_t>& shape,
                   DType dtype = DType::Float32) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return from_vector(host_iota(n), IntArrayRef(shape), ctx.options(dtype));
}

// The storage positions a (sizes, strides, offset) layout visits, row-major.
inline std::vector<int64_t> positions(const std::vector<int64_t>& sizes,
                                      const std::vector<int64_t>& strides, int64_t offset) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<int64_t> out;
  out.reserve(static_cast<std::size_t>(n));
  std::vector<int64_t> idx(sizes.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t pos = offset;
    for (std::size_t d = 0; d < sizes.size(); ++d) pos += idx[d] * strides[d];
    out.push_back(pos);
    for (std::size_t d = sizes.size(); d-- > 0;) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// The values a layout sees in host `storage`.
inline std::vector<double> gather(const std::vector<double>& storage,
                                  const std::vector<int64_t>& sizes,
                                  const std::vector<int64_t>& strides, int64_t offset) {
  std::vector<double> out;
  for (int64_t p : positions(sizes, strides, offset))
    out.push_back(storage[static_cast<std::size_t>(p)]);
  return out;
}

// `storage` with `value` written at every position of a layout.
inline std::vector<double> scatter(std::vector<double> storage, const std::vector<int64_t>& sizes,
                                   const std::vector<int64_t>& strides, int64_t offset,
                                   double value) {
  for (int64_t p : positions(sizes, strides, offset)) storage[static_cast<std::size_t>(p)] = value;
  return storage;
}

// Where a tensor's first element lives, on any device: its storage and the
// byte offset in it (device memory has no host address to compare).
struct Location {
  const void* storage = nullptr;
  int64_t byte_offset = 0;
  bool operator==(const Location&) const = default;
};
inline std::ostream& operator<<(std::ostream& os, const Location& l) {
  return os << "storage " << l.storage << " + " << l.byte_offset << " bytes";
}
inline Location location(const Tensor& t) {
  return {t.impl()->storage.get(), t.storage_offset() * static_cast<int64_t>(t.itemsize())};
}
// Element `offset` of the memory `base` starts at.
inline Location location_at(const Tensor& base, int64_t offset) {
  Location l = location(base);
  l.byte_offset += offset * static_cast<int64_t>(base.itemsize());
  return l;
}

// Allocations the backend has made so far on the device under test, when its
// allocator keeps statistics; used to prove an op allocated nothing.
inline std::optional<uint64_t> allocation_count(const Context& ctx) {
  auto stats = ctx.backend().memory_stats(ctx.device().index);
  if (!stats) return std::nullopt;
  return stats->num_allocs;
}

}  // namespace bp::conformance
