// PyTorch's text for a sparse COO tensor:
//   tensor(indices=tensor([[1, 0, 1],
//                          [0, 2, 0]]),
//          values=tensor([1., 2., 3.]),
//          size=(2, 3), nnz=3, layout=torch.sparse_coo)
#include "coo_internal.h"

#include "../internal.h"

#include <backplane/autograd.h>

#include <ostream>
#include <sstream>

namespace bp {

namespace {

constexpr std::size_t kOuterIndent = 7;  // "tensor("

std::string size_tuple(IntArrayRef sizes) {
  std::ostringstream os;
  os << "(";
  for (std::size_t i = 0; i < sizes.size(); ++i) os << (i ? ", " : "") << sizes[i];
  os << (sizes.size() == 1 ? ",)" : ")");
  return os.str();
}

// The elements of `t` laid out as PyTorch lays them out after `prefix`:
// continuation lines indented past "tensor(" and the prefix. An empty
// tensor says its size, whatever its dims.
std::string body(const Tensor& t, const std::string& prefix) {
  if (t.numel() == 0) return "[], size=" + size_tuple(t.sizes());
  return detail::print_elements(t, static_cast<int>(kOuterIndent + prefix.size()));
}

}  // namespace

std::string SparseTensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  NoGradGuard no_grad;
  const std::string indices_prefix = "indices=tensor(";
  const std::string values_prefix = "values=tensor(";
  const std::string pad(kOuterIndent, ' ');
  std::ostringstream os;
  os << "tensor(" << indices_prefix << body(_indices(), indices_prefix) << "),\n"
     << pad << values_prefix << body(_values(), values_prefix) << "),\n"
     << pad;
  if (!detail::is_default_device(device())) os << "device='" << bp::to_string(device()) << "', ";
  os << "size=" << size_tuple(sizes()) << ", nnz=" << nnz();
  if (dtype() != DType::Float32 && dtype() != DType::Int64 && dtype() != DType::Bool)
    os << ", dtype=" << dtype();
  os << ", layout=torch.sparse_coo";
  if (requires_grad()) os << ", requires_grad=True";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const SparseTensor& t) { return os << t.to_string(); }

}  // namespace bp
