// sim's kernels are written as an accelerator's are: a launch over an index
// space, one "thread" per output element (or per line, for ops that walk
// one), each finding its operands' addresses from its linear index. A Grid
// holds the index space (a shape) and each operand's byte strides over it;
// launch() runs the threads block by block, the blocks in reverse order, so
// that no kernel (and no caller) can depend on the elements being written
// front to back. Memory is the arena's, opened for the kernel by the queue.
#pragma once

#include <array>
#include <backplane/sdk/checks.hpp>
#include <backplane/sdk/elementwise.hpp>
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/tensor.hpp>
#include <cstdint>

namespace bp::sim {

using bp::sdk::KernelCall;
using bp::sdk::Registrar;
using bp::sdk::TensorDesc;  // shows a 0-d tensor as [1]
using bp::sdk::TensorRef;
namespace check = bp::sdk::check;
namespace fn = bp::sdk::fn;

template <int N>
struct Grid {
  int ndim = 0;
  std::array<int64_t, BP_MAX_DIMS> shape{};
  std::array<char*, N> base{};
  std::array<std::array<int64_t, BP_MAX_DIMS>, N> strides{};  // bytes

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    return n;
  }
  // The operands' addresses for element i, row-major over shape.
  std::array<char*, N> at(int64_t i) const {
    std::array<char*, N> p = base;
    for (int d = ndim - 1; d >= 0 && i > 0; --d) {
      const int64_t q = i % shape[d];
      i /= shape[d];
      for (int k = 0; k < N; ++k) p[k] += q * strides[k][d];
    }
    return p;
  }
  // Byte offset of operand k's element i, from its base.
  int64_t offset(int k, int64_t i) const {
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0 && i > 0; --d) {
      off += (i % shape[d]) * strides[k][d];
      i /= shape[d];
    }
    return off;
  }
  // Operand k walks dim d with `elements` elements between steps (0: it
  // stays put along d, as a line start or a broadcast value does).
  void set_stride(int k, int d, int64_t elements, std::size_t item) {
    strides[k][d] = elements * static_cast<int64_t>(item);
  }
};

// A grid over `shape_of`'s shape for `ops`, each with its own strides (an
// operand of lower rank or other sizes is the caller's to adjust).
template <int N>
Grid<N> grid(const std::array<TensorRef, N>& ops, const TensorRef& shape_of) {
  Grid<N> g;
  g.ndim = shape_of.ndim();
  for (int d = 0; d < g.ndim; ++d) g.shape[d] = shape_of.size(d);
  for (int k = 0; k < N; ++k) {
    g.base[k] = static_cast<char*>(ops[k].base());
    const auto item = static_cast<int64_t>(bp::sdk::dtype_size(ops[k].dtype()));
    for (int d = 0; d < ops[k].ndim() && d < g.ndim; ++d) g.strides[k][d] = ops[k].stride(d) * item;
  }
  return g;
}

// Runs f(i) for every i in [0, n): blocks of kBlock threads, last block first.
template <class F>
void launch(int64_t n, F&& f) {
  constexpr int64_t kBlock = 256;
  for (int64_t block = (n + kBlock - 1) / kBlock - 1; block >= 0; --block) {
    const int64_t end = (block + 1) * kBlock < n ? (block + 1) * kBlock : n;
    for (int64_t i = block * kBlock; i < end; ++i) f(i);
  }
}

template <class T>
T& ref(char* p) {
  return *reinterpret_cast<T*>(p);
}

// One function per op family, each in its own file.
void register_elementwise_kernels(Registrar& r);  // elementwise.cpp: FILL..LOGICAL_NOT
void register_reduce_kernels(Registrar& r);       // reduce.cpp: SUM..ARGMIN
void register_sort_kernels(Registrar& r);         // sort.cpp: ARGSORT, CUMSUM
void register_linalg_kernels(Registrar& r);       // linalg.cpp: MATMUL, SOFTMAX, layer_norm
void register_index_kernels(Registrar& r);  // index.cpp: GATHER, SCATTER, INDEX_SELECT, RANDOM
void register_nn_kernels(Registrar& r);     // nn.cpp: conv2d, pools, batch_norm (core:: overrides)
void register_optim_kernels(Registrar& r);  // optim.cpp: sgd_step, adam_step (core:: overrides)

}  // namespace bp::sim
