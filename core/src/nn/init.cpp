// torch.nn.init's initialisers, from the process generator.
#include <backplane/autograd.h>
#include <backplane/error.h>
#include <backplane/nn/init.h>
#include <backplane/ops.h>

#include <cmath>

namespace bp::nn::init {

namespace {
// Fills t from a float64 draw made on t's device, converted to t's dtype.
Tensor& fill_from(Tensor& t, const Tensor& values) {
  NoGradGuard no_grad;
  t.copy_(values);
  return t;
}

TensorOptions draw_options(const Tensor& t) {
  BP_CHECK_TYPE(is_floating(t.dtype()), "[nn.init] a floating tensor is needed, got ", t.dtype());
  return TensorOptions(t.dtype()).device(t.device());
}
}  // namespace

Tensor& uniform_(Tensor& t, double low, double high) {
  BP_CHECK(low <= high, "[nn.init.uniform_] low (", low, ") must not exceed high (", high, ")");
  return fill_from(t, rand(t.sizes(), draw_options(t)) * (high - low) + low);
}

Tensor& normal_(Tensor& t, double mean, double std) {
  BP_CHECK(std >= 0, "[nn.init.normal_] std must be >= 0, got ", std);
  return fill_from(t, randn(t.sizes(), draw_options(t)) * std + mean);
}

Tensor& constant_(Tensor& t, double value) {
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}
Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  BP_CHECK(t.dim() >= 2,
           "[nn.init] fan in and fan out can not be computed for a tensor with fewer "
           "than 2 dimensions (got ",
           t.dim(), ")");
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(const std::string& nonlinearity, double param) {
  if (nonlinearity == "linear" || nonlinearity == "sigmoid" || nonlinearity == "identity" ||
      nonlinearity.rfind("conv", 0) == 0)
    return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nonlinearity == "selu") return 3.0 / 4.0;
  detail::raise<ValueError>("[nn.init.calculate_gain] unsupported nonlinearity '", nonlinearity,
                            "'");
}

namespace {
double kaiming_std(const Tensor& t, double a, FanMode mode, const std::string& nonlinearity) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const int64_t fan = mode == FanMode::FanIn ? fan_in : fan_out;
  BP_CHECK(fan > 0, "[nn.init] initialising a zero-element tensor");
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan));
}
}  // namespace

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, const std::string& nonlinearity) {
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nonlinearity);
  return uniform_(t, -bound, bound);
}

Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, const std::string& nonlinearity) {
  return normal_(t, 0.0, kaiming_std(t, a, mode, nonlinearity));
}

Tensor& xavier_uniform_(Tensor& t, double gain) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform_(t, -bound, bound);
}

}  // namespace bp::nn::init
