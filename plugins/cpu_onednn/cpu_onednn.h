// Internal header of the cpu_onednn plugin: shared thresholds, the oneDNN
// context and primitive cache, layout predicates and the parallel row walker.
#pragma once

#include <omp.h>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <backplane/sdk/checks.hpp>
#include <backplane/sdk/elementwise.hpp>
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/strided.hpp>
#include <backplane/sdk/tensor.hpp>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace bp::cpu {

using bp::sdk::KernelCall;
using bp::sdk::Registrar;
using bp::sdk::TensorRef;

// A function built once per instruction set named (GCC's target_clones,
// e.g. BP_CPU_CLONES("arch=haswell", "default")), the loader picking the
// one for the machine. Not under the sanitizers, whose runtimes start after
// the clones are resolved, nor with compilers other than GCC.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__clang__)
#define BP_CPU_CLONES(...) __attribute__((target_clones(__VA_ARGS__)))
#else
#define BP_CPU_CLONES(...)
#endif

// Below this many elements a oneDNN primitive costs more in fixed overhead
// (memory objects, argument map, dispatch: ~1-3 us) than the plugin's own
// loop spends on the whole tensor.
inline constexpr int64_t kDnnlMinElements = 32768;
// Below this many elements waking the OpenMP team costs more than it saves:
// an add of 32K floats (in cache) into an existing output took 0.81 of a
// serial loop's time on two threads and 1.02-1.07 on one, 16K floats
// 1.05-1.09 on one and 1.33-1.45 on two (backplane-bench's add_mid, 2-core
// AMD EPYC, docs/performance.md).
inline constexpr int64_t kParallelMinElements = 32768;
// float32 ADD..DIV of at least this many elements go to oneDNN's binary
// primitive; below it the plugin's loop over OpenMP threads was as fast or
// faster (32K-64K floats: 0.66-0.75 of a serial loop's time against
// 0.88-1.2 through oneDNN).
inline constexpr int64_t kDnnlBinaryMinElements = int64_t{1} << 20;
// Below this many multiply-adds (m*n*k) the plugin's matmul loop wins.
inline constexpr int64_t kDnnlMinMatmulFlops = 32768;

// ---------------------------------------------------------------------------
// oneDNN context and primitive cache (primitive_cache.cpp)
// ---------------------------------------------------------------------------

// The CPU engine, created on first use and kept for the library's lifetime.
dnnl::engine& dnnl_engine();
// A stream per calling thread: oneDNN streams must not be shared by threads
// that execute concurrently, and creating one per call is not free.
dnnl::stream& dnnl_stream();
// Runs a cached single-input primitive: src (layout src_md) -> dst (dst_md).
void execute_src_dst(const dnnl::primitive& prim, const dnnl::memory::desc& src_md, void* src,
                     const dnnl::memory::desc& dst_md, void* dst);

// Memory for oneDNN's temporaries: an operand reordered into a primitive's
// layout, a result in it, a primitive's scratchpad. The blocks come from
// the plugin's cache of freed blocks (allocator.cpp), not oneDNN's malloc:
// a fresh large block faults a page per 4 KiB on first touch, and a
// convolution makes several every call. Empty for a zero-size descriptor.
struct ScratchFree {
  std::size_t nbytes = 0;
  void operator()(void* p) const noexcept;
};
struct Scratch {
  dnnl::memory memory;
  std::unique_ptr<void, ScratchFree> buffer;
  operator const dnnl::memory&() const { return memory; }  // for execute()'s argument maps
};
Scratch scratch_memory(const dnnl::memory::desc& md);
// The scratchpad memory a primitive made with scratchpad_attr() needs.
dnnl::primitive_attr scratchpad_attr();
Scratch scratchpad_for(const dnnl::primitive_desc_base& pd);
// Gives the temporaries' cached blocks back (the plugin's empty_cache).
void empty_scratch_cache();

