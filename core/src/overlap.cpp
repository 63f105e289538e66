// Memory-overlap checks of an op's output: against itself (several elements
// at one address) and against its inputs (a partial overlap, which would
// make the result depend on the order the kernel visits elements). Their
// cost is metadata only for the layouts ops meet (dense, sliced, transposed,
// two columns of one matrix) and otherwise proportional to the elements the
// op touches, never to the extent of the storage between them.
#include <backplane/tensor.h>

#include <algorithm>
#include <vector>

#include "internal.h"

namespace bp::detail {

namespace {

// Calls fn(position) for the storage position of every element of a layout,
// row-major, until fn returns false.
template <class F>
void for_each_position(IntArrayRef sizes, IntArrayRef strides, int64_t offset, F&& fn) {
  const int64_t n = numel(sizes);
  const std::size_t nd = sizes.size();
  DimVector idx(nd, 0);
  int64_t pos = offset;
  for (int64_t k = 0; k < n; ++k) {
    if (!fn(pos)) return;
    for (std::size_t d = nd; d-- > 0;) {
      if (++idx[d] < sizes[d]) {
        pos += strides[d];
        break;
      }
      pos -= (sizes[d] - 1) * strides[d];
      idx[d] = 0;
    }
  }
}

// [first, last] element range a layout touches in its storage.
std::pair<int64_t, int64_t> extent(IntArrayRef sizes, IntArrayRef strides, int64_t offset) {
  int64_t lo = offset, hi = offset;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    const int64_t span = (sizes[d] - 1) * strides[d];
    (span < 0 ? lo : hi) += span;
  }
  return {lo, hi};
}
std::pair<int64_t, int64_t> extent(const Tensor& t) {
  return extent(t.sizes(), t.strides(), t.storage_offset());
}

// A layout's dims of size > 1 sorted by |stride|, with what the dims below
// each can reach: below[i] = sum over j < i of (size_j - 1) * stride_j.
struct SortedDims {
  DimVector stride, size, below;
  bool zero_stride = false;
  // Each stride steps beyond all the smaller ones can reach: then no two
  // elements share an address (transposes, slices, diagonals, unfold with
  // step >= size).
  bool distinct = true;
};

SortedDims sorted_dims(IntArrayRef sizes, IntArrayRef strides) {
  SortedDims s;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] <= 1) continue;
    if (strides[i] == 0) s.zero_stride = true;
    const int64_t a = strides[i] < 0 ? -strides[i] : strides[i];
    std::size_t at = s.stride.size();  // insertion sort: ranks are tiny
    while (at > 0 && s.stride[at - 1] > a) --at;
    s.stride.insert(at, a);
    s.size.insert(at, sizes[i]);
  }
  int64_t span = 0;
  for (std::size_t i = 0; i < s.stride.size(); ++i) {
    s.below.push_back(span);
    s.distinct = s.distinct && s.stride[i] > span;
    span += (s.size[i] - 1) * s.stride[i];
  }
  return s;
}

int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// Whether d = sum over dims <= i of e_j * stride_j with |e_j| <= size_j - 1:
// whether two elements of the layout lie d apart. For a distinct layout at
// most two e fit each dim (stride_i > below_i), so the search is tiny.
bool reachable(const SortedDims& s, int i, int64_t d) {
  if (i < 0) return d == 0;
  const int64_t st = s.stride[i], below = s.below[i], n = s.size[i] - 1;
  const int64_t lo = std::max(-floor_div(below - d, st), -n);  // ceil((d - below) / st)
  const int64_t hi = std::min(floor_div(d + below, st), n);
  for (int64_t e = lo; e <= hi; ++e)
    if (reachable(s, i - 1, d - e * st)) return true;
  return false;
}

// The storage positions of a layout's elements within [lo, hi], sorted.
std::vector<int64_t> sorted_positions(const Tensor& t, int64_t lo, int64_t hi) {
  std::vector<int64_t> p;
  p.reserve(static_cast<std::size_t>(t.numel()));
  for_each_position(t.sizes(), t.strides(), t.storage_offset(), [&](int64_t q) {
    if (q >= lo && q <= hi) p.push_back(q);
    return true;
  });
  std::sort(p.begin(), p.end());
  return p;
}

