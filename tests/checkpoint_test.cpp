// Checkpoints (backplane/nn/checkpoint.h): a module and its optimiser saved
// together and restored exactly; every refusal leaves both as they were.
#include <backplane/backplane.h>
#include <backplane/nn/checkpoint.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace {

using bp::Tensor;
namespace nn = bp::nn;
namespace optim = bp::optim;
using bp::testing::message_of;
using bp::testing::TempDir;

std::vector<float> values(const Tensor& t) {
  return t.to(bp::DType::Float32).contiguous().to_vector<float>();
}

// Two Adam steps on a small regression, so the state has tensors and a step count.
void two_steps(nn::Module& model, optim::Optimizer& opt) {
  const Tensor x = bp::tensor({{1.f, 2.f, 3.f}, {-1.f, 0.5f, 2.f}});
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    model(x).pow(2).sum().backward();
    opt.step();
  }
}

TEST(Checkpoint, RestoresModelAndOptimiserExactly) {
  TempDir dir;
  bp::manual_seed(1);
  nn::Linear a(3, 2);
  optim::Adam opt_a(a.parameters(), {.lr = 0.1});
  two_steps(a, opt_a);
  nn::save_checkpoint(dir / "c.safetensors", a, &opt_a, {{"epoch", "2"}});

  const nn::Checkpoint c = nn::read_checkpoint(dir / "c.safetensors");
  EXPECT_EQ(c.optimizer_name, "Adam");
  EXPECT_EQ(c.metadata, (bp::safetensors::Metadata{{"epoch", "2"}}));
  EXPECT_EQ(c.model.keys(), (std::vector<std::string>{"weight", "bias"}));
  ASSERT_TRUE(c.optimizer.has_value());
  ASSERT_EQ(c.optimizer->param_groups.size(), 1u);
  EXPECT_EQ(c.optimizer->param_groups[0].params, (std::vector<int64_t>{0, 1}));
  EXPECT_DOUBLE_EQ(c.optimizer->param_groups[0].options.at("lr"), 0.1);
  EXPECT_EQ(c.optimizer->state.at(1).numbers.at("step"), 2.0);
  EXPECT_EQ(values(c.optimizer->state.at(0).tensors.at("exp_avg")),
            values(opt_a.state(a.weight).tensors["exp_avg"]));

  bp::manual_seed(2);
  nn::Linear b(3, 2);
  optim::Adam opt_b(b.parameters(), {.lr = 0.5});
  EXPECT_EQ(nn::load_checkpoint(dir / "c.safetensors", b, &opt_b), c.metadata);
  EXPECT_EQ(values(b.weight), values(a.weight));
  EXPECT_DOUBLE_EQ(opt_b.param_groups()[0]["lr"], 0.1);
  // The next step is the same in both: the moments and the step count came back.
  two_steps(a, opt_a);
  two_steps(b, opt_b);
  EXPECT_EQ(values(b.weight), values(a.weight));
  EXPECT_EQ(values(b.bias), values(a.bias));
}

TEST(Checkpoint, OptimiserKeysAreNotTheCallers) {
  TempDir dir;
  nn::Linear m(2, 2);
  optim::SGD opt(m.parameters(), {.lr = 0.1});
  EXPECT_NE(message_of<bp::ValueError>([&] {
              nn::save_checkpoint(dir / "c.safetensors", m, &opt, {{"optimizer.lr", "1"}});
            }).find("metadata key 'optimizer.lr' is kept for the optimiser's state"),
            std::string::npos);
}

TEST(Checkpoint, AnotherOptimiserKindIsRefusedAndNothingChanges) {
  TempDir dir;
  nn::Linear a(3, 2);
  optim::Adam adam(a.parameters(), {.lr = 0.1});
  two_steps(a, adam);
  nn::save_checkpoint(dir / "c.safetensors", a, &adam);
  nn::Linear b(3, 2);
  const std::vector<float> before = values(b.weight);
  optim::SGD sgd(b.parameters(), {.lr = 0.1});
  EXPECT_NE(message_of<bp::ValueError>([&] {
              nn::load_checkpoint(dir / "c.safetensors", b, &sgd);
            }).find("holds the state of Adam, not of SGD"),
            std::string::npos);
  EXPECT_EQ(values(b.weight), before);
}

// The optimiser fits but the module does not (other names): the optimiser's
// state, loaded first, is put back.
TEST(Checkpoint, ModuleRefusalPutsTheOptimiserBack) {
  TempDir dir;
  nn::Linear a(3, 2);
  optim::Adam opt_a(a.parameters(), {.lr = 0.1});
  two_steps(a, opt_a);
  nn::save_checkpoint(dir / "c.safetensors", a, &opt_a);

  nn::Sequential b(nn::Linear(3, 2));
  optim::Adam opt_b(b.parameters(), {.lr = 0.3});
  two_steps(b, opt_b);
  const std::vector<float> weight = values(b.parameters()[0]);
  const std::vector<float> moment = values(opt_b.state(b.parameters()[0]).tensors["exp_avg"]);
  EXPECT_NE(message_of<bp::ValueError>([&] {
              nn::load_checkpoint(dir / "c.safetensors", b, &opt_b);
            }).find("0.weight"),
            std::string::npos);
  EXPECT_EQ(values(b.parameters()[0]), weight);
  EXPECT_EQ(values(opt_b.state(b.parameters()[0]).tensors["exp_avg"]), moment);
  EXPECT_DOUBLE_EQ(opt_b.param_groups()[0]["lr"], 0.3);
  EXPECT_EQ(opt_b.state(b.parameters()[0]).numbers["step"], 2.0);
}

