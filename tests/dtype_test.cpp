// Dtypes, scalars and PyTorch's promotion rules: the pure functions first,
// then the dtype that binary ops actually give on the default backend.
// Expected dtypes are PyTorch's (torch.promote_types / torch.result_type):
// rules DT-1 and DT-2 of docs/semantics.md.
#include <backplane/backplane.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

using bp::DType;
constexpr float kInf = std::numeric_limits<float>::infinity();

// PyTorch 1.13's answers (tests/fixtures/dtype_reference.py made them).
#include "fixtures/dtype_reference.inc"

TEST(DType, SizesNamesAndCategories) {
  EXPECT_EQ(bp::itemsize(DType::Bool), 1u);
  EXPECT_EQ(bp::itemsize(DType::Int32), 4u);
  EXPECT_EQ(bp::itemsize(DType::Int64), 8u);
  EXPECT_EQ(bp::itemsize(DType::Float32), 4u);
  EXPECT_EQ(bp::itemsize(DType::Float64), 8u);
  EXPECT_EQ(bp::name(DType::Bool), "bool");
  EXPECT_EQ(bp::name(DType::Int32), "int32");
  EXPECT_EQ(bp::name(DType::Int64), "int64");
  EXPECT_EQ(bp::name(DType::Float32), "float32");
  EXPECT_EQ(bp::name(DType::Float64), "float64");
  EXPECT_TRUE(bp::is_floating(DType::Float32));
  EXPECT_FALSE(bp::is_floating(DType::Int64));
  EXPECT_TRUE(bp::is_integral(DType::Int32));
  EXPECT_FALSE(bp::is_integral(DType::Bool));
}

TEST(DType, ValuesMatchTheAbiEnum) {
  EXPECT_EQ(static_cast<int>(DType::Bool), BP_DTYPE_BOOL);
  EXPECT_EQ(static_cast<int>(DType::Int32), BP_DTYPE_INT32);
  EXPECT_EQ(static_cast<int>(DType::Int64), BP_DTYPE_INT64);
  EXPECT_EQ(static_cast<int>(DType::Float32), BP_DTYPE_FLOAT32);
  EXPECT_EQ(static_cast<int>(DType::Float64), BP_DTYPE_FLOAT64);
}

struct PromoteCase {
  DType a, b, expected;
};

TEST(DType, PromoteTypesMatchesPyTorchTable) {
  const PromoteCase cases[] = {
      {DType::Bool, DType::Bool, DType::Bool},
      {DType::Bool, DType::Int32, DType::Int32},
      {DType::Bool, DType::Int64, DType::Int64},
      {DType::Bool, DType::Float32, DType::Float32},
      {DType::Bool, DType::Float64, DType::Float64},
      {DType::Int32, DType::Int32, DType::Int32},
      {DType::Int32, DType::Int64, DType::Int64},
      {DType::Int32, DType::Float32, DType::Float32},
      {DType::Int32, DType::Float64, DType::Float64},
      {DType::Int64, DType::Float32, DType::Float32},
      {DType::Int64, DType::Float64, DType::Float64},
      {DType::Float32, DType::Float64, DType::Float64},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(bp::promote_types(c.a, c.b), c.expected) << c.a << " + " << c.b;
    EXPECT_EQ(bp::promote_types(c.b, c.a), c.expected) << c.b << " + " << c.a;
  }
}

TEST(DType, EveryPairPromotesAsPyTorchSays) {
  const PromoteCase table[] = {BP_PROMOTE_TABLE};
  ASSERT_EQ(std::size(table), std::size(bp::kAllDTypes) * std::size(bp::kAllDTypes));
  for (const auto& c : table)
    EXPECT_EQ(bp::promote_types(c.a, c.b), c.expected) << c.a << " + " << c.b;
}

