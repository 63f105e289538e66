// The model layer on the device under test (NN-1, NN-2): modules' names,
// state dicts and their refusals, modes, conversions, a small CNN's
// training forward and backward against PyTorch 1.13 (model_fixture.h),
// the printed forms, and ReLU(inplace)'s errors; the same network trained
// side by side on the device and on the reference backend.
#include <backplane/autograd.h>
#include <backplane/conformance.h>
#include <backplane/nn.h>
#include <backplane/safetensors.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "case_checks.h"
#include "model_fixture.h"

namespace bp::conformance {

namespace {

using model::part;
using model::vals;

constexpr const char* kCategory = "model";

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ",") + n;
  return s;
}

// The script's network, its parameters set to the script's values, on ctx's device in dt.
std::shared_ptr<nn::Sequential> network(const Context& ctx, DType dt) {
  auto net = std::make_shared<nn::Sequential>(nn::Conv2d(2, 4, 3, {.padding = 1}),
                                              nn::BatchNorm2d(4), nn::ReLU(true), nn::MaxPool2d(2),
                                              nn::Flatten(), nn::Linear(16, 3));
  net->to(ctx.device(), dt);
  NoGradGuard no_grad;
  int k = 0;
  for (const auto& [name, p] : net->named_parameters()) {
    Tensor t = p;
    t.copy_(vals(ctx.device(), dt, std::vector<int64_t>(p.sizes().begin(), p.sizes().end()),
                 0.1 * ++k, 0.4));
  }
  return net;
}

void cnn_case(const Context& ctx, DType dt) {
  const double tol = model::tolerance(dt);
  auto net = network(ctx, dt);
  const Tensor x = vals(ctx.device(), dt, {2, 2, 4, 4}, 0.3, 1.5);
  const Tensor target = from_vector(std::vector<int64_t>{2, 0}, {2}, ctx.options(DType::Int64));
  const Tensor logits = (*net)(x);
  BP_EXPECT_EQ(logits.device(), ctx.device());
  const Tensor loss = nn::CrossEntropyLoss()(logits, target);
  loss.backward();
  expect_close(logits, part("cnn.forward", 0), tol, tol, "logits", __FILE__, __LINE__);
  expect_close(loss, part("cnn.forward", 1), tol, tol, "loss", __FILE__, __LINE__);
  std::size_t i = 0;
  for (const auto& [name, p] : net->named_parameters()) {
    BP_EXPECT(p.grad().defined(), "parameter ", name, " has no gradient");
    expect_close(p.grad(), part("cnn.grads", i++), tol, tol, name.c_str(), __FILE__, __LINE__);
  }
  const auto buffers = net->named_buffers();
  expect_close(buffers["1.running_mean"], part("cnn.buffers", 0), tol, tol, "running_mean",
               __FILE__, __LINE__);
  expect_close(buffers["1.running_var"], part("cnn.buffers", 1), tol, tol, "running_var", __FILE__,
               __LINE__);
  BP_EXPECT_VALUES(buffers["1.num_batches_tracked"], part("cnn.buffers", 2));
  net->eval();
  NoGradGuard no_grad;
  expect_close((*net)(x), part("cnn.eval", 0), tol, tol, "eval logits", __FILE__, __LINE__);
}