TEST(Checkpoint, FileWithoutOptimiserStateIsRefusedForAnOptimiser) {
  TempDir dir;
  nn::Linear a(3, 2);
  nn::save_checkpoint(dir / "c.safetensors", a);
  EXPECT_FALSE(nn::read_checkpoint(dir / "c.safetensors").optimizer.has_value());
  optim::SGD opt(a.parameters(), {.lr = 0.1});
  EXPECT_NE(message_of<bp::ValueError>([&] {
              nn::load_checkpoint(dir / "c.safetensors", a, &opt);
            }).find("holds no optimiser state"),
            std::string::npos);
  nn::load_checkpoint(dir / "c.safetensors", a);  // the module alone loads
}

TEST(Checkpoint, MalformedOptimiserEntriesAreNamed) {
  TempDir dir;
  const nn::NamedTensors none;
  const auto error_of = [&](const bp::safetensors::Metadata& meta) {
    bp::safetensors::save_file(none, dir / "bad.safetensors", meta);
    return message_of<bp::ValueError>([&] { nn::read_checkpoint(dir / "bad.safetensors"); });
  };
  EXPECT_NE(error_of({{"optimizer", "SGD"}}).find("without 'optimizer.param_groups'"),
            std::string::npos);
  EXPECT_NE(error_of({{"optimizer", "SGD"},
                      {"optimizer.param_groups", "2"},
                      {"optimizer.param_groups.0.params", ""}})
                .find("'optimizer.param_groups' is 2 but groups 0..0 are described"),
            std::string::npos);
  EXPECT_NE(error_of({{"optimizer", "SGD"},
                      {"optimizer.param_groups", "1"},
                      {"optimizer.param_groups.0.params", "0,x"}})
                .find("'x' is not an index"),
            std::string::npos);
  EXPECT_NE(error_of({{"optimizer", "SGD"},
                      {"optimizer.param_groups", "1"},
                      {"optimizer.param_groups.0.params", "0"},
                      {"optimizer.param_groups.0.lr", "fast"}})
                .find("'fast', not a number"),
            std::string::npos);
  EXPECT_NE(error_of({{"optimizer.state.0.step", "1"}}).find("without the 'optimizer' name"),
            std::string::npos);
  EXPECT_NE(error_of({{"optimizer.lr", "1"}}).find("unknown optimiser entry 'optimizer.lr'"),
            std::string::npos);
}

// Numbers out of their range are refused naming the key and the value.
TEST(Checkpoint, OptimiserNumbersOutOfRangeAreNamed) {
  TempDir dir;
  const nn::NamedTensors none;
  const auto save = [&](const std::string& key, const std::string& value) {
    bp::safetensors::Metadata meta = {{"optimizer", "Adam"},
                                      {"optimizer.param_groups", "1"},
                                      {"optimizer.param_groups.0.params", "0"},
                                      {"optimizer.param_groups.0.lr", "0.001"},
                                      {"optimizer.state.0.step", "3"}};
    meta[key] = value;
    bp::safetensors::save_file(none, dir / "bad.safetensors", meta);
  };
  const auto error_of = [&](const std::string& key, const std::string& value) {
    save(key, value);
    return message_of<bp::ValueError>([&] { nn::read_checkpoint(dir / "bad.safetensors"); });
  };
  save("optimizer.state.0.step", "3");
  EXPECT_NO_THROW(nn::read_checkpoint(dir / "bad.safetensors"));
  save("optimizer.param_groups.0.lr", "0");
  EXPECT_NO_THROW(nn::read_checkpoint(dir / "bad.safetensors")) << "a schedule may end at 0";
  EXPECT_NE(error_of("optimizer.param_groups.0.lr", "inf")
                .find("'optimizer.param_groups.0.lr' is 'inf', not a finite"),
            std::string::npos);
  EXPECT_NE(error_of("optimizer.param_groups.0.lr", "-0.5")
                .find("'-0.5'; a learning rate is not negative"),
            std::string::npos);
  EXPECT_NE(error_of("optimizer.state.0.step", "-1")
                .find("'optimizer.state.0.step' is '-1'; a step count"),
            std::string::npos);
  EXPECT_NE(error_of("optimizer.state.0.step", "2.5").find("a step count is a whole number"),
            std::string::npos);
  EXPECT_NE(error_of("optimizer.state.0.step", "nan").find("not a finite number"),
            std::string::npos);
}

}  // namespace
