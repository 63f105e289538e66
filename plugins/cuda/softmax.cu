// SOFTMAX and LOG_SOFTMAX over dim ints[0], in three passes over each row
// (max, sum of exponentials, write), computed in double so that float32
// results match the reference to the last bit in nearly every case.
//
// Rows are laid out over blocks as in reduce.cu: `ry` threads share a row,
// taking consecutive elements along the dim when it is the input's
// fastest-moving one, else a warp takes consecutive rows.
#include <algorithm>
#include <cmath>
#include <limits>

#include "elementwise.cuh"
#include "lines.cuh"

namespace bp::cuda {

namespace {

struct SoftmaxArgs {
  LineArgs rows;  // a row: the elements along the dim
  const char* in;
  char* out;
  int ry, r_fast, log;
};

__device__ __forceinline__ double nan_max(double a, double b) { return (a > b || a != a) ? a : b; }

// Combines the ry values of one row in shared memory; every thread of the
// block must call it, and all get the row's result.
template <bool kMax>
__device__ double row_reduce(double* mine, int ri, int ry, double v) {
  mine[ri] = v;
  __syncthreads();
  for (int step = ry / 2; step > 0; step >>= 1) {
    if (ri < step)
      mine[ri] = kMax ? nan_max(mine[ri], mine[ri + step]) : mine[ri] + mine[ri + step];
    __syncthreads();
  }
  const double result = mine[0];
  __syncthreads();  // before the next call overwrites the slots
  return result;
}

template <class T>
__global__ void __launch_bounds__(kBlock) softmax_kernel(SoftmaxArgs a) {
  __shared__ double smem[kBlock];
  const int ry = a.ry, mx = kBlock / ry, tid = threadIdx.x;
  const int ri = a.r_fast ? tid % ry : tid / mx;
  const int mi = a.r_fast ? tid / ry : tid % mx;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * mx + mi;
  const bool valid = row < a.rows.lines;
  int64_t in_off = 0, out_off = 0;
  if (valid) line_offsets(a.rows, row, in_off, out_off);
  const T* x = reinterpret_cast<const T*>(a.in) + in_off;
  T* y = reinterpret_cast<T*>(a.out) + out_off;
  const int64_t n = valid ? a.rows.n : 0;
  double* mine = smem + mi * ry;

  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = ri; j < n; j += ry) m = nan_max(static_cast<double>(x[j * a.rows.in_step]), m);
  m = row_reduce<true>(mine, ri, ry, m);

  double sum = 0;
  for (int64_t j = ri; j < n; j += ry) sum += exp(static_cast<double>(x[j * a.rows.in_step]) - m);
  sum = row_reduce<false>(mine, ri, ry, sum);

  const double log_sum = log(sum);
  for (int64_t j = ri; j < n; j += ry) {
    const double v = static_cast<double>(x[j * a.rows.in_step]) - m;
    y[j * a.rows.out_step] = static_cast<T>(a.log ? v - log_sum : exp(v) / sum);
  }
}

int pow2_at_least(int64_t n, int cap) {
  int p = 1;
  while (p < cap && p < n) p <<= 1;
  return p;
}

void softmax_kernel_entry(const KernelCall& c) {
  const int dim = check::softmax(c);
  const TensorRef in = c.input(0), out = c.output(0);
  if (in.numel() == 0) return;
  SoftmaxArgs a{};
  a.rows = line_args(in, out, dim);
  a.in = static_cast<const char*>(in.base());
  a.out = static_cast<char*>(out.base());
  a.log = c.op() == BP_OP_LOG_SOFTMAX;
  const LineArgs& r = a.rows;
  const int64_t row_inner = std::llabs(r.in[0]);
  a.r_fast = r.lines == 1 || row_inner == 0 || std::llabs(r.in_step) < row_inner;
  a.ry = a.r_fast ? pow2_at_least(r.n, kBlock) : kBlock / pow2_at_least(r.lines, kBlock);
  const unsigned blocks = grid_for(r.lines, kBlock / a.ry);
  const cudaStream_t s = prepare(c).handle;
  if (out.dtype() == BP_DTYPE_FLOAT32)
    softmax_kernel<float><<<blocks, kBlock, 0, s>>>(a);
  else if (out.dtype() == BP_DTYPE_FLOAT64)
    softmax_kernel<double><<<blocks, kBlock, 0, s>>>(a);
  else
    BP_SDK_UNSUPPORTED("not implemented for " << bp::sdk::dtype_name(out.dtype()));
  BP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void register_softmax_kernels(Registrar& r) {
  add_kernel<&softmax_kernel_entry>(r, BP_OP_SOFTMAX, kFloatDtypes, BP_ORIGIN);
  add_kernel<&softmax_kernel_entry>(r, BP_OP_LOG_SOFTMAX, kFloatDtypes, BP_ORIGIN);
}

}  // namespace bp::cuda