void names_case(const Context& ctx) {
  auto net = network(ctx, DType::Float32);
  BP_EXPECT_EQ(join(net->named_parameters().keys()),
               std::string(model::fixture("cnn.named_parameters").text));
  BP_EXPECT_EQ(join(net->state_dict().keys()),
               std::string(model::fixture("cnn.state_dict_keys").text));
  BP_EXPECT_EQ(net->parameters().size(), std::size_t{6});
  BP_EXPECT_EQ(net->buffers().size(), std::size_t{3});
  BP_EXPECT_EQ(net->named_modules().size(), std::size_t{7}, "the Sequential and its six layers");

  nn::Module m("Custom");
  m.register_parameter("w", zeros({2}, ctx.options()));
  m.register_buffer("seen", zeros({2}, ctx.options()), /*persistent=*/false);
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, m.register_parameter("a.b", zeros({1}))),
                     "must not contain a dot", "a.b");
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, m.register_buffer("w", zeros({1}))), "'w'",
                     "already exists");
  BP_EXPECT(!m.state_dict().contains("seen"), "a non-persistent buffer is not in state_dict()");
  BP_EXPECT(m.named_buffers().contains("seen"), "a non-persistent buffer is still a buffer");

  net->eval();
  for (const auto& mod : net->modules())
    BP_EXPECT(!mod->is_training(), mod->type_name(), " is training");
  net->train();
  for (const auto& mod : net->modules())
    BP_EXPECT(mod->is_training(), mod->type_name(), " is in eval");
}

void state_dict_case(const Context& ctx) {
  auto a = network(ctx, DType::Float32);
  auto sd = a->state_dict();
  // Shares storage, detached: an in-place change shows in the module.
  BP_EXPECT(!sd["0.weight"].requires_grad(), "state_dict() entries are detached");
  {
    NoGradGuard no_grad;
    Tensor w = sd["5.bias"];
    w.fill_(7.0);
  }
  auto fc = std::dynamic_pointer_cast<nn::Linear>((*a)[5]);
  BP_EXPECT_VALUES(fc->bias, {7.0, 7.0, 7.0});

  // Loading into a fresh network copies every value.
  auto b = std::make_shared<nn::Sequential>(nn::Conv2d(2, 4, 3, {.padding = 1}), nn::BatchNorm2d(4),
                                            nn::ReLU(true), nn::MaxPool2d(2), nn::Flatten(),
                                            nn::Linear(16, 3));
  b->to(ctx.device());
  const auto loaded = b->load_state_dict(sd);
  BP_EXPECT(loaded.missing_keys.empty() && loaded.unexpected_keys.empty());
  for (const auto& [name, t] : b->state_dict())
    BP_EXPECT(equal(t, sd[name]), name, " was not loaded");

  // A shape mismatch, a missing and an unexpected key: refused, naming them, nothing changed.
  auto c = std::make_shared<nn::Sequential>(nn::Linear(4, 3), nn::Linear(3, 2));
  c->to(ctx.device());
  const auto before = c->state_dict();
  std::vector<Tensor> kept;
  for (const auto& [name, t] : before) kept.push_back(t.clone());
  nn::NamedTensors bad;
  bad.insert("0.weight", zeros({3, 4}, ctx.options()));
  bad.insert("0.bias", zeros({3}, ctx.options()));
  bad.insert("1.weight", zeros({5, 3}, ctx.options()));  // [2, 3] in the model
  bad.insert("2.weight", zeros({1}, ctx.options()));
  const std::string msg = BP_ERROR_MESSAGE(ValueError, c->load_state_dict(bad));
  BP_EXPECT_MENTIONS(msg, "size mismatch for 1.weight", "[5, 3]", "[2, 3]", "Missing key(s)",
                     "\"1.bias\"", "Unexpected key(s)", "\"2.weight\"");
  std::size_t i = 0;
  for (const auto& [name, t] : c->state_dict())
    BP_EXPECT(equal(t, kept[i++]), name, " changed although loading failed");
  // Not strict: the mismatch is still refused; missing and unexpected keys are reported.
  bad.insert("1.weight", zeros({2, 3}, ctx.options()));
  const auto report = c->load_state_dict(bad, /*strict=*/false);
  BP_EXPECT_EQ(join(report.missing_keys), std::string("1.bias"));
  BP_EXPECT_EQ(join(report.unexpected_keys), std::string("2.weight"));
  BP_EXPECT_VALUES(c->state_dict()["0.bias"], {0.0, 0.0, 0.0});
  // A dtype mismatch is refused too.
  nn::NamedTensors wrong_dtype;
  wrong_dtype.insert("weight", zeros({3, 4}, ctx.options(DType::Float64)));
  wrong_dtype.insert("bias", zeros({3}, ctx.options(DType::Float64)));
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, nn::Linear(4, 3).load_state_dict(wrong_dtype)),
                     "dtype mismatch for weight");
}

