// Views: new sizes, strides and offset over the same memory. No copy, no
// kernel; each is O(rank).
#include <backplane/ops.h>

#include <algorithm>

#include "../internal.h"

namespace bp {

using detail::make_view;

Tensor Tensor::view(IntArrayRef shape) const {
  DimVector target = infer_shape(shape, numel(), "view");
  DimVector strides;
  BP_CHECK(view_strides(sizes(), this->strides(), target, strides), "[view] cannot view ",
           detail::describe_tensor(*this), " with strides ", this->strides(), " as shape ", target,
           ": its memory layout is not compatible (at least one dimension spans "
           "across two contiguous subspaces); use .reshape(...) instead, which copies when needed");
  return make_view(*this, target, std::move(strides), storage_offset(), "view", "ViewBackward0",
                   [target](const Tensor& t) { return t.view(target); });
}

Tensor Tensor::reshape(IntArrayRef shape) const {
  DimVector target = infer_shape(shape, numel(), "reshape");
  DimVector strides;
  if (view_strides(sizes(), this->strides(), target, strides))
    return make_view(*this, target, std::move(strides), storage_offset(), "reshape",
                     "ViewBackward0", [target](const Tensor& t) { return t.view(target); });
  // A copy, not a view: the result owns its memory (VW-1, VW-3), like
  // PyTorch's _unsafe_view of the contiguous copy.
  Tensor out = contiguous().view(target);
  out.impl()->base.reset();
  return out;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  DimVector sz(sizes()), st(strides());
  if (dim() > 0) {
    std::swap(sz[d0], sz[d1]);
    std::swap(st[d0], st[d1]);
  }
  return make_view(*this, std::move(sz), std::move(st), storage_offset(), "transpose",
                   "TransposeBackward0", [d0, d1](const Tensor& t) { return t.transpose(d0, d1); });
}

Tensor Tensor::t() const {
  BP_CHECK(dim() <= 2, "[t] expects a tensor with <= 2 dims, got ", detail::describe_tensor(*this),
           "; use .transpose(dim0, dim1) or .permute(...) for more");
  DimVector sz(sizes()), st(strides());
  if (dim() == 2) {
    std::swap(sz[0], sz[1]);
    std::swap(st[0], st[1]);
  }
  return make_view(*this, std::move(sz), std::move(st), storage_offset(), "t", "TBackward0",
                   [](const Tensor& t) { return t.t(); });
}

Tensor Tensor::permute(IntArrayRef dims) const {
  BP_CHECK(static_cast<int64_t>(dims.size()) == dim(), "[permute] got ", dims.size(), " dims ",
           dims, " for ", detail::describe_tensor(*this), "; give one per dim");
  DimVector sz(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    BP_CHECK(!seen[d], "[permute] dim ", d, " appears twice in ", dims);
    seen[d] = true;
    sz[i] = size(d);
    st[i] = stride(d);
  }
  return make_view(*this, std::move(sz), std::move(st), storage_offset(), "permute",
                   "PermuteBackward0",
                   [order = DimVector(dims)](const Tensor& t) { return t.permute(order); });
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  BP_CHECK_INDEX(dim() > 0, "[narrow] cannot narrow a 0-d tensor");
  d = wrap_dim(d, dim(), "narrow");
  const int64_t n = size(d);
  if (start < 0) start += n;
  BP_CHECK_INDEX(start >= 0 && start <= n, "[narrow] start ", start, " is out of range for dim ", d,
                 " of size ", n, " (valid: ", -n, " to ", n, ")");
  BP_CHECK_INDEX(length >= 0 && length <= n - start, "[narrow] start ", start, " + length ", length,
                 " exceeds dim ", d, " of size ", n);
  DimVector sz(sizes());
  sz[d] = length;
  return make_view(*this, std::move(sz), DimVector(strides()), storage_offset() + start * stride(d),
                   "narrow", "NarrowBackward0",
                   [d, start, length](const Tensor& t) { return t.narrow(d, start, length); });
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  BP_CHECK_INDEX(dim() > 0, "[select] cannot index a 0-d tensor");
  d = wrap_dim(d, dim(), "select");
  const int64_t n = size(d);
  BP_CHECK_INDEX(index >= -n && index < n, "[select] index ", index, " is out of range for dim ", d,
                 " of size ", n, " (valid: ", -n, " to ", n - 1, ")");
  if (index < 0) index += n;
  DimVector sz(sizes()), st(strides());
  const int64_t offset = storage_offset() + index * st[d];
  sz.erase(d);
  st.erase(d);
  return make_view(*this, std::move(sz), std::move(st), offset, "select", "SelectBackward0",
                   [d, index](const Tensor& t) { return t.select(d, index); });
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> stop,
                     int64_t step) const {
  BP_CHECK_INDEX(dim() > 0, "[slice] cannot slice a 0-d tensor");
  d = wrap_dim(d, dim(), "slice");
  BP_CHECK(step > 0, "[slice] step must be positive, got ", step);
  const int64_t n = size(d);
  // Python's clamping: negative from the end, then into [0, n].
  auto clamp = [n](int64_t v) {
    if (v < 0) v += n;
    return std::clamp<int64_t>(v, 0, n);
  };
  int64_t b = start ? clamp(*start) : 0;
  int64_t e = stop ? clamp(*stop) : n;
  if (e < b) e = b;
  DimVector sz(sizes()), st(strides());
  sz[d] = (e - b + step - 1) / step;
  st[d] *= step;
  return make_view(*this, std::move(sz), std::move(st), storage_offset() + b * stride(d), "slice",
                   "SliceBackward0",
                   [d, b, e, step](const Tensor& t) { return t.slice(d, b, e, step); });
}

Tensor Tensor::index(std::initializer_list<TensorIndex> indices) const {
  BP_CHECK_INDEX(static_cast<int64_t>(indices.size()) <= dim(), "[index] too many indices (",
                 indices.size(), ") for ", detail::describe_tensor(*this));
  Tensor r = *this;
  int64_t d = 0;
  for (const auto& idx : indices) {
    if (const auto* i = std::get_if<int64_t>(&idx)) {
      r = r.select(d, *i);  // the dim disappears; d stays
    } else {
      const Slice& s = std::get<Slice>(idx);
      r = r.slice(d, s.start, s.stop, s.step);
      ++d;
    }
  }
  return r;
}

Tensor Tensor::expand(IntArrayRef shape) const {
  BP_CHECK(static_cast<int64_t>(shape.size()) >= dim(), "[expand] the target shape ", shape,
           " has fewer dims than ", detail::describe_tensor(*this));
  const std::size_t lead = shape.size() - dim();
  DimVector sz(shape.size()), st(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      BP_CHECK(shape[i] >= 0, "[expand] a new leading dim cannot be ", shape[i], " in ", shape);
      sz[i] = shape[i];
      st[i] = 0;
      continue;
    }
    const int64_t cur = size(i - lead), want = shape[i] == -1 ? cur : shape[i];
    BP_CHECK(cur == want || cur == 1, "[expand] the size ", cur, " of dim ", i - lead,
             " must match the target size ", want, " (only size-1 dims expand); shape ", sizes(),
             " to ", shape);
    sz[i] = want;
    st[i] = cur == want ? stride(i - lead) : 0;
  }
  DimVector target = sz;
  return make_view(*this, std::move(sz), std::move(st), storage_offset(), "expand",
                   "ExpandBackward0", [target](const Tensor& t) { return t.expand(target); });
}

