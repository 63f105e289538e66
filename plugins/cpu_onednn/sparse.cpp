// core::sparse_mm: a coalesced sparse COO matrix times a dense one, for
// float32 and float64. The stored elements are sorted by row, so each
// row's run of them writes one output row: rows are split over threads
// (whole runs, balanced by element count), and each element adds
// value * dense[column, :] to its row with a loop the compiler vectorises.
// The core's composite (a gather, a multiply and a scatter_add of
// nnz x m elements) moves far more memory; it still runs when a gradient
// is being recorded and for layouts declined here.
#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

template <class T>
void sparse_mm_rows(const TensorRef& values, const TensorRef& indices, const TensorRef& dense,
                    const TensorRef& out) {
  const int64_t nnz = values.size(0), m = dense.size(1), rows = out.size(0);
  const T* v = values.data<T>();
  const int64_t* idx = indices.data<int64_t>();
  const int64_t rs = indices.stride(0), es = indices.stride(1);
  const T* d = dense.data<T>();
  T* o = out.data<T>();
  const int64_t ds = dense.stride(0), os = out.stride(0);
  auto row_of = [&](int64_t j) { return idx[j * es]; };
  auto col_of = [&](int64_t j) { return idx[rs + j * es]; };
  // Every output element is written: zeros first (out is contiguous).
  for_range(rows * m, [&](int64_t b, int64_t e) { std::fill(o + b, o + e, T(0)); });
  // Thread t takes the elements from the first row starting at or after
  // nnz * t / nt: runs are never split, so no two threads share a row.
  parallel_ranges(nnz, [&](int64_t b, int64_t e) {
    while (b > 0 && b < nnz && row_of(b) == row_of(b - 1)) ++b;
    while (e < nnz && row_of(e) == row_of(e - 1)) ++e;
    for (int64_t j = b; j < e; ++j) {
      T* orow = o + row_of(j) * os;
      const T* drow = d + col_of(j) * ds;
      const T x = v[j];
#pragma omp simd
      for (int64_t k = 0; k < m; ++k) orow[k] += x * drow[k];
    }
  });
}

void sparse_mm_kernel(const KernelCall& c) {
  const TensorRef values = c.input(0), indices = c.input(1), dense = c.input(2), out = c.output(0);
  if (values.ndim() != 1 || indices.ndim() != 2 || indices.size(0) != 2 || dense.ndim() != 2 ||
      out.ndim() != 2 || indices.dtype() != BP_DTYPE_INT64 || dense.dtype() != values.dtype() ||
      out.dtype() != values.dtype() || indices.size(1) != values.size(0) ||
      out.size(1) != dense.size(1))
    throw bp::sdk::Unsupported("[core::sparse_mm] not a coalesced 2-D sparse matrix and a matrix");
  // Unit strides along the rows of dense and out, and along values.
  if ((values.size(0) > 1 && values.stride(0) != 1) ||
      (dense.size(1) > 1 && dense.stride(1) != 1) || !out.is_contiguous())
    throw bp::sdk::Unsupported("[core::sparse_mm] strided operands: the composite runs");
  if (values.dtype() == BP_DTYPE_FLOAT32)
    sparse_mm_rows<float>(values, indices, dense, out);
  else
    sparse_mm_rows<double>(values, indices, dense, out);
}

}  // namespace

void register_sparse_kernels(Registrar& r) {
  if (!r.has_named_ops()) return;
  r.add_named<&sparse_mm_kernel>("core::sparse_mm", BP_SCHEMA_CORE_SPARSE_MM,
                                 {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}, BP_ORIGIN);
}

}  // namespace bp::cpu
