// torch.nn.utils: gradient clipping.
#pragma once

#include <backplane/tensor.h>

#include <limits>
#include <vector>

namespace bp::nn::utils {

// The norm of all the gradients together (as one vector); when it exceeds
// max_norm, every gradient is scaled in place by max_norm / (norm + 1e-6).
// norm_type is p (> 0) or infinity. Parameters without a gradient are
// skipped; returns the total norm as a 0-d tensor on the first gradient's
// device (0 when there is none). The work stays on the device: no sync.
// With error_if_nonfinite, a NaN or infinite norm is an error (it syncs).
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0, bool error_if_nonfinite = false);

// Clamps every gradient element to [-clip_value, clip_value], in place.
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace bp::nn::utils