// The same elements in the same order: equal offsets and sizes, and equal
// strides wherever a stride addresses memory (size > 1).
bool same_elements(const Tensor& a, const Tensor& b) {
  if (a.storage_offset() != b.storage_offset() || !a.sizes().equals(b.sizes())) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

// One layout at two offsets (x[:, 0] and x[:, 1]; a[1:] and a[:-1]).
bool same_layout(const Tensor& a, const Tensor& b) {
  if (!a.sizes().equals(b.sizes())) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

}  // namespace

bool has_internal_overlap(IntArrayRef sizes, IntArrayRef strides) {
  for (int64_t s : sizes)
    if (s == 0) return false;
  const SortedDims dims = sorted_dims(sizes, strides);
  if (dims.zero_stride) return true;
  if (dims.distinct) return false;
  // Other layouts: their positions, sorted, have a repeat.
  std::vector<int64_t> p;
  p.reserve(static_cast<std::size_t>(numel(sizes)));
  for_each_position(sizes, strides, 0, [&](int64_t q) {
    p.push_back(q);
    return true;
  });
  std::sort(p.begin(), p.end());
  return std::adjacent_find(p.begin(), p.end()) != p.end();
}

void check_writable(const char* op, const Tensor& out) {
  if (out.numel() == 0) return;  // nothing is written, so nothing can collide
  // A zero stride on a dim of size > 1 maps several elements to one address.
  const auto sz = out.sizes(), st = out.strides();
  for (std::size_t i = 0; i < sz.size(); ++i)
    BP_CHECK(!(st[i] == 0 && sz[i] > 1), "[", op, "] cannot write to ", describe_tensor(out),
             ": several of its elements share one memory location (an expanded tensor, dim ", i,
             " has stride 0); call .clone() first");
  if (out.is_contiguous() || out.numel() < 2) return;
  BP_CHECK(!has_internal_overlap(sz, st), "[", op, "] cannot write to ", describe_tensor(out),
           " with strides ", st, ": several of its elements share one memory location ",
           "(overlapping windows, as unfold or as_strided make); call .clone() first");
}

bool partially_overlap(const Tensor& out, const Tensor& in) {
  if (!out.shares_storage(in) || out.numel() == 0 || in.numel() == 0) return false;
  if (same_elements(out, in)) return false;  // exactly the output: x.add_(x)
  const auto [olo, ohi] = extent(out);
  const auto [ilo, ihi] = extent(in);
  if (ohi < ilo || ihi < olo) return false;
  if (same_layout(out, in)) {
    const SortedDims dims = sorted_dims(out.sizes(), out.strides());
    if (!dims.zero_stride && dims.distinct)
      return reachable(dims, static_cast<int>(dims.stride.size()) - 1,
                       in.storage_offset() - out.storage_offset());
  }
  // Interleaved or unrelated layouts (x[::2] and x[1::2]): look for a
  // common position, in a bitmap when the window they share is small next
  // to their elements, else by searching one's sorted positions.
  const int64_t lo = std::max(olo, ilo), hi = std::min(ohi, ihi);
  const int64_t window = hi - lo + 1, elements = out.numel() + in.numel();
  bool overlap = false;
  if (window <= 8 * elements) {
    std::vector<bool> written(static_cast<std::size_t>(window), false);
    for_each_position(out.sizes(), out.strides(), out.storage_offset(), [&](int64_t p) {
      if (p >= lo && p <= hi) written[p - lo] = true;
      return true;
    });
    for_each_position(in.sizes(), in.strides(), in.storage_offset(), [&](int64_t p) {
      overlap = p >= lo && p <= hi && written[p - lo];
      return !overlap;
    });
    return overlap;
  }
  const bool out_smaller = out.numel() <= in.numel();
  const std::vector<int64_t> p = sorted_positions(out_smaller ? out : in, lo, hi);
  const Tensor& other = out_smaller ? in : out;
  for_each_position(other.sizes(), other.strides(), other.storage_offset(), [&](int64_t q) {
    overlap = std::binary_search(p.begin(), p.end(), q);
    return !overlap;
  });
  return overlap;
}

void check_no_partial_overlap(const char* op, const Tensor& out, const Tensor& in) {
  BP_CHECK(!partially_overlap(out, in), "[", op, "] the input ", describe_tensor(in),
           " partially overlaps the output ", describe_tensor(out),
           " in memory; pass a .clone() of the input");
}

}  // namespace bp::detail
