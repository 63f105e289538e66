// The layers of bp::nn (NN-2), with PyTorch 1.13's arguments, defaults,
// initialisation and printed form. Each is a Module whose forward calls the
// functional op of nn_ops.h / ops.h, so it runs and differentiates on every
// backend. Options are structs for designated initialisers:
//   auto conv = std::make_shared<nn::Conv2d>(64, 192, 3, nn::Conv2dOptions{.padding = 1});
// Parameters are made on the default device in float32; Module::to moves them.
// A layer's tensor members (weight, bias, running_mean, ...) are references
// to its registered slots: `lin->weight = t` replaces the registered
// parameter (weight tying: `dec->weight = enc->weight`), so forward,
// parameters(), state_dict() and optimisers made afterwards all see `t`.
#pragma once

#include <backplane/nn/module.h>
#include <backplane/nn_ops.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

namespace bp::nn {

// y = x W^T + b; weight [out, in] and bias [out] from U(-1/sqrt(in), 1/sqrt(in))
// (kaiming_uniform with a = sqrt(5), as PyTorch).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_features, out_features;
  Tensor &weight, &bias;
};

struct Conv2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

// conv2d with weight [out, in/groups, kh, kw] and bias [out], both from
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in/groups * kh * kw.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Conv2dOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_channels, out_channels;
  Size2 kernel_size;
  Conv2dOptions options;
  Tensor &weight, &bias;
};

struct ConvTranspose2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 output_padding = 0;
  int64_t groups = 1;
  bool bias = true;
  Size2 dilation = 1;
};

// conv_transpose2d with weight [in, out/groups, kh, kw] and bias [out], both
// from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = out/groups * kh * kw (the
// weight's second dim, as PyTorch counts it).
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size,
                  ConvTranspose2dOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t in_channels, out_channels;
  Size2 kernel_size;
  ConvTranspose2dOptions options;
  Tensor &weight, &bias;
};

// max(x, 0); with inplace, x.relu_() (the errors of an in-place op: a leaf
// that requires grad, a view of one, a tensor saved for backward, which
// fails at backward by its version).
class ReLU : public Module {
 public:
  explicit ReLU(bool inplace = false) : Module("ReLU"), inplace(inplace) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  bool inplace;
};

class GELU : public Module {
 public:
  explicit GELU(bool tanh_approximation = false)
      : Module("GELU"), tanh_approximation(tanh_approximation) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  bool tanh_approximation;
};

// input.flatten(start_dim, end_dim).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  int64_t start_dim, end_dim;
};

// Dropout with probability p in training mode, identity in eval mode.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, bool inplace = false);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  double p;
  bool inplace;
};

struct BatchNormOptions {
  double eps = 1e-5;
  // nullopt: a cumulative average (momentum 1 / num_batches_tracked), as PyTorch.
  std::optional<double> momentum = 0.1;
  bool affine = true;
  bool track_running_stats = true;
};

// Batch normalisation over the channels of NCHW input. Buffers running_mean
// (0), running_var (1) and num_batches_tracked (int64 0), when tracking;
// weight (1) and bias (0) when affine. Training uses the batch's statistics
// and updates the running ones; eval uses the running ones.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, BatchNormOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  void reset_running_stats();
  int64_t num_features;
  BatchNormOptions options;
  Tensor &weight, &bias, &running_mean, &running_var, &num_batches_tracked;
};

// Normalises the trailing normalized_shape dims; weight (1) and bias (0)
// of that shape when elementwise_affine.
class LayerNorm : public Module {
 public:
  LayerNorm(std::vector<int64_t> normalized_shape, double eps = 1e-5,
            bool elementwise_affine = true);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  std::vector<int64_t> normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor &weight, &bias;
};

struct MaxPool2dOptions {
  std::optional<Size2> stride;  // the kernel size when not given
  Size2 padding = 0;
  Size2 dilation = 1;
  bool ceil_mode = false;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, MaxPool2dOptions options = {})
      : Module("MaxPool2d"), kernel_size(kernel_size), options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  Size2 kernel_size;
  MaxPool2dOptions options;
};

struct AvgPool2dOptions {
  std::optional<Size2> stride;
  Size2 padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel_size, AvgPool2dOptions options = {})
      : Module("AvgPool2d"), kernel_size(kernel_size), options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  Size2 kernel_size;
  AvgPool2dOptions options;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size)
      : Module("AdaptiveAvgPool2d"), output_size(output_size) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  Size2 output_size;
};

// weight [num_embeddings, embedding_dim] from N(0, 1), the padding_idx row
// zero; forward takes int64 indices.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;
  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;
  Tensor& weight;
};

// --- containers ---------------------------------------------------------------------

namespace detail {
template <typename M>
std::shared_ptr<Module> hold(M&& m) {
  using T = std::decay_t<M>;
  if constexpr (std::is_convertible_v<T, std::shared_ptr<Module>>) {
    return std::forward<M>(m);
  } else {
    static_assert(std::is_base_of_v<Module, T>, "Sequential and ModuleList hold modules");
    // A module is not copyable: pass a temporary, std::move(m), or a shared_ptr.
    static_assert(!std::is_lvalue_reference_v<M>,
                  "pass a module by value (a temporary or std::move) or as a shared_ptr");
    return std::make_shared<T>(std::forward<M>(m));
  }
}
}  // namespace detail

// Children named "0", "1", ... in order; forward feeds each one's output to
// the next. Takes modules or shared_ptrs to them.
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  template <typename... Ms>
  explicit Sequential(Ms&&... ms) : Module("Sequential") {
    (push_back(detail::hold(std::forward<Ms>(ms))), ...);
  }
  void push_back(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& input) override;
  std::size_t size() const { return items_.size(); }
  std::shared_ptr<Module> operator[](std::size_t i) const;

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

// Children named "0", "1", ...; no forward of its own.
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  template <typename... Ms>
  explicit ModuleList(Ms&&... ms) : Module("ModuleList") {
    (push_back(detail::hold(std::forward<Ms>(ms))), ...);
  }
  void push_back(std::shared_ptr<Module> m);
  std::size_t size() const { return items_.size(); }
  std::shared_ptr<Module> operator[](std::size_t i) const;
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

// --- losses (forward(input, target)) ------------------------------------------------

class CrossEntropyLoss : public Module {
 public:
  explicit CrossEntropyLoss(Reduction reduction = Reduction::Mean, int64_t ignore_index = -100,
                            double label_smoothing = 0.0, Tensor weight = Tensor());
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  Reduction reduction;
  int64_t ignore_index;
  double label_smoothing;
  Tensor& weight;  // per class; a buffer (undefined when not given), as PyTorch's
};

class NLLLoss : public Module {
 public:
  explicit NLLLoss(Reduction reduction = Reduction::Mean, int64_t ignore_index = -100,
                   Tensor weight = Tensor());
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  Reduction reduction;
  int64_t ignore_index;
  Tensor& weight;
};

class MSELoss : public Module {
 public:
  explicit MSELoss(Reduction reduction = Reduction::Mean)
      : Module("MSELoss"), reduction(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  Reduction reduction;
};

}  // namespace bp::nn