// A layer's member is its registered slot: assigning it replaces the
// parameter that forward, parameters() and state_dict() see (as PyTorch's
// assignment of an nn.Parameter); dec->weight = enc->weight ties them.
void member_assign_case(const Context& ctx) {
  const Device dev = ctx.device();
  auto lin = std::make_shared<nn::Linear>(2, 2);
  lin->to(dev);
  {
    NoGradGuard no_grad;
    lin->bias.copy_(vals(dev, DType::Float64, {2}, 0.2, 1).to(DType::Float32));
  }
  lin->weight = vals(dev, DType::Float32, {2, 2}, 0.9, 1).requires_grad_();
  const double tol = model::tolerance(DType::Float32);
  expect_close(lin->forward(vals(dev, DType::Float32, {3, 2}, 0.3, 1)),
               part("module.member_assign", 0), tol, tol, "forward after lin->weight = W", __FILE__,
               __LINE__);
  BP_EXPECT(lin->parameters().at(0).is_same(lin->weight), "parameters()[0] is the assigned tensor");
  expect_close(lin->parameters().at(0), part("module.member_assign", 1), tol, tol,
               "parameters()[0]", __FILE__, __LINE__);
  expect_close(lin->state_dict()["weight"], part("module.member_assign", 2), tol, tol,
               "state_dict()[weight]", __FILE__, __LINE__);
  auto enc = std::make_shared<nn::Linear>(2, 2);
  auto dec = std::make_shared<nn::Linear>(2, 2);
  dec->weight = enc->weight;
  BP_EXPECT_EQ(dec->parameters().at(0).is_same(enc->weight),
               part("module.weight_tying", 0).at(0) != 0,
               "dec->weight = enc->weight ties the parameter");
}

// A BatchNorm2d state without num_batches_tracked (the files PyTorch before
// 0.4.1 wrote): loaded, with the counter reset to 0, as PyTorch loads one
// without version metadata.
void batchnorm_no_counter_case(const Context& ctx) {
  auto bn = std::make_shared<nn::BatchNorm2d>(3);
  bn->to(ctx.device());
  {
    NoGradGuard no_grad;
    bn->num_batches_tracked.fill_(5);
  }
  nn::NamedTensors old;
  for (const auto& [name, t] : nn::BatchNorm2d(3).state_dict())
    if (name != "num_batches_tracked") old.insert(name, t.to(ctx.device()));
  old.insert("running_mean", vals(ctx.device(), DType::Float32, {3}, 0.5, 1));
  const auto result = bn->load_state_dict(old);
  BP_EXPECT_VALUES(bn->num_batches_tracked, part("batchnorm.no_counter", 0));
  expect_close(bn->running_mean, part("batchnorm.no_counter", 1), 1e-6, 1e-6, "running_mean",
               __FILE__, __LINE__);
  BP_EXPECT_EQ(static_cast<double>(result.missing_keys.size()),
               part("batchnorm.no_counter", 2).at(0));
  BP_EXPECT_EQ(static_cast<double>(result.unexpected_keys.size()),
               part("batchnorm.no_counter", 2).at(1));
  // Another module's missing key is still refused.
  nn::NamedTensors partial = nn::Linear(2, 2).state_dict();
  auto seq = std::make_shared<nn::Sequential>(nn::Linear(2, 2), nn::BatchNorm2d(3));
  nn::NamedTensors no_bias;
  no_bias.insert("0.weight", partial["weight"]);
  for (const auto& [name, t] : nn::BatchNorm2d(3).state_dict())
    if (name != "num_batches_tracked") no_bias.insert("1." + name, t);
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, seq->load_state_dict(no_bias)), "Missing key(s)",
                     "\"0.bias\"");
  BP_EXPECT(std::string(BP_ERROR_MESSAGE(ValueError, seq->load_state_dict(no_bias)))
                    .find("num_batches_tracked") == std::string::npos,
            "the counter is not a missing key");
}

