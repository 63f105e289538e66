// Random inputs of the op cases: values from a domain, shapes, and the
// strided layouts (views of bigger tensors) the device under test is given.
#pragma once

#include <backplane/conformance/op_case.h>

#include <string>
#include <vector>

namespace bp::conformance {

// `n` values of `domain`, exactly representable in `dtype`.
std::vector<double> random_values(Rng& rng, Domain domain, DType dtype, int64_t n);

// A shape of rank in [min_rank, max_rank], every dim in [1, 5], at most
// `max_numel` elements.
std::vector<int64_t> random_shape(Rng& rng, int min_rank, int max_rank, int64_t max_numel = 192);

// One input built twice with the same values: on the device under test in
// the layout asked for, and on the reference device as a dense tensor.
struct BuiltInput {
  Tensor dut, ref;
  std::string description;  // "float32 [2, 3] strides [1, 4] offset 2"
};
BuiltInput build_input(const Context& ctx, Rng& rng, const InputSpec& spec, DType case_dtype,
                       Layout layout);

}  // namespace bp::conformance
