// The model layer on the default backend: what the conformance category
// `model` does not cover (containers, traversal, initialisation statistics,
// layer modes, to() with gradients, schedulers' state, clipping by value) and
// a small training run that must learn. Expected values are worked out by
// hand in the comments or follow from PyTorch's definitions.
#include <backplane/backplane.h>
#include <backplane/debug.h>
#include <backplane/nn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using bp::DType;
using bp::Tensor;
namespace nn = bp::nn;
namespace optim = bp::optim;
using bp::testing::message_of;

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// A module with a parameter, a buffer and a nested child, as in PyTorch's docs.
struct Net : nn::Module {
  Net() : Module("Net") {
    w = register_parameter("w", bp::zeros({2}));
    running = register_buffer("running", bp::ones({2}));
    fc = register_module("fc", std::make_shared<nn::Linear>(2, 3));
    block =
        register_module("block", std::make_shared<nn::Sequential>(nn::Linear(3, 3), nn::ReLU()));
  }
  Tensor forward(const Tensor& x) override { return (*block)((*fc)(x * w)); }
  Tensor w, running;
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::Sequential> block;
};

TEST(Module, NamesNestInRegistrationOrder) {
  auto net = std::make_shared<Net>();
  EXPECT_EQ(joined(net->named_parameters().keys()),
            "w,fc.weight,fc.bias,block.0.weight,block.0.bias");
  EXPECT_EQ(joined(net->named_parameters(/*recurse=*/false).keys()), "w");
  EXPECT_EQ(joined(net->named_buffers().keys()), "running");
  EXPECT_EQ(joined(net->state_dict().keys()),
            "w,running,fc.weight,fc.bias,block.0.weight,block.0.bias");
  std::vector<std::string> modules;
  for (const auto& [name, m] : net->named_modules()) modules.push_back(name + ":" + m->type_name());
  EXPECT_EQ(joined(modules), ":Net,fc:Linear,block:Sequential,block.0:Linear,block.1:ReLU");
  EXPECT_EQ(net->children().size(), 2u);
}

TEST(Module, SharedChildIsListedOnceAndStackModulesWork) {
  nn::Module root("Root");  // not held by a shared_ptr
  auto shared = std::make_shared<nn::Linear>(2, 2);
  root.register_module("a", shared);
  root.register_module("b", shared);
  EXPECT_EQ(root.named_modules().size(), 2u);  // root and the shared Linear, once
  // Parameters reachable twice are listed once, under their first name (an
  // optimiser refuses a list with repeats); state_dict() has both names.
  EXPECT_EQ(joined(root.named_parameters().keys()), "a.weight,a.bias");
  EXPECT_EQ(joined(root.state_dict().keys()), "a.weight,a.bias,b.weight,b.bias");
  EXPECT_NO_THROW(optim::SGD(root.parameters(), {}));
}

TEST(Module, ApplyVisitsChildrenFirst) {
  auto net = std::make_shared<Net>();
  std::vector<std::string> order;
  net->apply([&](nn::Module& m) { order.push_back(m.type_name()); });
  EXPECT_EQ(joined(order), "Linear,Linear,ReLU,Sequential,Net");
}

TEST(Module, ForwardOfAModuleWithoutOneNamesIt) {
  nn::ModuleList list(nn::Linear(2, 2), nn::ReLU());
  EXPECT_EQ(list.size(), 2u);
  EXPECT_NE(message_of<bp::NotImplementedError>([&] {
              list(bp::zeros({2}));
            }).find("[ModuleList] this module has no"),
            std::string::npos);
  EXPECT_NE(message_of<bp::IndexError>([&] { list[2]; }).find("out of range"), std::string::npos);
}

TEST(Module, ToConvertsGradientsAndKeepsIdentity) {
  nn::Linear fc(3, 2);
  Tensor w = fc.weight;
  fc(bp::ones({1, 3})).sum().backward();
  ASSERT_TRUE(w.grad().defined());
  fc.to(DType::Float64);
  EXPECT_EQ(w.dtype(), DType::Float64);
  EXPECT_EQ(w.grad().dtype(), DType::Float64);
  // d(sum(x W^T + b))/dW = ones, converted with the parameter.
  EXPECT_EQ(w.grad().to_vector<double>(), std::vector<double>(6, 1.0));
  EXPECT_NE(message_of<bp::TypeError>([&] { fc.to(DType::Int32); }).find("floating dtypes only"),
            std::string::npos);
}