// Everything that decides a primitive's shape. Plain bytes so that hashing
// and equality are a memcmp; value-initialise it so padding is zero.
struct PrimitiveKey {
  int32_t kind = 0;  // which family built it (binary, eltwise, ...)
  int32_t alg = 0;   // dnnl::algorithm
  int32_t dtype = 0;
  int32_t ndim = 0;
  float scale0 = 1.0f;
  float scale1 = 1.0f;
  int64_t dims[3][BP_MAX_DIMS] = {};
  int64_t strides[3][BP_MAX_DIMS] = {};
};
static_assert(sizeof(PrimitiveKey) == 6 * 4 + 2 * 3 * 8 * BP_MAX_DIMS,
              "PrimitiveKey must have no padding");

// Returns the cached primitive for `key`, building it with `make` once. A
// null primitive means "no fast implementation": `make` returned nothing or
// threw, and the caller falls back to its own loop without retrying. The
// cache is sharded by the key's hash (a lock per shard) and each shard
// evicts its least recently used entry; values that change per call (a
// binary's alpha) are runtime arguments, never part of a key.
dnnl::primitive cached_primitive(const PrimitiveKey& key,
                                 const std::function<dnnl::primitive()>& make);

// True when a primitive descriptor picked oneDNN's reference implementation,
// which is far slower than the plugin's own loops.
inline bool is_reference_impl(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
}

inline dnnl::memory::data_type dnnl_type(bp_dtype d) {
  switch (d) {
    case BP_DTYPE_INT32:
      return dnnl::memory::data_type::s32;
    case BP_DTYPE_FLOAT32:
      return dnnl::memory::data_type::f32;
    default:
      return dnnl::memory::data_type::undef;
  }
}

// ---------------------------------------------------------------------------
// Layout predicates
// ---------------------------------------------------------------------------

using bp::sdk::is_dense;
using bp::sdk::same_strides;

// ---------------------------------------------------------------------------
// Loops
// ---------------------------------------------------------------------------

// Splits [0, n) evenly over the OpenMP team and calls f(begin, end) per thread.
template <class F>
void parallel_ranges(int64_t n, F&& f) {
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t b = n * t / nt, e = n * (t + 1) / nt;
    if (b < e) f(b, e);
  }
}

// Calls f(begin, end) over [0, n), in parallel when n is large.
template <class F>
void for_range(int64_t n, F&& f) {
  if (n < kParallelMinElements) {
    if (n > 0) f(int64_t{0}, n);
    return;
  }
  parallel_ranges(n, f);
}

// Walks N operands that share out[0]'s shape row by row, like
// bp::sdk::for_each_row, but splits the rows over threads for large work
// (numel times `work_per_element`, e.g. the length of a line each element
// stands for). Only for independent work: every element of ops[0] is
// visited once, by one thread.
template <int N, class Row>
void for_each_row_parallel(const std::array<TensorRef, N>& ops, Row&& row,
                           int64_t work_per_element = 1) {
  const int64_t numel = ops[0].numel();
  if (numel == 0) return;
  if (numel * work_per_element < kParallelMinElements || numel == 1) {
    bp::sdk::for_each_row<N>(ops, row);
    return;
  }
  std::array<const int64_t*, N> strides;
  std::array<int64_t, N> sizes;
  std::array<char*, N> base0;
  for (int k = 0; k < N; ++k) {
    strides[k] = ops[k].strides();
    sizes[k] = static_cast<int64_t>(bp::sdk::dtype_size(ops[k].dtype()));
    base0[k] = static_cast<char*>(ops[k].base());
  }
  const auto full = bp::sdk::make_layout<N>(ops[0].ndim(), ops[0].shape(), strides, sizes);
  std::array<bp::sdk::LayoutPart<N>, 2> parts;
  const int num_parts = bp::sdk::tile_for_cache<N>(full, parts);
  for (int part = 0; part < num_parts; ++part) {
    const auto& L = parts[part].layout;
    std::array<char*, N> base = base0;
    for (int k = 0; k < N; ++k) base[k] += parts[part].shift[k];
    const int outer = L.ndim - 1;
    const int64_t inner = L.shape[outer];
    std::array<int64_t, N> inner_strides;
    for (int k = 0; k < N; ++k) inner_strides[k] = L.strides[k][outer];
    int64_t rows = 1;
    for (int d = 0; d < outer; ++d) rows *= L.shape[d];
    if (rows == 1) {
      // One long row: cut it into pieces instead.
      parallel_ranges(inner, [&](int64_t b, int64_t e) {
        std::array<char*, N> p;
        for (int k = 0; k < N; ++k) p[k] = base[k] + b * inner_strides[k];
        row(p, inner_strides, e - b);
      });
      continue;
    }
    parallel_ranges(rows, [&](int64_t b, int64_t e) {
      std::array<int64_t, BP_MAX_DIMS> idx{};
      std::array<char*, N> p = base;
      int64_t rest = b;
      for (int d = outer - 1; d >= 0; --d) {
        idx[d] = rest % L.shape[d];
        rest /= L.shape[d];
        for (int k = 0; k < N; ++k) p[k] += idx[d] * L.strides[k][d];
      }
      for (int64_t r = b; r < e; ++r) {
        row(p, inner_strides, inner);
        for (int d = outer - 1; d >= 0; --d) {
          if (++idx[d] < L.shape[d]) {
            for (int k = 0; k < N; ++k) p[k] += L.strides[k][d];
            break;
          }
          for (int k = 0; k < N; ++k) p[k] -= L.strides[k][d] * (L.shape[d] - 1);
          idx[d] = 0;
        }
      }
    });
  }
}