Tensor Tensor::squeeze() const {
  DimVector sz, st;
  for (int64_t d = 0; d < dim(); ++d)
    if (size(d) != 1) {
      sz.push_back(size(d));
      st.push_back(stride(d));
    }
  return make_view(*this, std::move(sz), std::move(st), storage_offset(), "squeeze",
                   "SqueezeBackward0", [](const Tensor& t) { return t.squeeze(); });
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  DimVector sz(sizes()), st(strides());
  if (dim() > 0 && size(d) == 1) {
    sz.erase(d);
    st.erase(d);
  }
  return make_view(*this, std::move(sz), std::move(st), storage_offset(), "squeeze",
                   "SqueezeBackward1", [d](const Tensor& t) { return t.squeeze(d); });
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  DimVector sz(sizes()), st(strides());
  const int64_t s = d < dim() ? size(d) * stride(d) : 1;
  sz.insert(d, 1);
  st.insert(d, s);
  return make_view(*this, std::move(sz), std::move(st), storage_offset(), "unsqueeze",
                   "UnsqueezeBackward0", [d](const Tensor& t) { return t.unsqueeze(d); });
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape(std::vector<int64_t>{1});
  start = wrap_dim(start, dim(), "flatten");
  end = wrap_dim(end, dim(), "flatten");
  BP_CHECK(start <= end, "[flatten] start_dim ", start, " comes after end_dim ", end);
  DimVector shape;
  for (int64_t d = 0; d < start; ++d) shape.push_back(size(d));
  int64_t n = 1;
  for (int64_t d = start; d <= end; ++d) n *= size(d);
  shape.push_back(n);
  for (int64_t d = end + 1; d < dim(); ++d) shape.push_back(size(d));
  return reshape(shape);
}

Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2) const {
  BP_CHECK(dim() >= 2, "[diagonal] needs at least 2 dims, got ", detail::describe_tensor(*this));
  const int64_t d1 = wrap_dim(dim1, dim(), "diagonal"), d2 = wrap_dim(dim2, dim(), "diagonal");
  BP_CHECK(d1 != d2, "[diagonal] dim1 and dim2 must differ, both are ", d1);
  int64_t len, start = storage_offset();
  if (offset >= 0) {
    len = std::max<int64_t>(std::min(size(d1), size(d2) - offset), 0);
    if (len > 0) start += offset * stride(d2);
  } else {
    len = std::max<int64_t>(std::min(size(d1) + offset, size(d2)), 0);
    if (len > 0) start -= offset * stride(d1);
  }
  DimVector sz, st;
  for (int64_t d = 0; d < dim(); ++d)
    if (d != d1 && d != d2) {
      sz.push_back(size(d));
      st.push_back(stride(d));
    }
  sz.push_back(len);
  st.push_back(stride(d1) + stride(d2));
  return make_view(*this, std::move(sz), std::move(st), start, "diagonal", "DiagonalBackward0",
                   [offset, d1, d2](const Tensor& t) { return t.diagonal(offset, d1, d2); });
}

