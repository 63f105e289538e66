// The strided elementwise engine behind every pointwise kernel.
//
// Host side: the operands' dims are coalesced (bp::sdk::make_layout: size-1
// dims dropped, the output's fastest dim innermost, dims merged where every
// operand is contiguous across them), then one of two kernels runs:
//   - contiguous: every operand is one flat run (or a broadcast scalar) and
//     suitably aligned; each thread moves kVecPerThread packs of kVec
//     elements with vector loads and stores (float4 for float32);
//   - strided: each thread turns its linear index into per-operand byte
//     offsets, in 32-bit arithmetic when every offset fits (the divisions
//     are the cost of this path), else 64-bit.
// Shape and strides travel in the kernel's argument struct (max rank 8), so
// a launch needs no device memory and no copy.
//
// Two ways in: launch_elementwise() for functors on values (up to 3 inputs,
// one output), launch_strided() for functors on raw element pointers (index
// ops, checks). Both launch on the stream they are given: the call's.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <backplane/sdk/elementwise.hpp>
#include <backplane/sdk/strided.hpp>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "cuda_backend.h"

namespace bp::cuda {

inline constexpr int kBlock = 256;
inline constexpr int kStridedPerThread = 4;
inline constexpr int kVec = 4;
inline constexpr int kVecPerThread = 2;

// An absent input of a value functor.
struct None {};

// Element values with PyTorch's rules, shared with every other backend
// (integers wrap, NaN propagates, exact integer pow).
using bp::sdk::Wrapping;
namespace fn = bp::sdk::fn;

// Records a failure in the stream's error record (see cuda_backend.h and
// errors.cu): the first one claims the record, later ones are dropped until
// a synchronisation has reported it. Nothing waits: the host reads the record
// at the stream's next synchronisation point.
__device__ __forceinline__ void record_error(ErrorRecord* r, int32_t code, int32_t op,
                                             int64_t value, int64_t limit, int32_t dim) {
  if (atomicCAS(&r->code, kNoError, code) != kNoError) return;
  r->op = op;
  r->value = value;
  r->limit = limit;
  r->dim = dim;
}

template <int N, class I>
struct StridedArgs {
  int ndim;
  I sizes[BP_MAX_DIMS];       // innermost first
  I strides[BP_MAX_DIMS][N];  // bytes, [dim][operand]
  char* base[N];
};

// Pointers to element i of every operand. The dim loop is fully unrolled so
// that the argument arrays are indexed by constants: a dynamic index would
// copy the whole struct to local memory.
template <int N, class I>
__device__ __forceinline__ void element_pointers(const StridedArgs<N, I>& a, I i, char* (&p)[N]) {
  I off[N];
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
#pragma unroll
  for (int d = 0; d < BP_MAX_DIMS; ++d) {
    if (d == a.ndim - 1) {
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += i * a.strides[d][k];
      break;
    }
    const I q = i / a.sizes[d];
    const I r = i - q * a.sizes[d];
    i = q;
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += r * a.strides[d][k];
  }
#pragma unroll
  for (int k = 0; k < N; ++k) p[k] = a.base[k] + off[k];
}

template <int N, class I, class F>
__global__ void __launch_bounds__(kBlock) strided_kernel(StridedArgs<N, I> a, int64_t n, F f) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * (kBlock * kStridedPerThread) + threadIdx.x;
#pragma unroll
  for (int u = 0; u < kStridedPerThread; ++u, i += kBlock) {
    if (i < n) {
      char* p[N];
      element_pointers(a, static_cast<I>(i), p);
      f(p);
    }
  }
}

inline unsigned grid_for(int64_t n, int64_t per_block) {
  const int64_t g = (n + per_block - 1) / per_block;
  BP_SDK_REQUIRE(g <= INT32_MAX, "tensor of " << n << " elements is too large for one launch");
  return static_cast<unsigned>(g);
}

