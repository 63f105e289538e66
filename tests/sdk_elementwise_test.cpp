// The SDK's element values (backplane/sdk/elementwise.hpp), called directly:
// the cases every backend must get right and a hand-written loop gets wrong.
// Expected values are PyTorch 1.13's (integer tensors wrap, NaN propagates
// through maximum/max, argmax takes the first NaN), worked out by hand.
#include <gtest/gtest.h>

#include <backplane/sdk/elementwise.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace {

namespace fn = bp::sdk::fn;
using R = fn::Reduction;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(SdkElementwise, IntegerArithmeticWrapsInsteadOfOverflowing) {
  const int32_t max = std::numeric_limits<int32_t>::max(),
                min = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(fn::add<int32_t>(max, 1, 1), min);
  EXPECT_EQ(fn::add<int32_t>(1, max, 2), -1);  // 1 + 2 * (2^31 - 1) = 2^32 - 1
  EXPECT_EQ(fn::sub<int32_t>(min, 1, 1), max);
  EXPECT_EQ(fn::mul<int64_t>(std::numeric_limits<int64_t>::max(), 2), -2);
  EXPECT_EQ(fn::neg<int32_t>(min), min);
  EXPECT_EQ(fn::abs<int32_t>(min), min);
  EXPECT_EQ((fn::combine<R::sum, int64_t>(std::numeric_limits<int64_t>::max(), 1)),
            std::numeric_limits<int64_t>::min());
}

TEST(SdkElementwise, IntegerPowIsExactAndWraps) {
  EXPECT_EQ(fn::pow<int64_t>(3, 39), 4052555153018976267LL);  // 3^39 < 2^63: exact
  EXPECT_EQ(fn::pow<int32_t>(3, 21), 1870418611);             // 3^21 mod 2^32
  EXPECT_EQ(fn::pow<int32_t>(-2, 3), -8);
  EXPECT_EQ(fn::pow<int32_t>(7, 0), 1);
  EXPECT_EQ(fn::pow<double>(2.0, 0.5), std::sqrt(2.0));
}

TEST(SdkElementwise, NanPropagatesThroughMaximumMinimumAndTheirReductions) {
  EXPECT_TRUE(std::isnan(fn::maximum(kNaN, 1.0)));
  EXPECT_TRUE(std::isnan(fn::maximum(1.0, kNaN)));
  EXPECT_TRUE(std::isnan(fn::minimum(-kInf, kNaN)));
  EXPECT_TRUE(std::isnan(fn::combine<R::max, double>(fn::identity<R::max, double>(), kNaN)));
  EXPECT_TRUE(std::isnan(fn::combine<R::min, double>(kNaN, -kInf)));
  // relu and clamp pass NaN through; clamp with lo > hi gives hi.
  EXPECT_TRUE(std::isnan(fn::relu(kNaN)));
  EXPECT_TRUE(std::isnan(fn::clamp(kNaN, 0.0, 1.0)));
  EXPECT_EQ(fn::clamp(0.5, 2.0, 1.0), 1.0);
}

TEST(SdkElementwise, NegKeepsTheSignOfZero) {
  EXPECT_TRUE(std::signbit(fn::neg(0.0)));
  EXPECT_FALSE(std::signbit(fn::neg(-0.0)));
  EXPECT_FALSE(std::signbit(fn::abs(-0.0)));
}

TEST(SdkElementwise, ArgBetterKeepsTheFirstWinnerAndTreatsNanAsExtreme) {
  EXPECT_FALSE(fn::arg_better<true>(3.0, 3.0));  // a tie keeps the first
  EXPECT_TRUE(fn::arg_better<true>(4.0, 3.0));
  EXPECT_TRUE(fn::arg_better<false>(kNaN, -kInf));  // NaN beats everything, for min too
  EXPECT_FALSE(fn::arg_better<true>(kNaN, kNaN));   // the first NaN stays
  EXPECT_FALSE(fn::arg_better<true>(kInf, kNaN));
}

TEST(SdkElementwise, SortsBeforePutsNanAboveNumbersAndKeepsTiesApartFromOrder) {
  EXPECT_TRUE(fn::sorts_before(1.0, 2.0, false));
  EXPECT_FALSE(fn::sorts_before(2.0, 2.0, false));  // ties: neither before the other
  EXPECT_FALSE(fn::sorts_before(-0.0, 0.0, false));
  EXPECT_FALSE(fn::sorts_before(0.0, -0.0, true));
  EXPECT_TRUE(fn::sorts_before(kInf, kNaN, false));  // NaN last ascending
  EXPECT_FALSE(fn::sorts_before(kNaN, kInf, false));
  EXPECT_TRUE(fn::sorts_before(kNaN, kInf, true));  // and first descending
  EXPECT_FALSE(fn::sorts_before(kNaN, kNaN, true));
  EXPECT_FALSE(fn::sorts_before(kNaN, kNaN, false));
  EXPECT_TRUE(fn::sorts_before(2.0, 1.0, true));
  EXPECT_TRUE(fn::sorts_before(false, true, false));
  EXPECT_TRUE(fn::sorts_before(int64_t{-5}, int64_t{3}, false));
}

TEST(SdkElementwise, ConvertMakesBoolFromNonZeroAndTruncatesToIntegers) {
  EXPECT_TRUE(fn::convert<bool>(0.25));
  EXPECT_TRUE(fn::convert<bool>(int64_t{1} << 40));
  EXPECT_FALSE(fn::convert<bool>(-0.0));
  EXPECT_EQ(fn::convert<int32_t>(-2.7), -2);
  EXPECT_EQ(fn::mul(true, false), false);  // bool multiplies as "and"
  EXPECT_TRUE(fn::logical_or(0, 5));
  EXPECT_FALSE(fn::logical_and(0.0, 5.0));
  EXPECT_TRUE(fn::logical_not(0));
}

TEST(SdkElementwise, ReductionsStartFromTheFarEndAndWidenIntegerSums) {
  EXPECT_EQ((fn::identity<R::max, int32_t>()), std::numeric_limits<int32_t>::min());
  EXPECT_EQ((fn::identity<R::min, double>()), kInf);
  EXPECT_EQ((fn::identity<R::prod, int64_t>()), 1);
  static_assert(std::is_same_v<fn::ReductionTypes<R::sum, bool>::Out, int64_t>);
  static_assert(std::is_same_v<fn::ReductionTypes<R::sum, int32_t>::Acc, int64_t>);
  static_assert(std::is_same_v<fn::ReductionTypes<R::prod, float>::Out, float>);
  static_assert(std::is_same_v<fn::ReductionTypes<R::sum, float>::Acc, double>);
  static_assert(std::is_same_v<fn::ReductionTypes<R::max, int32_t>::Out, int32_t>);
}

}  // namespace
