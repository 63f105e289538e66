// The layers of bp::nn: construction (PyTorch's initialisation), forward and
// the printed form.
#include <backplane/autograd.h>
#include <backplane/error.h>
#include <backplane/nn/init.h>
#include <backplane/nn/layers.h>
#include <backplane/ops.h>

#include <charconv>
#include <cmath>

namespace bp::nn {

namespace {
// Python's repr of a float: the shortest digits that round-trip, written
// positionally when the decimal exponent is in [-4, 16), else as 1e-05.
std::string py_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // "-1.2345e-05"
  const std::size_t e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  const bool negative = sci[0] == '-';
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c >= '0' && c <= '9') digits += c;
  std::string out = negative ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += exp < 0 ? "e-" : "e+";
    const std::string mag = std::to_string(exp < 0 ? -exp : exp);
    return out + (mag.size() < 2 ? "0" : "") + mag;
  }
  if (exp < 0) return out + "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
  const std::size_t point = static_cast<std::size_t>(exp) + 1;
  if (digits.size() <= point) return out + digits + std::string(point - digits.size(), '0') + ".0";
  return out + digits.substr(0, point) + "." + digits.substr(point);
}
const char* py_bool(bool b) { return b ? "True" : "False"; }
std::string tuple(Size2 s) { return bp::detail::concat("(", s[0], ", ", s[1], ")"); }
// As it was given: an int, or a tuple for two numbers (as PyTorch prints them).
std::string int_or_tuple(Size2 s) { return s.pair ? tuple(s) : std::to_string(s[0]); }

}  // namespace

// --- Linear ----------------------------------------------------------------------------

Linear::Linear(int64_t in, int64_t out, bool with_bias)
    : Module("Linear"),
      in_features(in),
      out_features(out),
      weight(register_parameter("weight", Tensor())),
      bias(register_parameter("bias", Tensor())) {
  BP_CHECK(in >= 0 && out >= 0, "[Linear] in_features and out_features must be >= 0, got ", in,
           " and ", out);
  weight = empty({out, in}).requires_grad_();
  if (with_bias) bias = empty({out}).requires_grad_();
  reset_parameters();
}

void Linear::reset_parameters() {
  // kaiming_uniform(a = sqrt 5) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
  init::uniform_(weight, -bound, bound);
  if (bias.defined()) init::uniform_(bias, -bound, bound);
}

Tensor Linear::forward(const Tensor& input) {
  BP_CHECK(input.dim() >= 1 && input.size(-1) == in_features,
           "[Linear] the input's last dim must be ", "in_features = ", in_features, ", got shape ",
           input.sizes());
  Tensor y = matmul(input, weight.t());
  return bias.defined() ? y + bias : y;
}

std::string Linear::extra_repr() const {
  return bp::detail::concat("in_features=", in_features, ", out_features=", out_features,
                            ", bias=", py_bool(bias.defined()));
}

// --- Conv2d -----------------------------------------------------------------------------

Conv2d::Conv2d(int64_t in, int64_t out, Size2 k, Conv2dOptions o)
    : Module("Conv2d"),
      in_channels(in),
      out_channels(out),
      kernel_size(k),
      options(o),
      weight(register_parameter("weight", Tensor())),
      bias(register_parameter("bias", Tensor())) {
  BP_CHECK(o.groups > 0, "[Conv2d] groups must be a positive integer, got ", o.groups);
  BP_CHECK(in % o.groups == 0, "[Conv2d] in_channels (", in, ") must be divisible by groups (",
           o.groups, ")");
  BP_CHECK(out % o.groups == 0, "[Conv2d] out_channels (", out, ") must be divisible by groups (",
           o.groups, ")");
  BP_CHECK(k[0] > 0 && k[1] > 0, "[Conv2d] kernel_size must be positive, got ", tuple(k));
  weight = empty({out, in / o.groups, k[0], k[1]}).requires_grad_();
  if (o.bias) bias = empty({out}).requires_grad_();
  reset_parameters();
}

