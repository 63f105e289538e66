#include <backplane/error.h>
#include <backplane/shape.h>

#include <sstream>

namespace bp {

std::ostream& operator<<(std::ostream& os, IntArrayRef v) {
  os << '[';
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os << ']';
}

std::string to_string(IntArrayRef v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

int64_t numel(IntArrayRef shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t checked_numel(IntArrayRef shape, const char* op) {
  BP_CHECK(shape.size() <= static_cast<std::size_t>(kMaxDims), "[", op, "] shape ", shape, " has ",
           shape.size(), " dims; a tensor has at most ", kMaxDims,
           " (the plugin ABI's BP_MAX_DIMS)");
  int64_t n = 1, span = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    BP_CHECK(shape[i] >= 0, "[", op, "] negative size ", shape[i], " at dim ", i, " in shape ",
             shape);
    BP_CHECK(!__builtin_mul_overflow(span, std::max<int64_t>(shape[i], 1), &span), "[", op,
             "] shape ", shape, " has too many elements: their count overflows a 64-bit integer");
    n *= shape[i];
  }
  return n;
}

std::pair<int64_t, int64_t> checked_extent(IntArrayRef shape, IntArrayRef strides, int64_t offset,
                                           const char* op) {
  int64_t lo = offset, hi = offset;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return {offset, offset - 1};
    int64_t span;
    const bool overflow = __builtin_mul_overflow(shape[d] - 1, strides[d], &span) ||
                          __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi);
    BP_CHECK(!overflow, "[", op, "] sizes ", shape, " with strides ", strides, " at offset ",
             offset, " reach past what a 64-bit offset can address");
  }
  return {lo, hi};
}

DimVector contiguous_strides(IntArrayRef shape) {
  DimVector s(shape.size());
  int64_t acc = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    // A zero-size dim keeps numel at 0 while the other dims' strides grow:
    // {0, 2^62, 2^62} has no elements but no 64-bit stride for dim 0.
    BP_CHECK(i == 0 || !__builtin_mul_overflow(acc, std::max<int64_t>(shape[i], 1), &acc), "shape ",
             shape, " has no elements, but its strides overflow a 64-bit integer");
  }
  return s;
}

bool is_contiguous(IntArrayRef shape, IntArrayRef strides) {
  // No elements, no layout (PyTorch): whichever dim is 0, strides do not matter.
  if (numel(shape) == 0) return true;
  int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

bool is_non_overlapping_and_dense(IntArrayRef shape, IntArrayRef strides) {
  const std::size_t n = shape.size();
  if (numel(shape) == 0) return true;
  // Sort dims by stride and check that they tile memory exactly.
  DimVector order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<int64_t>(i);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (shape[a] < 2) return false;
    if (shape[b] < 2) return true;
    return strides[a] < strides[b];
  });
  int64_t expected = 1;
  for (std::size_t k = 0; k < n; ++k) {
    int64_t d = order[k];
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

DimVector broadcast_shapes(IntArrayRef a, IntArrayRef b, const char* op) {
  const std::size_t n = std::max(a.size(), b.size());
  DimVector out(n);
  for (std::size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    BP_CHECK(da == db || da == 1 || db == 1, "[", op, "] shapes ", a, " and ", b,
             " do not broadcast: dim ", i, " has sizes ", da, " and ", db,
             " (each must be equal or 1)");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

DimVector broadcast_strides(IntArrayRef shape, IntArrayRef strides, IntArrayRef target) {
  DimVector out(target.size());
  const std::size_t lead = target.size() - shape.size();
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (i < lead) continue;  // new leading dims: stride 0
    std::size_t j = i - lead;
    out[i] = (shape[j] == 1 && target[i] != 1) ? 0 : strides[j];
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  BP_CHECK_INDEX(dim >= lo && dim <= hi, "[", op, "] dim ", dim,
                 " is out of range for a tensor of ", ndim, " dims (valid: ", lo, " to ", hi, ")");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

// PyTorch's computeStride: walks groups of old dims that are contiguous with
// each other and maps each group onto the new dims with the same product.
bool view_strides(IntArrayRef shape, IntArrayRef strides, IntArrayRef new_shape, DimVector& out) {
  out = DimVector(new_shape.size());
  if (shape.empty()) {
    for (auto& s : out) s = 1;
    return true;
  }
  const int64_t n = numel(shape);
  if (n == 0) {
    out = contiguous_strides(new_shape);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

DimVector infer_shape(IntArrayRef shape, int64_t n, const char* op) {
  DimVector out(shape);
  int64_t infer = -1, known = 1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      BP_CHECK(infer < 0, "[", op, "] only one dimension can be -1, got shape ", shape);
      infer = static_cast<int64_t>(i);
    } else {
      BP_CHECK(out[i] >= 0, "[", op, "] invalid size ", out[i], " at dim ", i, " in shape ", shape);
      BP_CHECK(!__builtin_mul_overflow(known, out[i], &known), "[", op, "] shape ", shape,
               " has too many elements: their count overflows a 64-bit integer");
    }
  }
  if (infer >= 0) {
    BP_CHECK(known != 0 && n % known == 0, "[", op, "] shape ", shape,
             " is invalid for input of size ", n);
    out[infer] = n / known;
  } else {
    BP_CHECK(known == n, "[", op, "] shape ", shape, " is invalid for input of size ", n);
  }
  return out;
}

}  // namespace bp
