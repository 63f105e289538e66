// The fuzzer's shared parts: the case (what the generator draws, the
// shrinker simplifies and the executors run), the host model of layouts and
// storages, resolved views and ops, and the transcript that becomes a
// reproducer.
//
// A case stores parameters, not finished arguments: a view step keeps a dim
// selector, a start, a seed, and is resolved against the shape it meets when
// the case runs (dims taken modulo the rank, starts clamped, inapplicable
// steps skipped). So the shrinker may drop a step or a dim anywhere and the
// rest of the case still resolves to legal calls.
#pragma once

#include <backplane/conformance/fuzz.h>
#include <backplane/nn_ops.h>
#include <backplane/sparse/coo.h>

#include <array>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "random_inputs.h"

namespace bp::conformance::fuzz {

// --- the case ----------------------------------------------------------------

enum class CaseKind : uint8_t { View, Op, Inplace, Grad };
std::string_view to_string(CaseKind kind);

enum class ValueKind : uint8_t {
  Random,   // drawn from the domain
  Iota,     // 0, 1, 2, ... (printed as arange)
  Special,  // half of them 0, -0, NaN, ±inf, ±1, huge or tiny (floats only)
  Zeros,    // a third of them exactly 0 (grad leaves: prod's and pow's special point)
};

struct ValuesSpec {
  DType dtype = DType::Float32;
  Domain domain = Domain::Any;
  ValueKind kind = ValueKind::Random;
  uint64_t seed = 0;
};

struct BaseSpec {
  std::vector<int64_t> shape;
  ValuesSpec values;
};

enum class ViewKind : uint8_t {
  Narrow,
  Slice,
  Select,
  Transpose,
  T,
  Permute,
  Expand,
  Unfold,
  AsStrided,
  Squeeze,
  SqueezeDim,
  Unsqueeze,
  Diagonal,
  View,
  Reshape,
  Flatten,
};
inline constexpr int kNumViewKinds = 16;
std::string_view view_name(ViewKind kind);

// p[] and seed mean what resolve_view() makes of them for each kind. A probe
// step is given arguments the contract rejects (a rank over 8, a size
// overflow, an index out of range, ...): it must raise.
struct ViewStep {
  ViewKind kind = ViewKind::Narrow;
  std::array<int64_t, 3> p{};
  uint64_t seed = 0;
  bool probe = false;
};

enum class Source : uint8_t {
  Fresh,   // a new tensor, plain or a strided view of a bigger one
  Self,    // the primary operand itself (x.add_(x))
  Alias,   // as_strided over the primary's memory: overlapping it or not
  Scalar,  // a number
};

struct Operand {
  Source source = Source::Fresh;
  uint64_t shape_seed = 0;   // its shape, from the primary's (broadcastable)
  ValuesSpec values;         // Fresh: the values; Scalar: the category and value
  uint64_t layout_seed = 0;  // Fresh: the strided layout; Alias: strides and offset
  bool strided = false;      // Fresh: a view of a bigger tensor
  bool leaf = false;         // grad: a leaf that requires grad (else a constant)
};

enum class OpKind : uint8_t {
  // unary
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Sigmoid,
  Tanh,
  Relu,
  LogicalNot,
  Clamp,
  Silu,  // a composite op a backend may override (DV-6)
  Erf,
  // binary: a tensor or a scalar other
  Add,
  Sub,
  Mul,
  Div,
  Maximum,
  Minimum,
  Pow,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  LogicalAnd,
  LogicalOr,
  Where,
  // along dims
  Sum,
  Mean,
  Prod,
  Max,
  Min,
  Argmax,
  Argmin,
  MaxDim,
  MinDim,
  Softmax,
  LogSoftmax,
  Sort,     // sort(dim, descending = keepdim): values and positions
  Argsort,  // argsort(dim, descending = keepdim)
  Cumsum,
  Matmul,
  SparseMm,  // mm(to_sparse(primary), other): a 2-D primary, the sparse COO path (SP-1)
  // CNN layers on an NCHW primary (conv2d's weight is the other operand)
  Conv2d,
  ConvTranspose2d,  // output_padding stride - 1
  MaxPool2d,
  AvgPool2d,
  BatchNorm,  // training mode, eps 1 (see fuzz_ops.cpp), on a primary of rank 2 or more
  // Two optimiser steps on a copy of a floating primary, the other operand
  // (its shape and dtype) the gradient: the backend's fused update kernels
  // (core::sgd_step, core::adam_step) where it has them, else the composite.
  SgdStep,
  AdamStep,
  // in place
  AddI,
  SubI,
  MulI,
  DivI,
  FillI,
  ZeroI,
  ClampI,
  ReluI,
  NegI,
  AbsI,
  ExpI,
  LogI,
  SqrtI,
  SigmoidI,
  TanhI,
  PowI,
  CopyI,
  // reads of a view (view cases)
  Contiguous,
  Clone,
  CloneContiguous,
  ToDtype,
  // grad cases: an op with an integer or bool result must not require grad
  IntResult,
};
inline constexpr int kNumOpKinds = static_cast<int>(OpKind::IntResult) + 1;

// The ops with a second output (indices).
inline constexpr bool two_outputs(OpKind k) {
  return k == OpKind::MaxDim || k == OpKind::MinDim || k == OpKind::Sort;
}

enum class OpClass : uint8_t { Unary, Binary, Where, Reduce, Matmul, Nn, Inplace, Read, IntResult };

struct OpInfo {
  OpKind kind;
  const char* name;  // as printed: "add", "add_", "max(dim)"
  OpClass cls;
  uint8_t dtypes;  // bit per DType value: the dtypes the op computes in
  bool grad;       // differentiable: may appear in grad chains
};
const OpInfo& op_info(OpKind kind);
inline constexpr uint8_t dtype_bit(DType d) {
  return static_cast<uint8_t>(1u << static_cast<int>(d));
}

struct OpStep {
  OpKind kind = OpKind::Neg;
  std::array<int64_t, 3> p{};
  uint64_t seed = 0;
  std::vector<Operand> operands;  // beyond the primary
};

// Views applied to the segment's input, then an op (op cases: the input is
// the previous segment's result; in-place cases: always the base).
struct Segment {
  std::vector<ViewStep> views;
  std::optional<OpStep> op;
};

struct Case {
  uint64_t seed = 0, index = 0;
  CaseKind kind = CaseKind::View;
  BaseSpec base;
  std::vector<Segment> segments;
  int variant = 0;  // grad: 0 gradcheck, 1 the NaN rule of max/min
};

// What the generator may not use: kind names, op and view names, features.
struct GenConfig {
  std::set<std::string, std::less<>> skip;
  bool skipped(std::string_view name) const { return skip.count(name) > 0; }
};

// Case `index` of `seed`: a function of those two and `config` only.
Case generate(uint64_t seed, uint64_t index, const GenConfig& config);

// The element values of a spec, row-major.
std::vector<double> make_values(const ValuesSpec& spec, int64_t n);
// A small deterministic stream for resolving parameters (splitmix64).
uint64_t mix(uint64_t a, uint64_t b);

// --- the host model ------------------------------------------------------------

struct Layout {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  int64_t numel() const;
};
Layout contiguous_layout(const std::vector<int64_t>& sizes);
std::vector<int64_t> layout_positions(const Layout& l);
// Two elements share a memory location.
bool self_overlapping(const Layout& l);
// The same elements in the same order (x.add_(x)).
bool same_elements(const Layout& a, const Layout& b);
// Some element of `b` is an element of `a`, but they are not the same elements.
bool partially_overlaps(const Layout& a, const Layout& b);
bool non_overlapping_and_dense(const Layout& l);
bool contiguous(const Layout& l);
// numpy broadcasting; nullopt when the shapes do not broadcast.
std::optional<std::vector<int64_t>> broadcast(const std::vector<int64_t>& a,
                                              const std::vector<int64_t>& b);
// PyTorch's computeStride: strides viewing `in` as `shape`, or nullopt.
std::optional<std::vector<int64_t>> view_strides_of(const Layout& in,
                                                    const std::vector<int64_t>& shape);
// `values` (row-major, shape `from`) broadcast to `to`.
std::vector<double> broadcast_values(const std::vector<double>& values,
                                     const std::vector<int64_t>& from,
                                     const std::vector<int64_t>& to);
// The value a cast to `dtype` gives (as copy_ and to() do).
double cast_value(double v, DType dtype);
// "[2, 3]", "{2, 3}" (C++), "f32".
std::string shape_str(const std::vector<int64_t>& v);
std::string braces(const std::vector<int64_t>& v);
std::string dtype_cpp(DType d);   // the reproducer's options variable: "f32"
std::string dtype_enum(DType d);  // "bp::DType::Float32"
std::string scalar_cpp(const Scalar& s);
// C++ for a fresh tensor holding `values` (row-major) with `shape`: arange
// when `iota`, else from_vector with every value spelled out.
std::string values_cpp(const std::vector<double>& values, const std::vector<int64_t>& shape,
                       DType dtype, bool iota, bool requires_grad);

// --- views -------------------------------------------------------------------

struct ResolvedView {
  ViewKind kind = ViewKind::Narrow;
  bool skip = false;    // not applicable at this shape
  std::string error;    // the contract says it must raise: why
  bool copies = false;  // a reshape that cannot be a view
  std::vector<int64_t> a, b;
  int64_t i0 = 0, i1 = 0, i2 = 0;
  std::optional<int64_t> start, stop;
  Layout out;  // in the input's storage, or contiguous in a new one
};
// `capacity`: elements in the input's storage (as_strided stays inside it).
ResolvedView resolve_view(const ViewStep& step, const Layout& in, int64_t capacity);
Tensor apply_view(const ResolvedView& v, const Tensor& t);
std::string view_cpp(const ResolvedView& v);  // ".transpose(0, 2)"

// --- ops -----------------------------------------------------------------------

// An operand resolved against the primary's shape.
struct OperandPlan {
  Source source = Source::Fresh;
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;  // as the op sees it
  ValuesSpec values;
  bool leaf = false;
  // Fresh: allocated as `alloc`, then permuted by `perm`, sliced per dim
  // (front, step), expanded to `shape` when pre_expand differs.
  std::vector<int64_t> alloc, perm, front, step, pre_expand;
  bool strided = false;
  Layout alias;  // Alias: the layout in the primary's storage
  Scalar scalar;
};

struct ResolvedOp {
  OpKind kind = OpKind::Neg;
  const OpInfo* info = nullptr;
  bool skip = false;
  std::string error;  // the contract says it must raise: why
  std::vector<int64_t> dims;
  int64_t dim = 0;
  bool keepdim = false, all = false, swap = false, scalar_other = false, has_alpha = false;
  bool shift = false;  // grad: log/sqrt of x*x + 0.5, kept off their singularity
  std::optional<Scalar> lo, hi;
  Scalar scalar, alpha;
  DType to_dtype = DType::Float32;
  bool with_dtype = false;  // softmax / log_softmax(x, dim, to_dtype)
  std::vector<OperandPlan> operands;
  int64_t terms = 1;         // accumulated terms per output element
  bool accumulates = false;  // tolerance grows with the inputs' magnitude
};

struct PrimaryInfo {
  Layout layout;
  DType dtype = DType::Float32;
  int64_t capacity = 0;
  bool grad = false;  // a grad chain: only differentiable, smooth-enough choices
};
ResolvedOp resolve_op(const OpStep& step, const PrimaryInfo& primary);
// A shape that broadcasts with `p`: the same, fewer or size-1 dims, 0-d, or
// (when `grow`) bigger where p has size 1 or a new leading dim.
std::vector<int64_t> related_shape(const std::vector<int64_t>& p, uint64_t seed, bool grow);
// A shape that `p` cannot take in place: it broadcasts to a bigger shape, or
// does not broadcast at all (IP-4).
std::vector<int64_t> grown_shape(const std::vector<int64_t>& p, uint64_t seed);
// The operand `spec` with `shape` (Self: the primary's), laid out as it says.
OperandPlan plan_operand(const Operand& spec, std::vector<int64_t> shape, const PrimaryInfo& p);
// Runs the op; in-place kinds modify `primary` and return it.
std::vector<Tensor> run_op(const ResolvedOp& op, Tensor& primary,
                           const std::vector<Tensor>& others);
// "auto t5 = bp::add(t3, t4, 2);" (out empty for in-place ops and reads of none).
std::string op_cpp(const ResolvedOp& op, const std::string& primary,
                   const std::vector<std::string>& others, const std::vector<std::string>& outs);
// The result dtype category of an op on these dtypes (IP-5), as the contract says.
int result_category(const ResolvedOp& op, DType self, const std::vector<OperandPlan>& others);

// --- running -------------------------------------------------------------------

// The statements of a case as C++, as it runs.
class Transcript {
 public:
  std::string fresh() {
    std::string name = "t";
    return name += std::to_string(next_++);
  }
  void add(const std::string& line);
  const std::vector<std::string>& lines() const { return lines_; }
  std::ostream* echo = nullptr;  // verbose replay: each statement before it runs

