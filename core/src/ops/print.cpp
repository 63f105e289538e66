// Printing in PyTorch's format: tensor([[0., 1.],
//         [2., 3.]])
#include <backplane/ops.h>

#include "../internal.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace bp {

namespace {

constexpr int kPrecision = 4;
constexpr int64_t kThreshold = 1000;  // summarize above this many elements
constexpr int64_t kEdgeItems = 3;
constexpr int kLineWidth = 80;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

// Python's '{:.4e}' prints a two-digit exponent at least, as C does.
std::string sci(double v) { return fmt("%.4e", v); }

struct Formatter {
  DType dtype;
  bool floating, int_mode = true, sci_mode = false;
  std::size_t width = 1;

  Formatter(DType d, const std::vector<double>& vals) : dtype(d), floating(is_floating(d)) {
    if (!floating) {
      for (double v : vals) width = std::max(width, raw(v).size());
      return;
    }
    double lo = INFINITY, hi = 0;
    bool any = false;
    for (double v : vals) {
      if (!std::isfinite(v) || v == 0) continue;
      any = true;
      lo = std::min(lo, std::fabs(v));
      hi = std::max(hi, std::fabs(v));
      if (v != std::ceil(v)) int_mode = false;
    }
    if (!any) return;
    if (int_mode) {
      sci_mode = hi / lo > 1000.0 || hi > 1.0e8;
    } else {
      sci_mode = hi / lo > 1000.0 || hi > 1.0e8 || lo < 1.0e-4;
    }
    for (double v : vals) {
      if (!std::isfinite(v) || v == 0) continue;
      std::size_t w = sci_mode ? sci(v).size() : int_mode ? fmt("%.0f", v).size() + 1
                                                           : fmt("%.4f", v).size();
      width = std::max(width, w);
    }
  }

  std::string raw(double v) const {
    if (dtype == DType::Bool) return v != 0 ? "True" : "False";
    if (!floating) return std::to_string(static_cast<int64_t>(v));
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode) return sci(v);
    if (int_mode) return fmt("%.0f", v) + ".";
    return fmt("%.4f", v);
  }

  std::string operator()(double v) const {
    std::string s = raw(v);
    return s.size() < width ? std::string(width - s.size(), ' ') + s : s;
  }
};

struct Printer {
  const std::vector<double>& vals;
  const DimVector& shape;
  const DimVector strides;
  const Formatter& f;
  bool summarize;

  std::string vector(int64_t offset, int64_t n, int64_t stride, int indent) const {
    std::vector<std::string> data;
    auto push = [&](int64_t i) { data.push_back(f(vals[offset + i * stride])); };
    if (summarize && n > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) push(i);
      data.push_back(" ...");
      for (int64_t i = n - kEdgeItems; i < n; ++i) push(i);
    } else {
      for (int64_t i = 0; i < n; ++i) push(i);
    }
    const int per_line =
        std::max(1, static_cast<int>((kLineWidth - indent) / static_cast<int>(f.width + 2)));
    std::string out = "[";
    for (std::size_t i = 0; i < data.size(); ++i) {
      if (i) out += (i % per_line == 0) ? ",\n" + std::string(indent + 1, ' ') : ", ";
      out += data[i];
    }
    return out + "]";
  }

  std::string tensor(std::size_t d, int64_t offset, int indent) const {
    const std::size_t dims_left = shape.size() - d;
    if (dims_left == 1) return vector(offset, shape[d], strides[d], indent);
    std::vector<std::string> slices;
    const int64_t n = shape[d];
    auto push = [&](int64_t i) { slices.push_back(tensor(d + 1, offset + i * strides[d], indent + 1)); };
    if (summarize && n > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) push(i);
      slices.push_back("...");
      for (int64_t i = n - kEdgeItems; i < n; ++i) push(i);
    } else {
      for (int64_t i = 0; i < n; ++i) push(i);
    }
    std::string sep(",");
    sep.append(dims_left - 1, '\n').append(static_cast<std::size_t>(indent) + 1, ' ');
    std::string out = "[";
    for (std::size_t i = 0; i < slices.size(); ++i) out += (i ? sep : "") + slices[i];
    return out + "]";
  }
};

bool is_default_device(Device d) {
  try {
    return d == default_device();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const int indent = static_cast<int>(prefix.size());
  std::vector<double> vals = to_vector<double>();
  std::ostringstream os;
  os << prefix;
  if (numel() == 0) {
    os << "[]";
    if (dim() != 1) {
      os << ", size=(";
      for (int64_t d = 0; d < dim(); ++d) os << (d ? ", " : "") << size(d);
      os << (dim() == 1 ? ",)" : ")");
    }
  } else {
    Formatter f(dtype(), vals);
    if (dim() == 0) {
      os << f.raw(vals[0]);
    } else {
      Printer p{vals, impl()->sizes, contiguous_strides(sizes()), f, numel() > kThreshold};
      os << p.tensor(0, 0, indent);
    }
  }
  if (!is_default_device(device())) os << ", device='" << bp::to_string(device()) << "'";
  if (dtype() == DType::Float64 || dtype() == DType::Int32) os << ", dtype=" << dtype();
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace bp