TEST(Module, ContainersTakeModulesByMove) {
  nn::Sequential inner(nn::Linear(2, 2), nn::ReLU());
  nn::Sequential outer(std::move(inner), nn::Linear(2, 1));
  EXPECT_EQ(joined(outer.named_parameters().keys()), "0.0.weight,0.0.bias,1.weight,1.bias");
  EXPECT_EQ(outer(bp::ones({3, 2})).size(1), 1);
}

TEST(Module, SetDataKeepsVersionAndIsNoView) {
  Tensor buf = bp::arange(6, DType::Float32);
  buf.add_(1);
  const uint32_t version = buf.version();
  nn::set_data(buf, buf.narrow(0, 0, 3));
  EXPECT_FALSE(buf.is_view());
  EXPECT_EQ(buf.version(), version);
  EXPECT_EQ(buf.to_vector<float>(), std::vector<float>({1, 2, 3}));
  buf.add_(1);
  EXPECT_EQ(buf.version(), version + 1);
}

TEST(Module, PrintsFloatsAndSizesAsPython) {
  EXPECT_EQ(nn::BatchNorm2d(3, {.eps = 1e-4, .momentum = 0.01}).extra_repr(),
            "3, eps=0.0001, momentum=0.01, affine=True, track_running_stats=True");
  EXPECT_EQ(nn::Dropout(1e-5).extra_repr(), "p=1e-05, inplace=False");
  EXPECT_EQ(nn::LayerNorm({4}, 1e20).extra_repr(), "(4,), eps=1e+20, elementwise_affine=True");
  EXPECT_EQ(nn::Dropout(0.125).extra_repr(), "p=0.125, inplace=False");
  EXPECT_EQ(nn::MaxPool2d(bp::Size2{2, 2}).extra_repr(),
            "kernel_size=(2, 2), stride=(2, 2), padding=0, dilation=1, ceil_mode=False");
}

TEST(Module, SetDataRefusesATensorThatRequiresGrad) {
  Tensor t = bp::zeros({2});
  Tensor src = bp::ones({3}).requires_grad_();
  EXPECT_NE(
      message_of<bp::AutogradError>([&] { nn::set_data(t, src); }).find("must not require grad"),
      std::string::npos);
  nn::set_data(t, src.detach());
  EXPECT_EQ(t.to_vector<float>(), std::vector<float>({1, 1, 1}));
}

TEST(Init, KaimingUniformBoundsAndSpread) {
  bp::manual_seed(3);
  nn::Linear fc(256, 512);
  // U(-1/16, 1/16): every value inside, the variance (1/16)^2 / 3.
  const std::vector<float> w = fc.weight.to_vector<float>();
  double sum = 0, sq = 0;
  for (float v : w) {
    ASSERT_LE(std::fabs(v), 1.0 / 16);
    sum += v;
    sq += double(v) * v;
  }
  const double n = static_cast<double>(w.size());
  EXPECT_NEAR(sum / n, 0.0, 0.002);
  EXPECT_NEAR(sq / n, 1.0 / (16.0 * 16.0 * 3.0), 1e-4);
  // The same seed gives the same weights.
  bp::manual_seed(3);
  nn::Linear again(256, 512);
  EXPECT_TRUE(bp::equal(fc.weight, again.weight));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3.0));
  EXPECT_EQ(nn::init::calculate_fan_in_and_fan_out(bp::zeros({8, 3, 5, 5})),
            std::make_pair(int64_t{75}, int64_t{200}));
}

TEST(Layers, DropoutFollowsTheMode) {
  nn::Dropout drop(0.5);
  const Tensor x = bp::ones({1000});
  const std::vector<float> y = drop(x).to_vector<float>();
  int kept = 0;
  for (float v : y) {
    ASSERT_TRUE(v == 0.0f || v == 2.0f);  // kept values scaled by 1 / (1 - p)
    kept += v != 0.0f;
  }
  EXPECT_GT(kept, 400);
  EXPECT_LT(kept, 600);
  drop.eval();
  EXPECT_TRUE(bp::equal(drop(x), x));
  EXPECT_NE(message_of<bp::ValueError>([] { nn::Dropout(1.5); }).find("between 0 and 1"),
            std::string::npos);
}