 private:
  std::vector<std::string> lines_;
  int next_ = 0;
};

enum class Verdict { Pass, Fail, Unsupported };

struct Outcome {
  Verdict verdict = Verdict::Pass;
  std::string kind;     // the failed check: "inplace-values", "missing-error", ...
  std::string op;       // the op or view it failed on
  std::string message;  // expected and actual
  std::vector<std::string> transcript;
  std::string signature() const { return kind + " " + op; }
};

// Thrown inside an executor by a failed check.
struct Failure {
  std::string kind, op, message;
};
// Thrown when the device under test or the reference lacks a kernel.
struct Unsupported {
  std::string message;
};

struct Env {
  Device device, reference;
  std::vector<bp_tolerance> tolerances;  // both backends' declared ones
  std::ostream* echo = nullptr;
  bool poison = false;  // Options::poison
};

Outcome run_case(const Case& c, const Env& env);
// Per kind (fuzz_oracle.cpp, fuzz_grad.cpp); they throw Failure or Unsupported.
void run_view_case(const Case& c, const Env& env, Transcript& tr);
void run_op_case(const Case& c, const Env& env, Transcript& tr);
void run_inplace_case(const Case& c, const Env& env, Transcript& tr);
void run_grad_case(const Case& c, const Env& env, Transcript& tr);

// The base tensor on `device`, with its C++ line.
Tensor build_base(const BaseSpec& base, Device device, bool requires_grad, Transcript& tr,
                  const std::string& name);
// A host-built operand: the device tensor, its C++ lines, and its logical
// values (row-major, of plan.shape).
struct BuiltOperand {
  Tensor t;
  std::string name;
  std::vector<double> values;
  Tensor root;  // the fresh tensor a strided operand is a view of (a leaf in grad cases)
  std::string root_name;
};
// Alias operands are views of `owner` (named `owner_name`, holding `owner_values`).
BuiltOperand build_operand(const OperandPlan& plan, Device device, Transcript& tr,
                           const Tensor* owner = nullptr, const std::string& owner_name = {},
                           const std::vector<double>* owner_values = nullptr);
// A Fresh operand's views of its root, and their C++ (".permute({1, 0}).slice(...)").
Tensor operand_view(const OperandPlan& plan, const Tensor& root);
std::string operand_view_cpp(const OperandPlan& plan);

// Comparisons (fuzz_oracle.cpp).
struct Tolerance {
  double rtol = 0, atol = 0;
};
Tolerance tolerance_for(const Env& env, OpKind op, DType dtype);
// Empty when equal within tolerance: |got - want| <= scale*(atol + rtol*max(|want|, magnitude)).
std::string compare_values(const std::vector<double>& got, const std::vector<double>& want,
                           const std::vector<int64_t>& shape, DType dtype, Tolerance tol,
                           double scale = 1, double magnitude = 0);
std::string values_str(const std::vector<double>& v, std::size_t limit = 12);

// Calls `f`; a NotImplementedError becomes Unsupported, any other exception a
// Failure of kind `kind` on `op`.
template <class F>
auto guarded(const char* kind, const std::string& op, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const NotImplementedError& e) {
    throw Unsupported{e.what()};
  } catch (const Failure&) {
    throw;
  } catch (const Unsupported&) {
    throw;
  } catch (const std::exception& e) {
    throw Failure{kind, op, e.what()};
  }
}

// Runs `f`, which the contract says must raise a bp::Error (`why`).
template <class F>
void expect_error(const std::string& op, const std::string& why, F&& f) {
  try {
    f();
  } catch (const NotImplementedError& e) {
    throw Unsupported{e.what()};
  } catch (const Error&) {
    return;
  } catch (const std::exception& e) {
    throw Failure{"wrong-error", op,
                  std::string("raised a non-bp::Error exception: ") + e.what() + "; " + why};
  }
  throw Failure{"missing-error", op, "did not raise; the contract says it must: " + why};
}

// --- shrinking and printing (fuzz_shrink.cpp) ------------------------------------

struct Shrunk {
  Case c;
  Outcome outcome;
  int accepted = 0, tried = 0;
};
Shrunk shrink(const Case& c, const Outcome& failure, const Env& env, double seconds);
// The reproducer: the replay command, the C++ snippet and the failure.
void print_reproducer(std::ostream& os, const Case& original, const Shrunk& s,
                      const std::string& replay_command, int number);
// The case's op names, and view names when `views`, sorted: distinct
// failures differ in them.
std::string op_set(const Case& c, bool views = true);

}  // namespace bp::conformance::fuzz
