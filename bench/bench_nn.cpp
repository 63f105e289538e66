// The CNN benchmarks: conv2d 3x3, 64 -> 192 channels, on a 32x64x56x56
// float32 input (padding 1), forward and forward+backward, through
// Backplane and through oneDNN called directly on the same NCHW data; and a
// ResNet basic block (conv-bn-relu-conv-bn, residual add, relu) forward and
// backward in training mode; batch_norm, relu and the pools around it
// (norm_pool). The LibTorch side is in bench_libtorch.cpp.
//
// oneDNN direct is what a program holding NCHW tensors writes: primitives
// that choose their own (blocked) memory formats, the reorders into and out
// of them each call, as the backend does. conv2d_fwd/onednn_compute shows
// the convolution alone, its operands already in oneDNN's formats;
// */composite the core's composite (the path of a backend without a
// convolution kernel). With --backend, the Backplane side runs there.
#include <backplane/backplane.h>
#include <benchmark/benchmark.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <vector>

#include "bench_common.h"

namespace bp::bench {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// Waits for the default device's work: an asynchronous backend (--backend
// cuda) is timed to the end of its kernels.
void sync() {
  const Device d = default_device();
  PluginLoader::instance().by_id(d.backend)->synchronize(d.index);
}

// Through the backend's kernels, or (composite) the core's composite.
void conv_fwd_backplane(benchmark::State& state, bool composite) {
  NoGradGuard no_grad;
  std::optional<CompositeOnlyGuard> guard;
  if (composite) guard.emplace();
  manual_seed(0);
  const Tensor x = randn({kConvN, kConvC, kConvHW, kConvHW}), w = randn({kConvO, kConvC, 3, 3});
  const Tensor b = randn({kConvO});
  conv2d(x, w, b, 1, 1);  // warm-up: a backend may choose its algorithm on the first call
  sync();
  for (auto _ : state) {
    Tensor y = conv2d(x, w, b, 1, 1);
    sync();
    benchmark::DoNotOptimize(y.impl());
  }
  state.SetItemsProcessed(state.iterations() * kConvFlops);
}

void conv_fwd_bwd_backplane(benchmark::State& state, bool composite) {
  std::optional<CompositeOnlyGuard> guard;
  if (composite) guard.emplace();
  manual_seed(0);
  Tensor x = randn({kConvN, kConvC, kConvHW, kConvHW}).requires_grad_();
  Tensor w = randn({kConvO, kConvC, 3, 3}).requires_grad_();
  Tensor b = randn({kConvO}).requires_grad_();
  const Tensor g = randn({kConvN, kConvO, kConvHW, kConvHW});
  conv2d(x, w, b, 1, 1).backward(g);  // warm-up
  sync();
  for (auto _ : state) {
    for (Tensor* p : {&x, &w, &b}) p->set_grad(Tensor());
    conv2d(x, w, b, 1, 1).backward(g);
    sync();
    benchmark::DoNotOptimize(w.grad().impl());
  }
  state.SetItemsProcessed(state.iterations() * 3 * kConvFlops);
}

// --- oneDNN called directly -------------------------------------------------------
struct Direct {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream s{eng};
  memory::desc x_md{{kConvN, kConvC, kConvHW, kConvHW}, dt::f32, tag::nchw};
  memory::desc w_md{{kConvO, kConvC, 3, 3}, dt::f32, tag::oihw};
  memory::desc b_md{{kConvO}, dt::f32, tag::x};
  memory::desc y_md{{kConvN, kConvO, kConvHW, kConvHW}, dt::f32, tag::nchw};
  std::vector<float> x, w, b, y, g, gx, gw, gb;
  dnnl::convolution_forward::primitive_desc fwd;
  Direct()
      : x(static_cast<size_t>(kConvN * kConvC * kConvHW * kConvHW), 0.5f),
        w(static_cast<size_t>(kConvO * kConvC * 9), 0.01f),
        b(static_cast<size_t>(kConvO), 0.1f),
        y(static_cast<size_t>(kConvN * kConvO * kConvHW * kConvHW)),
        g(y.size(), 0.25f),
        gx(x.size()),
        gw(w.size()),
        gb(b.size()) {
    const memory::desc any_x(x_md.dims(), dt::f32, tag::any), any_w(w_md.dims(), dt::f32, tag::any);
    const memory::desc any_y(y_md.dims(), dt::f32, tag::any);
    fwd = {{dnnl::prop_kind::forward_training,
            dnnl::algorithm::convolution_direct,
            any_x,
            any_w,
            b_md,
            any_y,
            {1, 1},
            {0, 0},
            {1, 1},
            {1, 1}},
           eng};
  }
  memory in(const memory::desc& want, const memory::desc& user_md, float* data) {
    memory user(user_md, eng, data);
    if (want == user_md) return user;
    memory m(want, eng);
    dnnl::reorder(user, m).execute(s, user, m);
    return m;
  }
  void out(const memory& m, const memory::desc& user_md, float* data) {
    if (m.get_desc() == user_md) return;
    memory user(user_md, eng, data);
    dnnl::reorder(m, user).execute(s, const_cast<memory&>(m), user);
  }
  void forward() {
    const memory src = in(fwd.src_desc(), x_md, x.data()),
                 wei = in(fwd.weights_desc(), w_md, w.data());
    const memory bias(b_md, eng, b.data()), dst(fwd.dst_desc(), eng);
    dnnl::convolution_forward(fwd).execute(
        s,
        {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}});
    out(dst, y_md, y.data());
    s.wait();
  }
};