template <int N, class I, class F>
void launch_layout(cudaStream_t s, const bp::sdk::StridedLayout<N>& L,
                   const std::array<char*, N>& base, int64_t n, const F& f) {
  StridedArgs<N, I> a{};
  a.ndim = L.ndim;
  for (int d = 0; d < L.ndim; ++d) {
    const int src = L.ndim - 1 - d;
    a.sizes[d] = static_cast<I>(L.shape[src]);
    for (int k = 0; k < N; ++k) a.strides[d][k] = static_cast<I>(L.strides[k][src]);
  }
  for (int k = 0; k < N; ++k) a.base[k] = base[k];
  strided_kernel<N, I, F><<<grid_for(n, kBlock * kStridedPerThread), kBlock, 0, s>>>(a, n, f);
  BP_CUDA_CHECK(cudaGetLastError());
}

// True when n and every operand's furthest byte offset fit in int32.
template <int N>
bool fits_int32(const bp::sdk::StridedLayout<N>& L, int64_t n) {
  if (n > INT32_MAX) return false;
  for (int k = 0; k < N; ++k) {
    int64_t span = 0;
    for (int d = 0; d < L.ndim; ++d) span += (L.shape[d] - 1) * std::llabs(L.strides[k][d]);
    if (span > INT32_MAX) return false;
  }
  return true;
}

template <int N, class F>
void launch_layout(cudaStream_t s, const bp::sdk::StridedLayout<N>& L,
                   const std::array<char*, N>& base, int64_t n, const F& f) {
  if (fits_int32(L, n))
    launch_layout<N, int32_t>(s, L, base, n, f);
  else
    launch_layout<N, int64_t>(s, L, base, n, f);
}

// Calls f(p) on the device for every element of `shape`; p[k] points at
// operand k's element. `strides` are in elements, `elem_size` in bytes.
template <int N, class F>
void launch_strided(cudaStream_t s, int ndim, const int64_t* shape,
                    const std::array<char*, N>& base, const std::array<const int64_t*, N>& strides,
                    const std::array<int64_t, N>& elem_size, const F& f) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  if (n == 0) return;
  launch_layout<N>(s, bp::sdk::make_layout<N>(ndim, shape, strides, elem_size), base, n, f);
}

// ---------------------------------------------------------------------------
// Value functors
// ---------------------------------------------------------------------------

template <class T>
struct alignas(sizeof(T) * kVec) Pack {
  T v[kVec];
};

template <class Out, class A, class B, class C, class F>
__device__ __forceinline__ Out apply(const F& f, const A& a, const B& b, const C& c) {
  if constexpr (std::is_same_v<A, None>)
    return f();
  else if constexpr (std::is_same_v<B, None>)
    return f(a);
  else if constexpr (std::is_same_v<C, None>)
    return f(a, b);
  else
    return f(a, b, c);
}

template <class T>
__device__ __forceinline__ void load_pack(Pack<T>& r, const T* p, int64_t i, bool scalar) {
  if constexpr (!std::is_same_v<T, None>) {
    if (scalar) {
      const T x = p[0];
#pragma unroll
      for (int j = 0; j < kVec; ++j) r.v[j] = x;
    } else {
      r = *reinterpret_cast<const Pack<T>*>(p + i);
    }
  }
}

template <class T>
__device__ __forceinline__ T load_one(const T* p, int64_t i, bool scalar) {
  if constexpr (std::is_same_v<T, None>)
    return None{};
  else
    return scalar ? p[0] : p[i];
}

// `scalar` bit k set: input k is a broadcast scalar (stride 0), read once.
template <class Out, class A, class B, class C, class F>
__global__ void __launch_bounds__(kBlock)
    contiguous_kernel(int64_t n, Out* out, const A* a, const B* b, const C* c, unsigned scalar,
                      F f) {
  constexpr int64_t kPerBlock = int64_t(kBlock) * kVec * kVecPerThread;
  const int64_t block_start = static_cast<int64_t>(blockIdx.x) * kPerBlock;
  const int64_t first = block_start + threadIdx.x * kVec;
  if (block_start + kPerBlock <= n) {
    // All loads before any store: the output may be an input (in place), so
    // the compiler could not hoist them over the stores itself.
    Pack<A> pa[kVecPerThread];
    Pack<B> pb[kVecPerThread];
    Pack<C> pc[kVecPerThread];
#pragma unroll
    for (int u = 0; u < kVecPerThread; ++u) {
      const int64_t i = first + u * kBlock * kVec;
      load_pack(pa[u], a, i, scalar & 1u);
      load_pack(pb[u], b, i, scalar & 2u);
      load_pack(pc[u], c, i, scalar & 4u);
    }
#pragma unroll
    for (int u = 0; u < kVecPerThread; ++u) {
      Pack<Out> po;
#pragma unroll
      for (int j = 0; j < kVec; ++j) po.v[j] = apply<Out>(f, pa[u].v[j], pb[u].v[j], pc[u].v[j]);
      *reinterpret_cast<Pack<Out>*>(out + first + u * kBlock * kVec) = po;
    }
    return;
  }
#pragma unroll
  for (int u = 0; u < kVecPerThread; ++u) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const int64_t i = first + u * kBlock * kVec + j;
      if (i < n)
        out[i] = apply<Out>(f, load_one(a, i, scalar & 1u), load_one(b, i, scalar & 2u),
                            load_one(c, i, scalar & 4u));
    }
  }
}

