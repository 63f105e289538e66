// The SDK's argument checks (backplane/sdk/checks.hpp), element loops
// (backplane/sdk/loops.hpp) and scalar-operand thunk (plugin.hpp), called directly on hand-made
// descriptors: what each check accepts, what it derives, and the words it refuses a call with.
#include <backplane/dispatcher.h>
#include <gtest/gtest.h>

#include <backplane/sdk/checks.hpp>
#include <backplane/sdk/loops.hpp>
#include <backplane/sdk/nn_checks.hpp>
#include <backplane/sdk/plugin.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

namespace check = bp::sdk::check;
using bp::sdk::InvalidArgument;
using bp::sdk::KernelCall;
using bp::sdk::TensorRef;
using bp::sdk::Unsupported;

// A descriptor with its own shape and strides (contiguous unless given).
struct Desc {
  std::vector<int64_t> shape, strides;
  bp_tensor t{};
  Desc(bp_dtype dt, std::vector<int64_t> s, void* data = nullptr, std::vector<int64_t> st = {})
      : shape(std::move(s)), strides(std::move(st)) {
    if (strides.empty()) {
      strides.assign(shape.size(), 1);
      for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d)
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    t.data = data;
    t.device = {1, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = bp::sdk::to_dl(dt);
    t.shape = shape.data();
    t.strides = strides.data();
  }
};

// One call: op, inputs, outputs and attributes, kept alive together.
struct Call {
  std::vector<bp_tensor> in, out;
  bp_attrs attrs{};
  bp_kernel_call raw{};
  Call(bp_op op, std::vector<const Desc*> ins, std::vector<const Desc*> outs,
       std::vector<int64_t> ints = {}, std::vector<bp_scalar> scalars = {}) {
    for (const Desc* d : ins) in.push_back(d->t);
    for (const Desc* d : outs) out.push_back(d->t);
    attrs.struct_size = sizeof attrs;
    attrs.num_ints = static_cast<int32_t>(ints.size());
    for (size_t i = 0; i < ints.size(); ++i) attrs.ints[i] = ints[i];
    attrs.num_scalars = static_cast<int32_t>(scalars.size());
    for (size_t i = 0; i < scalars.size(); ++i) attrs.scalars[i] = scalars[i];
    raw.struct_size = sizeof raw;
    raw.op = op;
    raw.num_inputs = static_cast<int32_t>(in.size());
    raw.num_outputs = static_cast<int32_t>(out.size());
    raw.inputs = in.data();
    raw.outputs = out.data();
    raw.attrs = &attrs;
  }
  KernelCall kc() const { return KernelCall(raw); }
};

// The message of the InvalidArgument that f throws ("" when none).
template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

bp_scalar fscalar(double v) {
  bp_scalar s{};
  s.dtype = BP_DTYPE_FLOAT64;
  s.value.f = v;
  return s;
}

TEST(SdkChecks, OpNamesAreTheCoresForEveryOp) {
  for (int op = 0; op < BP_OP_COUNT; ++op)
    EXPECT_EQ(std::string(bp::sdk::op_name(op)), std::string(bp::op_name(static_cast<bp::Op>(op))))
        << "op " << op;
  EXPECT_STREQ(bp::sdk::op_name(BP_OP_COUNT), "op?");
}

// The SDK's error idiom: BP_SDK_REQUIRE names the innermost OpScope, the
// default name outside every scope, and a kernel entered through
// scoped_kernel_thunk names its call's op.
void checks_positive(const KernelCall& c) {
  BP_SDK_REQUIRE(c.attrs().num_ints > 0 && c.attrs().ints[0] > 0, "ints[0] must be positive");
}

TEST(SdkChecks, ErrorsNameTheCurrentOp) {
  EXPECT_EQ(refusal([] { BP_SDK_REQUIRE(false, "outside"); }), "[plugin] outside");
  {
    bp::sdk::OpScope outer("allocate");
    EXPECT_STREQ(bp::sdk::current_op(), "allocate");
    {
      bp::sdk::OpScope inner("memset");
      EXPECT_EQ(refusal([] { BP_SDK_REQUIRE(1 + 1 == 3, "got " << 2); }), "[memset] got 2");
    }
    EXPECT_EQ(refusal([] { BP_SDK_REQUIRE(false, "x"); }), "[allocate] x");
    try {
      BP_SDK_UNSUPPORTED("not for "
                         << "bool");
      ADD_FAILURE() << "BP_SDK_UNSUPPORTED did not throw";
    } catch (const Unsupported& e) {
      EXPECT_STREQ(e.what(), "[allocate] not for bool");
    }
  }
  EXPECT_STREQ(bp::sdk::current_op(), "plugin");
  EXPECT_EQ(refusal([] { BP_SDK_REQUIRE(true, "never"); }), "");

  const Desc x(BP_DTYPE_FLOAT32, {2});
  Call call(BP_OP_CUMSUM, {&x}, {&x}, {0});
  bp_error err{};
  char buf[256] = {};
  err.struct_size = sizeof err;
  err.message = buf;
  err.capacity = sizeof buf;
  EXPECT_EQ(bp::sdk::scoped_kernel_thunk<&checks_positive>(nullptr, &call.raw, &err),
            BP_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(buf, "[cumsum] ints[0] must be positive");
  EXPECT_STREQ(bp::sdk::current_op(), "plugin");
}

TEST(SdkChecks, ElementwiseReturnsTheDispatchDtypeOfAMatchingCall) {
  Desc cond(BP_DTYPE_BOOL, {2, 3}), a(BP_DTYPE_INT64, {2, 3}), b(BP_DTYPE_INT64, {2, 3}),
      out(BP_DTYPE_INT64, {2, 3});
  const Call where(BP_OP_WHERE, {&cond, &a, &b}, {&out});
  EXPECT_EQ(check::elementwise(where.kc(), 3, false, /*dispatch=*/1, /*skip=*/0), BP_DTYPE_INT64);
  Desc x(BP_DTYPE_FLOAT32, {4}), y(BP_DTYPE_FLOAT32, {4}), flags(BP_DTYPE_BOOL, {4});
  const Call eq(BP_OP_EQ, {&x, &y}, {&flags});
  EXPECT_EQ(check::elementwise(eq.kc(), 2, true), BP_DTYPE_FLOAT32);
}

TEST(SdkChecks, ElementwiseNamesTheOpAndWhatDiffers) {
  Desc a(BP_DTYPE_FLOAT32, {2, 3}), row(BP_DTYPE_FLOAT32, {3}), wide(BP_DTYPE_FLOAT32, {2, 4}),
      ints(BP_DTYPE_INT32, {2, 3}), out(BP_DTYPE_FLOAT32, {2, 3});
  EXPECT_EQ(refusal([&] { check::elementwise(Call(BP_OP_ADD, {&a}, {&out}).kc(), 2, false); }),
            "[add] expected 2 input(s) and 1 output(s), got 1 and 1");
  EXPECT_EQ(refusal([&] {
              check::elementwise(Call(BP_OP_ADD, {&a, &row}, {&out}).kc(), 2, false);
            }),
            "[add] input 1 has rank 1, the output 2");
  EXPECT_EQ(refusal([&] {
              check::elementwise(Call(BP_OP_SUB, {&wide, &a}, {&out}).kc(), 2, false);
            }),
            "[sub] input 0 has size 4 in dim 1, the output 3");
  EXPECT_EQ(refusal([&] {
              check::elementwise(Call(BP_OP_MUL, {&a, &ints}, {&out}).kc(), 2, false);
            }),
            "[mul] input 1 is int32, expected float32");
  EXPECT_EQ(refusal([&] {
              check::elementwise(Call(BP_OP_LT, {&a, &a}, {&out}).kc(), 2, true);
            }),
            "[lt] the output must be bool, got float32");
}

TEST(SdkChecks, DimCountsNegativesFromTheEndAndRefusesOthers) {
  Desc x(BP_DTYPE_FLOAT32, {2, 3, 4}), out(BP_DTYPE_FLOAT32, {2, 3, 4});
  EXPECT_EQ(check::softmax(Call(BP_OP_SOFTMAX, {&x}, {&out}, {-1}).kc()), 2);
  EXPECT_EQ(check::softmax(Call(BP_OP_SOFTMAX, {&x}, {&out}, {1}).kc()), 1);
  EXPECT_EQ(refusal([&] { check::softmax(Call(BP_OP_SOFTMAX, {&x}, {&out}, {3}).kc()); }),
            "[softmax] dim 3 is out of range for a tensor of rank 3");
  EXPECT_EQ(refusal([&] { check::softmax(Call(BP_OP_LOG_SOFTMAX, {&x}, {&out}).kc()); }),
            "[log_softmax] the dim (ints[0]) is missing");
  // A 0-d tensor takes dim 0 and -1, as PyTorch's do.
  Desc s(BP_DTYPE_FLOAT64, {}), so(BP_DTYPE_FLOAT64, {});
  EXPECT_EQ(check::softmax(Call(BP_OP_SOFTMAX, {&s}, {&so}, {-1}).kc()), 0);
  EXPECT_NE(refusal([&] { check::softmax(Call(BP_OP_SOFTMAX, {&s}, {&so}, {1}).kc()); }), "");
}

TEST(SdkChecks, ReduceRequiresThePromotedOutputDtypeAndAnInputForMaxAndMin) {
  Desc in(BP_DTYPE_INT32, {2, 3}), out64(BP_DTYPE_INT64, {2, 1}), out32(BP_DTYPE_INT32, {2, 1});
  check::reduce(Call(BP_OP_SUM, {&in}, {&out64}).kc());
  check::reduce(Call(BP_OP_MAX, {&in}, {&out32}).kc());
  EXPECT_EQ(refusal([&] { check::reduce(Call(BP_OP_PROD, {&in}, {&out32}).kc()); }),
            "[prod] a int32 prod is int64, the output is int32");
  Desc bad(BP_DTYPE_INT64, {2, 2});
  EXPECT_EQ(refusal([&] { check::reduce(Call(BP_OP_SUM, {&in}, {&bad}).kc()); }),
            "[sum] output dim 1 must be 3 or 1, got 2");
  Desc empty(BP_DTYPE_FLOAT32, {0, 3}), one(BP_DTYPE_FLOAT32, {1, 1}),
      sum_out(BP_DTYPE_FLOAT32, {1, 1});
  check::reduce(Call(BP_OP_SUM, {&empty}, {&sum_out}).kc());  // the empty sum is 0
  EXPECT_EQ(refusal([&] { check::reduce(Call(BP_OP_MIN, {&empty}, {&one}).kc()); }),
            "[min] cannot reduce an empty tensor");
}

TEST(SdkChecks, ArgReduceReturnsTheDimAndRefusesAnEmptyLine) {
  Desc in(BP_DTYPE_FLOAT32, {2, 3}), out(BP_DTYPE_INT64, {1, 3});
  EXPECT_EQ(check::arg_reduce(Call(BP_OP_ARGMAX, {&in}, {&out}, {-2}).kc()), 0);
  Desc f32(BP_DTYPE_FLOAT32, {1, 3});
  EXPECT_EQ(refusal([&] { check::arg_reduce(Call(BP_OP_ARGMIN, {&in}, {&f32}, {0}).kc()); }),
            "[argmin] the output must be int64, got float32");
  Desc empty(BP_DTYPE_FLOAT32, {0, 3}), eout(BP_DTYPE_INT64, {1, 3});
  EXPECT_EQ(refusal([&] { check::arg_reduce(Call(BP_OP_ARGMAX, {&empty}, {&eout}, {0}).kc()); }),
            "[argmax] cannot reduce over dim 0 of size 0");
  // Nothing to write: no line to search, no refusal.
  Desc none(BP_DTYPE_FLOAT32, {3, 0}), nout(BP_DTYPE_INT64, {1, 0});
  EXPECT_EQ(check::arg_reduce(Call(BP_OP_ARGMAX, {&none}, {&nout}, {0}).kc()), 0);
}

TEST(SdkChecks, ArgsortAndCumsumReturnTheDimAndNameWrongOutputs) {
  Desc in(BP_DTYPE_FLOAT32, {2, 3}), idx(BP_DTYPE_INT64, {2, 3});
  bool descending = false;
  EXPECT_EQ(check::argsort(Call(BP_OP_ARGSORT, {&in}, {&idx}, {-1, 1}).kc(), &descending), 1);
  EXPECT_TRUE(descending);
  EXPECT_EQ(check::argsort(Call(BP_OP_ARGSORT, {&in}, {&idx}, {0}).kc(), &descending), 0);
  EXPECT_FALSE(descending);  // ints[1] absent: ascending
  Desc f32(BP_DTYPE_FLOAT32, {2, 3}), small(BP_DTYPE_INT64, {2, 2});
  EXPECT_EQ(
      refusal([&] { check::argsort(Call(BP_OP_ARGSORT, {&in}, {&f32}, {0}).kc(), &descending); }),
      "[argsort] the output must be int64, got float32");
  EXPECT_EQ(
      refusal([&] { check::argsort(Call(BP_OP_ARGSORT, {&in}, {&small}, {0}).kc(), &descending); }),
      "[argsort] the input has size 3 in dim 1, the output 2");
  EXPECT_EQ(refusal([&] {
              check::argsort(Call(BP_OP_ARGSORT, {&in}, {&idx}, {0, 2}).kc(), &descending);
            }),
            "[argsort] ints[1] (descending) must be 0 or 1, got 2");
  Desc ints(BP_DTYPE_INT32, {2, 3}), i64(BP_DTYPE_INT64, {2, 3});
  EXPECT_EQ(check::cumsum(Call(BP_OP_CUMSUM, {&ints}, {&i64}, {1}).kc()), 1);
  EXPECT_EQ(check::cumsum(Call(BP_OP_CUMSUM, {&in}, {&f32}, {-2}).kc()), 0);
  EXPECT_EQ(refusal([&] { check::cumsum(Call(BP_OP_CUMSUM, {&ints}, {&ints}, {0}).kc()); }),
            "[cumsum] the cumsum of int32 is int64, the output is int32");
  EXPECT_EQ(refusal([&] { check::cumsum(Call(BP_OP_CUMSUM, {&in}, {&f32}, {2}).kc()); }),
            "[cumsum] dim 2 is out of range for a tensor of rank 2");
}

TEST(SdkChecks, MatmulReturnsTheBatchAndNamesShapesThatDoNotChain) {
  Desc a(BP_DTYPE_FLOAT32, {4, 2, 3}), b(BP_DTYPE_FLOAT32, {4, 3, 5}),
      out(BP_DTYPE_FLOAT32, {4, 2, 5});
  EXPECT_EQ(check::matmul(Call(BP_OP_MATMUL, {&a, &b}, {&out}).kc()), 4);
  Desc b2(BP_DTYPE_FLOAT32, {4, 2, 5});
  EXPECT_EQ(refusal([&] {
              check::matmul(Call(BP_OP_MATMUL, {&a, &b2}, {&out}).kc());
            }),
            "[matmul] shapes do not chain: [2, 3] @ [2, 5] -> [2, 5]");
  Desc bd(BP_DTYPE_FLOAT64, {4, 3, 5});
  EXPECT_EQ(refusal([&] {
              check::matmul(Call(BP_OP_MATMUL, {&a, &bd}, {&out}).kc());
            }),
            "[matmul] operands must share one dtype, got float32, float64 -> float32");
}

TEST(SdkChecks, IndexOpsCheckTheIndexDtypeAndShapes) {
  Desc self(BP_DTYPE_FLOAT32, {3, 4}), idx(BP_DTYPE_INT64, {2, 4}), out(BP_DTYPE_FLOAT32, {2, 4});
  EXPECT_EQ(check::gather(Call(BP_OP_GATHER, {&self, &idx}, {&out}, {0}).kc()), 0);
  Desc idx32(BP_DTYPE_INT32, {2, 4});
  EXPECT_EQ(refusal([&] {
              check::gather(Call(BP_OP_GATHER, {&self, &idx32}, {&out}, {0}).kc());
            }),
            "[gather] the index must be int64, got int32");
  Desc big(BP_DTYPE_INT64, {2, 5}), bout(BP_DTYPE_FLOAT32, {2, 5});
  EXPECT_EQ(refusal([&] {
              check::gather(Call(BP_OP_GATHER, {&self, &big}, {&bout}, {0}).kc());
            }),
            "[gather] the index has size 5 in dim 1, more than the input's 4");

  Desc flat(BP_DTYPE_INT64, {5}), sel(BP_DTYPE_FLOAT32, {3, 5});
  EXPECT_EQ(check::index_select(Call(BP_OP_INDEX_SELECT, {&self, &flat}, {&sel}, {-1}).kc()), 1);
  EXPECT_EQ(refusal([&] {
              check::index_select(Call(BP_OP_INDEX_SELECT, {&self, &idx}, {&out}, {1}).kc());
            }),
            "[index_select] the index must be 1-D, got rank 2");

  Desc src(BP_DTYPE_FLOAT32, {2, 4});
  const check::ScatterArgs s =
      check::scatter(Call(BP_OP_SCATTER, {&idx, &src}, {&self}, {0, 1}).kc());
  EXPECT_EQ(s.dim, 0);
  EXPECT_EQ(s.reduction, 1);
  // A reduction it does not know is declined, not refused: the fallback may run it.
  EXPECT_THROW(check::scatter(Call(BP_OP_SCATTER, {&idx, &src}, {&self}, {0, 2}).kc()),
               Unsupported);
}

TEST(SdkChecks, IndexRangeNamesTheFirstIndexOutside) {
  int64_t values[] = {0, 2, -1, 7};
  Desc idx(BP_DTYPE_INT64, {4}, values);
  Desc self(BP_DTYPE_FLOAT32, {3}), out(BP_DTYPE_FLOAT32, {4});
  const Call c(BP_OP_GATHER, {&self, &idx}, {&out}, {0});
  EXPECT_EQ(refusal([&] { check::index_range(c.kc(), TensorRef(idx.t), 0, 3); }),
            "[gather] index -1 is out of range for dim 0 of size 3 (valid range: [0, 3))");
  values[2] = 1;
  EXPECT_EQ(refusal([&] { check::index_range(c.kc(), TensorRef(idx.t), 0, 3); }),
            "[gather] index 7 is out of range for dim 0 of size 3 (valid range: [0, 3))");
  values[3] = 2;
  EXPECT_EQ(refusal([&] { check::index_range(c.kc(), TensorRef(idx.t), 0, 3); }), "");
}

TEST(SdkChecks, RandomAndFillReadTheirAttributes) {
  Desc out(BP_DTYPE_FLOAT32, {8});
  const check::RandomArgs r = check::random(Call(BP_OP_RANDOM, {}, {&out}, {1, 42, 7}).kc());
  EXPECT_EQ(r.distribution, 1);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.offset, 7u);
  EXPECT_EQ(refusal([&] {
              check::random(Call(BP_OP_RANDOM, {}, {&out}, {2, 0, 0}).kc());
            }),
            "[random] unknown distribution 2 (0 uniform, 1 normal)");
  EXPECT_EQ(refusal([&] { check::fill(Call(BP_OP_FILL, {}, {&out}).kc()); }),
            "[fill] the value (scalars[0]) is missing");
}

TEST(SdkChecks, ClampBoundsRoundInwardsAndSaturateForIntegers) {
  Desc x(BP_DTYPE_INT32, {2}), out(BP_DTYPE_INT32, {2});
  const Call both(BP_OP_CLAMP, {&x}, {&out}, {3}, {fscalar(1.5), fscalar(1e20)});
  const int64_t given = check::clamp(both.kc());
  EXPECT_EQ(given, 3);
  int32_t lo = 0, hi = 0;
  bp::sdk::clamp_bounds<int32_t>(both.kc(), given, &lo, &hi);
  EXPECT_EQ(lo, 2);  // ceil(1.5): every integer >= 1.5 is >= 2
  EXPECT_EQ(hi, std::numeric_limits<int32_t>::max());
  const Call hi_only(BP_OP_CLAMP, {&x}, {&out}, {2}, {fscalar(0), fscalar(-2.5)});
  bp::sdk::clamp_bounds<int32_t>(hi_only.kc(), 2, &lo, &hi);
  EXPECT_EQ(lo, std::numeric_limits<int32_t>::lowest());
  EXPECT_EQ(hi, -3);  // floor(-2.5)
  const Call nan(BP_OP_CLAMP, {&x}, {&out}, {1}, {fscalar(std::nan(""))});
  EXPECT_EQ(refusal([&] { bp::sdk::clamp_bounds<int32_t>(nan.kc(), 1, &lo, &hi); }),
            "[clamp] a NaN bound cannot clamp an integer tensor");
  EXPECT_EQ(refusal([&] { check::clamp(Call(BP_OP_CLAMP, {&x}, {&out}, {3}, {fscalar(0)}).kc()); }),
            "[clamp] ints[0] = 3 needs 2 scalars, got 1");
}

TEST(SdkChecks, WhereWantsABoolConditionAndReturnsTheValuesDtype) {
  Desc cond(BP_DTYPE_BOOL, {3}), mask(BP_DTYPE_INT32, {3}), a(BP_DTYPE_FLOAT64, {3}),
      b(BP_DTYPE_FLOAT64, {3}), out(BP_DTYPE_FLOAT64, {3});
  EXPECT_EQ(check::where(Call(BP_OP_WHERE, {&cond, &a, &b}, {&out}).kc()), BP_DTYPE_FLOAT64);
  EXPECT_EQ(refusal([&] {
              check::where(Call(BP_OP_WHERE, {&mask, &a, &b}, {&out}).kc());
            }),
            "[where] the condition must be bool, got int32");
}

TEST(SdkChecks, LayerNormReturnsRowSizeAndEpsAndRefusesShortWeights) {
  Desc x(BP_DTYPE_FLOAT32, {4, 2, 3}), w(BP_DTYPE_FLOAT32, {2, 3}), b(BP_DTYPE_FLOAT32, {2, 3}),
      out(BP_DTYPE_FLOAT32, {4, 2, 3}), w3(BP_DTYPE_FLOAT32, {3}), wd(BP_DTYPE_FLOAT64, {2, 3});
  const check::LayerNormArgs args =
      check::layer_norm(Call(BP_OP_COUNT, {&x, &w, &b}, {&out}, {2}, {fscalar(1e-5)}).kc());
  EXPECT_EQ(args.normalized_dims, 2);
  EXPECT_EQ(args.row_size, 6);
  EXPECT_EQ(args.eps, 1e-5);
  EXPECT_EQ(refusal([&] {
              check::layer_norm(Call(BP_OP_COUNT, {&x, &w3, &b}, {&out}, {2}, {fscalar(0)}).kc());
            }),
            "[core::layer_norm] weight and bias must have 6 elements");
  EXPECT_EQ(refusal([&] {
              check::layer_norm(Call(BP_OP_COUNT, {&x, &w, &b}, {&out}, {4}, {fscalar(0)}).kc());
            }),
            "[core::layer_norm] normalized_dims 4 is out of range for rank 3");
  EXPECT_EQ(refusal([&] {
              check::layer_norm(Call(BP_OP_COUNT, {&x, &wd, &b}, {&out}, {2}, {fscalar(0)}).kc());
            }),
            "[core::layer_norm] operands must share x's dtype float32");
}

TEST(SdkChecks, Pool2dDerivesCeilModeAndRefusesAnOutputOfNeitherMode) {
  // 7x7 input, kernel 2, stride 2, no padding: floor mode gives 3x3, ceil mode 4x4.
  Desc x(BP_DTYPE_FLOAT32, {2, 3, 7, 7}), floor_out(BP_DTYPE_FLOAT32, {2, 3, 3, 3}),
      ceil_out(BP_DTYPE_FLOAT32, {2, 3, 4, 4}), odd(BP_DTYPE_FLOAT32, {2, 3, 5, 5}),
      idx(BP_DTYPE_INT64, {2, 3, 4, 4}), idx32(BP_DTYPE_INT32, {2, 3, 4, 4});
  const std::vector<int64_t> avg = {2, 2, 2, 2, 0, 0, 1}, max = {2, 2, 2, 2, 0, 0, 1, 1};
  const check::Pool2dArgs f =
      check::pool2d(Call(BP_OP_COUNT, {&x}, {&floor_out}, avg).kc(), "core::avg_pool2d");
  EXPECT_FALSE(f.ceil_mode);
  EXPECT_TRUE(f.count_include_pad);
  EXPECT_EQ(f.out_h, 3);
  const check::Pool2dArgs m =
      check::pool2d(Call(BP_OP_COUNT, {&x}, {&ceil_out, &idx}, max).kc(), "core::max_pool2d");
  EXPECT_TRUE(m.ceil_mode);
  EXPECT_EQ(m.in_w, 7);
  // The backward call's input is the output gradient, its output the input's.
  EXPECT_EQ(
      check::pool2d(Call(BP_OP_COUNT, {&floor_out}, {&x}, avg).kc(), "core::avg_pool2d_backward")
          .in_h,
      7);
  EXPECT_EQ(
      refusal(
          [&] { check::pool2d(Call(BP_OP_COUNT, {&x}, {&odd}, avg).kc(), "core::avg_pool2d"); }),
      "[core::avg_pool2d] an output plane of 5x5 fits neither floor (3x3) nor ceil mode (4x4)");
  EXPECT_EQ(
      refusal([&] {
        check::pool2d(Call(BP_OP_COUNT, {&x}, {&ceil_out, &idx32}, max).kc(), "core::max_pool2d");
      }),
      "[core::max_pool2d] the indices must be int64");
  EXPECT_EQ(refusal([&] {
              check::pool2d(Call(BP_OP_COUNT, {&x}, {&floor_out}, {2, 2, 2, 2, 2, 0, 1}).kc(),
                            "core::avg_pool2d");
            }),
            "[core::avg_pool2d] padding must be between 0 and half the kernel");
}

TEST(SdkChecks, AvgPoolDivisorCountsAsPyTorch) {
  // 4-wide input, kernel 3, stride 2, no padding, ceil mode: windows start at
  // 0 and 2; the second reaches 5, past the (un)padded 4, and counts only
  // its 2 x 2 part inside, padding counted or not.
  check::Pool2dArgs c{1, 1, 4, 4, 2, 2, 3, 3, 2, 2, 0, 0};
  c.count_include_pad = true;
  EXPECT_EQ(check::avg_pool_divisor(c, 1, 1), 4);
  EXPECT_EQ(check::avg_pool_divisor(c, 0, 0), 9);
  // 5-wide input, kernel 3, stride 2, padding 1: windows start at -1, 1, 3
  // (the last reaches 5, inside the padded 6). Counting padding, the first
  // window is 3 wide; without, 2 (columns 0 and 1).
  check::Pool2dArgs p{1, 1, 5, 5, 3, 3, 3, 3, 2, 2, 1, 1};
  p.count_include_pad = true;
  EXPECT_EQ(check::avg_pool_divisor(p, 0, 0), 9);
  p.count_include_pad = false;
  EXPECT_EQ(check::avg_pool_divisor(p, 0, 0), 4);
  EXPECT_EQ(check::avg_pool_divisor(p, 1, 1), 9);
  EXPECT_EQ(check::avg_pool_divisor(p, 2, 0), 4);  // rows 3, 4 by columns 0, 1
}

TEST(SdkChecks, BatchNormReturnsTheShapeAndRefusesAWrongChannelCount) {
  Desc x(BP_DTYPE_FLOAT32, {4, 3, 5, 2}), c3(BP_DTYPE_FLOAT32, {3}), c2(BP_DTYPE_FLOAT32, {2}),
      out(BP_DTYPE_FLOAT32, {4, 3, 5, 2}), one(BP_DTYPE_FLOAT32, {1});
  const check::BatchNormArgs a = check::batch_norm(
      Call(BP_OP_COUNT, {&x, &c3, &c3}, {&out, &c3, &c3}, {}, {fscalar(1e-5)}).kc(),
      "core::batch_norm");
  EXPECT_EQ(a.n, 4);
  EXPECT_EQ(a.c, 3);
  EXPECT_EQ(a.spatial, 10);
  EXPECT_EQ(a.eps, 1e-5);
  // Backward with grad_x not asked for (mask 6): a 1-element stand-in is fine.
  const check::BatchNormArgs b = check::batch_norm(
      Call(BP_OP_COUNT, {&out, &x, &c3, &c3, &c3}, {&one, &c3, &c3}, {6}, {fscalar(0)}).kc(),
      "core::batch_norm_backward");
  EXPECT_EQ(b.output_mask, 6);
  EXPECT_EQ(refusal([&] {
              check::batch_norm(
                  Call(BP_OP_COUNT, {&x, &c2, &c3}, {&out, &c3, &c3}, {}, {fscalar(0)}).kc(),
                  "core::batch_norm");
            }),
            "[core::batch_norm] weight must have shape [3]");
  EXPECT_EQ(
      refusal([&] {
        check::batch_norm(
            Call(BP_OP_COUNT, {&out, &x, &c3, &c3, &c3}, {&one, &c3, &c3}, {7}, {fscalar(0)}).kc(),
            "core::batch_norm_backward");
      }),
      "[core::batch_norm_backward] grad_x must have x's shape");
}

TEST(SdkLoops, Map2RunsInPlaceOverATransposedOperand) {
  // a is 2x3 row-major; b is the transpose of a 3x2 buffer; out is a itself.
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6};
  std::vector<int32_t> bt = {10, 40, 20, 50, 30, 60};  // b[i][j] = bt[j * 2 + i]
  Desc da(BP_DTYPE_INT32, {2, 3}, a.data()), db(BP_DTYPE_INT32, {2, 3}, bt.data(), {1, 2});
  bp::sdk::map2<int32_t, int32_t>(TensorRef(da.t), TensorRef(da.t), TensorRef(db.t),
                                  [](int32_t x, int32_t y) { return x + y; });
  EXPECT_EQ(a, (std::vector<int32_t>{11, 22, 33, 44, 55, 66}));
}