void conv_fwd_onednn(benchmark::State& state) {
  Direct d;
  dnnl::convolution_forward prim(d.fwd);  // created once, as a program would
  for (auto _ : state) {
    d.forward();
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kConvFlops);
}

void conv_fwd_onednn_compute(benchmark::State& state) {
  Direct d;
  const dnnl::convolution_forward prim(d.fwd);
  const memory src(d.fwd.src_desc(), d.eng), wei(d.fwd.weights_desc(), d.eng),
      dst(d.fwd.dst_desc(), d.eng);
  const memory bias(d.b_md, d.eng, d.b.data());
  for (auto _ : state) {
    prim.execute(
        d.s,
        {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}});
    d.s.wait();
  }
  state.SetItemsProcessed(state.iterations() * kConvFlops);
}

void conv_fwd_bwd_onednn(benchmark::State& state) {
  Direct d;
  const memory::desc any_x(d.x_md.dims(), dt::f32, tag::any),
      any_w(d.w_md.dims(), dt::f32, tag::any);
  const memory::desc any_y(d.y_md.dims(), dt::f32, tag::any);
  const dnnl::convolution_backward_data::primitive_desc bd(
      {dnnl::algorithm::convolution_direct, any_x, any_w, any_y, {1, 1}, {0, 0}, {1, 1}, {1, 1}},
      d.eng, d.fwd);
  const dnnl::convolution_backward_weights::primitive_desc bw({dnnl::algorithm::convolution_direct,
                                                               any_x,
                                                               any_w,
                                                               d.b_md,
                                                               any_y,
                                                               {1, 1},
                                                               {0, 0},
                                                               {1, 1},
                                                               {1, 1}},
                                                              d.eng, d.fwd);
  for (auto _ : state) {
    d.forward();
    {
      const memory dy = d.in(bd.diff_dst_desc(), d.y_md, d.g.data());
      const memory wei = d.in(bd.weights_desc(), d.w_md, d.w.data());
      const memory dx(bd.diff_src_desc(), d.eng);
      dnnl::convolution_backward_data(bd).execute(
          d.s, {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DIFF_SRC, dx}});
      d.out(dx, d.x_md, d.gx.data());
    }
    const memory dy = d.in(bw.diff_dst_desc(), d.y_md, d.g.data());
    const memory src = d.in(bw.src_desc(), d.x_md, d.x.data());
    const memory dw(bw.diff_weights_desc(), d.eng), db(d.b_md, d.eng, d.gb.data());
    dnnl::convolution_backward_weights(bw).execute(d.s, {{DNNL_ARG_DIFF_DST, dy},
                                                         {DNNL_ARG_SRC, src},
                                                         {DNNL_ARG_DIFF_WEIGHTS, dw},
                                                         {DNNL_ARG_DIFF_BIAS, db}});
    d.out(dw, d.w_md, d.gw.data());
    d.s.wait();
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * 3 * kConvFlops);
}