TEST(DType, EveryDtypeWithAScalarGivesPyTorchsResultType) {
  struct Case {
    DType tensor;
    int kind;
    DType expected;
  };
  const Case table[] = {BP_SCALAR_TABLE};
  const bp::Scalar scalars[] = {bp::Scalar(true), bp::Scalar(2), bp::Scalar(2.5)};
  for (const auto& c : table)
    EXPECT_EQ(bp::result_type(c.tensor, scalars[c.kind]), c.expected)
        << c.tensor << " with scalar " << scalars[c.kind];
}

TEST(DType, NarrowDtypesSizesAndCategories) {
  EXPECT_EQ(bp::itemsize(DType::Float16), 2u);
  EXPECT_EQ(bp::itemsize(DType::BFloat16), 2u);
  EXPECT_EQ(bp::itemsize(DType::Int8), 1u);
  EXPECT_EQ(bp::itemsize(DType::UInt8), 1u);
  EXPECT_EQ(bp::itemsize(DType::Int16), 2u);
  EXPECT_TRUE(bp::is_floating(DType::Float16) && bp::is_floating(DType::BFloat16));
  EXPECT_TRUE(bp::is_integral(DType::Int8) && bp::is_integral(DType::UInt8) &&
              bp::is_integral(DType::Int16));
  EXPECT_EQ(bp::name(DType::BFloat16), "bfloat16");
  EXPECT_EQ(static_cast<int>(DType::Int16), BP_DTYPE_INT16);
}

TEST(DType, HalfAndBFloat16RoundAsPyTorch) {
  struct Case {
    float value;
    uint16_t half, bfloat16;
  };
  const Case table[] = {BP_ROUND_TABLE};
  for (const auto& c : table) {
    EXPECT_EQ(bp::Half(c.value).bits, c.half) << c.value;
    EXPECT_EQ(bp::BFloat16(c.value).bits, c.bfloat16) << c.value;
    // And back: the value the bits stand for, exactly.
    const float h = bp::Half::from_bits(c.half);
    EXPECT_EQ(bp::Half(h).bits, c.half) << c.value;
  }
  EXPECT_TRUE(std::isnan(static_cast<float>(bp::Half(std::nanf("")))));
  EXPECT_TRUE(std::isnan(static_cast<float>(bp::BFloat16(std::nanf("")))));
}

TEST(DType, ScalarOnlyDecidesWhenOfHigherCategory) {
  EXPECT_EQ(bp::result_type(DType::Int32, bp::Scalar(2)), DType::Int32);
  EXPECT_EQ(bp::result_type(DType::Int32, bp::Scalar(2.5)), DType::Float32);
  EXPECT_EQ(bp::result_type(DType::Float64, bp::Scalar(2.5)), DType::Float64);
  EXPECT_EQ(bp::result_type(DType::Float32, bp::Scalar(2.5)), DType::Float32);
  EXPECT_EQ(bp::result_type(DType::Bool, bp::Scalar(1)), DType::Int64);
  EXPECT_EQ(bp::result_type(DType::Bool, bp::Scalar(true)), DType::Bool);
  EXPECT_EQ(bp::result_type(DType::Bool, bp::Scalar(0.5)), DType::Float32);
  EXPECT_EQ(bp::result_type(DType::Float32, bp::Scalar(true)), DType::Float32);
}

TEST(Scalar, RemembersItsCategoryAndCrossesTheAbiTagged) {
  EXPECT_EQ(bp::Scalar(3).kind(), DType::Int64);
  EXPECT_EQ(bp::Scalar(int32_t{3}).kind(), DType::Int64);
  EXPECT_EQ(bp::Scalar(3.0f).kind(), DType::Float64);
  EXPECT_EQ(bp::Scalar(false).kind(), DType::Bool);

  const bp_scalar i = bp::Scalar(-7).to_abi();
  EXPECT_EQ(i.dtype, BP_DTYPE_INT64);
  EXPECT_EQ(i.value.i, -7);
  const bp_scalar f = bp::Scalar(0.25).to_abi();
  EXPECT_EQ(f.dtype, BP_DTYPE_FLOAT64);
  EXPECT_EQ(f.value.f, 0.25);
  EXPECT_EQ(bp::Scalar(2.75).to<int64_t>(), 2);
}