TEST(SdkLoops, WrappingArithmeticWrapsLikeTwosComplement) {
  using W = bp::sdk::Wrapping<int32_t>;
  static_assert(std::is_same_v<W, uint32_t>);
  static_assert(std::is_same_v<bp::sdk::Wrapping<double>, double>);
  static_assert(std::is_same_v<bp::sdk::Wrapping<bool>, bool>);
  const int32_t max = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(static_cast<int32_t>(static_cast<W>(max) + W(1)), std::numeric_limits<int32_t>::min());
}

// --- scalar operands (Registrar::add_scalar_operand) ----------------------

// What a kernel behind scalar_operand_thunk saw of its last call.
struct Seen {
  int inputs = 0;
  std::vector<int64_t> shape, strides;
  bp_dtype dtype = BP_DTYPE_COUNT;
  double value = 0;
};
Seen g_seen;

void seeing_kernel(const KernelCall& c) {
  g_seen.inputs = c.num_inputs();
  const TensorRef b = c.input(c.num_inputs() - 1);
  g_seen.shape.assign(b.shape(), b.shape() + b.ndim());
  g_seen.strides.assign(b.strides(), b.strides() + b.ndim());
  g_seen.dtype = b.dtype();
  if (b.dtype() == BP_DTYPE_FLOAT32) g_seen.value = *b.data<float>();
  if (b.dtype() == BP_DTYPE_INT64) g_seen.value = static_cast<double>(*b.data<int64_t>());
  if (b.dtype() == BP_DTYPE_FLOAT16) g_seen.value = float(*b.data<bp::sdk::Half>());
}

