// Named ops (bp::call_op) against the vendor_ops fake: what a call computes,
// how the core checks it against the op's schema before the kernel runs, and
// what a plugin with a malformed schema is told.
#include <backplane/backplane.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace {

const std::string kFakes = BACKPLANE_TEST_PLUGIN_DIR;

bp::Backend& vendor() {
  return bp::PluginLoader::instance().load(kFakes + "/libbackplane_vendor_ops.so");
}

bp::TensorOptions on_vendor(bp::DType dt) {
  return bp::TensorOptions(dt).device(bp::Device{static_cast<int16_t>(vendor().id()), 0});
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

using bp::testing::message_of;

TEST(NamedOps, CallRunsTheKernelWithItsAttributes) {
  const bp::Tensor x =
      bp::from_vector(std::vector<float>{1, 2, 3}, {3}, on_vendor(bp::DType::Float32));
  const bp::Tensor y =
      bp::from_vector(std::vector<float>{10, 20, 30}, {3}, on_vendor(bp::DType::Float32));
  const std::vector<bp::Tensor> out = bp::call_op("fake::axpby", {x, y}, {2.0, 0.5});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].device(), x.device());
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{7, 14, 21}));
  // An int is taken for a float parameter.
  EXPECT_EQ(bp::call_op("fake::axpby", {x, y}, {int64_t{1}, int64_t{0}})[0].to_vector<float>(),
            (std::vector<float>{1, 2, 3}));
}

TEST(NamedOps, SimsFusedLayerNormTakesStridedOperandsBehindItsMemoryGuard) {
  // sim overrides core::layer_norm; with no gradient recorded the core runs
  // the override, here on a transposed x (strides, no copy) in sim's
  // arena, which only the kernel's memory guard makes readable.
  bp::Backend& sim = bp::PluginLoader::instance().load("sim");
  const bp::TensorOptions opts =
      bp::TensorOptions(bp::DType::Float64).device(bp::Device{static_cast<int16_t>(sim.id()), 0});
  const bp::Tensor m = bp::from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}, opts);
  const bp::Tensor w = bp::from_vector(std::vector<double>{2, 2}, {2}, opts);
  const bp::Tensor b = bp::from_vector(std::vector<double>{0.5, 0.5}, {2}, opts);
  ASSERT_TRUE(bp::has_override("core::layer_norm", m));
  bp::NoGradGuard no_grad;
  // Rows of m.t() are [1, 3] and [2, 4]: mean +-1 around the middle, biased
  // variance 1, so each row is [-1, 1] * 2 + 0.5 (eps 0).
  const std::vector<double> got = bp::layer_norm(m.t(), {2}, w, b, 0.0).to_vector<double>();
  EXPECT_EQ(got, (std::vector<double>{-1.5, 2.5, -1.5, 2.5}));
  // sim's own named op runs on its queue like any kernel.
  EXPECT_EQ(bp::call_op("sim::delay", {m}, {int64_t{100}})[0].to_vector<double>(),
            (std::vector<double>{1, 2, 3, 4}));
}

TEST(NamedOps, TwoOutputsAndABoolAttribute) {
  const bp::Tensor x =
      bp::from_vector(std::vector<float>{-2, 3, 0, -1}, {2, 2}, on_vendor(bp::DType::Float32));
  const std::vector<bp::Tensor> parts = bp::call_op("fake::split_sign", {x}, {true});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].size(0), 2);
  EXPECT_EQ(parts[1].size(1), 2);
  EXPECT_EQ(parts[0].to_vector<float>(), (std::vector<float>{0, 3, 0, 0}));
  EXPECT_EQ(parts[1].to_vector<float>(), (std::vector<float>{2, 0, 0, 1}));
  EXPECT_EQ(bp::call_op("fake::split_sign", {x}, {false})[1].to_vector<float>(),
            (std::vector<float>{-2, 0, 0, -1}));
}

TEST(NamedOps, CallOutWritesInPlaceAndBumpsTheVersion) {
  bp::Tensor x = bp::from_vector(std::vector<int64_t>{1, 2, 3}, {3}, on_vendor(bp::DType::Int64));
  const auto before = x.version();
  bp::call_op_out("fake::shift", {x}, {x}, {int64_t{40}});
  EXPECT_EQ(x.to_vector<int64_t>(), (std::vector<int64_t>{41, 42, 43}));
  EXPECT_GT(x.version(), before);
}