// tile[r * K + c] = element r of column c, the columns `col_stride` bytes
// apart and each contiguous (nr x nc, at most K x K). Float tiles go 4 x 4
// through SSE registers (a scalar element-by-element transpose costs more
// than the add it feeds).
template <class T, int64_t K>
void transpose_into_tile(T* tile, const char* src, int64_t col_stride, int64_t nr, int64_t nc) {
  int64_t c = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    for (; c + 4 <= nc; c += 4) {
      const float* s0 = reinterpret_cast<const float*>(src + c * col_stride);
      const float* s1 = reinterpret_cast<const float*>(src + (c + 1) * col_stride);
      const float* s2 = reinterpret_cast<const float*>(src + (c + 2) * col_stride);
      const float* s3 = reinterpret_cast<const float*>(src + (c + 3) * col_stride);
      int64_t r = 0;
      for (; r + 4 <= nr; r += 4) {
        __m128 a = _mm_loadu_ps(s0 + r), b = _mm_loadu_ps(s1 + r), d = _mm_loadu_ps(s2 + r),
               e = _mm_loadu_ps(s3 + r);
        _MM_TRANSPOSE4_PS(a, b, d, e);
        _mm_storeu_ps(tile + (r + 0) * K + c, a);
        _mm_storeu_ps(tile + (r + 1) * K + c, b);
        _mm_storeu_ps(tile + (r + 2) * K + c, d);
        _mm_storeu_ps(tile + (r + 3) * K + c, e);
      }
      for (; r < nr; ++r) {
        tile[r * K + c] = s0[r];
        tile[r * K + c + 1] = s1[r];
        tile[r * K + c + 2] = s2[r];
        tile[r * K + c + 3] = s3[r];
      }
    }
  }
