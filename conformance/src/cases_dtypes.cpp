// The narrow dtypes on the device under test (DT-1, DT-2): the dtype an op
// gives and the values it computes, with PyTorch 1.13's answers (each
// checked with torch: promote_types, integer wrap, rounding of float16 and
// bfloat16). The promotion table itself is the core's and is checked pair
// by pair in tests/dtype_test.cpp.
#include <backplane/conformance.h>

#include <limits>

#include "case_checks.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "dtype";

// uint8 with int8 meets in int16; integers wrap in their width; a floating
// scalar takes an integer tensor to float32 and keeps a float16 one.
void narrow_promotion_and_wrap(const Context& ctx) {
  const Tensor u8 = from_vector(std::vector<double>{0, 200}, {2}, ctx.options(DType::UInt8));
  const Tensor i8 = from_vector(std::vector<double>{1, -1}, {2}, ctx.options(DType::Int8));
  const Tensor mixed = u8 + i8;
  BP_EXPECT_EQ(mixed.dtype(), DType::Int16, "uint8 + int8");
  BP_EXPECT_VALUES(mixed, {1, 199});
  BP_EXPECT_VALUES(u8 - 1, {255, 199});
  BP_EXPECT_VALUES(u8 + u8, {0, 144});
  const Tensor w = from_vector(std::vector<double>{2, -3}, {2}, ctx.options(DType::Int8));
  BP_EXPECT_VALUES(w * from_vector(std::vector<double>{100, 100}, {2}, ctx.options(DType::Int8)),
                   {-56, -44});
  BP_EXPECT_EQ((w + 2.5).dtype(), DType::Float32, "int8 + 2.5");
  const Tensor h = from_vector(std::vector<double>{1.5}, {1}, ctx.options(DType::Float16));
  BP_EXPECT_EQ((h + 2.5).dtype(), DType::Float16, "float16 + 2.5");
  BP_EXPECT_EQ((h + from_vector(std::vector<double>{1}, {1}, ctx.options(DType::BFloat16))).dtype(),
               DType::Float32, "float16 + bfloat16");
  BP_EXPECT_VALUES(
      from_vector(std::vector<double>{1000.7, -3.9}, {2}, ctx.options()).to(DType::Int8),
      {-24, -3});
}

// float16 and bfloat16 round to nearest even once, keep subnormals and
// overflow to infinity; their sums accumulate in float32.
void sixteen_bit_rounding(const Context& ctx) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor f32 = from_vector(std::vector<double>{1.00048828125, 65520.0, -3.0e-8}, {3},
                                 ctx.options(DType::Float32));
  BP_EXPECT_VALUES(f32.to(DType::Float16), {1.0, inf, -5.960464477539063e-08});
  BP_EXPECT_VALUES(
      from_vector(std::vector<double>{1.00390625, 3.0e38}, {2}, ctx.options()).to(DType::BFloat16),
      {1.0, 3.00405527047391e+38});
  BP_EXPECT_EQ(ones({3000}, ctx.options(DType::Float16)).sum().item<double>(), 3000.0,
               "3000 float16 ones summed");
  const Tensor h = from_vector(std::vector<double>{1.5, -2.25}, {2}, ctx.options(DType::Float16));
  BP_EXPECT_VALUES(h * 2, {3.0, -4.5});
}

}  // namespace

void add_dtype_cases(Suite& suite) {
  suite.add(
      {"dtype.narrow_promotion_and_wrap", {"DT-1", "DT-2"}, kCategory, narrow_promotion_and_wrap});
  suite.add({"dtype.sixteen_bit_rounding", {"DT-2"}, kCategory, sixteen_bit_rounding});
}

}  // namespace bp::conformance
