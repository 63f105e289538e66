// Shared by the benchmark sources: sizes, so every implementation of one
// benchmark does the same work.
#pragma once

#include <cstdint>
#include <string>

namespace bp::bench {

// Elements of the large elementwise benchmarks: 64 MiB per float32 operand,
// well past any cache, so the time is memory traffic.
inline constexpr int64_t kLargeElems = int64_t{16} << 20;
// Bytes one large add moves: read two operands, write one.
inline constexpr int64_t kLargeAddBytes = 3 * kLargeElems * int64_t{sizeof(float)};
// The mid-size elementwise adds (bench_elementwise.cpp): 4K to 1M floats.
inline constexpr int64_t kMidSizes[] = {4096, 16384, 32768, 65536, 262144, 1048576};

// The strided-vs-dense pairs: float32 adds of side x side, the largest
// 2048 x 2048 (4M elements); bytes moved: read two operands, write one.
inline constexpr int64_t kSquare = 2048;
inline constexpr int64_t square_add_bytes(int64_t side) {
  return 3 * side * side * int64_t{sizeof(float)};
}
// The pairs' sizes, named by element count.
struct SquareSize {
  const char* name;
  int64_t side;
};
inline constexpr SquareSize kSquareSizes[] = {
    {"4M", kSquare}, {"1M", kSquare / 2}, {"256K", kSquare / 4}};

// The column add_: two columns of a kColumnRows-square float32 matrix.
inline constexpr int64_t kColumnRows = 4096;

// The recorded in-place add: 1M float32 elements.
inline constexpr int64_t kInplaceElems = int64_t{1} << 20;

// The MLP step: batch 64, 256 wide, two layers.
inline constexpr int64_t kBatch = 64;
inline constexpr int64_t kWidth = 256;

// The CNN benchmarks: conv2d 3x3, kConvC -> kConvO channels, padding 1, on
// a kConvN x kConvC x kConvHW x kConvHW input; a ResNet basic block of
// kBlockC channels on a batch of kBlockN.
inline constexpr int64_t kConvN = 32, kConvC = 64, kConvO = 192, kConvHW = 56;
inline constexpr int64_t kConvFlops = 2 * kConvN * kConvO * kConvHW * kConvHW * kConvC * 9;
inline constexpr int64_t kBlockN = 8, kBlockC = 64;
// Sparse x dense: a kSparseRows-square sparse matrix by kSparseRows x kSparseCols.
inline constexpr int64_t kSparseRows = 4096, kSparseCols = 256;
// Sorting: a stable sort of this many float32 values.
inline constexpr int64_t kSortElements = int64_t{1} << 20;
// An optimiser step: kOptimTensors weights of kOptimElems float32 and as
// many biases of kOptimSmall (4M elements in all).
inline constexpr int kOptimTensors = 8;
inline constexpr int64_t kOptimElems = int64_t{1} << 19, kOptimSmall = 512;
// Registers them (bench_nn.cpp).
void register_nn_benchmarks();
void register_matmul_benchmarks();       // bench_matmul.cpp
void register_sparse_benchmarks();       // bench_sparse.cpp
void register_optim_benchmarks();        // bench_optim.cpp
void register_elementwise_benchmarks();  // bench_elementwise.cpp
void register_dlpack_benchmarks();       // bench_dlpack.cpp

// Registers the */<backend> device benchmarks when the selected backend is not
// the default CPU one; returns its name (empty when none).
std::string register_device_benchmarks();
// For such a backend, the side-by-side set of bench_accelerator.cpp.
void register_accelerator_benchmarks(const std::string& name);

#ifdef BACKPLANE_BENCH_WITH_LIBTORCH
// Registers the */libtorch benchmarks (bench_libtorch.cpp).
void register_libtorch_benchmarks();
#endif

}  // namespace bp::bench
