// Argument checks shared by the kernel families.
#include "cpu_onednn.h"

namespace bp::cpu {

bp_dtype check_elementwise(const KernelCall& c, const char* op, int num_inputs, int dispatch_input,
                           bool bool_out, int skip_dtype) {
  BP_CHECK(c.num_inputs() == num_inputs && c.num_outputs() == 1, op,
           "expected " << num_inputs << " input(s) and 1 output, got " << c.num_inputs() << " and "
                       << c.num_outputs());
  const TensorRef out = c.output(0);
  const bp_dtype in_dtype = c.input(dispatch_input).dtype();
  const bp_dtype out_dtype = bool_out ? BP_DTYPE_BOOL : in_dtype;
  BP_CHECK(out.dtype() == out_dtype, op,
           "the output must be " << bp::sdk::dtype_name(out_dtype) << ", got "
                                 << bp::sdk::dtype_name(out.dtype()));
  for (int i = 0; i < num_inputs; ++i) {
    const TensorRef in = c.input(i);
    BP_CHECK(i == skip_dtype || in.dtype() == in_dtype, op,
             "input " << i << " is " << bp::sdk::dtype_name(in.dtype()) << ", expected "
                      << bp::sdk::dtype_name(in_dtype));
    BP_CHECK(in.ndim() == out.ndim(), op,
             "input " << i << " has rank " << in.ndim() << ", the output " << out.ndim());
    for (int d = 0; d < out.ndim(); ++d)
      BP_CHECK(in.size(d) == out.size(d), op,
               "input " << i << " has size " << in.size(d) << " in dim " << d << ", the output "
                        << out.size(d));
  }
  return in_dtype;
}

int dim_attr(const KernelCall& c, const char* op, int slot, int ndim) {
  BP_CHECK(c.attrs().num_ints > slot, op, "the dim (ints[" << slot << "]) is missing");
  const int64_t dim = c.attrs().ints[slot];
  const int64_t rank = ndim > 0 ? ndim : 1;
  BP_CHECK(dim >= -rank && dim < rank, op,
           "dim " << dim << " is out of range for a tensor of rank " << ndim);
  return static_cast<int>(dim < 0 ? dim + rank : dim);
}

}  // namespace bp::cpu