Tensor Tensor::as_strided(IntArrayRef size, IntArrayRef stride,
                          std::optional<int64_t> storage_offset_in) const {
  BP_CHECK(size.size() == stride.size(), "[as_strided] got ", size.size(), " sizes but ",
           stride.size(), " strides");
  const int64_t offset = storage_offset_in.value_or(storage_offset());
  BP_CHECK(offset >= 0, "[as_strided] negative storage offset ", offset);
  checked_numel(size, "as_strided");
  for (std::size_t i = 0; i < size.size(); ++i)
    BP_CHECK(stride[i] >= 0, "[as_strided] negative stride ", stride[i], " at dim ", i);
  const auto [first, last] = checked_extent(size, stride, offset, "as_strided");
  const int64_t capacity = static_cast<int64_t>(impl()->storage->nbytes() / itemsize());
  BP_CHECK_INDEX(first > last || last < capacity, "[as_strided] size ", size, " and stride ",
                 stride, " at offset ", offset, " reach element ", last,
                 ", past the end of the memory (", capacity, " elements)");
  Tensor out =
      detail::make_view_unrecorded(*this, DimVector(size), DimVector(stride), offset, "as_strided");
  if (requires_grad()) autograd::record_as_strided(*this, out);
  return out;
}

Tensor Tensor::unfold(int64_t d, int64_t size_, int64_t step) const {
  const int64_t w = wrap_dim(d, dim(), "unfold");
  const int64_t n = dim() == 0 ? 1 : size(w);
  BP_CHECK(step > 0, "[unfold] step must be positive, got ", step);
  BP_CHECK(size_ >= 0 && size_ <= n, "[unfold] size ", size_, " exceeds dim ", w, " of size ", n);
  DimVector sz(sizes()), st(strides());
  if (dim() == 0) {
    sz.push_back(size_);
    st.push_back(1);
  } else {
    sz[w] = (n - size_) / step + 1;
    st[w] = stride(w) * step;
    sz.push_back(size_);
    st.push_back(stride(w));
  }
  return make_view(*this, std::move(sz), std::move(st), storage_offset(), "unfold",
                   "UnfoldBackward0",
                   [d, size_, step](const Tensor& t) { return t.unfold(d, size_, step); });
}

}  // namespace bp