void convert_case(const Context& ctx) {
  auto fc = std::make_shared<nn::Linear>(4, 3);
  Tensor weight = fc->weight;  // another handle to the parameter
  fc->to(ctx.device(), DType::Float64);
  BP_EXPECT_EQ(weight.dtype(), DType::Float64, "to() converts the parameter itself");
  BP_EXPECT_EQ(weight.device(), ctx.device());
  BP_EXPECT(weight.requires_grad() && weight.is_leaf(),
            "a converted parameter stays a leaf requiring grad");
  BP_EXPECT(fc->named_parameters()["weight"].is_same(weight),
            "the registered tensor is the member");
  auto bn = std::make_shared<nn::BatchNorm2d>(3);
  bn->to(ctx.device(), DType::Float64);
  BP_EXPECT_EQ(bn->num_batches_tracked.dtype(), DType::Int64, "integer buffers keep their dtype");
  BP_EXPECT_EQ(bn->running_mean.dtype(), DType::Float64);

  // zero_grad: none by default, zeros when asked.
  const Tensor x = ones({2, 4}, ctx.options(DType::Float64));
  (*fc)(x).sum().backward();
  BP_EXPECT(fc->weight.grad().defined());
  fc->zero_grad(/*set_to_none=*/false);
  BP_EXPECT_VALUES(fc->bias.grad(), {0.0, 0.0, 0.0});
  fc->zero_grad();
  BP_EXPECT(!fc->weight.grad().defined() && !fc->bias.grad().defined(), "zero_grad() sets to none");
}

// A state dict through a safetensors file and back onto the device.
void safetensors_case(const Context& ctx) {
  auto a = network(ctx, DType::Float32);
  (*a)(vals(ctx.device(), DType::Float32, {2, 2, 4, 4}, 0.3, 1.5));  // running stats move
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("bp-conformance-" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  struct Remove {
    std::string p;
    ~Remove() { std::filesystem::remove(p); }
  } remove{path};
  safetensors::save_file(a->state_dict(), path);
  const auto loaded = safetensors::load_file(path, ctx.device());
  auto b = network(ctx, DType::Float32);
  b->load_state_dict(loaded);
  for (const auto& [name, t] : a->state_dict()) {
    BP_EXPECT_EQ(loaded[name].device(), ctx.device());
    BP_EXPECT(equal(b->state_dict()[name], t), name, " differs after a safetensors round trip");
  }
}

void relu_inplace_case(const Context& ctx) {
  nn::ReLU relu(true);
  Tensor leaf = ones({3}, ctx.options()).requires_grad_();
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(AutogradError, relu(leaf)), "leaf");
  {
    NoGradGuard no_grad;
    relu(leaf);  // allowed without recording
  }
  // On a non-leaf nothing saved: allowed, and the gradient is relu's.
  Tensor x = from_vector(std::vector<float>{-1, 2, -3, 4}, {4}, ctx.options()).requires_grad_();
  Tensor y = x * 2;
  Tensor out = relu(y);
  BP_EXPECT(out.is_same(y), "ReLU(inplace) returns its input");
  out.sum().backward();
  BP_EXPECT_VALUES(x.grad(), {0.0, 2.0, 0.0, 2.0});
  // On a tensor saved for backward (sigmoid saves its output): the error comes at backward.
  Tensor z = from_vector(std::vector<float>{-1, 2}, {2}, ctx.options()).requires_grad_();
  Tensor s = z.sigmoid();
  relu(s);
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(AutogradError, s.sum().backward()),
                     "modified by an in-place operation");
}

