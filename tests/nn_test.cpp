// The CNN layers on the default backend (cpu_onednn): which path conv2d
// takes (oneDNN's kernels for float32, forward and backward, the composite
// for float64 or under CompositeOnlyGuard), and small cases whose values are
// worked out by hand in the comments.
#include <backplane/backplane.h>
#include <backplane/debug.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

using bp::DType;
using bp::Tensor;

bool reached(const bp::debug::KernelRecording& rec, const std::string& op) {
  const auto k = rec.kernels();
  return std::any_of(k.begin(), k.end(),
                     [&](const bp::debug::ReachedKernel& r) { return r.op == op; });
}

Tensor iota(std::vector<int64_t> shape, DType dt = DType::Float32) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return bp::arange(0, n, 1, bp::TensorOptions(dt)).reshape(bp::IntArrayRef(shape));
}

TEST(Conv2d, Float32RunsOnednnKernelsForwardAndBackward) {
  Tensor x = bp::randn({2, 8, 9, 9}).requires_grad_();
  Tensor w = bp::randn({16, 8, 3, 3}).requires_grad_();
  bp::debug::KernelRecording rec;
  Tensor y = bp::conv2d(x, w, Tensor(), 1, 1);
  y.sum().backward();
  // The composite is a matmul of columns: oneDNN's convolution needs none.
  EXPECT_FALSE(reached(rec, "matmul"));
  ASSERT_TRUE(x.grad().defined());
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(x.grad().sizes().size(), 4u);
}

TEST(Conv2d, CompositeRunsForFloat64AndUnderTheGuard) {
  {
    bp::debug::KernelRecording rec;
    bp::conv2d(bp::randn({1, 2, 5, 5}, bp::TensorOptions(DType::Float64)),
               bp::randn({3, 2, 3, 3}, bp::TensorOptions(DType::Float64)));
    EXPECT_TRUE(reached(rec, "matmul"));
  }
  bp::CompositeOnlyGuard guard;
  bp::debug::KernelRecording rec;
  bp::conv2d(bp::randn({1, 2, 5, 5}), bp::randn({3, 2, 3, 3}));
  EXPECT_TRUE(reached(rec, "matmul"));
}

TEST(Conv2d, OnesKernelSumsWindows) {
  // x = 0..15 as 4x4; a 2x2 kernel of ones, stride 2: each output is the sum
  // of one 2x2 block: 0+1+4+5 = 10, 2+3+6+7 = 18, 8+9+12+13 = 42, 10+11+14+15 = 50;
  // bias 1 adds 1. Every input element is in exactly one window: grad 1.
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = iota({1, 1, 4, 4}, dt).requires_grad_();
    const Tensor w = bp::ones({1, 1, 2, 2}, bp::TensorOptions(dt));
    const Tensor b = bp::ones({1}, bp::TensorOptions(dt));
    Tensor y = bp::conv2d(x, w, b, 2);
    EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{11, 19, 43, 51}));
    y.sum().backward();
    EXPECT_EQ(x.grad().to_vector<double>(), std::vector<double>(16, 1.0));
  }
}

