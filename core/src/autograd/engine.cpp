// The backward pass: runs the graph from the roots in reverse creation
// order, summing gradients into each node's inputs, and the per-tensor
// autograd calls of Tensor.
#include <backplane/ops.h>

#include <iostream>
#include <mutex>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "../internal.h"
#include "graph.h"

namespace bp {

namespace {
thread_local bool t_grad_enabled = true;

std::mutex g_warn_mu;
std::function<void(const std::string&)>& warning_handler() {
  static auto* h = new std::function<void(const std::string&)>(
      [](const std::string& m) { std::cerr << "[warning] " << m << "\n"; });
  return *h;
}
}  // namespace

bool GradMode::is_enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool enabled) { t_grad_enabled = enabled; }

void set_warning_handler(std::function<void(const std::string&)> handler) {
  std::lock_guard lock(g_warn_mu);
  warning_handler() = std::move(handler);
}

void warn(const std::string& message) {
  std::lock_guard lock(g_warn_mu);
  warning_handler()(message);
}

namespace autograd {
namespace {

struct ByLatest {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

void accumulate(Tensor& slot, const Tensor& g) { slot = slot.defined() ? slot.add(g) : g; }

// The callbacks queued during the backward pass running on this thread,
// and the pass's number.
thread_local std::vector<std::function<void()>>* t_callbacks = nullptr;
thread_local uint64_t t_pass = 0;
std::atomic<uint64_t> g_passes{0};

// Runs the queued callbacks when the pass ends, also when it ends by an
// error (then they are dropped: a callback finishes a pass that finished).
class CallbackScope {
 public:
  CallbackScope() : prev_(t_callbacks), prev_pass_(t_pass) {
    t_callbacks = &list_;
    t_pass = ++g_passes;
  }
  ~CallbackScope() {
    t_callbacks = prev_;
    t_pass = prev_pass_;
  }
  void run() {
    for (std::size_t i = 0; i < list_.size(); ++i) {
      auto f = std::move(list_[i]);  // a callback may queue more
      f();
    }
    list_.clear();
  }

 private:
  std::vector<std::function<void()>> list_;
  std::vector<std::function<void()>>* prev_;
  uint64_t prev_pass_;
};

void run_backward(const std::vector<Edge>& roots, const std::vector<Tensor>& grads,
                  bool retain_graph) {
  NoGradGuard no_grad;
  CallbackScope callbacks;
  // How many edges from reachable nodes lead to each node.
  std::unordered_map<Node*, int> deps;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const Edge& e : roots)
    if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.valid()) continue;
      ++deps[e.fn.get()];
      if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    }
  }
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto buffer_of = [&](Node* n) -> std::vector<Tensor>& {
    auto& b = buffers[n];
    if (b.size() < n->outputs.size()) b.resize(n->outputs.size());
    return b;
  };
  for (std::size_t i = 0; i < roots.size(); ++i)
    accumulate(buffer_of(roots[i].fn.get())[roots[i].input_nr], grads[i]);

  std::priority_queue<Node*, std::vector<Node*>, ByLatest> ready;
  std::unordered_set<Node*> queued;
  for (const Edge& e : roots)
    if (deps[e.fn.get()] == 0 && queued.insert(e.fn.get()).second) ready.push(e.fn.get());

  // Keeps nodes alive while they run even if the graph lets go of them.
  std::vector<IntrusivePtr<Node>> keep;
  for (const Edge& e : roots) keep.push_back(e.fn);
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::vector<Tensor> in = std::move(buffer_of(node));
    buffers.erase(node);
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (!in[i].defined()) {
        const OutputInfo& o = node->outputs[i];
        in[i] = zeros(o.shape, TensorOptions(o.dtype).device(o.device));
      }
      if (i < node->pre_hooks.size())
        for (const Hook& h : node->pre_hooks[i]) {
          Tensor r = h(in[i]);
          if (r.defined()) in[i] = r;
        }
    }
    // retain_grad() sees the gradient after every hook (AG-4).
    for (const auto& [output_nr, box] : node->retained)
      box->grad = box->grad.defined() ? box->grad.add(in[output_nr])
                                      : in[output_nr].clone(MemoryFormat::Contiguous);
    std::vector<Tensor> out = node->apply(in);
    if (!retain_graph) node->release_saved();
    for (std::size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.valid()) continue;
      if (i < out.size() && out[i].defined()) accumulate(buffer_of(e.fn.get())[e.input_nr], out[i]);
      if (--deps[e.fn.get()] == 0) {
        keep.push_back(e.fn);
        ready.push(e.fn.get());
      }
    }
  }
  callbacks.run();
}