TEST(Layers, BatchNormCumulativeAverageWithoutMomentum) {
  nn::BatchNorm2d bn(1, {.momentum = std::nullopt, .affine = false});
  // Batches with means 1 and 3: the running mean is their average, 2.
  bn(bp::full({2, 1, 1, 2}, 1.0));
  bn(bp::full({2, 1, 1, 2}, 3.0));
  EXPECT_FLOAT_EQ(bn.running_mean.item<float>(), 2.0f);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
  // Constant batches have variance 0: with factors 1 then 1/2, running_var is 0.
  EXPECT_FLOAT_EQ(bn.running_var.item<float>(), 0.0f);
  bn.eval();
  // Eval: (x - 2) / sqrt(0 + 1e-5).
  EXPECT_NEAR(bn(bp::full({1, 1, 1, 1}, 2.5)).item<float>(), 0.5 / std::sqrt(1e-5), 1e-1);
  EXPECT_NE(message_of<bp::ValueError>([&] {
              bn(bp::zeros({2, 1, 3}));
            }).find("expected 4D input (got 3D input)"),
            std::string::npos);
}

TEST(Layers, EmbeddingPaddingRowIsZeroAndGetsNoGradient) {
  nn::Embedding emb(4, 2, -1);  // padding_idx 3
  EXPECT_EQ(emb.padding_idx, 3);
  EXPECT_EQ(emb.weight.select(0, 3).to_vector<float>(), std::vector<float>({0, 0}));
  const Tensor idx = bp::tensor({int64_t{3}, int64_t{1}, int64_t{3}});
  emb(idx).sum().backward();
  EXPECT_EQ(emb.weight.grad().to_vector<float>(), std::vector<float>({0, 0, 1, 1, 0, 0, 0, 0}));
  EXPECT_NE(
      message_of<bp::ValueError>([] { nn::Embedding(4, 2, 4); }).find("padding_idx must be within"),
      std::string::npos);
}

TEST(Layers, LinearChecksItsInput) {
  nn::Linear fc(4, 3);
  EXPECT_NE(message_of<bp::ValueError>([&] {
              fc(bp::zeros({2, 5}));
            }).find("in_features = 4"),
            std::string::npos);
  EXPECT_EQ(fc(bp::zeros({7, 2, 4})).sizes().size(), 3u);  // leading dims broadcast
}

TEST(Optim, SchedulerStepsEveryGroup) {
  Tensor a = bp::zeros({1}).requires_grad_(), b = bp::zeros({1}).requires_grad_();
  optim::SGD sgd({optim::ParamGroup{{a}, {}}, optim::ParamGroup{{b}, {{"lr", 1.0}}}}, {.lr = 0.1});
  optim::StepLR sched(sgd, 1, 0.5);
  sched.step();
  sched.step();
  EXPECT_EQ(sched.last_epoch(), 2);
  const std::vector<double> lrs = sched.get_last_lr();
  EXPECT_DOUBLE_EQ(lrs[0], 0.025);
  EXPECT_DOUBLE_EQ(lrs[1], 0.25);
}

TEST(Optim, AdamWDecaysByDefaultAdamDoesNot) {
  Tensor a = bp::zeros({1}).requires_grad_();
  EXPECT_EQ(optim::AdamW({a}, {.lr = 0.1}).param_groups()[0]["weight_decay"], 1e-2);
  EXPECT_EQ(optim::Adam({a}, {.lr = 0.1}).param_groups()[0]["weight_decay"], 0.0);
  EXPECT_EQ(optim::AdamW({a}, {.weight_decay = 0.0}).param_groups()[0]["weight_decay"], 0.0);
}

TEST(Optim, AmsgradTurnedOnLateIsRefusedBeforeAnyChange) {
  Tensor a = bp::ones({2}).requires_grad_(), b = bp::ones({2}).requires_grad_();
  optim::Adam adam({a, b}, {.lr = 0.1});
  a.set_grad(bp::ones({2}));
  b.set_grad(bp::ones({2}));
  adam.step();
  adam.param_groups()[0]["amsgrad"] = 1;
  const Tensor a_before = a.detach().clone();
  EXPECT_NE(message_of<bp::ValueError>([&] {
              adam.step();
            }).find("amsgrad was turned on after the first step"),
            std::string::npos);
  EXPECT_TRUE(bp::equal(a, a_before));
  EXPECT_EQ(adam.state(a).numbers.at("step"), 1.0);
}

TEST(Optim, UnknownGroupOptionIsRefused) {
  Tensor a = bp::zeros({1}).requires_grad_();
  EXPECT_NE(message_of<bp::ValueError>([&] {
              optim::SGD({optim::ParamGroup{{a}, {{"betas", 1.0}}}}, {});
            }).find("unknown option 'betas'"),
            std::string::npos);
}

