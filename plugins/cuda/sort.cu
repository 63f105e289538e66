// ARGSORT and CUMSUM along dim ints[0].
//
// Both see the operands as `lines` lines of `n` elements along the dim: the
// other dims are coalesced (as in softmax.cu) and a line number turns into
// the input's and the output's element offsets of the line's start.
//
// ARGSORT is a stable bottom-up merge sort in bp::sdk::fn::sorts_before's
// order (NaN after every number, -0.0 equal to 0.0), not CUB's radix sort,
// whose order of NaN and -0.0 differs. A first kernel gathers every line's
// keys and the positions 0..n-1 into line-major scratch; then each of the
// ceil(log2(n)) passes merges pairs of sorted runs of `width` elements into
// runs of 2 * width, ping-ponging between two buffers, one thread per
// element: an element finds its place in the merged run from its own
// position and a binary search of the other run (elements of the right run
// that sort strictly before it for an element of the left run, elements of
// the left run that do not sort after it for one of the right run, so equal
// elements keep their order). The last pass writes the positions straight
// to the (strided) output.
//
// CUMSUM sums in double for floating inputs (each running sum rounded to
// the output's dtype, as the reference does) and in uint64 for bool and
// integers (wrapping, written as int64). With enough lines to fill the GPU
// one thread walks each line; with few long lines each line is cut into
// chunks: one thread sums each chunk, the chunk sums (a contiguous
// [lines, chunks] tensor) get the same scan in place, and a last kernel
// rescans each chunk from the sum of the chunks before it.
#include <algorithm>
#include <type_traits>

#include "elementwise.cuh"
#include "lines.cuh"

namespace bp::cuda {

namespace {

// ---------------------------------------------------------------------------
// ARGSORT
// ---------------------------------------------------------------------------

// keys[e], pos[e] for element e = line * n + p: the line's element p and p.
template <class T>
__global__ void __launch_bounds__(kBlock)
    sort_gather_kernel(LineArgs a, const T* in, T* keys, int64_t* pos) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (e >= a.lines * a.n) return;
  const int64_t line = e / a.n, p = e - line * a.n;
  int64_t in_off, out_off;
  line_offsets(a, line, in_off, out_off);
  keys[e] = in[in_off + p * a.in_step];
  pos[e] = p;
}

// One merge pass: the runs [lo, lo + width) and [lo + width, lo + 2 * width)
// of every line (cut at n), each sorted, become one sorted run. Element e
// goes to its place in keys_to / pos_to, or, on the last pass, its position
// goes to the output.
template <class T>
__global__ void __launch_bounds__(kBlock)
    merge_pass_kernel(LineArgs a, int64_t width, bool descending, const T* keys, const int64_t* pos,
                      T* keys_to, int64_t* pos_to, int64_t* out) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  const int64_t n = a.n;
  if (e >= a.lines * n) return;
  const int64_t line = e / n, p = e - line * n;
  const T* k = keys + line * n;
  const int64_t lo = p - p % (2 * width);
  const int64_t mid = min(lo + width, n), hi = min(lo + 2 * width, n);
  const T x = keys[e];
  int64_t dest;
  if (p < mid) {
    // After the elements of the right run that sort strictly before x.
    int64_t b = mid, t = hi;
    while (b < t) {
      const int64_t m = b + (t - b) / 2;
      if (fn::sorts_before(k[m], x, descending))
        b = m + 1;
      else
        t = m;
    }
    dest = p + (b - mid);
  } else {
    // After the elements of the left run that x does not sort before
    // (those equal to x included: they came first).
    int64_t b = lo, t = mid;
    while (b < t) {
      const int64_t m = b + (t - b) / 2;
      if (!fn::sorts_before(x, k[m], descending))
        b = m + 1;
      else
        t = m;
    }
    dest = (p - mid) + b;
  }
  if (out != nullptr) {
    int64_t in_off, out_off;
    line_offsets(a, line, in_off, out_off);
    out[out_off + dest * a.out_step] = pos[e];
  } else {
    keys_to[line * n + dest] = x;
    pos_to[line * n + dest] = pos[e];
  }
}

