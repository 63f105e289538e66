// Header-only strided iteration for kernels that walk arbitrary layouts.
//
// for_each_strided(n_operands, shape, strides...) coalesces dimensions that
// are contiguous in every operand, puts the innermost (unit-stride-most)
// dimension last, and calls a callback once per inner row with the byte
// pointers and byte strides of each operand, so kernels write a plain loop.
#pragma once

#include <backplane/plugin.h>

#include <algorithm>
#include <array>
#include <backplane/sdk/tensor.hpp>
#include <cstdint>

namespace bp::sdk {

template <int N>
struct StridedLayout {
  int ndim = 0;
  std::array<int64_t, BP_MAX_DIMS> shape{};
  // Byte strides per operand per dim.
  std::array<std::array<int64_t, BP_MAX_DIMS>, N> strides{};
};

// Builds a coalesced layout for N operands that share `shape` (element
// strides in `elem_strides[k]`, element sizes in `elem_size[k]`).
template <int N>
StridedLayout<N> make_layout(int ndim, const int64_t* shape,
                             const std::array<const int64_t*, N>& elem_strides,
                             const std::array<int64_t, N>& elem_size) {
  StridedLayout<N> L;
  // Drop size-1 dims; keep order.
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] == 1) continue;
    L.shape[L.ndim] = shape[d];
    for (int k = 0; k < N; ++k) L.strides[k][L.ndim] = elem_strides[k][d] * elem_size[k];
    ++L.ndim;
  }
  if (L.ndim == 0) {
    L.ndim = 1;
    L.shape[0] = 1;
    for (int k = 0; k < N; ++k) L.strides[k][0] = elem_size[k];
    return L;
  }
  // Sort dims so the one with the smallest |stride| of operand 0 (the
  // output) is innermost: a transposed output is still walked in memory order.
  std::array<int, BP_MAX_DIMS> perm{};
  for (int d = 0; d < L.ndim; ++d) perm[d] = d;
  auto key = [&](int d) {
    int64_t s = L.strides[0][d];
    return s < 0 ? -s : s;
  };
  std::stable_sort(perm.begin(), perm.begin() + L.ndim,
                   [&](int a, int b) { return key(a) > key(b); });
  StridedLayout<N> P;
  P.ndim = L.ndim;
  for (int d = 0; d < L.ndim; ++d) {
    P.shape[d] = L.shape[perm[d]];
    for (int k = 0; k < N; ++k) P.strides[k][d] = L.strides[k][perm[d]];
  }
  // Merge dim d into d+1 when every operand is contiguous across them.
  StridedLayout<N> C;
  C.ndim = 0;
  for (int d = 0; d < P.ndim; ++d) {
    if (C.ndim > 0) {
      bool mergeable = true;
      for (int k = 0; k < N; ++k)
        if (C.strides[k][C.ndim - 1] != P.strides[k][d] * P.shape[d]) mergeable = false;
      if (mergeable) {
        C.shape[C.ndim - 1] *= P.shape[d];
        for (int k = 0; k < N; ++k) C.strides[k][C.ndim - 1] = P.strides[k][d];
        continue;
      }
    }
    C.shape[C.ndim] = P.shape[d];
    for (int k = 0; k < N; ++k) C.strides[k][C.ndim] = P.strides[k][d];
    ++C.ndim;
  }
  return C;
}

