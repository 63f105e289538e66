// SUM, PROD, MAX, MIN over the dims where the output has size 1 and the
// input does not; ARGMAX, ARGMIN over the dim ints[0].
//
// Output elements are spread over blocks of 256 threads: `ry` threads
// cooperate on one output (a shared-memory tree at the end), 256 / ry outputs
// share a block. When the reduced dims hold the input's fastest-moving
// memory, a warp's threads take consecutive reduced elements of one output;
// otherwise they take consecutive outputs. Either way a warp reads adjacent
// addresses. When there are too few outputs to fill the GPU (a full sum), the
// reduced range is also split over blockIdx.y into partial results that a
// second small kernel combines.
//
// Accumulators: double for floating inputs (close to the reference's
// sequential double sums), int64 for bool and integers.
#include <algorithm>
#include <limits>
#include <optional>

#include "elementwise.cuh"

namespace bp::cuda {

namespace {

enum ReduceKind : int { kSum, kProd, kMax, kMin, kArgMax, kArgMin };

template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

struct ReduceArgs {
  int kept_ndim, red_ndim;  // dims innermost first, both >= 1
  int64_t kept_sizes[BP_MAX_DIMS], kept_in[BP_MAX_DIMS], kept_out[BP_MAX_DIMS];
  int64_t red_sizes[BP_MAX_DIMS], red_in[BP_MAX_DIMS];  // input strides in elements
  const char* in;
  char* out;  // kept_out strides are in bytes of the output's dtype
  void* partial;
  int64_t outputs, reduced, chunk;
  int kind, out_dtype, splits, ry, r_fast;
};

template <class A>
__device__ __forceinline__ bool acc_is_nan(A x) {
  return x != x;  // false for integers
}

template <class A>
__device__ __forceinline__ A lowest() {
  return fn::kLowest<A>;  // -infinity for floating types
}

template <class A>
__device__ __forceinline__ A highest() {
  return fn::kHighest<A>;
}

template <class T>
struct ValueOps {
  using Item = Acc<T>;
  __device__ static Item identity(int kind) {
    return kind == kSum    ? Item(0)
           : kind == kProd ? Item(1)
           : kind == kMax  ? lowest<Item>()
                           : highest<Item>();
  }
  __device__ static Item make(T v, int64_t) { return static_cast<Item>(v); }
  __device__ static Item combine(int kind, Item a, Item b) {
    using R = fn::Reduction;
    switch (kind) {
      case kSum:
        return fn::combine<R::sum>(a, b);
      case kProd:
        return fn::combine<R::prod>(a, b);
      case kMax:
        return fn::combine<R::max>(a, b);
      default:
        return fn::combine<R::min>(a, b);
    }
  }
  __device__ static void store(int out_dtype, char* p, Item v) {
    switch (out_dtype) {
      case BP_DTYPE_BOOL:
        *reinterpret_cast<bool*>(p) = v != Item(0);
        break;
      case BP_DTYPE_INT32:
        *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(v);
        break;
      case BP_DTYPE_INT64:
        *reinterpret_cast<int64_t*>(p) = static_cast<int64_t>(v);
        break;
      case BP_DTYPE_FLOAT32:
        *reinterpret_cast<float*>(p) = static_cast<float>(v);
        break;
      default:
        *reinterpret_cast<double*>(p) = static_cast<double>(v);
        break;
    }
  }
};

template <class A>
struct ArgItem {
  A v;
  int64_t i;
};

// First occurrence wins, NaN wins over numbers: indices are compared
// explicitly because the tree combines items out of order.
template <class T>
struct ArgOps {
  using Item = ArgItem<Acc<T>>;
  __device__ static Item identity(int kind) {
    return Item{kind == kArgMax ? lowest<Acc<T>>() : highest<Acc<T>>(),
                std::numeric_limits<int64_t>::max()};
  }
  __device__ static Item make(T v, int64_t i) { return Item{static_cast<Acc<T>>(v), i}; }
  __device__ static Item combine(int kind, Item a, Item b) {
    const bool an = acc_is_nan(a.v), bn = acc_is_nan(b.v);
    bool take_b;
    if (an || bn)
      take_b = bn && (!an || b.i < a.i);
    else if (a.v == b.v)
      take_b = b.i < a.i;
    else
      take_b = kind == kArgMax ? b.v > a.v : b.v < a.v;
    return take_b ? b : a;
  }
  __device__ static void store(int, char* p, Item v) { *reinterpret_cast<int64_t*>(p) = v.i; }
};

// Input (elements) and output (bytes) offsets of output element m.
__device__ __forceinline__ void kept_offsets(const ReduceArgs& a, int64_t m, int64_t& in_off,
                                             int64_t& out_off) {
  in_off = out_off = 0;
#pragma unroll
  for (int d = 0; d < BP_MAX_DIMS; ++d) {
    if (d == a.kept_ndim - 1) {
      in_off += m * a.kept_in[d];
      out_off += m * a.kept_out[d];
      break;
    }
    const int64_t q = m / a.kept_sizes[d], r = m - q * a.kept_sizes[d];
    in_off += r * a.kept_in[d];
    out_off += r * a.kept_out[d];
    m = q;
  }
}

__device__ __forceinline__ int64_t reduced_offset(const ReduceArgs& a, int64_t r) {
  int64_t off = 0;
#pragma unroll
  for (int d = 0; d < BP_MAX_DIMS; ++d) {
    if (d == a.red_ndim - 1) {
      off += r * a.red_in[d];
      break;
    }
    const int64_t q = r / a.red_sizes[d];
    off += (r - q * a.red_sizes[d]) * a.red_in[d];
    r = q;
  }
  return off;
}

template <class T, class Ops>
__global__ void __launch_bounds__(kBlock) reduce_kernel(ReduceArgs a) {
  using Item = typename Ops::Item;
  __shared__ Item smem[kBlock];
  const int ry = a.ry, mx = kBlock / ry, tid = threadIdx.x;
  const int ri = a.r_fast ? tid % ry : tid / mx;
  const int mi = a.r_fast ? tid / ry : tid % mx;
  const int64_t m = static_cast<int64_t>(blockIdx.x) * mx + mi;
  Item acc = Ops::identity(a.kind);
  int64_t in_off = 0, out_off = 0;
  if (m < a.outputs) {
    kept_offsets(a, m, in_off, out_off);
    const T* in = reinterpret_cast<const T*>(a.in) + in_off;
    const int64_t r0 = static_cast<int64_t>(blockIdx.y) * a.chunk;
    const int64_t r1 = r0 + a.chunk < a.reduced ? r0 + a.chunk : a.reduced;
    for (int64_t r = r0 + ri; r < r1; r += ry)
      acc = Ops::combine(a.kind, acc, Ops::make(in[reduced_offset(a, r)], r));
  }
  Item* mine = smem + mi * ry;
  mine[ri] = acc;
  __syncthreads();
  for (int step = ry / 2; step > 0; step >>= 1) {
    if (ri < step) mine[ri] = Ops::combine(a.kind, mine[ri], mine[ri + step]);
    __syncthreads();
  }
  if (ri != 0 || m >= a.outputs) return;
  if (a.splits == 1)
    Ops::store(a.out_dtype, a.out + out_off, mine[0]);
  else
    static_cast<Item*>(a.partial)[m * a.splits + blockIdx.y] = mine[0];
}

template <class T, class Ops>
__global__ void __launch_bounds__(kBlock) reduce_partials_kernel(ReduceArgs a) {
  using Item = typename Ops::Item;
  const int64_t m = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (m >= a.outputs) return;
  const Item* p = static_cast<const Item*>(a.partial) + m * a.splits;
  Item acc = p[0];
  for (int s = 1; s < a.splits; ++s) acc = Ops::combine(a.kind, acc, p[s]);
  int64_t in_off, out_off;
  kept_offsets(a, m, in_off, out_off);
  Ops::store(a.out_dtype, a.out + out_off, acc);
}

int pow2_at_least(int64_t n, int cap) {
  int p = 1;
  while (p < cap && p < n) p <<= 1;
  return p;
}

template <class T, class Ops>
void launch_reduce(const Stream& st, ReduceArgs a) {
  const cudaStream_t s = st.handle;
  using Item = typename Ops::Item;
  const int64_t kept_inner = std::llabs(a.kept_in[0]), red_inner = std::llabs(a.red_in[0]);
  a.r_fast = a.outputs == 1 || kept_inner == 0 || red_inner < kept_inner;
  a.ry = a.r_fast ? pow2_at_least(a.reduced, kBlock) : kBlock / pow2_at_least(a.outputs, kBlock);
  const int64_t blocks = (a.outputs + kBlock / a.ry - 1) / (kBlock / a.ry);
  BP_SDK_REQUIRE(blocks <= INT32_MAX, "too many outputs (" << a.outputs << ") for one launch");
  // Enough blocks for a few waves, each thread still reading >= 32 elements.
  const int64_t target = 4LL * sm_count(st.device);
  int64_t splits = 1;
  if (blocks < target && a.reduced > 0) {
    const int64_t by_work = (a.reduced + a.ry * 32LL - 1) / (a.ry * 32LL);
    splits =
        std::max<int64_t>(1, std::min<int64_t>({(target + blocks - 1) / blocks, by_work, 65535}));
  }
  a.chunk = splits == 1 ? a.reduced : (a.reduced + splits - 1) / splits;
  if (splits > 1) splits = (a.reduced + a.chunk - 1) / a.chunk;
  a.splits = static_cast<int>(splits);
  std::optional<Scratch> partial;
  if (splits > 1) {
    partial.emplace(st, static_cast<std::size_t>(a.outputs * splits) * sizeof(Item));
    a.partial = partial->get();
  }
  reduce_kernel<T, Ops><<<dim3(static_cast<unsigned>(blocks), a.splits), kBlock, 0, s>>>(a);
  BP_CUDA_CHECK(cudaGetLastError());
  if (splits > 1) {
    reduce_partials_kernel<T, Ops><<<grid_for(a.outputs, kBlock), kBlock, 0, s>>>(a);
    BP_CUDA_CHECK(cudaGetLastError());
  }
}

void reduce_kernel_entry(const KernelCall& c) {
  const bp_op op = c.op();
  const bool arg = op == BP_OP_ARGMAX || op == BP_OP_ARGMIN;
  int dim = -1;
  if (arg)
    dim = check::arg_reduce(c);
  else
    check::reduce(c);
  const TensorRef in = c.input(0), out = c.output(0);
  const int nd = in.ndim();
  const int kind = op == BP_OP_SUM      ? kSum
                   : op == BP_OP_PROD   ? kProd
                   : op == BP_OP_MAX    ? kMax
                   : op == BP_OP_MIN    ? kMin
                   : op == BP_OP_ARGMAX ? kArgMax
                                        : kArgMin;
  std::array<bool, BP_MAX_DIMS> reduced{};
  for (int d = 0; d < nd; ++d) reduced[d] = arg ? d == dim : out.size(d) == 1 && in.size(d) != 1;
  ReduceArgs a{};
  a.outputs = out.numel();
  if (a.outputs == 0) return;
  a.reduced = 1;
  for (int d = 0; d < nd; ++d)
    if (reduced[d]) a.reduced *= in.size(d);
  // Kept and reduced dims, each coalesced; make_layout puts the fastest last.
  const int64_t out_size = static_cast<int64_t>(bp::sdk::dtype_size(out.dtype()));
  int64_t ks[BP_MAX_DIMS], ki[BP_MAX_DIMS], ko[BP_MAX_DIMS], rs[BP_MAX_DIMS], ri[BP_MAX_DIMS];
  int nk = 0, nr = 0;
  for (int d = 0; d < nd; ++d) {
    if (reduced[d]) {
      rs[nr] = in.size(d);
      ri[nr++] = in.stride(d);
    } else {
      ks[nk] = in.size(d);
      ki[nk] = in.stride(d);
      ko[nk++] = out.stride(d);
    }
  }
  const auto K = bp::sdk::make_layout<2>(nk, ks, {ki, ko}, {1, out_size});
  const auto R = bp::sdk::make_layout<1>(nr, rs, {ri}, {1});
  a.kept_ndim = K.ndim;
  for (int d = 0; d < K.ndim; ++d) {
    a.kept_sizes[d] = K.shape[K.ndim - 1 - d];
    a.kept_in[d] = K.strides[0][K.ndim - 1 - d];
    a.kept_out[d] = K.strides[1][K.ndim - 1 - d];
  }
  a.red_ndim = R.ndim;
  for (int d = 0; d < R.ndim; ++d) {
    a.red_sizes[d] = R.shape[R.ndim - 1 - d];
    a.red_in[d] = R.strides[0][R.ndim - 1 - d];
  }
  a.in = static_cast<const char*>(in.base());
  a.out = static_cast<char*>(out.base());
  a.kind = kind;
  a.out_dtype = out.dtype();
  const Stream& s = prepare(c);
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (arg)
      launch_reduce<T, ArgOps<T>>(s, a);
    else
      launch_reduce<T, ValueOps<T>>(s, a);
  });
}

}  // namespace

void register_reduce_kernels(Registrar& r) {
  for (bp_op op : {BP_OP_SUM, BP_OP_PROD, BP_OP_MAX, BP_OP_MIN, BP_OP_ARGMAX, BP_OP_ARGMIN})
    add_kernel<&reduce_kernel_entry>(r, op, kBaseDtypes, BP_ORIGIN);
}

}  // namespace bp::cuda
