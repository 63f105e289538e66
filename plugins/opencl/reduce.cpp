// Reductions (sum, prod, max, min over the dims where the output has size
// 1; argmax, argmin over one dim) and softmax / log_softmax along a dim:
// kernels/reduce.cl, one work-group per output element (per row for
// softmax), the group's work-items splitting the reduced elements.
#include <algorithm>
#include <string>

#include "opencl_backend.h"
#include "registration.h"

namespace bp::opencl {

namespace {

bool floating(bp_dtype d) {
  return d == BP_DTYPE_FLOAT16 || d == BP_DTYPE_BFLOAT16 || d == BP_DTYPE_FLOAT32 ||
         d == BP_DTYPE_FLOAT64;
}

// The accumulator of max/min/arg*/softmax: float for the 16-bit floats.
bp_dtype compute_of(bp_dtype d) {
  return d == BP_DTYPE_FLOAT16 || d == BP_DTYPE_BFLOAT16 ? BP_DTYPE_FLOAT32 : d;
}

std::size_t group_size(int32_t index, int64_t reduced) {
  std::size_t l = 1;
  const std::size_t cap = default_local(index);
  while (l < cap && static_cast<int64_t>(l) < reduced) l <<= 1;
  return l;
}

// How many slices a reduction of `reduced` elements into `outputs` outputs
// is split into (1: one work-group per output is enough): a few thousand
// work-groups in all, each slice at least 16K elements.
int64_t split(int64_t outputs, int64_t reduced) {
  constexpr int64_t kSlice = int64_t{1} << 14, kGroups = 2048;
  if (outputs >= kGroups / 8 || reduced < 2 * kSlice) return 1;
  return std::max<int64_t>(1, std::min({reduced / kSlice, kGroups / outputs, int64_t{1024}}));
}

// The two passes of REDUCE_PARTS (kernels/reduce.cl), the partials in a
// temporary buffer released when its commands are done.
void run_in_parts(const KernelCall& c, Stream& s, const ProgramSpec& spec, const char* name,
                  const TensorRef& out, const TensorRef& in, const Geo& outer, const Geo& inner,
                  int64_t chunks) {
  cl_int err = CL_SUCCESS;
  const std::size_t groups = static_cast<std::size_t>(outer.n * chunks);
  cl_mem part =
      clCreateBuffer(device(c.device()).context, CL_MEM_READ_WRITE, groups * 8, nullptr, &err);
  BP_CL_CHECK(err);
  struct Release {
    cl_mem m;
    ~Release() { clReleaseMemObject(m); }
  } release{part};
  const std::string base = name;
  const cl_long n_chunks = chunks;
  cl_kernel k1 = kernel(c.device(), spec, (base + "_part").c_str());
  Args(k1).mem(part).mem(in.raw().data) << outer << inner << n_chunks;
  const std::size_t l = fit_local(k1, c.device(), default_local(c.device()));
  launch(s, k1, groups * l, l);
  cl_kernel k2 = kernel(c.device(), spec, (base + "_final").c_str());
  Args(k2).mem(out.raw().data).mem(part) << outer << n_chunks;
  launch(s, k2, static_cast<std::size_t>(outer.n));
}

// Walks for a reduction of `in` into `out` (same rank): outer over out's
// shape (operands out, in), inner over the dims of in that `reduced` marks
// (operand in, or out and in when `inner_has_out`: softmax writes a row).
// `splittable`: a sum, product, max or min, which may run in two passes.
void run(const KernelCall& c, const ProgramSpec& spec, const char* name, const TensorRef& out,
         const TensorRef& in, const std::vector<bool>& reduced, bool inner_has_out,
         bool splittable) {
  Stream& s = resolve(c.device(), c.stream());
  const int nd = in.ndim();
  std::vector<int64_t> outer_shape(static_cast<std::size_t>(nd)),
      inner_shape(static_cast<std::size_t>(nd));
  for (int d = 0; d < nd; ++d) {
    const bool r = reduced[static_cast<std::size_t>(d)];
    outer_shape[static_cast<std::size_t>(d)] = r ? 1 : in.size(d);
    inner_shape[static_cast<std::size_t>(d)] = r ? in.size(d) : 1;
  }
  const Geo outer = plain(nd, outer_shape.data(), {out.strides(), in.strides()},
                          {esize(out), esize(in)}, {offset(out), offset(in)});
  const Geo inner = inner_has_out ? plain(nd, inner_shape.data(), {out.strides(), in.strides()},
                                          {esize(out), esize(in)}, {0, 0})
                                  : plain(nd, inner_shape.data(), {in.strides()}, {esize(in)}, {0});
  if (outer.n == 0) return;
  const int64_t chunks = splittable ? split(outer.n, inner.n) : 1;
  if (chunks > 1) {
    run_in_parts(c, s, spec, name, out, in, outer, inner, chunks);
    return;
  }
  cl_kernel k = kernel(c.device(), spec, name);
  Args(k).mem(out.raw().data).mem(in.raw().data) << outer << inner << s.errors;
  const std::size_t l = fit_local(k, c.device(), group_size(c.device(), inner.n));
  launch(s, k, static_cast<std::size_t>(outer.n) * l, l);
}

void reduce(const KernelCall& c) {
  OpScope scope(bp::sdk::op_name(c.op()));
  const bp_dtype t = c.dtype();
  check_dtype(c.device(), t);
  const TensorRef in = c.input(0), out = c.output(0);
  BP_SDK_REQUIRE(in.ndim() == out.ndim(),
                 "the output has " << out.ndim() << " dims where the input has " << in.ndim());
  std::vector<bool> reduced(static_cast<std::size_t>(in.ndim()));
  for (int d = 0; d < in.ndim(); ++d)
    reduced[static_cast<std::size_t>(d)] = out.size(d) != in.size(d);
  const bool widen = c.op() == BP_OP_SUM || c.op() == BP_OP_PROD;
  ProgramSpec spec;
  if (widen) {
    const bp_dtype acc = floating(t)
                             ? (device(c.device()).fp64 ? BP_DTYPE_FLOAT64 : BP_DTYPE_FLOAT32)
                             : BP_DTYPE_INT64;
    spec = ProgramSpec{"sum", {{"T", t}, {"O", out.dtype()}, {"A", acc}}, {}};
  } else {
    spec = ProgramSpec{"minmax", {{"T", t}, {"O", t}, {"A", compute_of(t)}}, {}};
  }
  const char* name = c.op() == BP_OP_SUM    ? "sum"
                     : c.op() == BP_OP_PROD ? "prod"
                     : c.op() == BP_OP_MAX  ? "max_"
                                            : "min_";
  run(c, spec, name, out, in, reduced, false, true);
}

// argmax / argmin (the output keeps the dim, of size 1) and softmax /
// log_softmax (the output has the input's shape) along the dim ints[0].
void along_dim(const KernelCall& c) {
  OpScope scope(bp::sdk::op_name(c.op()));
  const bp_dtype t = c.dtype();
  check_dtype(c.device(), t);
  const TensorRef in = c.input(0), out = c.output(0);
  std::vector<bool> reduced(static_cast<std::size_t>(in.ndim()));
  if (in.ndim() > 0) reduced[static_cast<std::size_t>(dim_attr(c, in.ndim()))] = true;
  const ProgramSpec spec{"minmax", {{"T", t}, {"O", t}, {"A", compute_of(t)}}, {}};
  const bool softmax = c.op() == BP_OP_SOFTMAX || c.op() == BP_OP_LOG_SOFTMAX;
  const char* name = c.op() == BP_OP_ARGMAX    ? "argmax"
                     : c.op() == BP_OP_ARGMIN  ? "argmin"
                     : c.op() == BP_OP_SOFTMAX ? "softmax"
                                               : "log_softmax";
  run(c, spec, name, out, in, reduced, softmax, false);
}

}  // namespace

void register_reduce_kernels(Registrar& r) {
  for (bp_op op : {BP_OP_SUM, BP_OP_PROD, BP_OP_MAX, BP_OP_MIN}) add_kernel<reduce>(r, op, kAll);
  add_kernel<along_dim>(r, BP_OP_ARGMAX, kAll);
  add_kernel<along_dim>(r, BP_OP_ARGMIN, kAll);
  add_kernel<along_dim>(r, BP_OP_SOFTMAX, kFloating);
  add_kernel<along_dim>(r, BP_OP_LOG_SOFTMAX, kFloating);
}

}  // namespace bp::opencl