void print_case(const Context&) {
  auto net = std::make_shared<nn::Sequential>(nn::Conv2d(2, 4, 3, {.padding = 1}),
                                              nn::BatchNorm2d(4), nn::ReLU(true), nn::MaxPool2d(2),
                                              nn::Flatten(), nn::Linear(16, 3));
  BP_EXPECT_EQ(net->to_string(), std::string(model::fixture("cnn.print").text));
  std::vector<std::shared_ptr<nn::Module>> layers = {
      std::make_shared<nn::Linear>(4, 3, false),
      std::make_shared<nn::Conv2d>(
          3, 8, 3, nn::Conv2dOptions{.stride = 2, .padding = {1, 2}, .dilation = 2, .bias = false}),
      std::make_shared<nn::Conv2d>(4, 8, Size2{1, 3}, nn::Conv2dOptions{.groups = 2}),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::GELU>(true),
      std::make_shared<nn::Dropout>(0.25),
      std::make_shared<nn::BatchNorm2d>(
          5, nn::BatchNormOptions{.momentum = std::nullopt, .affine = false}),
      std::make_shared<nn::LayerNorm>(std::vector<int64_t>{3, 4}, 1e-6),
      std::make_shared<nn::MaxPool2d>(3, nn::MaxPool2dOptions{.stride = 2, .padding = 1}),
      std::make_shared<nn::AvgPool2d>(Size2{2, 3}),
      std::make_shared<nn::AdaptiveAvgPool2d>(1),
      std::make_shared<nn::Embedding>(10, 3, 0),
      std::make_shared<nn::Flatten>(),
      std::make_shared<nn::CrossEntropyLoss>()};
  std::string all;
  for (const auto& l : layers) all += (all.empty() ? "" : "\n") + l->to_string();
  BP_EXPECT_EQ(all, std::string(model::fixture("print.layers").text));
}

