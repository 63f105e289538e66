#include <backplane/dtype.h>

#include <algorithm>

namespace bp {

std::string_view name(DType d) {
  switch (d) {
    case DType::Bool:
      return "bool";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Float16:
      return "float16";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Int8:
      return "int8";
    case DType::UInt8:
      return "uint8";
    case DType::Int16:
      return "int16";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, DType d) { return os << name(d); }

DType promote_types(DType a, DType b) {
  // PyTorch's promoteTypes for these dtypes.
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_integral(a) && is_integral(b)) {
    // uint8 with a signed type needs the sign and uint8's range: int16 at least.
    if (a == DType::UInt8 || b == DType::UInt8) {
      const DType other = a == DType::UInt8 ? b : a;
      return itemsize(other) >= 2 ? other : DType::Int16;
    }
    return itemsize(a) >= itemsize(b) ? a : b;
  }
  if (is_integral(a)) return b;  // integer with floating: the floating one
  if (is_integral(b)) return a;
  // Both floating: float16 and bfloat16 meet in float32; otherwise the wider.
  if (itemsize(a) == 2 && itemsize(b) == 2) return DType::Float32;
  return itemsize(a) >= itemsize(b) ? a : b;
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