template <class Out, class A, class B, class C, class F>
struct LoadApplyStore {
  F f;
  __device__ __forceinline__ void operator()(char* (&p)[4]) const {
    A a{};
    B b{};
    C c{};
    if constexpr (!std::is_same_v<A, None>) a = *reinterpret_cast<const A*>(p[1]);
    if constexpr (!std::is_same_v<B, None>) b = *reinterpret_cast<const B*>(p[2]);
    if constexpr (!std::is_same_v<C, None>) c = *reinterpret_cast<const C*>(p[3]);
    *reinterpret_cast<Out*>(p[0]) = apply<Out>(f, a, b, c);
  }
};

template <class T>
constexpr int64_t size_or_one() {
  if constexpr (std::is_same_v<T, None>)
    return 1;
  else
    return sizeof(T);
}

// out = f(in0, in1, in2) elementwise, for inputs of out's shape (any strides,
// 0 on broadcast dims). Pass nullptr for the inputs whose type is None.
template <class Out, class A = None, class B = None, class C = None, class F>
void launch_elementwise(cudaStream_t s, const TensorRef& out,
                        const std::array<const bp_tensor*, 3>& in, const F& f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  static const int64_t kZeros[BP_MAX_DIMS] = {};
  std::array<char*, 4> base{static_cast<char*>(out.base()), nullptr, nullptr, nullptr};
  std::array<const int64_t*, 4> strides{out.strides(), kZeros, kZeros, kZeros};
  const std::array<int64_t, 4> sizes{sizeof(Out), size_or_one<A>(), size_or_one<B>(),
                                     size_or_one<C>()};
  for (int k = 0; k < 3; ++k) {
    if (in[k] == nullptr) continue;
    const TensorRef t(*in[k]);
    base[k + 1] = static_cast<char*>(t.base());
    strides[k + 1] = t.strides();
  }
  const auto L = bp::sdk::make_layout<4>(out.ndim(), out.shape(), strides, sizes);
  bool flat = L.ndim == 1 && L.strides[0][0] == sizes[0] &&
              reinterpret_cast<uintptr_t>(base[0]) % (sizes[0] * kVec) == 0;
  unsigned scalar = 0;
  for (int k = 1; k < 4 && flat; ++k) {
    if (in[k - 1] == nullptr) continue;
    if (L.strides[k][0] == 0 && L.shape[0] > 1)
      scalar |= 1u << (k - 1);
    else
      flat = L.strides[k][0] == sizes[k] &&
             reinterpret_cast<uintptr_t>(base[k]) % (sizes[k] * kVec) == 0;
  }
  if (flat) {
    contiguous_kernel<Out, A, B, C, F>
        <<<grid_for(n, int64_t(kBlock) * kVec * kVecPerThread), kBlock, 0, s>>>(
            n, reinterpret_cast<Out*>(base[0]), reinterpret_cast<const A*>(base[1]),
            reinterpret_cast<const B*>(base[2]), reinterpret_cast<const C*>(base[3]), scalar, f);
    BP_CUDA_CHECK(cudaGetLastError());
    return;
  }
  launch_layout<4>(s, L, base, n, LoadApplyStore<Out, A, B, C, F>{f});
}

}  // namespace bp::cuda