TEST(Clip, ByValueAndNothingToClip) {
  Tensor p = bp::zeros({3}).requires_grad_();
  p.set_grad(bp::tensor({-3.f, 0.5f, 2.f}));
  nn::utils::clip_grad_value_({p}, 1.0);
  EXPECT_EQ(p.grad().to_vector<float>(), std::vector<float>({-1, 0.5, 1}));
  Tensor q = bp::zeros({3}).requires_grad_();
  EXPECT_EQ(nn::utils::clip_grad_norm_({q}, 1.0).item<double>(), 0.0);
  // A norm below max_norm leaves the gradients as they are: [3, 4] has norm 5.
  Tensor r = bp::zeros({2}).requires_grad_();
  r.set_grad(bp::tensor({3.f, 4.f}));
  EXPECT_FLOAT_EQ(nn::utils::clip_grad_norm_({r}, 10.0).item<float>(), 5.0f);
  EXPECT_EQ(r.grad().to_vector<float>(), std::vector<float>({3, 4}));
  r.set_grad(bp::tensor({NAN, 4.f}));
  EXPECT_NE(message_of<bp::ValueError>([&] {
              nn::utils::clip_grad_norm_({r}, 1.0, 2.0, true);
            }).find("non-finite"),
            std::string::npos);
}

bool reached(const bp::debug::KernelRecording& rec, const std::string& op) {
  const auto k = rec.kernels();
  return std::any_of(k.begin(), k.end(),
                     [&](const bp::debug::ReachedKernel& r) { return r.op == op; });
}

// cpu_onednn has fused updates: steps on a dense parameter reach them (the
// first SGD step too, which records the buffer the kernel wrote); a
// transposed parameter with a contiguous gradient is declined and the
// composite runs, to the same values.
TEST(Optim, FusedUpdatesRunWhereTheBackendHasThem) {
  bp::manual_seed(4);
  const Tensor init = bp::randn({16, 8}), grad = bp::randn({16, 8});
  ASSERT_TRUE(bp::has_override("core::adam_step", grad) &&
              bp::has_override("core::sgd_step", grad));
  for (bool adam : {false, true}) {
    const char* op = adam ? "core::adam_step" : "core::sgd_step";
    auto make = [&](const std::vector<Tensor>& ps) -> std::unique_ptr<optim::Optimizer> {
      if (adam) return std::make_unique<optim::Adam>(ps, optim::AdamOptions{.lr = 0.1});
      return std::make_unique<optim::SGD>(ps, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    };
    Tensor dense = init.clone().requires_grad_();
    Tensor transposed =
        init.t().contiguous().t().detach().requires_grad_();  // same values, other strides
    auto a = make({dense});
    auto b = make({transposed});
    for (int step = 0; step < 2; ++step) {
      dense.set_grad(grad.clone());
      transposed.set_grad(grad.clone());
      {
        bp::debug::KernelRecording rec;
        a->step();
        EXPECT_TRUE(reached(rec, op)) << op << " at step " << step;
      }
      bp::debug::KernelRecording rec;
      b->step();
      EXPECT_FALSE(reached(rec, op)) << op << " ran on operands of two layouts";
    }
    EXPECT_EQ(a->state(dense).tensors.size(), adam ? 2u : 1u);
    EXPECT_TRUE(bp::allclose(dense, transposed, 1e-5, 1e-6)) << op;
  }
}

// A two-layer MLP learns XOR-like labels of 2-D points with Adam and a
// cosine schedule: the loss must fall by a factor of ten.
TEST(Training, MlpLearns) {
  bp::manual_seed(0);
  const Tensor x = bp::rand({256, 2}) * 2.0 - 1.0;
  const Tensor y =
      bp::ne(bp::gt(x.select(1, 0), 0.0), bp::gt(x.select(1, 1), 0.0)).to(DType::Int64);
  nn::Sequential model(nn::Linear(2, 32), nn::ReLU(), nn::Linear(32, 2));
  optim::Adam opt(model.parameters(), {.lr = 0.05});
  optim::CosineAnnealingLR sched(opt, 200);
  nn::CrossEntropyLoss criterion;
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    opt.zero_grad();
    const Tensor loss = criterion(model(x), y);
    loss.backward();
    opt.step();
    sched.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first / 10) << "loss " << first << " -> " << last;
  bp::NoGradGuard no_grad;
  const double accuracy = bp::eq(model(x).argmax(1), y).to(DType::Float64).mean().item<double>();
  EXPECT_GT(accuracy, 0.95);
}

}  // namespace
