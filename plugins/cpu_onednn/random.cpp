// RANDOM: Philox4x32-10 values as defined by backplane/sdk/philox.hpp.
// Element k (row-major) depends only on (seed, offset + k), so the fill
// splits into arbitrary ranges of k over threads and stays reproducible.
#include <backplane/sdk/philox.hpp>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

template <class T, bool kNormal>
void random_fill(const TensorRef& out, uint64_t seed, uint64_t offset) {
  const int64_t numel = out.numel();
  if (out.is_contiguous()) {
    T* o = out.data<T>();
    for_range(numel, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k)
        o[k] = bp::sdk::fn::random_value<T>(kNormal, seed, offset + uint64_t(k));
    });
    return;
  }
  // Any strides: each range [b, e) of logical indices is walked in
  // row-major order from its own starting position.
  const int nd = out.ndim();
  for_range(numel, [&](int64_t b, int64_t e) {
    std::array<int64_t, BP_MAX_DIMS> idx{};
    int64_t rest = b, off = 0;
    for (int d = nd - 1; d >= 0; --d) {
      idx[d] = rest % out.size(d);
      rest /= out.size(d);
      off += idx[d] * out.stride(d);
    }
    T* o = out.data<T>();
    for (int64_t k = b; k < e; ++k) {
      o[off] = bp::sdk::fn::random_value<T>(kNormal, seed, offset + uint64_t(k));
      for (int d = nd - 1; d >= 0; --d) {
        if (++idx[d] < out.size(d)) {
          off += out.stride(d);
          break;
        }
        off -= out.stride(d) * (out.size(d) - 1);
        idx[d] = 0;
      }
    }
  });
}

void random_kernel(const KernelCall& c) {
  const check::RandomArgs args = check::random(c);
  const int64_t dist = args.distribution;
  const uint64_t seed = args.seed, offset = args.offset;
  const TensorRef out = c.output(0);
  if (out.numel() == 0) return;
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      if (dist == 0)
        random_fill<T, false>(out, seed, offset);
      else
        random_fill<T, true>(out, seed, offset);
    } else {
      throw bp::sdk::Unsupported(std::string("[random] not implemented for ") +
                                 bp::sdk::dtype_name(out.dtype()));
    }
  });
}

}  // namespace

void register_random_kernels(Registrar& r) {
  r.add<&random_kernel>(BP_OP_RANDOM, kFloatDtypes, BP_ORIGIN);
}

}  // namespace bp::cpu
