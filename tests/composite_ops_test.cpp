// The composite-op table `backplane ops` prints (cli/composite_ops.h) says
// which primitive kernels each composite is built from. Each entry's probe
// runs it under kernel recording; the primitives it reaches must be the
// entry's list exactly, on cpu_onednn and on sim. Where a backend fused the
// composite into a named kernel (core::silu, core::layer_norm), the
// primitives it reached must be among the entry's.
#include "composite_ops.h"

#include <backplane/backplane.h>
#include <backplane/debug.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace {

class CompositeOps : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { bp::set_default_backend(GetParam()); }
  void TearDown() override { bp::set_default_backend("cpu_onednn"); }
};

std::string joined(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return "{" + out + "}";
}

TEST_P(CompositeOps, EachEntryReachesTheKernelsItLists) {
  int probed = 0;
  for (const bp::cli::CompositeOp& entry : bp::cli::composite_ops()) {
    SCOPED_TRACE(entry.name);
    if (entry.probe == nullptr) {
      // Only the copy between devices needs a second backend: checked below.
      EXPECT_STREQ(entry.name, "to(device)");
      continue;
    }
    std::set<std::string> listed, primitives, named;
    for (bp::Op op : entry.uses) listed.insert(std::string(bp::op_name(op)));
    for (const bp::debug::ReachedKernel& k : entry.probe())
      (k.op.find("::") != std::string::npos ? named : primitives).insert(k.op);
    if (named.empty()) {
      EXPECT_EQ(joined(primitives), joined(listed))
          << "the table lists other kernels than the probe reached";
    } else {
      for (const auto& p : primitives)
        EXPECT_TRUE(listed.count(p)) << p << " reached beside " << joined(named) << ", not listed";
    }
    ++probed;
  }
  EXPECT_EQ(probed + 1, static_cast<int>(bp::cli::composite_ops().size()));
}

INSTANTIATE_TEST_SUITE_P(Backends, CompositeOps, ::testing::Values("cpu_onednn", "sim"),
                         [](const auto& info) { return info.param; });

// to(device) between two plugins: host staging buffers, plus a copy kernel
// on the source for a view that is not contiguous.
TEST(CompositeOpsToDevice, AViewIsCopiedOnceThenStaged) {
  const bp::cli::CompositeOp* entry = nullptr;
  for (const auto& e : bp::cli::composite_ops())
    if (std::string(e.name) == "to(device)") entry = &e;
  ASSERT_NE(entry, nullptr);
  ASSERT_EQ(entry->uses.size(), 1u);
  EXPECT_EQ(entry->uses[0], bp::Op::Copy);
  bp::Tensor x = bp::arange(6, bp::TensorOptions(bp::DType::Float32)).view({2, 3}).t();
  const bp::Device sim = bp::device("sim");
  std::set<std::string> reached;
  {
    bp::debug::KernelRecording r;
    x.to(sim);
    for (const auto& k : r.kernels()) reached.insert(k.op);
  }
  EXPECT_EQ(joined(reached), "{copy}");
}

}  // namespace