TEST(NamedOps, CallsThatDoNotMatchTheSchemaAreRefusedNamingIt) {
  const bp::Tensor x =
      bp::from_vector(std::vector<float>{1, 2}, {2}, on_vendor(bp::DType::Float32));
  std::string m = message_of<bp::ValueError>([&] { bp::call_op("fake::axpby", {x}, {1.0, 2.0}); });
  EXPECT_TRUE(contains(m, "[fake::axpby] expects 2 tensor(s), got 1")) << m;
  EXPECT_TRUE(contains(m, "(schema: (Tensor x, Tensor y, float a, float b) -> Tensor)")) << m;
  m = message_of<bp::ValueError>([&] { bp::call_op("fake::axpby", {x, x}, {1.0}); });
  EXPECT_TRUE(contains(m, "expects 2 attribute(s), got 1")) << m;
  m = message_of<bp::ValueError>([&] { bp::call_op("fake::axpby", {x, x}, {1.0, true}); });
  EXPECT_TRUE(contains(m, "attribute 1 must be float, got bool")) << m;
  m = message_of<bp::ValueError>([&] { bp::call_op("fake::split_sign", {x}, {int64_t{1}}); });
  EXPECT_TRUE(contains(m, "attribute 0 must be bool, got int")) << m;
  m = message_of<bp::ValueError>([&] { bp::call_op_out("fake::split_sign", {x}, {x}, {true}); });
  EXPECT_TRUE(contains(m, "writes 2 output(s), got 1")) << m;
  // An output that partly overlaps an input (IP-6).
  const bp::Tensor z =
      bp::from_vector(std::vector<int64_t>{1, 2, 3}, {3}, on_vendor(bp::DType::Int64));
  m = message_of<bp::ValueError>([&] {
    bp::call_op_out("fake::shift", {z.narrow(0, 0, 2)}, {z.narrow(0, 1, 2)}, {int64_t{1}});
  });
  EXPECT_TRUE(contains(m, "fake::shift")) << m;
  EXPECT_EQ(z.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  // The kernel's own checks still run: shapes the schema cannot state.
  const bp::Tensor y =
      bp::from_vector(std::vector<float>{1, 2, 3}, {3}, on_vendor(bp::DType::Float32));
  m = message_of<bp::ValueError>([&] { bp::call_op("fake::axpby", {x, y}, {1.0, 1.0}); });
  EXPECT_TRUE(contains(m, "[fake::axpby] backend 'vendor_ops'")) << m;
}

TEST(NamedOps, DtypeOutsideTheRegistrationIsNotImplemented) {
  const bp::Tensor x =
      bp::from_vector(std::vector<int32_t>{1, 2}, {2}, on_vendor(bp::DType::Int32));
  const std::string m = message_of<bp::NotImplementedError>([&] {
    bp::call_op("fake::axpby", {x, x}, {1.0, 1.0});
  });
  EXPECT_TRUE(contains(m, "not implemented for dtype int32 on backend 'vendor_ops'")) << m;
  EXPECT_TRUE(contains(m, "it takes float32, float64")) << m;
}

TEST(NamedOps, ABackendWithoutTheOpNamesTheOnesThatHaveIt) {
  vendor();
  const bp::Tensor x = bp::ones({2});  // the default backend
  std::string m = message_of<bp::NotImplementedError>([&] {
    bp::call_op("fake::axpby", {x, x}, {1.0, 1.0});
  });
  EXPECT_TRUE(contains(m, "is not a named op of backend 'cpu_onednn'")) << m;
  EXPECT_TRUE(contains(m, "backends that have it: vendor_ops")) << m;
  m = message_of<bp::NotImplementedError>([&] { bp::call_op("fake::nothing", {x}); });
  EXPECT_TRUE(contains(m, "no loaded backend registered it")) << m;
}

TEST(NamedOps, MixedDevicesAndGradientsAreRefused) {
  const bp::Tensor x =
      bp::from_vector(std::vector<float>{1, 2}, {2}, on_vendor(bp::DType::Float32));
  const bp::Tensor cpu = bp::ones({2});
  std::string m = message_of<bp::ValueError>([&] {
    bp::call_op("fake::axpby", {x, cpu}, {1.0, 1.0});
  });
  EXPECT_TRUE(contains(m, "fake::axpby")) << m;
  EXPECT_TRUE(contains(m, "cpu_onednn:0")) << m;
  bp::Tensor w = bp::from_vector(std::vector<float>{1, 2}, {2}, on_vendor(bp::DType::Float32));
  w.requires_grad_(true);
  m = message_of<bp::Error>([&] { bp::call_op("fake::axpby", {x, w}, {1.0, 1.0}); });
  EXPECT_TRUE(contains(m, "has no gradient, and input 1 requires one")) << m;
  bp::NoGradGuard no_grad;
  EXPECT_EQ(bp::call_op("fake::axpby", {x, w}, {1.0, 1.0})[0].to_vector<float>(),
            (std::vector<float>{2, 4}));
}

TEST(NamedOps, TheListingShowsEachOpWithItsSchemaAndOrigin) {
  vendor();
  int seen = 0;
  for (const bp::NamedOpInfo& op : bp::named_ops()) {
    if (op.backend != "vendor_ops") continue;
    ++seen;
    EXPECT_TRUE(contains(op.origin, "vendor_ops.cpp:")) << op.origin;
    if (op.name == "fake::shift") {
      EXPECT_EQ(op.schema, "(Tensor x, int k) -> Tensor");
      EXPECT_EQ(op.dtype_mask, BP_DTYPE_BIT(BP_DTYPE_INT32) | BP_DTYPE_BIT(BP_DTYPE_INT64));
    }
  }
  EXPECT_EQ(seen, 4);
}

int listed_for(const std::string& backend) {
  int n = 0;
  for (const bp::NamedOpInfo& op : bp::named_ops()) n += op.backend == backend;
  return n;
}

TEST(NamedOps, UnloadingTheBackendTakesItsOpsAway) {
  bp::Tensor keep = bp::from_vector(std::vector<int64_t>{5}, {1}, on_vendor(bp::DType::Int64));
  ASSERT_EQ(listed_for("vendor_ops"), 4);
  bp::PluginLoader::instance().unload("vendor_ops");
  EXPECT_EQ(listed_for("vendor_ops"), 0);
  // Its tensors keep working (DV-4), named ops included.
  EXPECT_EQ(bp::call_op("fake::shift", {keep}, {int64_t{1}})[0].to_vector<int64_t>(),
            (std::vector<int64_t>{6}));
  keep = bp::Tensor();
  // Loaded again: a new instance with its own registrations.
  bp::Backend& again = vendor();
  EXPECT_EQ(listed_for("vendor_ops"), 4);
  const bp::Tensor x = bp::from_vector(std::vector<int64_t>{1}, {1}, on_vendor(bp::DType::Int64));
  EXPECT_EQ(x.device().backend, again.id());
  EXPECT_EQ(bp::call_op("fake::shift", {x}, {int64_t{1}})[0].to_vector<int64_t>(),
            (std::vector<int64_t>{2}));
}

TEST(NamedOps, AnOverrideRunsOnlyWhenNoGradientIsRecorded) {
  // vendor_ops overrides silu with x + 1000 and has no sigmoid: the
  // composite cannot run there, which shows which path a call took.
  const bp::Tensor x =
      bp::from_vector(std::vector<float>{1, 2}, {2}, on_vendor(bp::DType::Float32));
  EXPECT_TRUE(bp::has_override("core::silu", x));
  EXPECT_FALSE(bp::has_override("core::silu", x.to(bp::DType::Float64)));
  EXPECT_EQ(bp::silu(x).to_vector<float>(), (std::vector<float>{1001, 1002}));
  {
    bp::NoGradGuard no_grad;
    EXPECT_EQ(bp::silu(x).to_vector<float>(), (std::vector<float>{1001, 1002}));
  }
  {
    bp::CompositeOnlyGuard composite;
    EXPECT_THROW(bp::silu(x), bp::NotImplementedError);
  }
  // Never by name: the composite checks what the schema cannot say.
  const std::string m = message_of<bp::ValueError>([&] { bp::call_op("core::silu", {x}); });
  EXPECT_TRUE(contains(m, "call silu()")) << m;
  bp::Tensor w = x.clone();
  w.requires_grad_(true);
  EXPECT_THROW(bp::silu(w), bp::NotImplementedError);  // a gradient to record: the composite
  bp::NoGradGuard no_grad;
  EXPECT_EQ(bp::silu(w).to_vector<float>(), (std::vector<float>{1001, 1002}));
}

TEST(NamedOps, AMalformedSchemaRefusesTheLoadSayingWhy) {
  const std::string m = message_of<bp::PluginError>(
      [&] { bp::PluginLoader::instance().load(kFakes + "/libbackplane_bad_schema.so"); });
  EXPECT_TRUE(contains(m, "registering kernels failed")) << m;
  EXPECT_TRUE(contains(m, "unknown parameter type 'double'")) << m;
  // What it registered before the bad schema went with it.
  EXPECT_EQ(listed_for("bad_schema"), 0);
  const bp::Tensor x = bp::zeros({1}, bp::TensorOptions(bp::DType::Int64));
  const std::string gone =
      message_of<bp::NotImplementedError>([&] { bp::call_op("fake::shift", {x}, {int64_t{1}}); });
  EXPECT_TRUE(contains(gone, "no loaded backend registered it")) << gone;
}

}  // namespace