bp_status run_thunk(Call& c, bp_dtype dt) {
  c.raw.dtype = dt;
  char buf[256] = {0};
  bp_error err{sizeof(bp_error), buf, sizeof(buf)};
  return bp::sdk::scalar_operand_thunk<&seeing_kernel>(nullptr, &c.raw, &err);
}

TEST(SdkScalarOperand, AOneInputCallReachesTheKernelWithABroadcastOfTheScalar) {
  float x[6] = {}, y[6] = {};
  const Desc a(BP_DTYPE_FLOAT32, {2, 3}, x), out(BP_DTYPE_FLOAT32, {2, 3}, y);
  Call one(BP_OP_MUL, {&a}, {&out}, {}, {fscalar(1), fscalar(0.1)});
  ASSERT_EQ(run_thunk(one, BP_DTYPE_FLOAT32), BP_STATUS_OK);
  EXPECT_EQ(g_seen.inputs, 2);
  EXPECT_EQ(g_seen.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g_seen.strides, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(g_seen.dtype, BP_DTYPE_FLOAT32);
  EXPECT_EQ(g_seen.value, static_cast<double>(0.1f));  // converted to the dispatch dtype
  int64_t i[6] = {}, o[6] = {};
  const Desc ai(BP_DTYPE_INT64, {6}, i), oi(BP_DTYPE_INT64, {6}, o);
  bp_scalar seven{};
  seven.dtype = BP_DTYPE_INT64;
  seven.value.i = 7;
  Call ints(BP_OP_ADD, {&ai}, {&oi}, {}, {fscalar(1), seven});
  ASSERT_EQ(run_thunk(ints, BP_DTYPE_INT64), BP_STATUS_OK);
  EXPECT_EQ(g_seen.value, 7.0);
  EXPECT_EQ(g_seen.strides, (std::vector<int64_t>{0}));
  // float16: rounded to the dtype (0.1 is 0.0999755859375 in float16).
  uint16_t h[6] = {}, ho[6] = {};
  const Desc ah(BP_DTYPE_FLOAT16, {6}, h), oh(BP_DTYPE_FLOAT16, {6}, ho);
  Call halves(BP_OP_MUL, {&ah}, {&oh}, {}, {fscalar(1), fscalar(0.1)});
  ASSERT_EQ(run_thunk(halves, BP_DTYPE_FLOAT16), BP_STATUS_OK);
  EXPECT_EQ(g_seen.value, 0.0999755859375);
}

TEST(SdkScalarOperand, ATwoInputCallPassesThroughUnchanged) {
  float x[6] = {}, y[6] = {}, z[6] = {};
  const Desc a(BP_DTYPE_FLOAT32, {2, 3}, x), b(BP_DTYPE_FLOAT32, {2, 3}, y),
      out(BP_DTYPE_FLOAT32, {2, 3}, z);
  Call two(BP_OP_MUL, {&a, &b}, {&out}, {}, {fscalar(1)});
  ASSERT_EQ(run_thunk(two, BP_DTYPE_FLOAT32), BP_STATUS_OK);
  EXPECT_EQ(g_seen.inputs, 2);
  EXPECT_EQ(g_seen.strides, (std::vector<int64_t>{3, 1}));
}

}  // namespace