template <class T>
void launch_argsort(const Stream& st, const LineArgs& a, const T* in, int64_t* out,
                    bool descending) {
  const cudaStream_t s = st.handle;
  const int64_t total = a.lines * a.n;
  const unsigned blocks = grid_for(total, kBlock);
  // Two position buffers, then two key buffers (8-byte aligned after them).
  const std::size_t count = static_cast<std::size_t>(total);
  const Scratch scratch(st, 2 * count * (sizeof(int64_t) + sizeof(T)));
  int64_t* pos[2] = {scratch.as<int64_t>(), scratch.as<int64_t>() + count};
  T* keys[2] = {reinterpret_cast<T*>(pos[1] + count), reinterpret_cast<T*>(pos[1] + count) + count};
  sort_gather_kernel<T><<<blocks, kBlock, 0, s>>>(a, in, keys[0], pos[0]);
  BP_CUDA_CHECK(cudaGetLastError());
  int from = 0;
  for (int64_t width = 1; width < a.n; width *= 2, from ^= 1) {
    const bool last = 2 * width >= a.n;
    merge_pass_kernel<T><<<blocks, kBlock, 0, s>>>(a, width, descending, keys[from], pos[from],
                                                   keys[from ^ 1], pos[from ^ 1],
                                                   last ? out : nullptr);
    BP_CUDA_CHECK(cudaGetLastError());
  }
}

void argsort_kernel_entry(const KernelCall& c) {
  bool descending = false;
  const int dim = check::argsort(c, &descending);
  const TensorRef in = c.input(0), out = c.output(0);
  if (in.numel() == 0) return;
  const LineArgs a = line_args(in, out, dim);
  const Stream& st = prepare(c);
  if (a.n == 1) {  // every position is 0
    fill_zero(st.handle, out.raw());
    return;
  }
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_argsort<T>(st, a, static_cast<const T*>(in.base()), static_cast<int64_t*>(out.base()),
                      descending);
  });
}

// ---------------------------------------------------------------------------
// CUMSUM
// ---------------------------------------------------------------------------

// Elements each chunk thread sums at least.
inline constexpr int64_t kMinChunk = 64;

// v in the accumulator: double for floating sums; uint64 (through int64, so
// negative integers wrap as the reference's do) for bool and integers.
template <class Acc, class T>
__device__ __forceinline__ Acc widen(T v) {
  if constexpr (std::is_floating_point_v<Acc>)
    return static_cast<Acc>(v);
  else
    return static_cast<Acc>(static_cast<int64_t>(v));
}

// One thread per line, in order.
template <class T, class Acc, class O>
__global__ void __launch_bounds__(kBlock) cumsum_line_kernel(LineArgs a, const T* in, O* out) {
  const int64_t line = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (line >= a.lines) return;
  int64_t in_off, out_off;
  line_offsets(a, line, in_off, out_off);
  const T* x = in + in_off;
  O* y = out + out_off;
  Acc acc = 0;
  for (int64_t j = 0; j < a.n; ++j) {
    acc += widen<Acc>(x[j * a.in_step]);
    y[j * a.out_step] = static_cast<O>(acc);
  }
}

// Thread t = line * chunks + k sums chunk k of its line (elements
// [k * chunk, (k + 1) * chunk) cut at n) into sums[t].
template <class T, class Acc>
__global__ void __launch_bounds__(kBlock)
    chunk_sum_kernel(LineArgs a, const T* in, int64_t chunk, int64_t chunks, Acc* sums) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (t >= a.lines * chunks) return;
  const int64_t line = t / chunks, k = t - line * chunks;
  int64_t in_off, out_off;
  line_offsets(a, line, in_off, out_off);
  const T* x = in + in_off;
  const int64_t j1 = min((k + 1) * chunk, a.n);
  Acc acc = 0;
  for (int64_t j = k * chunk; j < j1; ++j) acc += widen<Acc>(x[j * a.in_step]);
  sums[t] = acc;
}

