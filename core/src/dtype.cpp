#include <backplane/dtype.h>

#include <algorithm>

namespace bp {

std::string_view name(DType d) {
  switch (d) {
    case DType::Bool: return "bool";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, DType d) { return os << name(d); }

DType promote_types(DType a, DType b) {
  // For these five types PyTorch's lattice is a chain:
  // bool < int32 < int64 < float32 < float64.
  return static_cast<DType>(std::max(static_cast<int>(a), static_cast<int>(b)));
}

DType result_type(DType tensor, const Scalar& s) {
  DType k = s.kind();
  if (category(k) <= category(tensor)) return tensor;
  return s.is_floating() ? kDefaultFloat : DType::Int64;
}

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.is_floating()) return os << s.to<double>();
  if (s.is_bool()) return os << (s.to<bool>() ? "True" : "False");
  return os << s.to<int64_t>();
}

}  // namespace bp