void Conv2d::reset_parameters() {
  const int64_t fan_in = in_channels / options.groups * kernel_size[0] * kernel_size[1];
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  init::uniform_(weight, -bound, bound);
  if (bias.defined()) init::uniform_(bias, -bound, bound);
}

Tensor Conv2d::forward(const Tensor& input) {
  return conv2d(input, weight, bias, options.stride, options.padding, options.dilation,
                options.groups);
}

std::string Conv2d::extra_repr() const {
  std::string s =
      bp::detail::concat(in_channels, ", ", out_channels, ", kernel_size=", tuple(kernel_size),
                         ", stride=", tuple(options.stride));
  if (options.padding[0] != 0 || options.padding[1] != 0)
    s += ", padding=" + tuple(options.padding);
  if (options.dilation[0] != 1 || options.dilation[1] != 1)
    s += ", dilation=" + tuple(options.dilation);
  if (options.groups != 1) s += ", groups=" + std::to_string(options.groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, Size2 k, ConvTranspose2dOptions o)
    : Module("ConvTranspose2d"),
      in_channels(in),
      out_channels(out),
      kernel_size(k),
      options(o),
      weight(register_parameter("weight", Tensor())),
      bias(register_parameter("bias", Tensor())) {
  BP_CHECK(o.groups > 0, "[ConvTranspose2d] groups must be a positive integer, got ", o.groups);
  BP_CHECK(in % o.groups == 0, "[ConvTranspose2d] in_channels (", in,
           ") must be divisible by groups (", o.groups, ")");
  BP_CHECK(out % o.groups == 0, "[ConvTranspose2d] out_channels (", out,
           ") must be divisible by groups (", o.groups, ")");
  BP_CHECK(k[0] > 0 && k[1] > 0, "[ConvTranspose2d] kernel_size must be positive, got ", tuple(k));
  weight = empty({in, out / o.groups, k[0], k[1]}).requires_grad_();
  if (o.bias) bias = empty({out}).requires_grad_();
  reset_parameters();
}

void ConvTranspose2d::reset_parameters() {
  const int64_t fan_in = out_channels / options.groups * kernel_size[0] * kernel_size[1];
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  init::uniform_(weight, -bound, bound);
  if (bias.defined()) init::uniform_(bias, -bound, bound);
}

Tensor ConvTranspose2d::forward(const Tensor& input) {
  return conv_transpose2d(input, weight, bias, options.stride, options.padding,
                          options.output_padding, options.groups, options.dilation);
}

std::string ConvTranspose2d::extra_repr() const {
  std::string s =
      bp::detail::concat(in_channels, ", ", out_channels, ", kernel_size=", tuple(kernel_size),
                         ", stride=", tuple(options.stride));
  if (options.padding[0] != 0 || options.padding[1] != 0)
    s += ", padding=" + tuple(options.padding);
  if (options.dilation[0] != 1 || options.dilation[1] != 1)
    s += ", dilation=" + tuple(options.dilation);
  if (options.output_padding[0] != 0 || options.output_padding[1] != 0)
    s += ", output_padding=" + tuple(options.output_padding);
  if (options.groups != 1) s += ", groups=" + std::to_string(options.groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

// --- activations and shape -----------------------------------------------------------------

Tensor ReLU::forward(const Tensor& input) {
  if (!inplace) return relu(input);
  Tensor out = input;
  out.relu_();
  return out;
}
std::string ReLU::extra_repr() const { return inplace ? "inplace=True" : ""; }

Tensor GELU::forward(const Tensor& input) { return gelu(input, tanh_approximation); }
std::string GELU::extra_repr() const {
  return tanh_approximation ? "approximate='tanh'" : "approximate='none'";
}

Tensor Flatten::forward(const Tensor& input) { return input.flatten(start_dim, end_dim); }
std::string Flatten::extra_repr() const {
  return bp::detail::concat("start_dim=", start_dim, ", end_dim=", end_dim);
}

Dropout::Dropout(double p, bool inplace) : Module("Dropout"), p(p), inplace(inplace) {
  BP_CHECK(p >= 0 && p <= 1, "[Dropout] dropout probability has to be between 0 and 1, but got ",
           p);
}

Tensor Dropout::forward(const Tensor& input) {
  if (!inplace) return dropout(input, p, is_training());
  Tensor out = input;
  dropout_(out, p, is_training());
  return out;
}
std::string Dropout::extra_repr() const {
  return bp::detail::concat("p=", py_float(p), ", inplace=", py_bool(inplace));
}

// --- normalisation ----------------------------------------------------------------------------

BatchNorm2d::BatchNorm2d(int64_t n, BatchNormOptions o)
    : Module("BatchNorm2d"),
      num_features(n),
      options(o),
      weight(register_parameter("weight", Tensor())),
      bias(register_parameter("bias", Tensor())),
      running_mean(register_buffer("running_mean", Tensor())),
      running_var(register_buffer("running_var", Tensor())),
      num_batches_tracked(register_buffer("num_batches_tracked", Tensor())) {
  BP_CHECK(n > 0, "[BatchNorm2d] num_features must be positive, got ", n);
  if (o.affine) {
    weight = ones({n}).requires_grad_();
    bias = zeros({n}).requires_grad_();
  }
  if (o.track_running_stats) {
    running_mean = zeros({n});
    running_var = ones({n});
    num_batches_tracked = zeros({}, DType::Int64);
  }
}

void BatchNorm2d::reset_running_stats() {
  if (!options.track_running_stats) return;
  NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

Tensor BatchNorm2d::forward(const Tensor& input) {
  BP_CHECK(input.dim() == 4, "[BatchNorm2d] expected 4D input (got ", input.dim(), "D input)");
  BP_CHECK(input.size(1) == num_features, "[BatchNorm2d] expected ", num_features,
           " channels (dim 1), got input of shape ", input.sizes());
  double factor = options.momentum.value_or(0.0);
  if (is_training() && options.track_running_stats) {
    {
      NoGradGuard no_grad;
      num_batches_tracked.add_(1);
    }
    if (!options.momentum) factor = 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
  }
  // Batch statistics in training, and in eval when nothing is tracked.
  const bool use_batch = is_training() || !options.track_running_stats;
  const bool update = !is_training() || options.track_running_stats;
  return batch_norm(input, update ? running_mean : Tensor(), update ? running_var : Tensor(),
                    weight, bias, use_batch, factor, options.eps);
}

std::string BatchNorm2d::extra_repr() const {
  return bp::detail::concat(num_features, ", eps=", py_float(options.eps),
                            ", momentum=", options.momentum ? py_float(*options.momentum) : "None",
                            ", affine=", py_bool(options.affine),
                            ", track_running_stats=", py_bool(options.track_running_stats));
}

LayerNorm::LayerNorm(std::vector<int64_t> shape, double eps, bool affine)
    : Module("LayerNorm"),
      normalized_shape(std::move(shape)),
      eps(eps),
      elementwise_affine(affine),
      weight(register_parameter("weight", Tensor())),
      bias(register_parameter("bias", Tensor())) {
  BP_CHECK(!normalized_shape.empty(), "[LayerNorm] normalized_shape must have at least one dim");
  if (affine) {
    weight = ones(normalized_shape).requires_grad_();
    bias = zeros(normalized_shape).requires_grad_();
  }
}

Tensor LayerNorm::forward(const Tensor& input) {
  return layer_norm(input, normalized_shape, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  std::string dims = "(";
  for (std::size_t i = 0; i < normalized_shape.size(); ++i)
    dims += (i ? ", " : "") + std::to_string(normalized_shape[i]);
  dims += normalized_shape.size() == 1 ? ",)" : ")";
  return bp::detail::concat(dims, ", eps=", py_float(eps),
                            ", elementwise_affine=", py_bool(elementwise_affine));
}

// --- pooling
// --------------------------------------------------------------------------------------

Tensor MaxPool2d::forward(const Tensor& input) {
  return max_pool2d(input, kernel_size, options.stride, options.padding, options.dilation,
                    options.ceil_mode);
}
std::string MaxPool2d::extra_repr() const {
  return bp::detail::concat("kernel_size=", int_or_tuple(kernel_size),
                            ", stride=", int_or_tuple(options.stride.value_or(kernel_size)),
                            ", padding=", int_or_tuple(options.padding),
                            ", dilation=", int_or_tuple(options.dilation),
                            ", ceil_mode=", py_bool(options.ceil_mode));
}

Tensor AvgPool2d::forward(const Tensor& input) {
  return avg_pool2d(input, kernel_size, options.stride, options.padding, options.ceil_mode,
                    options.count_include_pad);
}
std::string AvgPool2d::extra_repr() const {
  return bp::detail::concat("kernel_size=", int_or_tuple(kernel_size),
                            ", stride=", int_or_tuple(options.stride.value_or(kernel_size)),
                            ", padding=", int_or_tuple(options.padding));
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& input) {
  return adaptive_avg_pool2d(input, output_size);
}
std::string AdaptiveAvgPool2d::extra_repr() const {
  return "output_size=" + int_or_tuple(output_size);
}

// --- Embedding
// ---------------------------------------------------------------------------------------

Embedding::Embedding(int64_t n, int64_t dim, std::optional<int64_t> pad)
    : Module("Embedding"),
      num_embeddings(n),
      embedding_dim(dim),
      weight(register_parameter("weight", Tensor())) {
  BP_CHECK(n >= 0 && dim >= 0, "[Embedding] num_embeddings and embedding_dim must be >= 0, got ", n,
           " and ", dim);
  if (pad) {
    BP_CHECK(*pad < n && *pad >= -n, "[Embedding] padding_idx must be within num_embeddings (", n,
             "), got ", *pad);
    padding_idx = *pad < 0 ? *pad + n : *pad;
  }
  weight = empty({n, dim}).requires_grad_();
  init::normal_(weight);
  if (padding_idx) {
    NoGradGuard no_grad;
    weight.select(0, *padding_idx).zero_();
  }
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(indices, weight, padding_idx); }

std::string Embedding::extra_repr() const {
  std::string s = bp::detail::concat(num_embeddings, ", ", embedding_dim);
  if (padding_idx) s += ", padding_idx=" + std::to_string(*padding_idx);
  return s;
}

// --- containers
// ---------------------------------------------------------------------------------------

void Sequential::push_back(std::shared_ptr<Module> m) {
  add_child(std::to_string(items_.size()), m);
  items_.push_back(std::move(m));
}

std::shared_ptr<Module> Sequential::operator[](std::size_t i) const {
  BP_CHECK_INDEX(i < items_.size(), "[Sequential] index ", i, " is out of range for ",
                 items_.size(), " modules");
  return items_[i];
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (auto& m : items_) x = m->forward(x);
  return x;
}

void ModuleList::push_back(std::shared_ptr<Module> m) {
  add_child(std::to_string(items_.size()), m);
  items_.push_back(std::move(m));
}

std::shared_ptr<Module> ModuleList::operator[](std::size_t i) const {
  BP_CHECK_INDEX(i < items_.size(), "[ModuleList] index ", i, " is out of range for ",
                 items_.size(), " modules");
  return items_[i];
}

// --- losses
// -----------------------------------------------------------------------------------------------

CrossEntropyLoss::CrossEntropyLoss(Reduction r, int64_t ignore, double smoothing, Tensor w)
    : Module("CrossEntropyLoss"),
      reduction(r),
      ignore_index(ignore),
      label_smoothing(smoothing),
      weight(register_buffer("weight", Tensor())) {
  BP_CHECK(smoothing >= 0 && smoothing <= 1,
           "[CrossEntropyLoss] label_smoothing must be between 0.0 and 1.0, got ", smoothing);
  weight = std::move(w);
}

Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing);
}

NLLLoss::NLLLoss(Reduction r, int64_t ignore, Tensor w)
    : Module("NLLLoss"),
      reduction(r),
      ignore_index(ignore),
      weight(register_buffer("weight", Tensor())) {
  weight = std::move(w);
}

Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  return nll_loss(input, target, weight, ignore_index, reduction);
}

Tensor MSELoss::forward(const Tensor& input, const Tensor& target) {
  return mse_loss(input, target, reduction);
}

}  // namespace bp::nn
