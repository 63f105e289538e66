// RANDOM: element k of the output in row-major order takes Philox block
// (seed, offset + k), through the same header the CPU plugin uses
// (sdk/philox.hpp), so uniform values match it bit for bit and normal values
// (double sqrt/log/cos, rounded once) to within the last bit.
//
// The row-major index is what matters, not memory order: dims are merged only
// where that keeps the order (no reordering by stride as elsewhere).
#include <backplane/sdk/philox.hpp>

#include "elementwise.cuh"

namespace bp::cuda {

namespace {

struct RandomArgs {
  int ndim;                                          // innermost first
  int64_t sizes[BP_MAX_DIMS], strides[BP_MAX_DIMS];  // elements
  int64_t n;
  uint64_t seed, offset;
  int normal, contiguous;
};

template <class T>
__global__ void __launch_bounds__(kBlock) random_kernel(T* out, RandomArgs a) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (k >= a.n) return;
  int64_t off = 0;
  if (a.contiguous) {
    off = k;
  } else {
    int64_t rest = k;
#pragma unroll
    for (int d = 0; d < BP_MAX_DIMS; ++d) {
      if (d == a.ndim - 1) {
        off += rest * a.strides[d];
        break;
      }
      const int64_t q = rest / a.sizes[d];
      off += (rest - q * a.sizes[d]) * a.strides[d];
      rest = q;
    }
  }
  const uint64_t counter = a.offset + static_cast<uint64_t>(k);
  T v;
  if (a.normal)
    v = static_cast<T>(bp::sdk::philox::normal(a.seed, counter));
  else if constexpr (std::is_same_v<T, float>)
    v = bp::sdk::philox::uniform_float(a.seed, counter);
  else
    v = bp::sdk::philox::uniform_double(a.seed, counter);
  out[off] = v;
}

void random_kernel_entry(const KernelCall& c) {
  const check::RandomArgs args = check::random(c);
  const TensorRef out = c.output(0);
  RandomArgs a{};
  a.n = out.numel();
  if (a.n == 0) return;
  a.normal = static_cast<int>(args.distribution);
  a.seed = args.seed;
  a.offset = args.offset;
  // Order-preserving merge: dim d joins the next inner one when d's stride
  // is exactly the inner block's extent.
  int64_t sizes[BP_MAX_DIMS], strides[BP_MAX_DIMS];
  int n = 0;
  for (int d = out.ndim() - 1; d >= 0; --d) {
    if (out.size(d) == 1) continue;
    if (n > 0 && out.stride(d) == strides[n - 1] * sizes[n - 1]) {
      sizes[n - 1] *= out.size(d);
    } else {
      sizes[n] = out.size(d);
      strides[n++] = out.stride(d);
    }
  }
  if (n == 0) {
    sizes[0] = 1;
    strides[0] = 1;
    n = 1;
  }
  a.ndim = n;
  for (int d = 0; d < n; ++d) {
    a.sizes[d] = sizes[d];
    a.strides[d] = strides[d];
  }
  a.contiguous = n == 1 && strides[0] == 1;
  const cudaStream_t s = prepare(c).handle;
  const unsigned blocks = grid_for(a.n, kBlock);
  if (out.dtype() == BP_DTYPE_FLOAT32)
    random_kernel<float><<<blocks, kBlock, 0, s>>>(out.data<float>(), a);
  else if (out.dtype() == BP_DTYPE_FLOAT64)
    random_kernel<double><<<blocks, kBlock, 0, s>>>(out.data<double>(), a);
  else
    BP_SDK_UNSUPPORTED("not implemented for " << bp::sdk::dtype_name(out.dtype()));
  BP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void register_random_kernels(Registrar& r) {
  add_kernel<&random_kernel_entry>(r, BP_OP_RANDOM, kFloatDtypes, BP_ORIGIN);
}

}  // namespace bp::cuda