TEST(ConvTranspose2d, SpreadsEachInputOverItsWindow) {
  // A 2x2 kernel of ones, stride 2: each input element fills its own 2x2
  // block of the 4x4 output; the bias adds 1. Each output has one input: the
  // input's gradient (of the sum) is the kernel's sum, 4.
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = iota({1, 1, 2, 2}, dt).requires_grad_();
    const Tensor w = bp::ones({1, 1, 2, 2}, bp::TensorOptions(dt));
    const Tensor b = bp::ones({1}, bp::TensorOptions(dt));
    Tensor y = bp::conv_transpose2d(x, w, b, 2);
    EXPECT_FALSE(y.is_view());  // float64 runs the composite: a tensor of its own
    EXPECT_EQ(y.to_vector<double>(),
              (std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
    y.sum().backward();
    EXPECT_EQ(x.grad().to_vector<double>(), std::vector<double>(4, 4.0));
  }
}

TEST(ConvTranspose2d, ModuleShapesAndRepr) {
  bp::nn::ConvTranspose2d m(4, 6, 3, {.stride = 2, .padding = 1, .output_padding = 1, .groups = 2});
  EXPECT_EQ(bp::DimVector(m.weight.sizes()), bp::DimVector({4, 3, 3, 3}));
  EXPECT_EQ(bp::DimVector(m.bias.sizes()), bp::DimVector({6}));
  // fan_in = out/groups * kh * kw = 27: every value within 1/sqrt(27).
  const double bound = 1 / std::sqrt(27.0);
  EXPECT_LE(m.weight.abs().max().item<double>(), bound);
  EXPECT_LE(m.bias.abs().max().item<double>(), bound);
  // (5 - 1) * 2 - 2 * 1 + 3 + 1 = 10 per spatial dim.
  EXPECT_EQ(bp::DimVector(m.forward(bp::ones({1, 4, 5, 5})).sizes()),
            bp::DimVector({1, 6, 10, 10}));
  EXPECT_EQ(
      m.extra_repr(),
      "4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1), groups=2");
}

TEST(LayerNorm, LargeFloat32RunsOnednnWithoutGrad) {
  // The composite reduces (sum); oneDNN's layer normalisation does not reach it.
  const Tensor x = bp::randn({256, 256}), w = bp::randn({256}), b = bp::randn({256});
  bp::NoGradGuard no_grad;
  bp::debug::KernelRecording rec;
  const Tensor y = bp::layer_norm(x, {256}, w, b);
  EXPECT_FALSE(reached(rec, "sum"));
  bp::CompositeOnlyGuard composite;
  EXPECT_TRUE(bp::allclose(y, bp::layer_norm(x, {256}, w, b), 1e-4, 1e-5));
}

TEST(Pooling, MaxAndAvgByHand) {
  // 0..15 as 4x4, 2x2 windows, stride 2: the maxima are each block's
  // bottom-right element (5, 7, 13, 15), at those positions; the means are
  // 2.5, 4.5, 10.5, 12.5.
  Tensor x = iota({1, 1, 4, 4}).requires_grad_();
  auto [m, i] = bp::max_pool2d_with_indices(x, 2);
  EXPECT_EQ(m.to_vector<double>(), (std::vector<double>{5, 7, 13, 15}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{5, 7, 13, 15}));
  m.sum().backward();
  std::vector<double> g(16, 0.0);
  for (int k : {5, 7, 13, 15}) g[static_cast<std::size_t>(k)] = 1;
  EXPECT_EQ(x.grad().to_vector<double>(), g);
  EXPECT_EQ(bp::avg_pool2d(x, 2).to_vector<double>(), (std::vector<double>{2.5, 4.5, 10.5, 12.5}));
  EXPECT_EQ(bp::adaptive_avg_pool2d(x, 1).to_vector<double>(), (std::vector<double>{7.5}));
}

TEST(Pooling, OwnKernelsRunWithGradAndAreRecordedByName) {
  Tensor x = bp::randn({2, 3, 8, 8}).requires_grad_();
  bp::debug::KernelRecording rec;
  bp::max_pool2d(x, 3, 2, 1).sum().backward();
  bp::avg_pool2d(x, 3, 2, 1).sum().backward();
  EXPECT_TRUE(reached(rec, "core::max_pool2d"));
  EXPECT_TRUE(reached(rec, "core::avg_pool2d"));
  EXPECT_TRUE(reached(rec, "core::avg_pool2d_backward"));
  EXPECT_FALSE(reached(rec, "where"));  // the composite max pool selects with where
  // A ceil-mode window past the padded input divides by the part inside it
  // (PyTorch's count), where oneDNN would divide by the whole kernel: the
  // plugin runs its own loop, and averaging ones gives ones.
  bp::debug::KernelRecording ceil_mode;
  const Tensor y = bp::avg_pool2d(bp::ones({1, 1, 4, 4}), 3, 2, 0, true, true);
  EXPECT_TRUE(reached(ceil_mode, "core::avg_pool2d"));
  EXPECT_EQ(y.to_vector<double>(), std::vector<double>(4, 1.0));
}

// cpu_onednn's float32 max pool over dense rows (16 columns at a time,
// branch-free) against its float64 one (the SDK's plain loop), on data
// with ties, NaN and -inf: the same values and the same indices (the first
// maximum in window order, a NaN taking the window), for every geometry.
TEST(Pooling, Float32RowsKernelKeepsThePlainLoopsRule) {
  std::vector<float> data;
  bp::manual_seed(3);
  const int64_t c = 3, h = 7, w = 41;
  const std::vector<double> r = bp::rand({2 * c * h * w}).to_vector<double>();
  for (double u : r) {
    const int v = static_cast<int>(u * 9);  // 0..8: ties in -3..3, then NaN and -inf
    data.push_back(v == 7 ? std::nanf("") : v == 8 ? -INFINITY : static_cast<float>(v - 3));
  }
  const Tensor x = bp::from_vector(data, {2, c, h, w});
  for (const bp::Size2 k :
       {bp::Size2(1), bp::Size2(2), bp::Size2(3), bp::Size2(3, 2), bp::Size2(5)})
    for (const int64_t stride : {1, 2, 3})
      for (const bp::Size2 pad : {bp::Size2(0), bp::Size2(1), bp::Size2(1, 0)}) {
        if (pad[0] * 2 > k[0] || pad[1] * 2 > k[1]) continue;
        for (const bool ceil : {false, true})
          for (const bool transposed : {false, true}) {
            SCOPED_TRACE(testing::Message()
                         << "kernel " << k[0] << "x" << k[1] << " stride " << stride << " pad "
                         << pad[0] << "," << pad[1] << (ceil ? " ceil" : "")
                         << (transposed ? " transposed" : ""));
            const Tensor in = transposed ? x.transpose(2, 3).contiguous().transpose(2, 3) : x;
            auto [v32, i32] = bp::max_pool2d_with_indices(in, k, bp::Size2(stride), pad, 1, ceil);
            auto [v64, i64] = bp::max_pool2d_with_indices(in.to(bp::DType::Float64), k,
                                                          bp::Size2(stride), pad, 1, ceil);
            EXPECT_EQ(i32.to_vector<int64_t>(), i64.to_vector<int64_t>());
            const std::vector<double> a = v32.to_vector<double>(), b = v64.to_vector<double>();
            ASSERT_EQ(a.size(), b.size());
            for (std::size_t e = 0; e < a.size(); ++e)
              EXPECT_TRUE(a[e] == b[e] || (std::isnan(a[e]) && std::isnan(b[e])))
                  << "element " << e << ": " << a[e] << " vs " << b[e];
          }
      }
}

TEST(BatchNorm, TrainingRunsOnednnForwardAndBackward) {
  Tensor x = bp::randn({4, 3, 5, 5}).requires_grad_();
  Tensor w = bp::ones({3}).requires_grad_();
  Tensor rm = bp::zeros({3}), rv = bp::ones({3});
  bp::debug::KernelRecording rec;
  Tensor y = bp::batch_norm(x, rm, rv, w, Tensor(), true, 0.1, 1e-5);
  y.pow(2).sum().backward();
  EXPECT_TRUE(reached(rec, "core::batch_norm"));
  EXPECT_TRUE(reached(rec, "core::batch_norm_backward"));
  ASSERT_TRUE(x.grad().defined());
  // sum(y^2) = N*H*W per channel whatever x is, so its gradient is ~0
  // (y is normalised); the weight's is 2 * sum(y^2) / w = 2 * 100.
  EXPECT_LT(x.grad().abs().max().item<double>(), 1e-3);
  for (double g : w.grad().to_vector<double>()) EXPECT_NEAR(g, 200.0, 1e-2);
}

TEST(Losses, CrossEntropyOfUniformLogitsIsLogC) {
  // Equal logits over 4 classes: every class has probability 1/4, loss log 4.
  const Tensor logits = bp::zeros({3, 4});
  const Tensor target = bp::tensor({0, 3, 1});
  EXPECT_NEAR(bp::cross_entropy(logits, target).item<double>(), std::log(4.0), 1e-6);
  // Ignoring one target averages over the other two: still log 4; ignoring
  // every target leaves nothing to average: 0/0, NaN (as PyTorch).
  EXPECT_NEAR(bp::cross_entropy(logits, target, Tensor(), 3).item<double>(), std::log(4.0), 1e-6);
  EXPECT_TRUE(
      std::isnan(bp::cross_entropy(logits, bp::tensor({3, 3, 3}), Tensor(), 3).item<double>()));
  EXPECT_NEAR(bp::mse_loss(bp::ones({2, 2}), bp::zeros({2, 2})).item<double>(), 1.0, 0);
}

TEST(BatchNorm, UpdatesRunningStatsInPlace) {
  // One channel holding 1, 3 (mean 2, biased var 1, unbiased var 2), momentum 0.5:
  // running_mean 0 -> 1, running_var 1 -> 1.5; the version counters move.
  const Tensor x = bp::tensor({{1.0}, {3.0}}, DType::Float32);
  Tensor rm = bp::zeros({1}), rv = bp::ones({1});
  const uint32_t v0 = rm.version();
  const Tensor y = bp::batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.5, 0);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{-1, 1}));
  EXPECT_EQ(rm.to_vector<double>(), (std::vector<double>{1}));
  EXPECT_EQ(rv.to_vector<double>(), (std::vector<double>{1.5}));
  EXPECT_GT(rm.version(), v0);
}

