// Shared by the benchmark sources: sizes, so every implementation of one
// benchmark does the same work.
#pragma once

#include <cstdint>

namespace bp::bench {

// Elements of the large elementwise benchmarks: 64 MiB per float32 operand,
// well past any cache, so the time is memory traffic.
inline constexpr int64_t kLargeElems = int64_t{16} << 20;
// Bytes one large add moves: read two operands, write one.
inline constexpr int64_t kLargeAddBytes = 3 * kLargeElems * int64_t{sizeof(float)};

#ifdef BACKPLANE_BENCH_WITH_LIBTORCH
// Registers tiny_add/libtorch and add_16M/libtorch (bench_libtorch.cpp).
void register_libtorch_benchmarks();
#endif

}  // namespace bp::bench