Edge root_edge(const Tensor& t, std::size_t i) {
  BP_CHECK_T(AutogradError, t.requires_grad(), "[backward] element ", i,
             " of the roots does not require grad and has no grad_fn: nothing to differentiate. "
             "Set requires_grad on the leaves first (and do not run under NoGradGuard)");
  return gradient_edge(t);
}

Tensor root_gradient(const Tensor& t, const Tensor& g) {
  if (!g.defined()) {
    BP_CHECK_T(AutogradError, t.numel() == 1,
               "[backward] a gradient can be created implicitly "
               "only for one-element outputs; this output is a ",
               detail::describe_tensor(t), ". Pass backward(gradient) with a tensor of its shape");
    return detail::full_on(t.sizes(), 1, t.dtype(), t);
  }
  BP_CHECK_T(AutogradError, DimVector(g.sizes()) == DimVector(t.sizes()),
             "[backward] the gradient has shape ", g.sizes(), " but the output has shape ",
             t.sizes(), "; they must match");
  detail::check_same_device("backward", t, g);
  return g.dtype() == t.dtype() ? g : g.to(t.dtype());
}

}  // namespace

uint64_t current_pass() { return t_pass; }

void queue_callback(std::function<void()> callback) {
  BP_CHECK_T(AutogradError, t_callbacks != nullptr,
             "[queue_callback] no backward pass is running "
             "on this thread: a callback can be queued only from a hook during backward");
  t_callbacks->push_back(std::move(callback));
}

}  // namespace autograd

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& gradients,
              bool retain_graph) {
  BP_CHECK_T(AutogradError, gradients.empty() || gradients.size() == roots.size(),
             "[backward] got ", gradients.size(), " gradients for ", roots.size(), " roots");
  std::vector<autograd::Edge> edges;
  std::vector<Tensor> grads;
  for (std::size_t i = 0; i < roots.size(); ++i) {
    edges.push_back(autograd::root_edge(roots[i], i));
    grads.push_back(autograd::root_gradient(roots[i], gradients.empty() ? Tensor() : gradients[i]));
  }
  autograd::run_backward(edges, grads, retain_graph);
}

// --- Tensor's autograd calls ------------------------------------------------------

using autograd::meta;
using autograd::meta_if;

Tensor& Tensor::requires_grad_(bool r) {
  BP_CHECK_TYPE(!r || is_floating(dtype()),
                "[requires_grad_] only floating tensors can require "
                "gradients, got ",
                detail::describe_tensor(*this), "; convert it with .to(float32)");
  BP_CHECK_T(AutogradError, is_leaf() || r,
             "[requires_grad_] only leaves can change this flag; "
             "this tensor was computed by ",
             grad_fn_name(), ". Use .detach() to get a tensor outside the graph");
  impl()->requires_grad = r;
  return *this;
}

bool Tensor::is_leaf() const {
  // A view whose base's history was rewritten derives its own first.
  if (is_view() && requires_grad()) autograd::gradient_edge(*this);
  const AutogradMeta* m = meta_if(*this);
  return !(m && m->grad_fn);
}

Tensor Tensor::grad() const {
  if (!is_leaf()) {
    const AutogradMeta* m = meta_if(*this);
    if (m && m->retained) return m->retained->grad;
    warn("[grad] the .grad of a tensor that is not a leaf is being read (" +
         detail::describe_tensor(*this) +
         "); it is not filled by backward. Call .retain_grad() "
         "on it before backward if you need it, or use the gradient of a leaf");
    return Tensor();
  }
  const AutogradMeta* m = meta_if(*this);
  const autograd::AccumulateGrad* acc =
      m ? m->accumulator.load(std::memory_order_acquire) : nullptr;
  return acc ? acc->grad() : Tensor();
}

