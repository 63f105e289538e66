// The lines along one dim of an input and an output of one shape, for
// kernels that walk a line each (softmax.cu, sort.cu): the other dims
// coalesced on the host (bp::sdk::make_layout), and a line number turned
// into the two operands' element offsets of the line's start on the device.
#pragma once

#include "elementwise.cuh"

namespace bp::cuda {

// `lines` lines of `n` elements; strides in elements.
struct LineArgs {
  int ndim;  // of the line grid, innermost first, >= 1
  int64_t sizes[BP_MAX_DIMS], in[BP_MAX_DIMS], out[BP_MAX_DIMS];
  int64_t lines, n, in_step, out_step;  // steps: the strides along the dim
};

// Element offsets of the start of `line` in the input and the output.
__device__ __forceinline__ void line_offsets(const LineArgs& a, int64_t line, int64_t& in_off,
                                             int64_t& out_off) {
  in_off = out_off = 0;
#pragma unroll
  for (int d = 0; d < BP_MAX_DIMS; ++d) {
    if (d == a.ndim - 1) {
      in_off += line * a.in[d];
      out_off += line * a.out[d];
      break;
    }
    const int64_t q = line / a.sizes[d], r = line - q * a.sizes[d];
    in_off += r * a.in[d];
    out_off += r * a.out[d];
    line = q;
  }
}

// The lines of `in` and `out` (one shape) along `dim`.
inline LineArgs line_args(const TensorRef& in, const TensorRef& out, int dim) {
  const int nd = in.ndim();
  LineArgs a{};
  a.n = nd == 0 ? 1 : in.size(dim);
  a.in_step = nd == 0 ? 0 : in.stride(dim);
  a.out_step = nd == 0 ? 0 : out.stride(dim);
  int64_t shape[BP_MAX_DIMS], si[BP_MAX_DIMS], so[BP_MAX_DIMS];
  int nr = 0;
  for (int d = 0; d < nd; ++d) {
    if (d == dim) continue;
    shape[nr] = in.size(d);
    si[nr] = in.stride(d);
    so[nr++] = out.stride(d);
  }
  const auto L = bp::sdk::make_layout<2>(nr, shape, {si, so}, {1, 1});
  a.ndim = L.ndim;
  a.lines = 1;
  for (int d = 0; d < L.ndim; ++d) {
    a.sizes[d] = L.shape[L.ndim - 1 - d];
    a.in[d] = L.strides[0][L.ndim - 1 - d];
    a.out[d] = L.strides[1][L.ndim - 1 - d];
    a.lines *= a.sizes[d];
  }
  return a;
}

}  // namespace bp::cuda