// The dtype that ops give on the default backend.

TEST(DTypeOfOps, TensorsOfSameRankPromote) {
  auto i32 = bp::ones({2}, DType::Int32);
  auto i64 = bp::ones({2}, DType::Int64);
  auto f32 = bp::ones({2}, DType::Float32);
  auto f64 = bp::ones({2}, DType::Float64);
  auto b = bp::ones({2}, DType::Bool);
  EXPECT_EQ((i32 + i64).dtype(), DType::Int64);
  EXPECT_EQ((i64 + f32).dtype(), DType::Float32);
  EXPECT_EQ((f32 * f64).dtype(), DType::Float64);
  EXPECT_EQ((b + i32).dtype(), DType::Int32);
  EXPECT_EQ((i32 + i64).to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
}

TEST(DTypeOfOps, ZeroDimTensorActsLikeAScalar) {
  auto i32 = bp::ones({2}, DType::Int32);
  auto f32 = bp::ones({2}, DType::Float32);
  // Same category: the dimensioned operand decides.
  EXPECT_EQ((i32 + bp::scalar_tensor(5, DType::Int64)).dtype(), DType::Int32);
  EXPECT_EQ((f32 + bp::scalar_tensor(0.5, DType::Float64)).dtype(), DType::Float32);
  // Higher category: promoted with the 0-d operand's dtype.
  auto r = i32 + bp::scalar_tensor(1.5, DType::Float64);
  EXPECT_EQ(r.dtype(), DType::Float64);
  EXPECT_EQ(r.to_vector<double>(), (std::vector<double>{2.5, 2.5}));
  // Two 0-d tensors promote normally.
  EXPECT_EQ((bp::scalar_tensor(1, DType::Int32) + bp::scalar_tensor(1, DType::Int64)).dtype(),
            DType::Int64);
}

TEST(DTypeOfOps, PythonScalarsFollowResultType) {
  auto i32 = bp::ones({3}, DType::Int32);
  EXPECT_EQ((i32 + 2).dtype(), DType::Int32);
  auto r = i32 + 0.5;
  EXPECT_EQ(r.dtype(), DType::Float32);
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{1.5f, 1.5f, 1.5f}));
  EXPECT_EQ((bp::ones({1}, DType::Float64) * 3).dtype(), DType::Float64);
}

TEST(DTypeOfOps, IntegerDivisionIsTrueDivision) {
  auto a = bp::tensor({7, 2});
  auto b = bp::tensor({2, 4});
  auto q = a / b;
  EXPECT_EQ(q.dtype(), DType::Float32);
  EXPECT_EQ(q.to_vector<float>(), (std::vector<float>{3.5f, 0.5f}));
}

TEST(DTypeOfOps, SumOfIntegersIsInt64) {
  EXPECT_EQ(bp::ones({3}, DType::Int32).sum().dtype(), DType::Int64);
  EXPECT_EQ(bp::ones({3}, DType::Bool).sum().item<int64_t>(), 3);
  EXPECT_EQ(bp::ones({3}, DType::Float64).sum().dtype(), DType::Float64);
}

TEST(DTypeOfOps, InPlaceRefusesToCastDownACategory) {
  auto i = bp::ones({2}, DType::Int64);
  try {
    i.add_(bp::ones({2}, DType::Float32));
    FAIL() << "expected TypeError";
  } catch (const bp::TypeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[add_]"), std::string::npos) << m;
    EXPECT_NE(m.find("float32"), std::string::npos) << m;
    EXPECT_NE(m.find("int64"), std::string::npos) << m;
  }
  // Same category but wider: allowed, and the result is cast into self.
  auto j = bp::ones({2}, DType::Int32);
  j.add_(bp::full({2}, 4, DType::Int64));
  EXPECT_EQ(j.dtype(), DType::Int32);
  EXPECT_EQ(j.to_vector<int32_t>(), (std::vector<int32_t>{5, 5}));
}

}  // namespace