// The CPU backend keeps freed blocks for reuse: taking one again counts no
// system allocation. Large blocks (12 MiB) and medium ones (16 KiB: a
// 64 x 64 float32 result) stay reserved while cached, so taking one counts
// no new reserved byte either; small ones (12 bytes: a 16-byte block) wait
// in a per-thread cache below the accounting, as in malloc's, and count as
// reserved while a tensor holds them.
class HostAllocator : public ::testing::TestWithParam<int64_t> {};

TEST_P(HostAllocator, FreedBlocksAreReusedAndCountedOnce) {
  const bp::Device d = bp::default_device();
  const bp::Backend& b = *bp::PluginLoader::instance().by_id(d.backend);
  const int64_t n = GetParam();
  { const Tensor warm = bp::empty({n}); }
  const bp_memory_stats s0 = *b.memory_stats(d.index);
#if defined(__SANITIZE_ADDRESS__)
  // Under AddressSanitizer small blocks go back to malloc at once, so that
  // it sees a use after free (allocator.cpp).
  if (n * 4 <= 256) {
    const Tensor t = bp::empty({n});
    EXPECT_EQ(b.memory_stats(d.index)->num_system_allocs, s0.num_system_allocs + 1);
    return;
  }
#endif
  for (int i = 0; i < 3; ++i) {
    const Tensor t = bp::empty({n});
    const bp_memory_stats s = *b.memory_stats(d.index);
    EXPECT_EQ(s.num_system_allocs, s0.num_system_allocs)
        << "pass " << i << " did not reuse the cached block";
    EXPECT_EQ(s.reserved_bytes, s0.reserved_bytes + (n * 4 <= 256 ? 16 : 0))
        << "pass " << i << " counted the reused block again";
    EXPECT_EQ(s.allocated_bytes, s0.allocated_bytes + static_cast<uint64_t>(n) * 4);
  }
  const bp_memory_stats s1 = *b.memory_stats(d.index);
  EXPECT_EQ(s1.reserved_bytes, s0.reserved_bytes);
  EXPECT_EQ(s1.allocated_bytes, s0.allocated_bytes);
}

