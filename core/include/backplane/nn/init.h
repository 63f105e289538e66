// Initialisers (torch.nn.init): fill a tensor in place under no-grad, from
// the process generator (manual_seed), so a seed gives the same values on
// every backend. Each returns its argument.
#pragma once

#include <backplane/tensor.h>

#include <cstdint>
#include <string>
#include <utility>

namespace bp::nn::init {

Tensor& uniform_(Tensor& t, double low = 0.0, double high = 1.0);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);

// (fan_in, fan_out) of a weight of rank >= 2: [out, in, k...] gives
// (in * prod(k), out * prod(k)).
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

// The gain PyTorch's calculate_gain gives: "linear", "conv2d", "sigmoid" 1;
// "tanh" 5/3; "relu" sqrt(2); "leaky_relu" sqrt(2 / (1 + param^2)); "selu" 3/4.
double calculate_gain(const std::string& nonlinearity, double param = 0.01);

enum class FanMode { FanIn, FanOut };
// U(-bound, bound), bound = gain * sqrt(3 / fan), gain for nonlinearity with a.
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                         const std::string& nonlinearity = "leaky_relu");
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                        const std::string& nonlinearity = "leaky_relu");
// U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0);

}  // namespace bp::nn::init