// --- a ResNet basic block, training mode, forward and backward ---------------------
void resnet_block_backplane(benchmark::State& state) {
  manual_seed(0);
  const Tensor x = randn({kBlockN, kBlockC, kConvHW, kConvHW});
  Tensor w1 = randn({kBlockC, kBlockC, 3, 3}).mul(0.05).detach().requires_grad_();
  Tensor w2 = randn({kBlockC, kBlockC, 3, 3}).mul(0.05).detach().requires_grad_();
  Tensor g1 = ones({kBlockC}).requires_grad_(), b1 = zeros({kBlockC}).requires_grad_();
  Tensor g2 = ones({kBlockC}).requires_grad_(), b2 = zeros({kBlockC}).requires_grad_();
  Tensor rm1 = zeros({kBlockC}), rv1 = ones({kBlockC}), rm2 = zeros({kBlockC}),
         rv2 = ones({kBlockC});
  bool warm = false;
  for (auto _ : state) {
    if (!warm) {  // the first pass chooses algorithms: not timed
      state.PauseTiming();
      relu(batch_norm(conv2d(x, w1, Tensor(), 1, 1), rm1, rv1, g1, b1, true)).sum().backward();
      sync();
      state.ResumeTiming();
      warm = true;
    }
    for (Tensor* p : {&w1, &w2, &g1, &b1, &g2, &b2}) p->set_grad(Tensor());
    Tensor h = relu(batch_norm(conv2d(x, w1, Tensor(), 1, 1), rm1, rv1, g1, b1, true));
    Tensor y = relu(batch_norm(conv2d(h, w2, Tensor(), 1, 1), rm2, rv2, g2, b2, true) + x);
    y.sum().backward();
    sync();
    benchmark::DoNotOptimize(w1.grad().impl());
  }
}

// --- batch_norm, relu, max and avg pooling, forward and backward ---------------------
// The layers around a ResNet's convolutions on the conv benchmark's input:
// the backend's kernels against the core's composites.
void norm_pool_backplane(benchmark::State& state, bool composite) {
  std::optional<CompositeOnlyGuard> guard;
  if (composite) guard.emplace();
  manual_seed(0);
  Tensor x = randn({kConvN, kConvC, kConvHW, kConvHW}).requires_grad_();
  Tensor g = ones({kConvC}).requires_grad_(), b = zeros({kConvC}).requires_grad_();
  Tensor rm = zeros({kConvC}), rv = ones({kConvC});
  for (auto _ : state) {
    for (Tensor* p : {&x, &g, &b}) p->set_grad(Tensor());
    Tensor y = avg_pool2d(max_pool2d(relu(batch_norm(x, rm, rv, g, b, true)), 3, 2, 1), 2);
    y.sum().backward();
    sync();
    benchmark::DoNotOptimize(x.grad().impl());
  }
}

}  // namespace

void register_nn_benchmarks() {
  auto add = [](const char* name, auto fn, auto... args) {
    benchmark::RegisterBenchmark(name, fn, args...)->UseRealTime()->Unit(benchmark::kMillisecond);
  };
  add("conv2d_fwd/backplane", conv_fwd_backplane, false);
  add("conv2d_fwd/composite", conv_fwd_backplane, true);
  add("conv2d_fwd_bwd/backplane", conv_fwd_bwd_backplane, false);
  add("conv2d_fwd_bwd/composite", conv_fwd_bwd_backplane, true);
  add("resnet_block/backplane", resnet_block_backplane);
  add("norm_pool/backplane", norm_pool_backplane, false);
  add("norm_pool/composite", norm_pool_backplane, true);
  // oneDNN on the host: the baseline of the CPU backend.
  add("conv2d_fwd/onednn", conv_fwd_onednn);
  add("conv2d_fwd/onednn_compute", conv_fwd_onednn_compute);
  add("conv2d_fwd_bwd/onednn", conv_fwd_bwd_onednn);
}

}  // namespace bp::bench
