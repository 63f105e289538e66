// Factories: empty/zeros/ones/full, arange, and tensors from host data.
#include <backplane/ops.h>

#include <cmath>
#include <cstring>

#include "../internal.h"

namespace bp {

namespace {
// Applies options.requires_grad_ once the values are in place (filling a
// leaf that requires grad would be an in-place op on it).
Tensor finish(Tensor t, const TensorOptions& options) {
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}

void check_requires_grad(const char* op, const TensorOptions& options) {
  BP_CHECK_TYPE(!options.requires_grad_ || is_floating(options.dtype_), "[", op,
                "] only floating tensors can require gradients, got dtype ", options.dtype_);
}
}  // namespace

Tensor empty(IntArrayRef shape, TensorOptions options) {
  check_requires_grad("empty", options);
  return finish(detail::make_empty(shape, options.dtype_, options.resolved_device()), options);
}

Tensor zeros(IntArrayRef shape, TensorOptions options) {
  check_requires_grad("zeros", options);
  Tensor t = detail::make_empty(shape, options.dtype_, options.resolved_device());
  // All-zero bytes are 0, 0.0 and false in every dtype we have.
  if (t.numel() > 0)
    detail::backend_of(t).memset(t.device().index, detail::current_stream_of(t.device()),
                                 t.impl()->storage->data(), t.impl()->storage->offset(), 0,
                                 t.numel() * t.itemsize());
  return finish(t, options);
}

Tensor ones(IntArrayRef shape, TensorOptions options) { return full(shape, 1, options); }

Tensor full(IntArrayRef shape, const Scalar& value, TensorOptions options) {
  check_requires_grad("full", options);
  Tensor t = detail::make_empty(shape, options.dtype_, options.resolved_device());
  detail::fill_fresh(t, value);
  return finish(t, options);
}

Tensor scalar_tensor(const Scalar& value, TensorOptions options) {
  return full(IntArrayRef(), value, options);
}

Tensor arange(const Scalar& end, std::optional<TensorOptions> options) {
  return arange(0, end, 1, options);
}

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step,
              std::optional<TensorOptions> options) {
  const bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  TensorOptions opts = options.value_or(TensorOptions());
  if (!opts.has_dtype_) opts = opts.dtype(integral ? DType::Int64 : kDefaultFloat);
  const double s = start.to_double(), e = end.to_double(), d = step.to_double();
  BP_CHECK(d != 0, "[arange] step must be nonzero");
  BP_CHECK(std::isfinite(s) && std::isfinite(e), "[arange] start and end must be finite, got ",
           start, " and ", end);
  BP_CHECK((e - s) == 0 || ((e - s) > 0) == (d > 0), "[arange] upper bound and lower bound are ",
           "inconsistent with the step sign: start ", start, ", end ", end, ", step ", step);
  int64_t n;
  if (integral) {
    const int64_t si = start.to<int64_t>(), ei = end.to<int64_t>(), di = step.to<int64_t>();
    // ceil((e - s) / d) in exact integer arithmetic.
    const int64_t num = ei - si;
    n = num / di + ((num % di != 0) && ((num > 0) == (di > 0)) ? 1 : 0);
  } else {
    const double count = std::ceil((e - s) / d);
    BP_CHECK(count < 0x1p62, "[arange] start ", start, ", end ", end, " and step ", step, " give ",
             count, " elements, more than a tensor can hold (CR-8)");
    n = static_cast<int64_t>(count);
  }
  n = std::max<int64_t>(n, 0);
  Tensor t = empty(IntArrayRef(&n, 1), opts);
  if (n == 0) return t;
  visit(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using H = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
    std::vector<H> host(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (is_floating_type_v<T>)
        host[i] = static_cast<T>(s + static_cast<double>(i) * d);
      else if constexpr (std::is_same_v<T, bool>)
        host[i] = (s + static_cast<double>(i) * d) != 0;
      else if (integral)
        host[i] = static_cast<T>(start.to<int64_t>() + i * step.to<int64_t>());
      else
        host[i] = static_cast<T>(s + static_cast<double>(i) * d);
    }
    detail::backend_of(t).copy_from_host(t.device().index, detail::current_stream_of(t.device()),
                                         t.impl()->storage->data(), t.impl()->storage->offset(),
                                         host.data(), host.size() * sizeof(H));
  });
  return t;
}