// Calls row(ptrs, inner_strides, inner_size) for every innermost row.
// `ptrs` are char* to the row's first element of each operand.
template <int N, class Row>
void for_each_row(const StridedLayout<N>& L, std::array<char*, N> base, Row&& row) {
  const int outer = L.ndim - 1;
  const int64_t inner = L.shape[outer];
  std::array<int64_t, N> inner_strides;
  for (int k = 0; k < N; ++k) inner_strides[k] = L.strides[k][outer];
  if (outer == 0) {
    row(base, inner_strides, inner);
    return;
  }
  std::array<int64_t, BP_MAX_DIMS> idx{};
  std::array<char*, N> p = base;
  for (;;) {
    row(p, inner_strides, inner);
    int d = outer - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < L.shape[d]) {
        for (int k = 0; k < N; ++k) p[k] += L.strides[k][d];
        break;
      }
      for (int k = 0; k < N; ++k) p[k] -= L.strides[k][d] * (L.shape[d] - 1);
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// A layout to walk, and the byte offset of its first element per operand.
template <int N>
struct LayoutPart {
  StridedLayout<N> layout;
  std::array<int64_t, N> shift{};
};

// Splits a layout for cache reuse. When an operand walks the second
// innermost dim with a smaller stride than the innermost one (a transposed
// input), rows of the output jump across that operand's cache lines. Cutting
// the innermost dim into tiles and walking tiles outermost makes consecutive
// rows reuse the lines the previous row loaded. Returns 1 or 2 parts (the
// second is the tail when the innermost size is not a multiple of `tile`).
template <int N>
int tile_for_cache(const StridedLayout<N>& L, std::array<LayoutPart<N>, 2>& parts,
                   int64_t tile = 64) {
  parts[0] = {L, {}};
  if (L.ndim < 2 || L.ndim >= BP_MAX_DIMS) return 1;
  const int in = L.ndim - 1, a = in - 1;
  if (L.shape[in] < 2 * tile) return 1;
  bool conflict = false;
  for (int k = 0; k < N; ++k) {
    const int64_t sa = L.strides[k][a] < 0 ? -L.strides[k][a] : L.strides[k][a];
    const int64_t si = L.strides[k][in] < 0 ? -L.strides[k][in] : L.strides[k][in];
    if (sa != 0 && sa < si) conflict = true;
  }
  if (!conflict) return 1;
  const int64_t blocks = L.shape[in] / tile, rest = L.shape[in] % tile;
  StridedLayout<N> M;
  M.ndim = L.ndim + 1;
  for (int d = 0; d < a; ++d) {
    M.shape[d] = L.shape[d];
    for (int k = 0; k < N; ++k) M.strides[k][d] = L.strides[k][d];
  }
  M.shape[a] = blocks;
  M.shape[a + 1] = L.shape[a];
  M.shape[a + 2] = tile;
  for (int k = 0; k < N; ++k) {
    M.strides[k][a] = L.strides[k][in] * tile;
    M.strides[k][a + 1] = L.strides[k][a];
    M.strides[k][a + 2] = L.strides[k][in];
  }
  parts[0] = {M, {}};
  if (rest == 0) return 1;
  StridedLayout<N> T = L;
  T.shape[in] = rest;
  std::array<int64_t, N> shift;
  for (int k = 0; k < N; ++k) shift[k] = blocks * tile * L.strides[k][in];
  parts[1] = {T, shift};
  return 2;
}

// Convenience: iterate operands given as TensorRefs sharing out[0]'s shape.
template <int N, class Row>
void for_each_row(const std::array<TensorRef, N>& ops, Row&& row) {
  std::array<const int64_t*, N> strides;
  std::array<int64_t, N> sizes;
  std::array<char*, N> base;
  for (int k = 0; k < N; ++k) {
    strides[k] = ops[k].strides();
    sizes[k] = static_cast<int64_t>(dtype_size(ops[k].dtype()));
    base[k] = static_cast<char*>(ops[k].base());
  }
  if (ops[0].numel() == 0) return;
  auto L = make_layout<N>(ops[0].ndim(), ops[0].shape(), strides, sizes);
  std::array<LayoutPart<N>, 2> parts;
  const int n = tile_for_cache<N>(L, parts);
  for (int i = 0; i < n; ++i) {
    std::array<char*, N> b = base;
    for (int k = 0; k < N; ++k) b[k] += parts[i].shift[k];
    for_each_row<N>(parts[i].layout, b, row);
  }
}

}  // namespace bp::sdk
