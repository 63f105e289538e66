// Tensors as text: for messages, and the elements of a printed tensor;
// not installed.
#pragma once

#include <backplane/tensor.h>

#include <string>

namespace bp::detail {

// "tensor of shape [2, 3], dtype float32 on cpu_onednn:0", for messages.
std::string describe_tensor(const Tensor& t);

// The elements of `t` as its printed form lays them out (PyTorch's line
// width, summarised above 1000 elements), continuation lines indented by
// `indent` + 1: without "tensor(" nor the dtype; `t` must not be empty.
std::string print_elements(const Tensor& t, int indent);
// Whether a printed tensor on `d` leaves its device unsaid: d is the
// default device (false when there is none).
bool is_default_device(Device d);

}  // namespace bp::detail
