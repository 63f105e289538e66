// Casting copies between any two dtypes (kernels/copy.cl): one program per
// source dtype holding a kernel per destination dtype, over a coalesced
// strided walk of both operands.
#include "opencl_backend.h"
#include "registration.h"

namespace bp::opencl {

namespace {

// Kernel and role name of a destination dtype ("bool" is an OpenCL type).
std::string role_name(bp_dtype d) { return d == BP_DTYPE_BOOL ? "bool_" : bp::sdk::dtype_name(d); }

ProgramSpec copy_spec(int32_t index, bp_dtype src) {
  ProgramSpec spec{"copy", {{"T", src}}, {}};
  const bool fp64 = device(index).fp64;
  for (int i = 0; i < BP_DTYPE_COUNT; ++i) {
    const auto d = static_cast<bp_dtype>(i);
    if (d == BP_DTYPE_FLOAT64 && !fp64) continue;
    spec.roles.emplace_back(role_name(d), d);
    spec.extra += "COPY_TO(" + role_name(d) + ")\n";
  }
  return spec;
}

void copy(const KernelCall& c) {
  OpScope scope("copy");
  BP_SDK_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1,
                 "copy takes one input and one output");
  check_dtype(c.device(), c.input(0).dtype());
  check_dtype(c.device(), c.output(0).dtype());
  enqueue_copy(resolve(c.device(), c.stream()), c.output(0).raw(), c.input(0).raw());
}

}  // namespace

void enqueue_copy(Stream& s, const bp_tensor& dst, const bp_tensor& src) {
  const TensorRef out(dst), in(src);
  if (out.numel() == 0) return;
  const std::string name = "to_" + role_name(out.dtype());
  const Geo g = coalesced({out, in});
  cl_kernel k =
      kernel(s.device, variant(copy_spec(s.device, in.dtype()), g, {out, in}), name.c_str());
  const cl_long zero = 0;
  Args(k).mem(dst.data).mem(src.data).mem(dst.data).mem(dst.data)
      << g << zero << zero << zero << s.errors;
  launch(s, k, static_cast<std::size_t>(g.n));
}

void register_copy_kernels(Registrar& r) {
  // Moves values, computes nothing: not flagged as emulated for any dtype.
  r.add_raw(BP_OP_COPY, dtype_mask(kAll), &bp::sdk::kernel_thunk<copy>, nullptr, nullptr);
}

}  // namespace bp::opencl