// NN-1..NN-3 against the reference backend: the same network (Conv2d,
// BatchNorm2d, ReLU(inplace), MaxPool2d, Dropout, Flatten, Linear) from the
// same initial weights, on the same batches and dropout seeds, trained four
// steps with SGD (momentum, Nesterov, weight decay) and then Adam on the
// device under test and on the reference: logits, losses, every gradient,
// every parameter after each step, the running statistics and the eval
// logits agree. The convolution has no bias, as before batch norm in
// ResNets: batch norm removes it, its gradient is rounding noise, and Adam
// would turn that noise into steps of lr.
void side_by_side_case(const Context& ctx, DType dt) {
  const double tol = dt == DType::Float64 ? 1e-9 : 2e-4;
  const uint64_t seed = ctx.case_seed("model.side_by_side");
  auto make = [&](Device device) {
    manual_seed(seed);  // the default initialisation, from the same numbers on both sides
    auto net = std::make_shared<nn::Sequential>(
        nn::Conv2d(3, 6, 3, {.padding = 1, .bias = false}), nn::BatchNorm2d(6), nn::ReLU(true),
        nn::MaxPool2d(2), nn::Dropout(0.2), nn::Flatten(), nn::Linear(6 * 4 * 4, 5));
    net->to(device, dt);
    return net;
  };
  auto dut = make(ctx.device()), ref = make(ctx.reference_device());
  auto agree = [&](const Tensor& mine, const Tensor& theirs, const std::string& what) {
    const Tensor here = mine.detach().to(ctx.reference_device());
    BP_EXPECT(allclose(here, theirs.detach(), tol, tol), what, " (", dt,
              ") differs from the reference's by ",
              (here - theirs.detach()).abs().max().item<double>());
  };
  const auto ref_params = ref->named_parameters();
  for (const auto& [name, p] : dut->named_parameters())
    agree(p, ref_params[name], "initial " + name);
  std::vector<std::unique_ptr<optim::Optimizer>> opts;
  for (auto* net : {dut.get(), ref.get()})
    opts.push_back(std::make_unique<optim::SGD>(
        net->parameters(),
        optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true}));
  nn::CrossEntropyLoss criterion;
  for (int step = 0; step < 4; ++step) {
    if (step == 2)  // the second half with Adam, from SGD's weights
      for (std::size_t k = 0; k < 2; ++k)
        opts[k] = std::make_unique<optim::Adam>((k == 0 ? dut : ref)->parameters(),
                                                optim::AdamOptions{.lr = 0.01});
    manual_seed(seed + 1 + static_cast<uint64_t>(step));
    const Tensor x_ref = randn({4, 3, 8, 8}, ctx.reference_options(dt));
    const Tensor y_ref = from_vector(std::vector<int64_t>{step % 5, 1, 4, (step + 2) % 5}, {4},
                                     ctx.reference_options(DType::Int64));
    const std::string at = " at step " + std::to_string(step);
    Tensor out[2], loss[2];
    for (std::size_t k = 0; k < 2; ++k) {
      nn::Module& net = k == 0 ? *dut : *ref;
      const Device device = k == 0 ? ctx.device() : ctx.reference_device();
      opts[k]->zero_grad();
      manual_seed(seed + 100 + static_cast<uint64_t>(step));  // the same dropout mask on both sides
      out[k] = net(x_ref.to(device));
      loss[k] = criterion(out[k], y_ref.to(device));
      loss[k].backward();
    }
    agree(out[0], out[1], "logits" + at);
    agree(loss[0], loss[1], "loss" + at);
    const auto ref_now = ref->named_parameters();
    for (const auto& [name, p] : dut->named_parameters())
      agree(p.grad(), ref_now[name].grad(), name + ".grad" + at);
    for (auto& o : opts) o->step();
    for (const auto& [name, p] : dut->named_parameters())
      agree(p, ref_now[name], name + " after the update" + at);
  }
  const auto ref_buffers = ref->named_buffers();
  for (const auto& [name, b] : dut->named_buffers())
    if (is_floating(b.dtype())) agree(b, ref_buffers[name], name);
  dut->eval();
  ref->eval();
  NoGradGuard no_grad;
  manual_seed(seed + 50);
  const Tensor x = randn({2, 3, 8, 8}, ctx.reference_options(dt));
  agree((*dut)(x.to(ctx.device())), (*ref)(x), "eval logits");
}

}  // namespace

void add_model_cases(Suite& suite) {
  suite.add({"model.module.names", {"NN-1"}, kCategory, names_case});
  suite.add({"model.module.state_dict", {"NN-1"}, kCategory, state_dict_case});
  suite.add({"model.module.to", {"NN-1"}, kCategory, convert_case});
  suite.add({"model.module.member_assign", {"NN-1"}, kCategory, member_assign_case});
  suite.add({"model.module.batchnorm_no_counter", {"NN-1"}, kCategory, batchnorm_no_counter_case});
  suite.add({"model.module.safetensors", {"NN-1"}, kCategory, safetensors_case});
  suite.add({"model.relu_inplace", {"NN-2"}, kCategory, relu_inplace_case});
  suite.add({"model.print", {"NN-2"}, kCategory, print_case});
  for (DType dt : {DType::Float32, DType::Float64})
    suite.add({"model.cnn." + std::string(name(dt)), {"NN-2"}, kCategory, [dt](const Context& ctx) {
                 cnn_case(ctx, dt);
               }});
  for (DType dt : {DType::Float32, DType::Float64})
    suite.add({"model.side_by_side." + std::string(name(dt)),
               {"NN-1", "NN-2", "NN-3"},
               kCategory,
               [dt](const Context& ctx) { side_by_side_case(ctx, dt); }});
  add_optim_cases(suite);
}

}  // namespace bp::conformance
