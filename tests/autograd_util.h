// Helpers of the autograd tests: float tensors from values, leaves that
// require grad, and a tensor's values as doubles.
#pragma once

#include <backplane/backplane.h>

#include <cstdint>
#include <vector>

namespace bp::testing {

using Values = std::vector<double>;

inline Tensor leaf(const Values& v, std::vector<int64_t> shape, DType dtype = DType::Float32) {
  Tensor t = from_vector(v, IntArrayRef(shape), TensorOptions(dtype));
  t.requires_grad_();
  return t;
}
inline Tensor leaf(const Values& v, DType dtype = DType::Float32) {
  return leaf(v, {static_cast<int64_t>(v.size())}, dtype);
}
inline Tensor constant(const Values& v, std::vector<int64_t> shape) {
  return from_vector(v, IntArrayRef(shape), TensorOptions(DType::Float32));
}
inline Values values(const Tensor& t) { return t.to_vector<double>(); }

}  // namespace bp::testing
