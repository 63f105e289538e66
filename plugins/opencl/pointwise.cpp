// Fill, arithmetic, comparisons, logical ops, where, clamp, pow, the
// floating unary functions and random numbers: kernels/pointwise.cl and
// kernels/random.cl, one program per dispatch dtype, one work-item per
// output element over a coalesced strided walk (launch.cpp).
#include "opencl_backend.h"
#include "registration.h"

namespace bp::opencl {

namespace {

struct PointwiseOp {
  bp_op op;
  const char* kernel;
  int inputs;
  const char* scalar_kernel = nullptr;  // the one-input form (BP_KERNEL_SCALAR_OPERAND)
};

constexpr PointwiseOp kOps[] = {
    {BP_OP_FILL, "fill", 0},
    {BP_OP_ADD, "add", 2, "add_s"},
    {BP_OP_SUB, "sub", 2, "sub_s"},
    {BP_OP_MUL, "mul", 2, "mul_s"},
    {BP_OP_DIV, "div_", 2, "div_s"},
    {BP_OP_RELU, "relu", 1},
    {BP_OP_NEG, "neg", 1},
    {BP_OP_ABS, "abs_", 1},
    {BP_OP_EXP, "exp_", 1},
    {BP_OP_LOG, "log_", 1},
    {BP_OP_SQRT, "sqrt_", 1},
    {BP_OP_SIGMOID, "sigmoid", 1},
    {BP_OP_TANH, "tanh_", 1},
    {BP_OP_CLAMP, "clamp_", 1},
    {BP_OP_LOGICAL_NOT, "logical_not", 1},
    {BP_OP_MAXIMUM, "maximum", 2},
    {BP_OP_MINIMUM, "minimum", 2},
    {BP_OP_POW, "pow_", 2},
    {BP_OP_EQ, "eq", 2},
    {BP_OP_NE, "ne", 2},
    {BP_OP_LT, "lt", 2},
    {BP_OP_LE, "le", 2},
    {BP_OP_GT, "gt", 2},
    {BP_OP_GE, "ge", 2},
    {BP_OP_LOGICAL_AND, "logical_and", 2},
    {BP_OP_LOGICAL_OR, "logical_or", 2},
    {BP_OP_WHERE, "where_", 3},
    {BP_OP_ERF, "erf_", 1},
};

// The 16-bit floats compute in float32 here: their scalar operand is first
// rounded to the dtype, as FILL's store would round it into a 0-d tensor.
bp_scalar rounded_to(bp_scalar s, bp_dtype t) {
  if (t != BP_DTYPE_FLOAT16 && t != BP_DTYPE_BFLOAT16) return s;
  const float f = bp::sdk::scalar_as<float>(s);
  s.value.f = t == BP_DTYPE_FLOAT16 ? float(bp::sdk::Half(f)) : float(bp::sdk::BFloat16(f));
  s.dtype = BP_DTYPE_FLOAT64;
  return s;
}

const PointwiseOp& find(bp_op op) {
  for (const PointwiseOp& p : kOps)
    if (p.op == op) return p;
  BP_SDK_UNSUPPORTED("no pointwise kernel for op " << static_cast<int>(op));
}

void pointwise(const KernelCall& c) {
  OpScope scope(bp::sdk::op_name(c.op()));
  const PointwiseOp& p = find(c.op());
  const bp_dtype t = c.dtype();
  check_dtype(c.device(), t);
  const bp_attrs& a = c.attrs();
  // The scalar form: one input fewer, the second operand in scalars[1].
  const bool scalar_form = p.scalar_kernel && c.num_inputs() == p.inputs - 1;
  const int inputs = scalar_form ? p.inputs - 1 : p.inputs;
  BP_SDK_REQUIRE(
      c.num_outputs() == 1 && c.num_inputs() == inputs,
      "expected " << p.inputs << (p.scalar_kernel ? " inputs (or 1 and a scalar)" : " inputs")
                  << " and 1 output, got " << c.num_inputs() << " and " << c.num_outputs());
  BP_SDK_REQUIRE(!scalar_form || a.num_scalars >= 2,
                 "the scalar form takes the operand as scalars[1]");
  std::vector<TensorRef> ops{c.output(0)};
  for (int i = 0; i < inputs; ++i) ops.push_back(c.input(i));
  if (ops[0].numel() == 0) return;
  Stream& s = resolve(c.device(), c.stream());
  const Geo g = coalesced(ops);
  const ProgramSpec spec = variant({"pointwise", {{"T", t}, {"B", BP_DTYPE_BOOL}}, {}}, g, ops);
  cl_kernel k = kernel(c.device(), spec, scalar_form ? p.scalar_kernel : p.kernel);
  cl_long s0 = 0, s1 = 0, iarg = 0;
  if (scalar_form) s1 = scalar_bits(rounded_to(a.scalars[1], t), t);
  if (c.op() == BP_OP_ADD || c.op() == BP_OP_SUB) {
    bp_scalar one{};
    one.dtype = BP_DTYPE_INT64;
    one.value.i = 1;
    s0 = scalar_bits(a.num_scalars > 0 ? a.scalars[0] : one, t);
  } else if (c.op() == BP_OP_FILL) {
    BP_SDK_REQUIRE(a.num_scalars >= 1, "fill takes the value as scalars[0]");
    s0 = scalar_bits(a.scalars[0], t);
  } else if (c.op() == BP_OP_CLAMP) {
    iarg = a.num_ints > 0 ? a.ints[0] : 0;
    if (iarg & 1) s0 = scalar_bits(a.scalars[0], t);
    if (iarg & 2) s1 = scalar_bits(a.scalars[1], t);
  } else if (c.op() == BP_OP_POW) {
    iarg = BP_OP_POW;
  }
  const void* out = ops[0].raw().data;
  auto in = [&](int i) { return i < inputs ? c.input(i).raw().data : out; };
  Args(k).mem(out).mem(in(0)).mem(in(1)).mem(in(2)) << g << s0 << s1 << iarg << s.errors;
  launch(s, k, static_cast<std::size_t>(g.n));
}

void random(const KernelCall& c) {
  OpScope scope("random");
  const bp_dtype t = c.dtype();
  check_dtype(c.device(), t);
  const TensorRef out = c.output(0);
  if (out.numel() == 0) return;
  const bp_attrs& a = c.attrs();
  BP_SDK_REQUIRE(a.num_ints >= 3, "random takes the distribution, seed and offset as ints[0..2]");
  BP_SDK_REQUIRE(a.ints[0] == 0 || a.ints[0] == 1,
                 "distribution " << a.ints[0] << " is neither 0 (uniform) nor 1 (normal)");
  if (a.ints[0] == 1 && !device(c.device()).fp64)
    BP_SDK_UNSUPPORTED("normal numbers are defined through float64, which "
                       << device(c.device()).name << " lacks (cl_khr_fp64)");
  Stream& s = resolve(c.device(), c.stream());
  cl_kernel k = kernel(c.device(), ProgramSpec{"random", {{"T", t}}, {}}, "random");
  const Geo g = plain(out.ndim(), out.shape(), {out.strides()},
                      {static_cast<int64_t>(bp::sdk::dtype_size(t))},
                      {static_cast<int64_t>(out.raw().byte_offset)});
  const cl_long seed = a.ints[1], offset = a.ints[2], dist = a.ints[0];
  const void* o = out.raw().data;
  Args(k).mem(o).mem(o).mem(o).mem(o) << g << seed << offset << dist << s.errors;
  launch(s, k, static_cast<std::size_t>(g.n));
}

}  // namespace

void register_pointwise_kernels(Registrar& r) {
  for (const PointwiseOp& p : kOps) {
    DtypeSet set = kAll;
    switch (p.op) {
      case BP_OP_ADD:
      case BP_OP_SUB:
      case BP_OP_RELU:
      case BP_OP_NEG:
      case BP_OP_ABS:
      case BP_OP_CLAMP:
      case BP_OP_POW:
        set = kNumeric;
        break;
      case BP_OP_DIV:
      case BP_OP_EXP:
      case BP_OP_LOG:
      case BP_OP_SQRT:
      case BP_OP_SIGMOID:
      case BP_OP_TANH:
      case BP_OP_ERF:
        set = kFloating;
        break;
      default:
        break;
    }
    add_kernel<pointwise>(r, p.op, set, nullptr, p.scalar_kernel ? BP_KERNEL_SCALAR_OPERAND : 0u);
  }
  add_kernel<random>(r, BP_OP_RANDOM, kFloating);
}

}  // namespace bp::opencl
