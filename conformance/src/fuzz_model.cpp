// The fuzzer's host model of memory: which storage positions a layout
// addresses, overlap between layouts, broadcasting, the strides of a view
// (PyTorch's computeStride) and casts, worked out here from the contract
// rather than taken from the core, so that the core's arithmetic is what
// gets checked.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "case_util.h"
#include "fuzz_internal.h"

namespace bp::conformance::fuzz {

namespace {

int64_t product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<int64_t>());
}

}  // namespace

// --- layouts -------------------------------------------------------------------

int64_t Layout::numel() const { return product(sizes); }

Layout contiguous_layout(const std::vector<int64_t>& sizes) {
  Layout l;
  l.sizes = sizes;
  l.strides.assign(sizes.size(), 1);
  int64_t acc = 1;
  for (std::size_t d = sizes.size(); d-- > 0;) {
    l.strides[d] = acc;
    acc *= std::max<int64_t>(sizes[d], 1);
  }
  return l;
}

std::vector<int64_t> layout_positions(const Layout& l) {
  return positions(l.sizes, l.strides, l.offset);
}

bool self_overlapping(const Layout& l) {
  std::vector<int64_t> p = layout_positions(l);
  std::sort(p.begin(), p.end());
  return std::adjacent_find(p.begin(), p.end()) != p.end();
}

bool same_elements(const Layout& a, const Layout& b) {
  return a.sizes == b.sizes && layout_positions(a) == layout_positions(b);
}

bool partially_overlaps(const Layout& a, const Layout& b) {
  if (a.numel() == 0 || b.numel() == 0 || same_elements(a, b)) return false;
  std::vector<int64_t> pa = layout_positions(a), pb = layout_positions(b);
  std::sort(pa.begin(), pa.end());
  std::sort(pb.begin(), pb.end());
  std::vector<int64_t> common;
  std::set_intersection(pa.begin(), pa.end(), pb.begin(), pb.end(), std::back_inserter(common));
  return !common.empty();
}

bool non_overlapping_and_dense(const Layout& l) {
  if (l.numel() == 0) return true;
  std::vector<int64_t> p = layout_positions(l);
  std::sort(p.begin(), p.end());
  for (std::size_t i = 1; i < p.size(); ++i)
    if (p[i] != p[i - 1] + 1) return false;
  return true;
}

bool contiguous(const Layout& l) {
  if (l.numel() == 0) return true;
  int64_t expected = 1;
  for (std::size_t d = l.sizes.size(); d-- > 0;) {
    if (l.sizes[d] == 1) continue;
    if (l.strides[d] != expected) return false;
    expected *= l.sizes[d];
  }
  return true;
}

std::optional<std::vector<int64_t>> broadcast(const std::vector<int64_t>& a,
                                              const std::vector<int64_t>& b) {
  const std::size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::optional<std::vector<int64_t>> view_strides_of(const Layout& in,
                                                    const std::vector<int64_t>& shape) {
  std::vector<int64_t> out(shape.size(), 1);
  if (in.sizes.empty()) return out;
  if (in.numel() == 0) return contiguous_layout(shape).strides;
  // Groups of old dims that are contiguous with each other map onto new dims
  // with the same element count.
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_stride = in.strides.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(in.sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= in.sizes[d];
    const bool chunk_ends =
        d == 0 || (in.sizes[d - 1] != 1 && in.strides[d - 1] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
      out[view_d] = view_numel * chunk_stride;
      view_numel *= shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = in.strides[d - 1];
      tensor_numel = view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

std::vector<double> broadcast_values(const std::vector<double>& values,
                                     const std::vector<int64_t>& from,
                                     const std::vector<int64_t>& to) {
  Layout l;
  l.sizes = to;
  l.strides.assign(to.size(), 0);
  const Layout src = contiguous_layout(from);
  const std::size_t lead = to.size() - from.size();
  for (std::size_t d = 0; d < from.size(); ++d)
    l.strides[lead + d] = from[d] == 1 ? 0 : src.strides[d];
  return gather(values, l.sizes, l.strides, 0);
}

double cast_value(double v, DType dtype) {
  switch (dtype) {
    case DType::Bool:
      return v != 0 ? 1 : 0;  // NaN is true, as in PyTorch
    case DType::Int32:
      return std::isnan(v) ? 0 : static_cast<double>(static_cast<int32_t>(v));
    case DType::Int64:
      return std::isnan(v) ? 0 : static_cast<double>(static_cast<int64_t>(v));
    case DType::Float32:
      return static_cast<double>(static_cast<float>(v));
    case DType::Float64:
      return v;
    case DType::Float16:
      return static_cast<float>(Half(static_cast<float>(v)));
    case DType::BFloat16:
      return static_cast<float>(BFloat16(static_cast<float>(v)));
    case DType::Int8:
      return std::isnan(v) ? 0 : static_cast<double>(static_cast<int8_t>(static_cast<int64_t>(v)));
    case DType::UInt8:
      return std::isnan(v) ? 0 : static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(v)));
    case DType::Int16:
      return std::isnan(v) ? 0 : static_cast<double>(static_cast<int16_t>(static_cast<int64_t>(v)));
  }
  return v;
}

std::string shape_str(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
  return os.str();
}

std::string braces(const std::vector<int64_t>& v) {
  std::string s = shape_str(v);
  s.front() = '{';
  s.back() = '}';
  return s;
}

}  // namespace bp::conformance::fuzz
