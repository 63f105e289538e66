// Factories that take their shape, dtype and device from a tensor: the
// *_like functions (CR-2) and the new_* methods (CR-3).
#include <backplane/ops.h>

#include "../internal.h"

namespace bp {

namespace {

// options when given, else t's dtype and device; never t's requires_grad.
TensorOptions like_options(const Tensor& t, const std::optional<TensorOptions>& options) {
  if (options) {
    TensorOptions o = *options;
    if (!o.device_) o.device_ = t.device();
    if (!o.has_dtype_) o = o.dtype(t.dtype());
    return o;
  }
  return TensorOptions(t.dtype()).device(t.device());
}

// A fresh tensor with t's strides when they are dense and non-overlapping
// (so elementwise results line up with t in memory), else contiguous.
Tensor empty_strided_like(const Tensor& t, const TensorOptions& o) {
  BP_CHECK_TYPE(!o.requires_grad_ || is_floating(o.dtype_),
                "[empty_like] only floating tensors can require gradients, got dtype ", o.dtype_);
  const Device dev = o.resolved_device();
  const bool dense = is_non_overlapping_and_dense(t.sizes(), t.strides());
  if (dev == t.device())  // t's backend, without a lookup
    return dense ? detail::make_empty_strided(t.sizes(), t.strides(), o.dtype_, t)
                 : detail::make_empty(t.sizes(), o.dtype_, t);
  return dense ? detail::make_empty_strided(t.sizes(), t.strides(), o.dtype_, dev)
               : detail::make_empty(t.sizes(), o.dtype_, dev);
}

Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad_) t.requires_grad_(true);
  return t;
}

}  // namespace

Tensor empty_like(const Tensor& t, std::optional<TensorOptions> options) {
  const TensorOptions o = like_options(t, options);
  return finish(empty_strided_like(t, o), o);
}

Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> options) {
  return full_like(t, 0, options);
}

Tensor ones_like(const Tensor& t, std::optional<TensorOptions> options) {
  return full_like(t, 1, options);
}

Tensor full_like(const Tensor& t, const Scalar& value, std::optional<TensorOptions> options) {
  const TensorOptions o = like_options(t, options);
  Tensor out = empty_strided_like(t, o);
  detail::fill_fresh(out, value);
  return finish(out, o);
}

namespace {

// The stream's values in row-major order, laid out with t's dense strides
// like every other *_like result (CR-2).
Tensor random_like(const Tensor& t, const TensorOptions& o,
                   Tensor (*gen)(IntArrayRef, TensorOptions)) {
  Tensor values = gen(t.sizes(), o.requires_grad(false));
  if (!is_non_overlapping_and_dense(t.sizes(), t.strides()) || t.is_contiguous())
    return finish(values, o);
  Tensor out = empty_strided_like(t, o.requires_grad(false));
  detail::copy_into(out, values);
  return finish(out, o);
}

}  // namespace

Tensor rand_like(const Tensor& t, std::optional<TensorOptions> options) {
  return random_like(t, like_options(t, options), &rand);
}

Tensor randn_like(const Tensor& t, std::optional<TensorOptions> options) {
  return random_like(t, like_options(t, options), &randn);
}

Tensor Tensor::new_empty(IntArrayRef shape, std::optional<TensorOptions> options) const {
  return empty(shape, like_options(*this, options));
}
Tensor Tensor::new_zeros(IntArrayRef shape, std::optional<TensorOptions> options) const {
  return zeros(shape, like_options(*this, options));
}
Tensor Tensor::new_ones(IntArrayRef shape, std::optional<TensorOptions> options) const {
  return ones(shape, like_options(*this, options));
}
Tensor Tensor::new_full(IntArrayRef shape, const Scalar& value,
                        std::optional<TensorOptions> options) const {
  return full(shape, value, like_options(*this, options));
}

Tensor Tensor::new_tensor(const Tensor& data, std::optional<TensorOptions> options) const {
  // Device and dtype from *this (the documented contract), never from data.
  const TensorOptions o = like_options(*this, options);
  Tensor out = detail::make_empty(data.sizes(), o.dtype_, o.resolved_device());
  detail::copy_into(out, data);
  return finish(out, o);
}

}  // namespace bp
