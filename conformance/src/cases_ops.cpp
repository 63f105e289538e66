// The differential op cases (DV-2) of the ops users call most: arithmetic,
// reductions, matmul, copies and fills. One entry per op; add_op_case()
// turns it into a case per dtype and layout (op_case.h). The other ops are
// in cases_ops_more.cpp.
#include <backplane/conformance/op_case.h>
#include <backplane/debug.h>

#include <algorithm>

namespace bp::conformance {

namespace {

using namespace samples;

const std::vector<DType>& kAll = kOpDtypesAll;
const std::vector<DType>& kNumeric = kOpDtypesNumeric;
const std::vector<DType>& kFloat = kOpDtypesFloat;

// A value every dtype holds exactly, of the dtype's category.
Scalar fill_value(DType d) {
  if (d == DType::Bool) return Scalar(true);
  if (is_integral(d)) return Scalar(-7);
  return Scalar(2.5);
}

// The dtype copy_ converts from in the case of dtype `d` and `layout`: the
// next dtypes after `d` (one per layout), so that it follows from the case's
// name and the layouts of one dtype convert from four others.
DType source_dtype(DType d, Layout layout) {
  const auto at = std::find(kAll.begin(), kAll.end(), d) - kAll.begin();
  const auto n = static_cast<std::ptrdiff_t>(kAll.size());
  return kAll[static_cast<std::size_t>((at + 1 + static_cast<std::ptrdiff_t>(layout)) % n)];
}

// Input 1 of another dtype than input 0 (copy_ converts).
samples::Fn converting(samples::Fn inner) {
  return [inner](Rng& rng, Layout layout, DType d) {
    Sample s = inner(rng, layout, d);
    s.inputs[1].dtype = source_dtype(d, layout);
    return s;
  };
}

// Input 0 written in place, alone.
samples::Fn writable(samples::Fn inner) {
  return [inner](Rng& rng, Layout layout, DType d) {
    Sample s = inner(rng, layout, d);
    s.inputs[0].writable = true;
    return s;
  };
}

// A backend whose ADD..DIV kernels take the scalar form (ABI 2.5,
// BP_KERNEL_SCALAR_OPERAND) gets `x op 2` with the scalar as an attribute:
// its kernel runs and no FILL makes a 0-d tensor first. (op.scalar checks
// the values of every form against the reference.)
void scalar_form(const Context& ctx) {
  const Op ops[] = {Op::Add, Op::Sub, Op::Mul, Op::Div};
  const Tensor x = full({3}, 3.0, ctx.options(DType::Float32));
  int taken = 0;
  for (Op op : ops) {
    if (!(KernelRegistry::instance().lookup(op, ctx.device().backend, DType::Float32).flags &
          BP_KERNEL_SCALAR_OPERAND))
      continue;
    ++taken;
    debug::KernelRecording rec;
    const Tensor y = op == Op::Add ? x + 2 : op == Op::Sub ? x - 2 : op == Op::Mul ? x * 2 : x / 2;
    const float want = op == Op::Add ? 5.0f : op == Op::Sub ? 1.0f : op == Op::Mul ? 6.0f : 1.5f;
    const std::vector<debug::ReachedKernel> seen = rec.kernels();
    BP_EXPECT(std::none_of(seen.begin(), seen.end(), [](const auto& k) { return k.op == "fill"; }),
              op_name(op),
              " with a scalar filled a tensor, although its kernel takes the scalar form");
    BP_EXPECT(
        std::any_of(seen.begin(), seen.end(), [&](const auto& k) { return k.op == op_name(op); }),
        op_name(op), "'s kernel was not reached");
    BP_EXPECT(y.to_vector<float>() == std::vector<float>(3, want), op_name(op), " of 3 and 2 gave ",
              y.to_vector<float>()[0], ", not ", want);
  }
  if (taken == 0) BP_SKIP("the backend's add, sub, mul and div kernels take no scalar operand");
}

}  // namespace

// The ops of cases_ops_more.cpp.
void add_more_op_cases(Suite& suite);

void add_op_cases(Suite& suite) {
  add_op_case(
      suite,
      {"add", {Op::Add}, kNumeric, broadcasting({Domain::Any, Domain::Any}), [](const OpArgs& a) {
         return Outputs{add(a[0], a[1]), add(a[0], a[1], 3)};
       }});
  add_op_case(
      suite,
      {"sub", {Op::Sub}, kNumeric, broadcasting({Domain::Any, Domain::Any}), [](const OpArgs& a) {
         return Outputs{sub(a[0], a[1]), sub(a[0], a[1], 2)};
       }});
  add_op_case(
      suite,
      {"mul", {Op::Mul}, kAll, broadcasting({Domain::Any, Domain::Any}), [](const OpArgs& a) {
         return Outputs{mul(a[0], a[1])};
       }});
  // Integer operands are true-divided in the default float dtype.
  add_op_case(suite, {"div",
                      {Op::Div},
                      kNumeric,
                      broadcasting({Domain::Any, Domain::NonZero}),
                      [](const OpArgs& a) { return Outputs{div(a[0], a[1])}; }});
  // A scalar operand: an attribute of the kernel call where the backend's
  // kernel takes one (BP_KERNEL_SCALAR_OPERAND), else a 0-d tensor that
  // broadcasts; the same values either way, out of place, in place and in
  // the gradients (which multiply and divide by the scalar).
  add_op_case(
      suite,
      {"scalar", {Op::Add, Op::Sub, Op::Mul, Op::Div}, kNumeric, unary(), [](const OpArgs& a) {
         const Tensor& x = a[0];
         Outputs out{x + 2, x - 1, x * 3, x / 4, x + 2.5, x * 0.5};
         Tensor y = x.clone();
         y.add_(3).mul_(2).sub_(1);
         out.push_back(y);
         if (!is_floating(x.dtype())) return out;
         Tensor z = x.clone();
         z.div_(2.5);
         out.push_back(z);
         const Tensor leaf = x.detach().requires_grad_();
         Tensor w = leaf.clone();
         w.mul_(1.5).add_(1);
         (((leaf + 2) * 3 - 1) / 4 + w.div(0.5) * w).sum().backward();
         out.push_back(leaf.grad());
         return out;
       }});
  add_op_case(suite, {"relu", {Op::Relu}, kNumeric, unary(), [](const OpArgs& a) {
                        return Outputs{relu(a[0])};
                      }});

  add_op_case(suite, {"sum", {Op::Sum}, kAll, reduce_all(), [](const OpArgs& a) {
                        return Outputs{sum(a[0])};
                      }});
  add_op_case(suite, {"sum.dims",
                      {Op::Sum},
                      kAll,
                      reduce_dims(),
                      [](const OpArgs& a) {
                        IntArrayRef dims(a.sample.dims);
                        return Outputs{sum(a[0], dims, false), sum(a[0], dims, true)};
                      },
                      kLayoutsNoZeroD});

  // Large reductions into few outputs: backends that split the reduced
  // elements between work-groups or blocks (two passes) take that path here.
  add_op_case(
      suite, {"reduce.large",
              {Op::Sum, Op::Max, Op::Min},
              kAll,
              [](Rng&, Layout, DType) {
                Sample s;
                s.inputs.push_back(InputSpec{{2, 40000}});
                s.terms = 80000;
                return s;
              },
              [](const OpArgs& a) {
                const int64_t row[] = {1};
                return Outputs{sum(a[0]), sum(a[0], IntArrayRef(row), false), max(a[0]), min(a[0])};
              },
              {Layout::Contiguous, Layout::Strided},
              {},
              1});
  add_op_case(suite, {"matmul",
                      {Op::Matmul},
                      kFloat,
                      samples::matmul(false),
                      [](const OpArgs& a) { return Outputs{matmul(a[0], a[1])}; },
                      kLayoutsNoZeroD});
  add_op_case(suite, {"matmul.batched",
                      {Op::Matmul},
                      kFloat,
                      samples::matmul(true),
                      [](const OpArgs& a) { return Outputs{matmul(a[0], a[1])}; },
                      kLayoutsNoZeroD});

  add_op_case(suite, {"to", {Op::Copy}, kAll, unary(), [](const OpArgs& a) {
                        Outputs out;
                        for (DType d : kAll) out.push_back(a[0].to(d));
                        return out;
                      }});
  add_op_case(suite, {"copy_", {Op::Copy}, kAll, converting(in_place()), [](const OpArgs& a) {
                        Tensor self = a[0];
                        self.copy_(a[1]);
                        return Outputs{self};
                      }});
  add_op_case(suite, {"contiguous", {Op::Copy}, kAll, unary(), [](const OpArgs& a) {
                        return Outputs{a[0].contiguous(), a[0].clone()};
                      }});
  add_op_case(suite, {"fill_", {Op::Fill}, kAll, writable(unary()), [](const OpArgs& a) {
                        Tensor self = a[0];
                        self.fill_(fill_value(a.dtype));
                        return Outputs{self};
                      }});
  add_op_case(suite, {"add_", {Op::Add}, kNumeric, in_place(), [](const OpArgs& a) {
                        Tensor self = a[0];
                        self.add_(a[1]);
                        return Outputs{self};
                      }});
  add_op_case(suite, {"mul_", {Op::Mul}, kAll, in_place(), [](const OpArgs& a) {
                        Tensor self = a[0];
                        self.mul_(a[1]);
                        return Outputs{self};
                      }});
  suite.add({"scalar.form", {"DV-2"}, "op", scalar_form});
  add_more_op_cases(suite);
}

}  // namespace bp::conformance
