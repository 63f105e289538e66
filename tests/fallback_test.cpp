// The fallback policy (--fallback deny|warn|allow) on the `partial` test
// plugin, which registers fill and copy but no add (and a mul that declines
// strided operands): with allow (and warn)
// its adds run on the reference backend (cpu_onednn unless --reference
// names another), give the right values and are counted;
// with deny they fail naming the op.
#include <backplane/backplane.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

using bp::DType;
using bp::Tensor;

class Fallback : public ::testing::Test {
 protected:
  void SetUp() override {
    bp::PluginLoader::instance().add_search_path(BACKPLANE_PLUGIN_DIR);
    bp::Backend& b =
        bp::PluginLoader::instance().load(BACKPLANE_TEST_PLUGIN_DIR "/libbackplane_partial.so");
    device_ = bp::Device{static_cast<int16_t>(b.id()), 0};
    bp::reset_fallback_records();
  }
  void TearDown() override { bp::set_fallback_policy(bp::FallbackPolicy::Deny); }

  bp::TensorOptions on_partial(DType d = DType::Float32) const {
    return bp::TensorOptions(d).device(device_);
  }

  bp::Device device_;
};

TEST_F(Fallback, AllowRunsAddOnTheCpuBackendAndCountsIt) {
  bp::set_fallback_policy(bp::FallbackPolicy::Allow);
  Tensor a = bp::from_vector(std::vector<double>{1, 2, 3}, {3}, on_partial());
  Tensor b = bp::full({3}, 10, on_partial());
  Tensor c = bp::add(a, b);
  EXPECT_EQ(c.device(), device_);
  EXPECT_EQ(c.to_vector<double>(), (std::vector<double>{11, 12, 13}));
  std::vector<bp::FallbackRecord> records = bp::fallback_records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].op, "add");
  EXPECT_EQ(records[0].dtype, DType::Float32);
  EXPECT_EQ(records[0].backend, "partial");
  EXPECT_EQ(records[0].count, 1u);
}

// The reference backend comes from --reference, else BACKPLANE_REFERENCE,
// else cpu_onednn; the flag is taken out of argv like the others.
TEST_F(Fallback, ReferenceComesFromTheFlagThenTheEnvironment) {
  bp::set_reference_backend("");
  ::unsetenv(bp::kReferenceEnv);
  EXPECT_EQ(bp::reference_backend(), "cpu_onednn");
  ::setenv(bp::kReferenceEnv, "sim", 1);
  EXPECT_EQ(bp::reference_backend(), "sim");
  std::string a0 = "prog", a1 = "--reference=hostref", a2 = "rest";
  char* argv[] = {a0.data(), a1.data(), a2.data(), nullptr};
  int argc = 3;
  const bp::BackendFlags flags = bp::init_from_args(argc, argv);
  EXPECT_EQ(flags.reference, "hostref");
  EXPECT_EQ(bp::reference_backend(), "hostref");
  ASSERT_EQ(argc, 2);
  EXPECT_EQ(std::string(argv[1]), "rest");
  bp::set_reference_backend("");
  EXPECT_EQ(bp::reference_backend(), "sim");
  ::unsetenv(bp::kReferenceEnv);
}

// The fallback runs on the reference backend, so one that cannot address
// host memory is refused by name, and the inputs are left as they were.
TEST_F(Fallback, AllowRunsOnTheReferenceAndRefusesOneWithoutHostMemory) {
  bp::set_fallback_policy(bp::FallbackPolicy::Allow);
  bp::set_reference_backend("sim");
  Tensor a = bp::from_vector(std::vector<double>{1, 2, 3}, {3}, on_partial());
  const uint32_t version = a.version();
  std::string message;
  try {
    a.add_(bp::full({3}, 10, on_partial()));
  } catch (const bp::Error& e) {
    message = e.what();
  }
  bp::set_reference_backend("");
  EXPECT_NE(message.find("reference backend 'sim'"), std::string::npos) << message;
  EXPECT_NE(message.find("--reference"), std::string::npos) << message;
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(a.version(), version);
  EXPECT_TRUE(bp::fallback_records().empty());
}