#endif
  for (; c < nc; ++c) {
    const T* col = reinterpret_cast<const T*>(src + c * col_stride);
    for (int64_t r = 0; r < nr; ++r) tile[r * K + c] = col[r];
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define BP_CPU_AVX2_TILES 1
// transpose_into_tile for float with AVX2: 8 x 8 blocks through eight
// registers (unpack, shuffle, permute), the edges element by element.
template <int64_t K>
__attribute__((target("avx2"))) void transpose_into_tile_avx2(float* tile, const char* src,
                                                              int64_t col_stride, int64_t nr,
                                                              int64_t nc) {
  const int64_t ld = col_stride / int64_t(sizeof(float));
  const float* base = reinterpret_cast<const float*>(src);
  int64_t c = 0;
  for (; c + 8 <= nc; c += 8) {
    const float* s = base + c * ld;
    int64_t r = 0;
    for (; r + 8 <= nr; r += 8) {
      __m256 x0 = _mm256_loadu_ps(s + r), x1 = _mm256_loadu_ps(s + ld + r),
             x2 = _mm256_loadu_ps(s + 2 * ld + r), x3 = _mm256_loadu_ps(s + 3 * ld + r),
             x4 = _mm256_loadu_ps(s + 4 * ld + r), x5 = _mm256_loadu_ps(s + 5 * ld + r),
             x6 = _mm256_loadu_ps(s + 6 * ld + r), x7 = _mm256_loadu_ps(s + 7 * ld + r);
      const __m256 t0 = _mm256_unpacklo_ps(x0, x1), t1 = _mm256_unpackhi_ps(x0, x1),
                   t2 = _mm256_unpacklo_ps(x2, x3), t3 = _mm256_unpackhi_ps(x2, x3),
                   t4 = _mm256_unpacklo_ps(x4, x5), t5 = _mm256_unpackhi_ps(x4, x5),
                   t6 = _mm256_unpacklo_ps(x6, x7), t7 = _mm256_unpackhi_ps(x6, x7);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                   u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                   u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                   u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      float* t = tile + r * K + c;
      _mm256_storeu_ps(t, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(t + K, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(t + 2 * K, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(t + 3 * K, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(t + 4 * K, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(t + 5 * K, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(t + 6 * K, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(t + 7 * K, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
    for (; r < nr; ++r)
      for (int64_t j = 0; j < 8; ++j) tile[r * K + c + j] = s[j * ld + r];
  }
  for (; c < nc; ++c)
    for (int64_t r = 0; r < nr; ++r) tile[r * K + c] = base[c * ld + r];
}

// AVX2 is there and oneDNN may use it: its cap (ONEDNN_MAX_CPU_ISA=SSE41,
// say) holds for this plugin's own vector code too, which also lets a test
// run the SSE path on an AVX2 machine.
inline bool cpu_has_avx2() {
  static const bool has = [] {
    if (!__builtin_cpu_supports("avx2")) return false;
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto avx2 = static_cast<unsigned>(dnnl::cpu_isa::avx2);
    return (isa & avx2) == avx2;
  }();
  return has;
}
#endif

// The transposed-operand case of binary_map: out and one input walk rows
// contiguously while the other input runs down columns (x + y.t()). Loading
// that input element by element down a column is a strided, unvectorised
// walk; instead each tile of 32 rows by 128 columns is first copied into a
// small buffer with contiguous reads along the input's own rows, and the
// tile's rows then run as dense, vectorisable loops. A tile wider than tall
// reads the output's and the other input's rows 512 bytes at a time: for
// 2048 x 2048 floats, 64 x 128 tiles took 0.70 to 0.86 of the time of
// 64 x 64 ones. 32 rows (16 KiB of floats) leave half of a 32 KiB L1 to the
// three streams: 0.91-0.98 of the time of 64 rows on 2048 x 2048 floats,
// 0.85-0.97 on 512 x 512, round by round (docs/performance.md).
// On a CPU with AVX2, float tiles are transposed 8 x 8 and the rows added
// 8 lanes wide (the code compiled for AVX2, chosen at run time): 0.8 of
// the time of the 4 x 4 SSE transposes on 2048 x 2048 floats. Adding each
// 8 x 8 block straight from its registers' stores was slower (twice the
// time): the compiler cannot vectorise a generic element function over 8
// lanes there, and the partial stores it makes instead stall the loads.
struct TransposedWalk {
  char* base[3];
  int64_t row_stride[3];  // bytes from one row to the next, per operand
  int64_t col_stride;     // the transposed operand's bytes between columns
  int t;                  // the transposed operand (1 or 2)
  int64_t rows, cols;
};
inline constexpr int64_t kTileRows = 32, kTileCols = 128;

// Row tiles [tb, te) of `w`. Always inlined, so that the AVX2 caller's
// copy is compiled for AVX2 (the element function included).
template <class O, class T, class F, bool kAvx2>
__attribute__((always_inline)) inline void transposed_tiles(const TransposedWalk& w, int64_t tb,
                                                            int64_t te, F& f) {
  alignas(32) T tile[kTileRows * kTileCols];
  const int u = w.t == 1 ? 2 : 1;  // the row-walking input
  for (int64_t rt = tb; rt < te; ++rt) {
    const int64_t r0 = rt * kTileRows, nr = std::min(kTileRows, w.rows - r0);
    for (int64_t c0 = 0; c0 < w.cols; c0 += kTileCols) {
      const int64_t nc = std::min(kTileCols, w.cols - c0);
      // tile[r][c] = transposed operand at (r0 + r, c0 + c): reads run along r.
      const char* tb0 = w.base[w.t] + r0 * w.row_stride[w.t] + c0 * w.col_stride;
#if defined(BP_CPU_AVX2_TILES)
      if constexpr (kAvx2)
        transpose_into_tile_avx2<kTileCols>(tile, tb0, w.col_stride, nr, nc);
      else
#endif
        transpose_into_tile<T, kTileCols>(tile, tb0, w.col_stride, nr, nc);
      for (int64_t r = 0; r < nr; ++r) {
        O* o = reinterpret_cast<O*>(w.base[0] + (r0 + r) * w.row_stride[0]) + c0;
        const T* row = reinterpret_cast<const T*>(w.base[u] + (r0 + r) * w.row_stride[u]) + c0;
        const T* tr = tile + r * kTileCols;
        if (w.t == 2)
          for (int64_t c = 0; c < nc; ++c) o[c] = f(row[c], tr[c]);
        else
          for (int64_t c = 0; c < nc; ++c) o[c] = f(tr[c], row[c]);
      }
    }
  }
}

#if defined(BP_CPU_AVX2_TILES)
template <class O, class F>
__attribute__((target("avx2"))) void transposed_tiles_avx2(const TransposedWalk& w, int64_t tb,
                                                           int64_t te, F& f) {
  transposed_tiles<O, float, F, true>(w, tb, te, f);
}
#endif

// Returns false when the layout is not the transposed case (or either side
// is below 64, where the plain walk is as fast).
template <class O, class T, class F>
bool binary_map_transposed(const TensorRef& out, const TensorRef& a, const TensorRef& b, F f) {
  const std::array<const int64_t*, 3> strides = {out.strides(), a.strides(), b.strides()};
  const std::array<int64_t, 3> sizes = {int64_t(sizeof(O)), int64_t(sizeof(T)), int64_t(sizeof(T))};
  const auto L = bp::sdk::make_layout<3>(out.ndim(), out.shape(), strides, sizes);
  if (L.ndim != 2 || L.shape[0] < 64 || L.shape[1] < 64) return false;
  // Rows along dim 1 for out; which input is the column-walking one?
  if (L.strides[0][1] != int64_t(sizeof(O))) return false;
  const bool x_rows = L.strides[1][1] == int64_t(sizeof(T));
  const bool y_rows = L.strides[2][1] == int64_t(sizeof(T));
  const bool x_cols = L.strides[1][0] == int64_t(sizeof(T)) && !x_rows;
  const bool y_cols = L.strides[2][0] == int64_t(sizeof(T)) && !y_rows;
  if (!((x_rows && y_cols) || (y_rows && x_cols))) return false;
  TransposedWalk w;
  w.base[0] = static_cast<char*>(out.base());
  w.base[1] = static_cast<char*>(a.base());
  w.base[2] = static_cast<char*>(b.base());
  w.t = x_cols ? 1 : 2;
  for (int k = 0; k < 3; ++k) w.row_stride[k] = L.strides[k][0];
  w.col_stride = L.strides[w.t][1];
  w.rows = L.shape[0];
  w.cols = L.shape[1];
  const int64_t row_tiles = (w.rows + kTileRows - 1) / kTileRows;
#if defined(BP_CPU_AVX2_TILES)
  if constexpr (std::is_same_v<T, float>) {
    if (cpu_has_avx2()) {
      parallel_ranges(row_tiles,
                      [&](int64_t tb, int64_t te) { transposed_tiles_avx2<O>(w, tb, te, f); });
      return true;
    }
  }
#endif
  parallel_ranges(row_tiles,
                  [&](int64_t tb, int64_t te) { transposed_tiles<O, T, F, false>(w, tb, te, f); });
  return true;
}

// Calls f(x, y) -> O for every element of two same-shaped inputs of type T.
template <class O, class T, class F>
void binary_map(const TensorRef& out, const TensorRef& a, const TensorRef& b, F f) {
  const int64_t n = out.numel();
  // The flat path is checked first and cheaply: it is what tiny ops take.
  if ((out.is_contiguous() && a.is_contiguous() && b.is_contiguous()) ||
      (is_dense(out) && same_strides(out, a) && same_strides(out, b))) {
    O* o = out.data<O>();
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    for_range(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = f(x[i], y[i]);
    });
    return;
  }
  if (n >= kParallelMinElements && binary_map_transposed<O, T>(out, a, b, f)) return;
  for_each_row_parallel<3>(
      {out, a, b}, [&](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t len) {
        O* o = reinterpret_cast<O*>(p[0]);
        const T* x = reinterpret_cast<const T*>(p[1]);
        const T* y = reinterpret_cast<const T*>(p[2]);
        const int64_t so = s[0] / int64_t(sizeof(O)), sx = s[1] / int64_t(sizeof(T)),
                      sy = s[2] / int64_t(sizeof(T));
        if (so == 1 && sx == 1 && sy == 1) {
          for (int64_t i = 0; i < len; ++i) o[i] = f(x[i], y[i]);
        } else if (so == 1 && sx == 1 && sy == 0) {
          const T yv = *y;
          for (int64_t i = 0; i < len; ++i) o[i] = f(x[i], yv);
        } else if (so == 1 && sx == 0 && sy == 1) {
          const T xv = *x;
          for (int64_t i = 0; i < len; ++i) o[i] = f(xv, y[i]);
        } else {
          for (int64_t i = 0; i < len; ++i) o[i * so] = f(x[i * sx], y[i * sy]);
        }
      });
}

// Calls f(x) -> O for every element of one input of type T.
template <class O, class T, class F>
void unary_map(const TensorRef& out, const TensorRef& in, F f) {
  const int64_t n = out.numel();
  if ((out.is_contiguous() && in.is_contiguous()) || (is_dense(out) && same_strides(out, in))) {
    O* o = out.data<O>();
    const T* x = in.data<T>();
    for_range(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = f(x[i]);
    });
    return;
  }
  for_each_row_parallel<2>(
      {out, in}, [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t len) {
        O* o = reinterpret_cast<O*>(p[0]);
        const T* x = reinterpret_cast<const T*>(p[1]);
        const int64_t so = s[0] / int64_t(sizeof(O)), sx = s[1] / int64_t(sizeof(T));
        if (so == 1 && sx == 1) {
          for (int64_t i = 0; i < len; ++i) o[i] = f(x[i]);
        } else {
          for (int64_t i = 0; i < len; ++i) o[i * so] = f(x[i * sx]);
        }
      });
}

// ---------------------------------------------------------------------------
// Checks and descriptors shared by the kernel families
// ---------------------------------------------------------------------------

using bp::sdk::kBaseDtypes;
using bp::sdk::kFloatDtypes;
using bp::sdk::kNumericDtypes;
namespace check = bp::sdk::check;  // the contract of each op (backplane/sdk/checks.hpp)
using bp::sdk::TensorDesc;

// ---------------------------------------------------------------------------
// Devices (device.cpp) and kernel families
// ---------------------------------------------------------------------------

void fill_device_props(int32_t device, bp_device_props& props);

void register_copy_kernels(Registrar& r);
void register_binary_kernels(Registrar& r);
void register_unary_kernels(Registrar& r);
void register_reduce_kernels(Registrar& r);
void register_matmul_kernels(Registrar& r);
void register_compare_kernels(Registrar& r);
void register_argreduce_kernels(Registrar& r);
void register_sort_kernels(Registrar& r);  // sort.cpp: ARGSORT, CUMSUM
void register_softmax_kernels(Registrar& r);
void register_index_kernels(Registrar& r);
void register_random_kernels(Registrar& r);
void register_conv_kernels(Registrar& r);    // conv.cpp: core::conv2d, core::conv2d_backward
void register_norm_kernels(Registrar& r);    // norm.cpp: core::layer_norm, core::batch_norm*
void register_sparse_kernels(Registrar& r);  // sparse.cpp: core::sparse_mm
void register_pool_kernels(Registrar& r);    // pool.cpp: core::max_pool2d, core::avg_pool2d*
void register_optim_kernels(Registrar& r);   // optim.cpp: core::sgd_step, core::adam_step

}  // namespace bp::cpu