// The small blocks a thread cached go back to malloc when it exits: 4000
// short-lived threads, each leaving 32 small blocks freed, raise the
// resident size by far less than the 4000 x 32 x (16..256 bytes) they
// would strand otherwise (about 25 MB here; a thread's counters stay, at
// a few dozen bytes each).
// Not under AddressSanitizer: it has no small-block cache there, and its
// own per-thread caches and quarantine grow the resident size.
#if !defined(__SANITIZE_ADDRESS__)
long resident_kib() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

TEST(HostAllocatorThreads, ExitingThreadsGiveTheirCachedBlocksBack) {
  const Tensor a = bp::ones({3}), b = bp::ones({40});
  const auto run_threads = [&](int count) {
    for (int i = 0; i < count; ++i)
      std::thread([&] {
        std::vector<Tensor> keep;
        for (int j = 0; j < 16; ++j) {
          keep.push_back(bp::add(a, a));
          keep.push_back(bp::add(b, b));
        }
      }).join();
  };
  run_threads(500);  // the arenas and the counters' vector settle
  const long before = resident_kib();
  ASSERT_GT(before, 0);
  run_threads(4000);
  EXPECT_LT(resident_kib() - before, 4 * 1024) << "kB of resident memory more after 4000 threads";
}
#endif

INSTANTIATE_TEST_SUITE_P(Sizes, HostAllocator,
                         ::testing::Values(int64_t{3} << 20, int64_t{4096}, int64_t{3}));

}  // namespace

// softmax and log_softmax have no implicit-dim form (docs/nn.md): a call
// without a dim does not compile; with a dtype, a non-floating one is refused.
template <typename T>
concept SoftmaxWithoutDim = requires(T t) {
  bp::softmax(t);
};
template <typename T>
concept LogSoftmaxWithoutDim = requires(T t) {
  bp::log_softmax(t);
};
static_assert(!SoftmaxWithoutDim<bp::Tensor> && !LogSoftmaxWithoutDim<bp::Tensor>);

TEST(Softmax, DtypeMustBeFloating) {
  const bp::Tensor x = bp::ones({2, 3});
  EXPECT_THROW(bp::softmax(x, 1, bp::DType::Int64), bp::TypeError);
  EXPECT_THROW(bp::log_softmax(x, 1, bp::DType::Int64), bp::TypeError);
  EXPECT_EQ(bp::softmax(x, 1, bp::DType::Float64).dtype(), bp::DType::Float64);
}
