// Sparse COO tensors (SP-1), as PyTorch 1.13's torch.sparse_coo_tensor.
//
// A SparseTensor is a handle, like Tensor: copies alias, so `s.zero_()`
// empties every copy. It holds
//   indices  int64 [sparse_dim, nnz]: the coordinates of the stored elements
//            in the first sparse_dim dims;
//   values   [nnz, dense sizes...] of any dtype: dense trailing dims make a
//            hybrid tensor (dense_dim > 0);
//   sizes    sparse sizes then dense sizes.
// Both are ordinary tensors on the same device, so every operation here is
// built in the core from ops each backend already has (index_select,
// scatter_add, mul, sum); values never leave the device. Coalescing sorts
// the coordinates on the host (they are int64 [sparse_dim, nnz]) and sums
// duplicate values on the device with scatter_add.
//
// Gradients: values may require grad (requires_grad_() flags them); the
// operations below are differentiable in values and in their dense
// operands, and grad() gives the gradient as a coalesced SparseTensor, one
// element per coordinate (PyTorch's form). The values share the caller's
// memory but not its autograd state.
//
// Departures from PyTorch, both on purpose: sparse + dense has no overload
// (PyTorch raises at run time: "add(sparse, dense) is not supported"), and
// sum over dims returns a SumResult that says which kind it holds.
#pragma once

#include <backplane/tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <variant>

namespace bp {

class SparseTensor {
 public:
  SparseTensor() = default;

  bool defined() const { return static_cast<bool>(impl_); }
  bool is_sparse() const { return true; }
  int64_t sparse_dim() const;
  int64_t dense_dim() const;
  int64_t dim() const;
  IntArrayRef sizes() const;
  int64_t size(int64_t dim) const;
  // Stored elements, duplicates included.
  int64_t nnz() const;
  DType dtype() const;
  Device device() const;
  // True when the coordinates are sorted and unique. Set at construction
  // with 0 or 1 stored elements (as PyTorch 1.13), by coalesce(), zero_()
  // and the operations that keep it; never inferred otherwise.
  bool is_coalesced() const;

  // The indices and values of a coalesced tensor; an uncoalesced one raises
  // (call coalesce() first), as in PyTorch.
  Tensor indices() const;
  Tensor values() const;
  // The stored indices and values whatever the state.
  Tensor _indices() const;
  Tensor _values() const;

  // Sorted coordinates, duplicates summed; *this when already coalesced.
  SparseTensor coalesce() const;
  // The dense tensor: duplicates summed, differentiable in values.
  Tensor to_dense() const;

  // Removes every stored element: nnz 0, sizes kept, coalesced; every dim
  // becomes sparse (dense_dim 0), as PyTorch.
  SparseTensor& zero_();
  SparseTensor clone() const;
  // Same indices; values detached from the graph.
  SparseTensor detach() const;
  SparseTensor to(Device device) const;
  SparseTensor to(DType dtype) const;

  SparseTensor mul(const Scalar& s) const;
  SparseTensor div(const Scalar& s) const;
  SparseTensor& mul_(const Scalar& s);
  SparseTensor& div_(const Scalar& s);
  SparseTensor neg() const;
  // this + alpha * other; coalesced when both are.
  SparseTensor add(const SparseTensor& other, const Scalar& alpha = 1) const;
  // this - alpha * other, as add with -alpha.
  SparseTensor sub(const SparseTensor& other, const Scalar& alpha = 1) const;
  // The transpose of a tensor of at most 2 dims with no dense dims, a copy
  // (uncoalesced, as PyTorch).
  SparseTensor t() const;

  // Flags the values (a leaf) as requiring grad.
  SparseTensor& requires_grad_(bool requires_grad = true);
  bool requires_grad() const;
  // The gradient, coalesced: at each coordinate the derivative by the dense
  // element there (PyTorch's form); undefined if none.
  SparseTensor grad() const;

  // PyTorch's text: tensor(indices=tensor(...), values=tensor(...), size=(...), nnz=N,
  // layout=torch.sparse_coo).
  std::string to_string() const;

  struct Impl;
  explicit SparseTensor(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Impl& impl() const;

 private:
  std::shared_ptr<Impl> impl_;
};

std::ostream& operator<<(std::ostream& os, const SparseTensor& t);

// From indices [sparse_dim, nnz] and values [nnz, dense...]; indices of
// another integer dtype are converted to int64, as PyTorch's constructor
// converts them (floating or bool indices are a TypeError). Checks the
// shapes and that every index lies in [0, size) (IndexError otherwise).
// Without `size`, each sparse size is the largest index + 1 (0 when nnz is 0)
// and the dense sizes are the values'. `dtype` converts the values.
SparseTensor sparse_coo_tensor(const Tensor& indices, const Tensor& values, IntArrayRef size,
                               std::optional<DType> dtype = std::nullopt);
SparseTensor sparse_coo_tensor(const Tensor& indices, const Tensor& values);

// The nonzero elements of `dense` over its first `sparse_dim` dims (all dims
// by default): a coalesced tensor whose values are differentiable in `dense`.
SparseTensor to_sparse(const Tensor& dense, std::optional<int64_t> sparse_dim = std::nullopt);

// dense + alpha * sparse, as a dense tensor of the same sizes.
Tensor add(const Tensor& dense, const SparseTensor& sparse, const Scalar& alpha = 1);
// dense += alpha * sparse, in place; returns dense.
Tensor& add_(Tensor& dense, const SparseTensor& sparse, const Scalar& alpha = 1);
inline Tensor operator+(const Tensor& d, const SparseTensor& s) { return add(d, s); }
inline SparseTensor operator+(const SparseTensor& a, const SparseTensor& b) { return a.add(b); }
inline SparseTensor operator-(const SparseTensor& a, const SparseTensor& b) { return a.sub(b); }
inline SparseTensor operator-(const SparseTensor& s) { return s.neg(); }
inline SparseTensor operator*(const SparseTensor& s, const Scalar& v) { return s.mul(v); }
inline SparseTensor operator/(const SparseTensor& s, const Scalar& v) { return s.div(v); }

// sparse [n, k] (no dense dims) times dense [k, m]: a dense [n, m],
// differentiable in the sparse values and in `dense`.
Tensor mm(const SparseTensor& sparse, const Tensor& dense);
// torch.matmul(S, D) (Python's S @ D): mm for a 2-D dense operand; a 1-D
// one is a matrix-vector product giving [n].
Tensor matmul(const SparseTensor& sparse, const Tensor& dense);
// beta * input + alpha * mm(sparse, dense); input broadcasts to [n, m].
Tensor addmm(const Tensor& input, const SparseTensor& sparse, const Tensor& dense,
             const Scalar& beta = 1, const Scalar& alpha = 1);

namespace sparse {

// Sum of every element: a 0-d dense tensor.
Tensor sum(const SparseTensor& s);
// Sum over `dims`: sparse (coalesced) while some sparse dim remains, dense
// once every sparse dim is reduced, as torch.sparse.sum.
class SumResult {
 public:
  explicit SumResult(std::variant<Tensor, SparseTensor> v) : v_(std::move(v)) {}
  bool is_sparse() const { return std::holds_alternative<SparseTensor>(v_); }
  // The result; the other accessor raises a ValueError naming the kind held.
  const Tensor& dense() const;
  const SparseTensor& sparse() const;

 private:
  std::variant<Tensor, SparseTensor> v_;
};
SumResult sum(const SparseTensor& s, IntArrayRef dims);

}  // namespace sparse

}  // namespace bp