TEST_F(Fallback, AllowKeepsInPlaceOpsInPlaceOnStridedViews) {
  bp::set_fallback_policy(bp::FallbackPolicy::Allow);
  Tensor base = bp::from_vector(std::vector<double>{0, 1, 2, 3, 4, 5}, {2, 3}, on_partial());
  Tensor column = base.index({bp::Slice(), 1});  // stride 3, offset 1
  const void* memory = base.data_ptr();
  column.add_(bp::full({2}, 100, on_partial()));
  EXPECT_EQ(base.data_ptr(), memory);
  EXPECT_EQ(base.to_vector<double>(), (std::vector<double>{0, 101, 2, 3, 104, 5}));
  ASSERT_EQ(bp::fallback_records().size(), 1u);
  EXPECT_EQ(bp::fallback_records()[0].count, 1u);
}

TEST_F(Fallback, WarnPrintsEachOpOnceAndCountsEveryCall) {
  bp::set_fallback_policy(bp::FallbackPolicy::Warn);
  Tensor a = bp::full({4}, 1, on_partial(DType::Int64));
  testing::internal::CaptureStderr();
  Tensor b = bp::add(a, a);
  Tensor c = bp::add(b, a);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(c.to_vector<int64_t>(), (std::vector<int64_t>{3, 3, 3, 3}));
  EXPECT_NE(err.find("add"), std::string::npos) << err;
  EXPECT_NE(err.find("partial"), std::string::npos) << err;
  EXPECT_EQ(err.find("add", err.find("add") + 1), std::string::npos) << "warned twice: " << err;
  ASSERT_EQ(bp::fallback_records().size(), 1u);
  EXPECT_EQ(bp::fallback_records()[0].count, 2u);
}

TEST_F(Fallback, DenyIsAnErrorNamingTheOpAndBackend) {
  bp::set_fallback_policy(bp::FallbackPolicy::Deny);
  Tensor a = bp::full({3}, 1, on_partial());
  try {
    (void)bp::add(a, a);
    FAIL() << "add on a backend without an add kernel must throw under --fallback deny";
  } catch (const bp::NotImplementedError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[add]", 0), 0u) << msg;
    EXPECT_NE(msg.find("partial"), std::string::npos) << msg;
  }
  EXPECT_TRUE(bp::fallback_records().empty());
}

// partial's mul declines (Unsupported) anything but contiguous operands: a
// contiguous mul runs on partial itself; a strided one goes to the policy,
// as a missing kernel does.
TEST_F(Fallback, KernelThatDeclinesACallGoesToThePolicy) {
  bp::set_fallback_policy(bp::FallbackPolicy::Allow);
  Tensor base = bp::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, on_partial());
  Tensor dense = bp::mul(base, base);
  EXPECT_EQ(dense.to_vector<double>(), (std::vector<double>{1, 4, 9, 16, 25, 36}));
  EXPECT_TRUE(bp::fallback_records().empty()) << "a contiguous mul is partial's own";

  Tensor strided = bp::mul(base.t(), base.t());  // strides [1, 3]
  EXPECT_EQ(strided.device(), device_);
  EXPECT_EQ(strided.to_vector<double>(), (std::vector<double>{1, 16, 4, 25, 9, 36}));
  ASSERT_EQ(bp::fallback_records().size(), 1u);
  EXPECT_EQ(bp::fallback_records()[0].op, "mul");
  EXPECT_EQ(bp::fallback_records()[0].count, 1u);

  // Under deny the kernel's own words reach the user, and self is unchanged.
  bp::set_fallback_policy(bp::FallbackPolicy::Deny);
  Tensor column = base.index({bp::Slice(), 1});
  const uint32_t version = base.version();
  try {
    column.mul_(bp::full({2}, 10, on_partial()));
    FAIL() << "a declined mul must throw under --fallback deny";
  } catch (const bp::NotImplementedError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[mul]", 0), 0u) << msg;
    EXPECT_NE(msg.find("contiguous operands of one shape only"), std::string::npos) << msg;
  }
  EXPECT_EQ(base.to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(base.version(), version);
}

TEST_F(Fallback, PolicyNamesParse) {
  EXPECT_EQ(bp::parse_fallback_policy("deny"), bp::FallbackPolicy::Deny);
  EXPECT_EQ(bp::parse_fallback_policy("warn"), bp::FallbackPolicy::Warn);
  EXPECT_EQ(bp::parse_fallback_policy("allow"), bp::FallbackPolicy::Allow);
  EXPECT_THROW(bp::parse_fallback_policy("sometimes"), bp::ValueError);
}

}  // namespace