// The same threads, once `scanned` holds the running sums of the chunk
// sums along each line: each scans its chunk from the sum before it. Reads
// each element before writing it, so `out` may be `in`.
template <class T, class Acc, class O>
__global__ void __launch_bounds__(kBlock)
    chunk_scan_kernel(LineArgs a, const T* in, O* out, int64_t chunk, int64_t chunks,
                      const Acc* scanned) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (t >= a.lines * chunks) return;
  const int64_t line = t / chunks, k = t - line * chunks;
  int64_t in_off, out_off;
  line_offsets(a, line, in_off, out_off);
  const T* x = in + in_off;
  O* y = out + out_off;
  const int64_t j1 = min((k + 1) * chunk, a.n);
  Acc acc = k == 0 ? Acc(0) : scanned[t - 1];
  for (int64_t j = k * chunk; j < j1; ++j) {
    acc += widen<Acc>(x[j * a.in_step]);
    y[j * a.out_step] = static_cast<O>(acc);
  }
}

// out = the running sums of in along each line. Recursive on the chunk sums
// (each level divides n by at least kMinChunk).
template <class T, class Acc, class O>
void scan_lines(const Stream& st, const LineArgs& a, const T* in, O* out) {
  const cudaStream_t s = st.handle;
  // About the number of threads the GPU holds at once.
  const int64_t resident = 2048LL * sm_count(st.device);
  if (a.lines >= resident / 8 || a.n <= 2 * kMinChunk) {
    cumsum_line_kernel<T, Acc, O><<<grid_for(a.lines, kBlock), kBlock, 0, s>>>(a, in, out);
    BP_CUDA_CHECK(cudaGetLastError());
    return;
  }
  const int64_t chunk = std::max(kMinChunk, (a.lines * a.n + resident - 1) / resident);
  const int64_t chunks = (a.n + chunk - 1) / chunk;
  const int64_t threads = a.lines * chunks;
  const Scratch sums(st, static_cast<std::size_t>(threads) * sizeof(Acc));
  chunk_sum_kernel<T, Acc>
      <<<grid_for(threads, kBlock), kBlock, 0, s>>>(a, in, chunk, chunks, sums.as<Acc>());
  BP_CUDA_CHECK(cudaGetLastError());
  // The chunk sums: `lines` contiguous lines of `chunks`, scanned in place.
  LineArgs b{};
  b.ndim = 1;
  b.sizes[0] = a.lines;
  b.in[0] = b.out[0] = chunks;
  b.lines = a.lines;
  b.n = chunks;
  b.in_step = b.out_step = 1;
  scan_lines<Acc, Acc, Acc>(st, b, sums.as<Acc>(), sums.as<Acc>());
  chunk_scan_kernel<T, Acc, O>
      <<<grid_for(threads, kBlock), kBlock, 0, s>>>(a, in, out, chunk, chunks, sums.as<Acc>());
  BP_CUDA_CHECK(cudaGetLastError());
}

void cumsum_kernel_entry(const KernelCall& c) {
  const int dim = check::cumsum(c);
  const TensorRef in = c.input(0), out = c.output(0);
  if (in.numel() == 0) return;
  const LineArgs a = line_args(in, out, dim);
  const Stream& st = prepare(c);
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in.base());
    if constexpr (std::is_floating_point_v<T>)
      scan_lines<T, double, T>(st, a, x, static_cast<T*>(out.base()));
    else
      scan_lines<T, uint64_t, int64_t>(st, a, x, static_cast<int64_t*>(out.base()));
  });
}

}  // namespace

void register_sort_kernels(Registrar& r) {
  add_kernel<&argsort_kernel_entry>(r, BP_OP_ARGSORT, kBaseDtypes, BP_ORIGIN);
  add_kernel<&cumsum_kernel_entry>(r, BP_OP_CUMSUM, kBaseDtypes, BP_ORIGIN);
}

}  // namespace bp::cuda