// The narrow dtypes on the default backend, with PyTorch 1.13's values.
TEST(NarrowDTypes, IntegersWrapAndPromoteAsPyTorch) {
  const auto i8 = bp::from_vector(std::vector<int64_t>{127, -128}, {2}, DType::Int8);
  EXPECT_EQ((i8 + 1).dtype(), DType::Int8);
  EXPECT_EQ((i8 + 1).to_vector<int64_t>(), (std::vector<int64_t>{-128, -127}));
  const auto u8 = bp::from_vector(std::vector<int64_t>{0, 200}, {2}, DType::UInt8);
  EXPECT_EQ((u8 - 1).to_vector<int64_t>(), (std::vector<int64_t>{255, 199}));
  EXPECT_EQ((u8 + u8).to_vector<int64_t>(), (std::vector<int64_t>{0, 144}));
  const auto mixed = u8 + bp::from_vector(std::vector<int64_t>{1, -1}, {2}, DType::Int8);
  EXPECT_EQ(mixed.dtype(), DType::Int16);
  EXPECT_EQ(mixed.to_vector<int64_t>(), (std::vector<int64_t>{1, 199}));
  EXPECT_EQ(bp::from_vector(std::vector<double>{1000.7, -3.9}, {2}, DType::Float32)
                .to(DType::Int8)
                .to_vector<int64_t>(),
            (std::vector<int64_t>{-24, -3}));
}

TEST(NarrowDTypes, SixteenBitFloatsRoundOnceAndPrintTheirDtype) {
  const auto h = bp::from_vector(std::vector<double>{1.5, -2.25}, {2}, DType::Float16);
  EXPECT_EQ((h * 2).to_vector<double>(), (std::vector<double>{3.0, -4.5}));
  EXPECT_EQ((h + bp::ones({2}, DType::BFloat16)).dtype(), DType::Float32);
  EXPECT_EQ(h.to_string(), "tensor([ 1.5000, -2.2500], dtype=float16)");
  // A sum accumulates in float32 and rounds once: 3000 ones give 3000.
  EXPECT_EQ(bp::ones({3000}, DType::Float16).sum().item<double>(), 3000.0);
  EXPECT_EQ(bp::full({1}, 1.00390625, DType::BFloat16).item<double>(), 1.0);
}

// Large dense bfloat16 and float16 operands may take oneDNN's primitive for
// the dtype (where the CPU has it) instead of the float32 loops: the values
// are the same, each the float32 result rounded once.
TEST(NarrowDTypes, LargeSixteenBitArithmeticRoundsOnceOnEveryPath) {
  const int64_t n = 100003;
  std::vector<double> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::sin(0.001 * static_cast<double>(i)) * 300.0;
    y[i] = std::cos(0.003 * static_cast<double>(i)) * 7.0 + 0.01;
  }
  for (DType d : {DType::BFloat16, DType::Float16}) {
    const auto a = bp::from_vector(x, {n}, d), b = bp::from_vector(y, {n}, d);
    const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
    const std::vector<double> sum = bp::add(a, b, 0.5).to_vector<double>();
    const std::vector<double> quot = (a / b).to_vector<double>();
    for (int64_t i = 0; i < n; ++i) {
      const float s = static_cast<float>(av[i]) + 0.5f * static_cast<float>(bv[i]);
      const float q = static_cast<float>(av[i]) / static_cast<float>(bv[i]);
      const double want_s = d == DType::BFloat16 ? static_cast<float>(bp::BFloat16(s))
                                                 : static_cast<float>(bp::Half(s));
      const double want_q = d == DType::BFloat16 ? static_cast<float>(bp::BFloat16(q))
                                                 : static_cast<float>(bp::Half(q));
      ASSERT_EQ(sum[i], want_s) << d << " add at " << i;
      ASSERT_EQ(quot[i], want_q) << d << " div at " << i;
    }
  }
}
