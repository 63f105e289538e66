// The random stream every backend must reproduce (BP_OP_RANDOM).
//
// Element k of a request (row-major order) takes Philox4x32-10 block number
// offset + k, keyed by the 64-bit seed: counter = (lo32(n), hi32(n), 0, 0),
// key = (lo32(seed), hi32(seed)), giving four 32-bit words x0..x3. Then
//   uniform float32  = (x0 >> 8) * 2^-24                        in [0, 1)
//   uniform float64  = (((x0 << 32) | x1) >> 11) * 2^-53         in [0, 1)
//   normal (any float dtype), computed in double and rounded once:
//     u1 = 1 - float64 from (x0, x1)   in (0, 1]
//     u2 = float64 from (x2, x3)
//     z  = sqrt(-2 ln u1) * cos(2 pi u2)
// One block per element wastes three quarters of Philox's output, but makes
// value k depend on nothing but (seed, offset + k): any backend, any thread
// layout, any order gives the same numbers. Usable from CUDA device code.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define BP_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define BP_HOST_DEVICE inline
#endif

namespace bp::sdk::philox {

struct Block {
  uint32_t x[4];
};

BP_HOST_DEVICE uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

// Philox4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC'11), the constants of the paper and of cuRAND.
BP_HOST_DEVICE Block philox4x32_10(uint64_t counter, uint64_t seed) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = mulhilo(0xD2511F53u, c0, &hi0);
    const uint32_t lo1 = mulhilo(0xCD9E8D57u, c2, &hi1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Block{{c0, c1, c2, c3}};
}

BP_HOST_DEVICE double to_unit_double(uint32_t hi, uint32_t lo) {
  const uint64_t v = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>(v >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

// Uniform [0, 1) value of element `n` (= offset + k) for float32 output.
BP_HOST_DEVICE float uniform_float(uint64_t seed, uint64_t n) {
  const Block b = philox4x32_10(n, seed);
  return static_cast<float>(b.x[0] >> 8) * (1.0f / 16777216.0f);  // 2^-24
}

// Uniform [0, 1) value of element `n` for float64 output.
BP_HOST_DEVICE double uniform_double(uint64_t seed, uint64_t n) {
  const Block b = philox4x32_10(n, seed);
  return to_unit_double(b.x[0], b.x[1]);
}

// Standard normal value of element `n`, in double (round once to the output dtype).
BP_HOST_DEVICE double normal(uint64_t seed, uint64_t n) {
  const Block b = philox4x32_10(n, seed);
  const double u1 = 1.0 - to_unit_double(b.x[0], b.x[1]);
  const double u2 = to_unit_double(b.x[2], b.x[3]);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

}  // namespace bp::sdk::philox
