// Threads sharing tensors (AG-15): ops recorded and backward passes run at
// once on the same leaves, from fresh leaves (whose autograd state is made
// lazily, by whichever thread gets there first) and with hooks, views and
// retain_grad in the mix. Every gradient must be exact. These cases are
// what the ThreadSanitizer job (the `tsan` preset) runs; they use the sim
// backend too, whose kernels are plain loops the sanitizer sees whole.
#include <backplane/backplane.h>
#include <gtest/gtest.h>

#include <atomic>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace {

using bp::Tensor;

class Threads : public ::testing::TestWithParam<std::string> {
 protected:
  bp::TensorOptions options() const { return bp::TensorOptions().device(bp::device(GetParam())); }
  Tensor leaf(std::vector<double> v) const {
    Tensor t = bp::from_vector(v, {static_cast<int64_t>(v.size())}, options());
    t.requires_grad_();
    return t;
  }
};

// Runs fn(thread index) on `n` threads and rethrows the first error.
template <class F>
void on_threads(int n, F&& fn) {
  std::vector<std::exception_ptr> errors(n);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      try {
        ready.fetch_add(1);
        while (ready.load() < n) std::this_thread::yield();  // start together
        fn(t);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  for (auto& th : threads) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

TEST_P(Threads, SharedFreshLeavesGetEveryContribution) {
  // The scenario: 20,000 leaves shared by two threads, each running
  // forward and backward through every leaf, in opposite orders.
  constexpr int kLeaves = 20000;
  std::vector<Tensor> leaves;
  for (int i = 0; i < kLeaves; ++i) leaves.push_back(leaf({1, 2}));
  on_threads(2, [&](int t) {
    const Tensor k = bp::full({2}, t + 1.0, options());
    for (int n = 0; n < kLeaves; ++n) (leaves[t == 0 ? n : kLeaves - 1 - n] * k).sum().backward();
  });
  for (int i = 0; i < kLeaves; ++i)
    ASSERT_EQ(leaves[i].grad().to_vector<double>(), (std::vector<double>{3, 3})) << "leaf " << i;
}

TEST_P(Threads, OneGraphPerThreadOverSharedLeaves) {
  // Each thread builds a deeper graph over all leaves (views, in-place ops
  // on non-leaves, retain_grad, a hook) and backpropagates it at once.
  constexpr int kLeaves = 200, kThreads = 4, kRounds = 5;
  std::vector<Tensor> leaves;
  for (int i = 0; i < kLeaves; ++i) leaves.push_back(leaf({1, 2, 3, 4}));
  std::atomic<int> hook_calls{0};
  leaves[0].register_hook([&](const Tensor&) {
    hook_calls.fetch_add(1);
    return Tensor();
  });
  on_threads(kThreads, [&](int) {
    for (int r = 0; r < kRounds; ++r) {
      Tensor total = bp::zeros({}, options());
      for (const Tensor& x : leaves) {
        Tensor y = x * 2;           // dy/dx = 2
        y.narrow(0, 0, 2).mul_(3);  // first half: 6
        y.retain_grad();
        total = total + y.sum();
      }
      total.backward();
    }
  });
  const double n = kThreads * kRounds;
  for (int i = 0; i < kLeaves; ++i)
    ASSERT_EQ(leaves[i].grad().to_vector<double>(),
              (std::vector<double>{6 * n, 6 * n, 2 * n, 2 * n}))
        << "leaf " << i;
  EXPECT_EQ(hook_calls.load(), kThreads * kRounds);
}

TEST_P(Threads, GradModeIsPerThread) {
  Tensor x = leaf({1, 2});
  on_threads(2, [&](int t) {
    for (int i = 0; i < 1000; ++i) {
      if (t == 0) {
        bp::NoGradGuard g;
        ASSERT_FALSE((x * 2).requires_grad());
      } else {
        ASSERT_TRUE((x * 2).requires_grad());
      }
    }
  });
}

TEST(ThreadsUnload, UnloadIsSafeWhileAnotherThreadComputes) {
  // One thread runs ops on a tensor of the backend while another unloads it:
  // the ops keep working to the end (DV-4).
  bp::Backend& b = bp::PluginLoader::instance().load("sim");
  const bp::Device d{static_cast<int16_t>(b.id()), 0};
  Tensor t = bp::full({64}, 1.0, bp::TensorOptions().device(d));
  on_threads(2, [&](int th) {
    if (th == 1) {
      bp::PluginLoader::instance().unload("sim");
      return;
    }
    Tensor acc = t;
    for (int i = 0; i < 2000; ++i) acc = acc + t;
    ASSERT_EQ(acc.to_vector<float>()[0], 2001.0f);
  });
  EXPECT_EQ(bp::PluginLoader::instance().find("sim"), nullptr);
  EXPECT_EQ((t * 2).to_vector<float>()[63], 2.0f);
}

#ifdef BACKPLANE_TEST_OPENCL
// Real queues and events of an OpenCL driver (PoCL's CPU device here).
INSTANTIATE_TEST_SUITE_P(Backends, Threads, ::testing::Values("cpu_onednn", "sim", "opencl"),
                         [](const auto& info) { return info.param; });
#else
INSTANTIATE_TEST_SUITE_P(Backends, Threads, ::testing::Values("cpu_onednn", "sim"),
                         [](const auto& info) { return info.param; });
#endif

}  // namespace
