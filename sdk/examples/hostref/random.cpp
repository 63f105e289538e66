// RANDOM: element k of out, in row-major order, is the Philox4x32-10 value
// (seed, offset + k) of backplane/sdk/philox.hpp (bp::sdk::fn::random_value);
// ints[0] = 0 uniform [0, 1), 1 standard normal; ints[1] = seed, ints[2] = offset. The walk follows
// out's logical order (not its memory order) because k is the logical index.
#include "hostref.h"

namespace hostref {

namespace {

void random_kernel(const KernelCall& c) {
  const bp::sdk::check::RandomArgs args = check::random(c);
  const int64_t dist = args.distribution;
  const uint64_t seed = args.seed, offset = args.offset;
  const TensorRef out = c.output(0);
  const int nd = out.ndim();
  const int64_t numel = out.numel();
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      std::array<int64_t, BP_MAX_DIMS> idx{};
      int64_t off = 0;  // element offset of idx
      for (int64_t k = 0; k < numel; ++k) {
        out.data<T>()[off] = fn::random_value<T>(dist, seed, offset + static_cast<uint64_t>(k));
        for (int d = nd - 1; d >= 0; --d) {
          if (++idx[d] < out.size(d)) {
            off += out.stride(d);
            break;
          }
          off -= out.stride(d) * (out.size(d) - 1);
          idx[d] = 0;
        }
      }
    } else {
      bp::sdk::unsupported(c, out.dtype());
    }
  });
}

}  // namespace

void register_random_kernels(Registrar& r) {
  r.add<&random_kernel>(BP_OP_RANDOM, kFloatDtypes, BP_ORIGIN);
}

}  // namespace hostref