Tensor from_blob(const void* host_data, DType dtype, IntArrayRef shape, Device device) {
  Tensor t = detail::make_empty(shape, dtype, device);
  if (t.numel())
    detail::backend_of(t).copy_from_host(device.index, detail::current_stream_of(device),
                                         t.impl()->storage->data(), t.impl()->storage->offset(),
                                         host_data, t.numel() * itemsize(dtype));
  return t;
}

Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, TensorOptions options) {
  BP_CHECK(steps >= 0, "[linspace] steps must be >= 0, got ", steps);
  BP_CHECK_TYPE(is_floating(options.dtype_), "[linspace] needs a floating dtype, got ",
                options.dtype_);
  const double s = start.to_double(), e = end.to_double();
  std::vector<double> v(static_cast<std::size_t>(steps));
  // Both ends exact: the first half steps up from start, the second down from end.
  const double step = steps > 1 ? (e - s) / static_cast<double>(steps - 1) : 0.0;
  for (int64_t i = 0; i < steps; ++i)
    v[i] = i < steps / 2 ? s + step * static_cast<double>(i)
                         : e - step * static_cast<double>(steps - 1 - i);
  if (steps == 1) v[0] = s;  // a single step is the start, not the end (CR-5)
  return from_vector(v, {steps}, options);
}

Tensor logspace(const Scalar& start, const Scalar& end, int64_t steps, double base,
                TensorOptions options) {
  BP_CHECK(steps >= 0, "[logspace] steps must be >= 0, got ", steps);
  BP_CHECK_TYPE(is_floating(options.dtype_), "[logspace] needs a floating dtype, got ",
                options.dtype_);
  Tensor lin = linspace(start, end, steps, options.dtype(DType::Float64).requires_grad(false));
  std::vector<double> v = lin.to_vector<double>();
  for (double& x : v) x = std::pow(base, x);
  return from_vector(v, {steps}, options);
}

template <class T>
Tensor from_vector(const std::vector<T>& values, IntArrayRef shape, TensorOptions options) {
  check_requires_grad("tensor", options);
  BP_CHECK(static_cast<int64_t>(values.size()) == numel(shape), "[tensor] ", values.size(),
           " values do not fill shape ", shape, " (", numel(shape), " elements)");
  const Device dev = options.resolved_device();
  return visit(options.dtype_, [&](auto tag) {
    using D = decltype(tag);
    // std::vector<bool> has no data(); bytes are what a bool tensor holds.
    using H = std::conditional_t<std::is_same_v<D, bool>, uint8_t, D>;
    std::vector<H> host(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      if constexpr (std::is_same_v<D, bool>)
        host[i] = values[i] != T(0);
      else if constexpr (std::is_integral_v<D> && is_floating_type_v<T>)
        host[i] = static_cast<D>(static_cast<int64_t>(values[i]));  // truncates, then wraps
      else
        host[i] = static_cast<D>(values[i]);
    }
    return finish(from_blob(host.data(), options.dtype_, shape, dev), options);
  });
}

template Tensor from_vector(const std::vector<bool>&, IntArrayRef, TensorOptions);
template Tensor from_vector(const std::vector<int32_t>&, IntArrayRef, TensorOptions);
template Tensor from_vector(const std::vector<int64_t>&, IntArrayRef, TensorOptions);
template Tensor from_vector(const std::vector<float>&, IntArrayRef, TensorOptions);
template Tensor from_vector(const std::vector<double>&, IntArrayRef, TensorOptions);
template Tensor from_vector(const std::vector<Half>&, IntArrayRef, TensorOptions);
template Tensor from_vector(const std::vector<BFloat16>&, IntArrayRef, TensorOptions);
template Tensor from_vector(const std::vector<int8_t>&, IntArrayRef, TensorOptions);
template Tensor from_vector(const std::vector<uint8_t>&, IntArrayRef, TensorOptions);
template Tensor from_vector(const std::vector<int16_t>&, IntArrayRef, TensorOptions);

}  // namespace bp