void Tensor::set_grad(const Tensor& g) {
  if (g.defined()) {
    BP_CHECK(DimVector(g.sizes()) == impl()->sizes, "[set_grad] the gradient has shape ", g.sizes(),
             " but the tensor has shape ", sizes());
    detail::check_same_device("set_grad", *this, g);
  }
  if (!is_leaf()) {
    AutogradMeta& m = meta(*this);
    if (m.retained) {
      m.retained->grad = g;
      return;
    }
  }
  autograd::accumulator(*this).set_grad(g);
}

std::string Tensor::grad_fn_name() const {
  if (!requires_grad()) return "";
  const autograd::Edge e = autograd::gradient_edge(*this);
  if (!e.valid() || !meta(*this).grad_fn) return "";
  return e.fn->name();
}

Tensor& Tensor::retain_grad() {
  BP_CHECK_T(AutogradError, requires_grad(),
             "[retain_grad] this tensor does not require grad: ", detail::describe_tensor(*this));
  if (is_leaf()) return *this;  // leaves keep their grad anyway
  const autograd::Edge e = autograd::gradient_edge(*this);
  AutogradMeta& m = meta(*this);
  std::lock_guard lock(m.mu);
  if (m.retained) return *this;
  m.retained = make_intrusive<autograd::RetainedGrad>();
  e.fn->retained.emplace_back(e.input_nr, m.retained);
  return *this;
}

bool Tensor::retains_grad() const {
  const AutogradMeta* m = meta_if(*this);
  return m && m->retained;
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) {
  BP_CHECK_T(AutogradError, requires_grad(),
             "[register_hook] cannot register a hook on a tensor "
             "that does not require grad: ",
             detail::describe_tensor(*this));
  if (is_leaf()) {
    autograd::accumulator(*this).add_hook(std::move(hook));
    return;
  }
  const autograd::Edge e = autograd::gradient_edge(*this);
  e.fn->hooks_of(e.input_nr).push_back(std::move(hook));
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) {
  BP_CHECK_T(AutogradError, requires_grad() && is_leaf(),
             "[register_post_accumulate_grad_hook] "
             "needs a leaf that requires grad, got ",
             detail::describe_tensor(*this));
  // The hook lives in the leaf's accumulator, which a graph may keep after
  // the leaf is gone: it gets the gradient, not the leaf (a hook that needs
  // the leaf holds it itself).
  autograd::accumulator(*this).add_post_hook(std::move(hook));
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  bp::backward({*this}, {gradient}, retain_graph);
}

Tensor Tensor::detach() const {
  const TensorImpl* src = impl();
  auto impl = make_intrusive<TensorImpl>();
  impl->storage = src->storage;
  impl->version = src->version;
  impl->own_version = src->own_version;
  impl->sizes = src->sizes;
  impl->strides = src->strides;
  impl->offset = src->offset;
  impl->numel = src->numel;
  impl->dtype = src->dtype;
  impl->device = src->device;
  impl->contiguous = src->contiguous;
  return Tensor(std::move(impl));
}

Tensor& Tensor::detach_() {
  BP_CHECK_T(AutogradError, !is_view(), "[detach_] cannot detach a view in place (",
             detail::describe_tensor(*this),
             "); its base would keep the history. Use .detach(), "
             "which returns a new tensor on the same memory");
  if (AutogradMeta* m = meta_if(*this)) {
    m->grad_fn.reset();
    m->output_nr = 0;
  }
  impl()->requires_grad = false;
  return *this;
}

Tensor Tensor::data() const {
  Tensor t = detach();
  t.impl()->own_version = make_intrusive<SharedVersionCounter>();
  t.impl()->version = &t.impl()->own_version->counter;
  return t;
}

}  // namespace bp
