// Printing in PyTorch's format: tensor([[0., 1.],
//         [2., 3.]])
#include <backplane/autograd.h>
#include <backplane/dispatcher.h>
#include <backplane/ops.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "../internal.h"

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
      std::size_t w = sci_mode   ? sci(v).size()
                      : int_mode ? fmt("%.0f", v).size() + 1
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

// Prints `vals`, the row-major values of a tensor of `shape`, showing along
// dim d the positions pos[d] (-1: the "..." between a long dim's edges).
struct Printer {
  const std::vector<double>& vals;
  const DimVector& shape;
  const DimVector strides;
  const Formatter& f;
  const std::vector<std::vector<int64_t>>& pos;

  std::string vector(std::size_t d, int64_t offset, int indent) const {
    std::vector<std::string> data;
    for (int64_t i : pos[d]) data.push_back(i < 0 ? " ..." : f(vals[offset + i * strides[d]]));
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
    if (dims_left == 1) return vector(d, offset, indent);
    std::vector<std::string> slices;
    for (int64_t i : pos[d])
      slices.push_back(i < 0 ? "..." : tensor(d + 1, offset + i * strides[d], indent + 1));
    std::string sep(",");
    sep.append(dims_left - 1, '\n').append(static_cast<std::size_t>(indent) + 1, ' ');
    std::string out = "[";
    for (std::size_t i = 0; i < slices.size(); ++i) out += (i ? sep : "") + slices[i];
    return out + "]";
  }
};

// The elements a print shows: above kThreshold elements, the first and last
// kEdgeItems along every longer dim. When the backend has index_select for
// the dtype they are selected on the device, so that only those are copied
// to the host; otherwise the whole tensor is read. Fills `pos` with the
// positions of the returned tensor to print along each dim.
Tensor shown_part(const Tensor& t, std::vector<std::vector<int64_t>>& pos) {
  const bool summarize = t.numel() > kThreshold;
  const bool on_device =
      summarize &&
      KernelRegistry::instance().lookup(Op::IndexSelect, t.device().backend, t.dtype()).fn;
  Tensor s = t;
  pos.assign(static_cast<std::size_t>(t.dim()), {});
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t n = t.size(d);
    std::vector<int64_t>& p = pos[static_cast<std::size_t>(d)];
    if (!summarize || n <= 2 * kEdgeItems) {
      for (int64_t i = 0; i < n; ++i) p.push_back(i);
      continue;
    }
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < kEdgeItems; ++i) keep.push_back(i);
    for (int64_t i = n - kEdgeItems; i < n; ++i) keep.push_back(i);
    if (on_device) {
      const Tensor index =
          from_blob(keep.data(), DType::Int64, {static_cast<int64_t>(keep.size())}, t.device());
      s = s.index_select(d, index);
      for (int64_t i = 0; i < 2 * kEdgeItems; ++i) p.push_back(i);
    } else {
      p = keep;
    }
    p.insert(p.begin() + kEdgeItems, -1);
  }
  return s;
}

}  // namespace

namespace detail {

bool is_default_device(Device d) {
  try {
    return d == default_device();
  } catch (const std::exception&) {
    return false;
  }
}

std::string print_elements(const Tensor& t, int indent) {
  NoGradGuard no_grad;
  std::vector<std::vector<int64_t>> pos;
  const Tensor shown = shown_part(t, pos);
  std::vector<double> vals = shown.to_vector<double>();
  Formatter f(t.dtype(), vals);
  if (t.dim() == 0) return f.raw(vals[0]);
  Printer p{vals, shown.impl()->sizes, contiguous_strides(shown.sizes()), f, pos};
  return p.tensor(0, 0, indent);
}

}  // namespace detail

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const int indent = static_cast<int>(prefix.size());
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
    os << detail::print_elements(*this, indent);
  }
  if (!detail::is_default_device(device())) os << ", device='" << bp::to_string(device()) << "'";
  // As PyTorch: every dtype but the defaults (float32, int64) and bool says itself.
  if (dtype() != DType::Float32 && dtype() != DType::Int64 && dtype() != DType::Bool)
    os << ", dtype=" << dtype();
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace bp
