// PyTorch's text for a sparse COO tensor:
//   tensor(indices=tensor([[1, 0, 1],
//                          [0, 2, 0]]),
//          values=tensor([1., 2., 3.]),
//          size=(2, 3), nnz=3, layout=torch.sparse_coo)
#include <backplane/autograd.h>

#include <ostream>
#include <sstream>
#include <vector>

#include "../internal.h"
#include "coo_internal.h"

namespace bp {

namespace {

constexpr std::size_t kOuterIndent = 7;  // "tensor("
constexpr std::size_t kLineWidth = 80;   // PyTorch's default linewidth

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
     << pad << values_prefix << body(_values(), values_prefix) << ")";
  std::vector<std::string> suffixes;
  if (!detail::is_default_device(device()))
    suffixes.push_back("device='" + bp::to_string(device()) + "'");
  suffixes.push_back("size=" + size_tuple(sizes()));
  suffixes.push_back("nnz=" + std::to_string(nnz()));
  if (dtype() != DType::Float32 && dtype() != DType::Int64 && dtype() != DType::Bool) {
    std::ostringstream d;
    d << "dtype=" << dtype();
    suffixes.push_back(d.str());
  }
  suffixes.push_back("layout=torch.sparse_coo");
  const std::string grad_fn = impl().values.grad_fn_name();
  if (!grad_fn.empty())
    suffixes.push_back("grad_fn=<" + grad_fn + ">");
  else if (requires_grad())
    suffixes.push_back("requires_grad=True");
  // PyTorch's _add_suffixes: the first suffix on a line of its own, each
  // later one on the same line unless that would pass 80 columns (PyTorch
  // counts the line 2 longer than it is).
  std::string text = os.str();
  std::size_t last_line = text.size() - text.rfind('\n') + 1;
  bool newline = true;
  for (const std::string& suffix : suffixes) {
    if (newline || last_line + suffix.size() + 2 > kLineWidth) {
      text += ",\n" + pad + suffix;
      last_line = kOuterIndent + suffix.size();
      newline = false;
    } else {
      text += ", " + suffix;
      last_line += suffix.size() + 2;
    }
  }
  return text + ")";
}

std::ostream& operator<<(std::ostream& os, const SparseTensor& t) { return os << t.to_string(); }

}  // namespace bp
