// Shared by the sparse COO sources: the state behind a SparseTensor handle
// and the index arithmetic every operation needs.
#pragma once

#include <backplane/ops.h>
#include <backplane/sparse/coo.h>

#include <string>

namespace bp {

struct SparseTensor::Impl {
  Tensor indices;  // int64 [sparse_dim, nnz]
  Tensor values;   // [nnz, dense sizes...]
  DimVector sizes;
  int64_t sparse_dim = 0;
  bool coalesced = false;
};

namespace sparse_detail {

SparseTensor make(Tensor indices, Tensor values, DimVector sizes, bool coalesced);

// The row-major position of each stored element over the sparse dims, on
// the tensor's device: int64 [nnz].
Tensor linear_index(const Tensor& indices, IntArrayRef sparse_sizes);

// A 1-D int64 index [nnz] viewed and expanded to the shape of `values`
// ([nnz, dense...]), as scatter_add along dim 0 wants it.
Tensor expand_to_rows(const Tensor& index, const Tensor& values);

// The product of sizes[0, n).
int64_t prod(IntArrayRef sizes, std::size_t n);

// "[2, 3]"
std::string shape_str(IntArrayRef sizes);

}  // namespace sparse_detail
}  // namespace bp
