// The autograd graph: nodes, edges, saved tensors, per-tensor metadata, and
// the recording helpers the ops call. Internal to the core.
#pragma once

#include <backplane/autograd.h>
#include <backplane/error.h>
#include <backplane/tensor.h>

#include <atomic>
#include <boost/container/small_vector.hpp>
#include <functional>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "../block_cache.h"

namespace bp::autograd {

class Node;

// Where a gradient goes: input `input_nr` of `fn` (null: nowhere).
struct Edge {
  IntrusivePtr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return static_cast<bool>(fn); }
};

using Hook = std::function<Tensor(const Tensor&)>;

// What a node needs to make a zero gradient for an output nobody used.
struct OutputInfo {
  DimVector shape;
  DType dtype = DType::Float32;
  Device device;
};

// A tensor kept for backward, with the version it had when saved (AG-8).
// It holds a detached alias (same memory and version counter, no autograd
// state), so saving an op's own output creates no reference cycle.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, const char* saved_by);
  // The tensor, after checking it was not modified in place since.
  Tensor unpack() const;
  void reset() { data_ = Tensor(); }

 private:
  Tensor data_;
  bool was_defined_ = false;  // an empty slot stays empty; a freed one is an error
  uint32_t version_ = 0;
  const char* saved_by_ = "";
};

// The gradient retain_grad() keeps for a non-leaf, shared by the tensor's
// metadata and the node that computes it (AG-4).
struct RetainedGrad : RefCounted {
  Tensor grad;
};

class Node : public RefCounted {
 public:
  Node();
  ~Node() override = default;

  virtual const char* name() const = 0;
  // Gradients for each input (undefined: none), from one gradient per output
  // (always defined: missing ones are zeros).
  virtual std::vector<Tensor> apply(std::vector<Tensor>& grad_outputs) = 0;
  // Frees saved tensors after a backward without retain_graph (AG-5).
  virtual void release_saved() { released_ = true; }
  bool released() const { return released_; }

  // Most ops have one or two inputs and one output: kept inside the node,
  // not in allocations of their own.
  boost::container::small_vector<Edge, 2> next_edges;     // one per input
  boost::container::small_vector<OutputInfo, 1> outputs;  // one per output
  // Per output: tensor hooks, sized only once one is added (an allocation
  // saved on every recorded op).
  std::vector<std::vector<Hook>> pre_hooks;
  std::vector<Hook>& hooks_of(uint32_t output_nr) {
    if (pre_hooks.size() <= output_nr) pre_hooks.resize(output_nr + 1);
    return pre_hooks[output_nr];
  }
  // Per output: where retain_grad() keeps the gradient, after the hooks ran.
  // Moved to the new node when an in-place op rewrites the tensor's history.
  std::vector<std::pair<uint32_t, IntrusivePtr<RetainedGrad>>> retained;
  uint64_t sequence_nr;  // creation order: later nodes run first

 protected:
  bool released_ = false;
};

// A node whose backward is a function of the node (for saved tensors) and
// the output gradients: a BackwardNode<F>, made by make_node.
class FunctionNode : public Node {
 public:
  const char* name() const override { return name_; }
  void release_saved() override;

  // Saves `t` for backward; returns its slot for saved().
  std::size_t save(const Tensor& t) {
    saved_.emplace_back(t, name_);
    return saved_.size() - 1;
  }
  Tensor saved(std::size_t i) const { return saved_[i].unpack(); }
  // Whether input i needs a gradient (skip work for the others).
  bool needs_grad(std::size_t i) const { return i < next_edges.size() && next_edges[i].valid(); }

 protected:
  explicit FunctionNode(const char* name) : name_(name) {}

 private:
  const char* name_;
  boost::container::small_vector<SavedTensor, 2> saved_;
};

// The node of one op, its backward function `F` (the op's lambda) kept
// inside it: recording an op makes one object, from a per-thread cache of
// freed blocks (block_cache.h), where a std::function would allocate its
// closure on its own.
template <class F>
class BackwardNode final : public FunctionNode {
 public:
  template <class G>
  BackwardNode(const char* name, G&& fn) : FunctionNode(name), fn_(std::forward<G>(fn)) {}
  static void* operator new(std::size_t size) { return detail::cached_new<BackwardNode>(size); }
  static void operator delete(void* p, std::size_t size) noexcept {
    detail::cached_delete<BackwardNode>(p, size);
  }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override { return fn_(*this, grads); }

 private:
  F fn_;
};

// A leaf's gradient and hooks (AG-3, AG-12). The leaf's metadata owns it,
// and so do the graphs that reach the leaf; it does not point back at the
// leaf, so a graph may outlive its leaf. Several threads may run backward
// into one leaf at once (AG-15): `mu` serialises them.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(const TensorImpl& leaf) {
    outputs.push_back({leaf.sizes, leaf.dtype, leaf.device});
    // Runs as soon as its gradient is complete (as PyTorch's does), so that
    // post-accumulate hooks (DistributedDataParallel's buckets) fire while
    // the rest of backward goes on, not all at its end.
    sequence_nr = std::numeric_limits<uint64_t>::max();
  }
  const char* name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override;
  // Shared by the graphs of several threads: nothing to free, and no
  // per-backward state to write.
  void release_saved() override {}

  Tensor grad() const;
  void set_grad(const Tensor& g);
  void add_hook(Hook hook);
  // Called with the accumulated gradient, no lock held, after each accumulation.
  void add_post_hook(std::function<void(const Tensor&)> hook);

 private:
  mutable std::mutex mu_;
  Tensor grad_;
  std::vector<Hook> hooks_;
  std::vector<std::function<void(const Tensor&)>> post_hooks_;
};

}  // namespace bp::autograd

namespace bp {
// Per-tensor autograd state (TensorImpl::autograd), made on first use.
struct AutogradMeta {
  // From a per-thread cache of freed ones (block_cache.h): every recorded
  // op's result makes one.
  static void* operator new(std::size_t size);
  static void operator delete(void* p, std::size_t size) noexcept;

  // Guards the parts made lazily (accumulator, a view's regenerated
  // history, the retained-grad box) when threads share a tensor (AG-15).
  std::mutex mu;
  IntrusivePtr<autograd::Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;
  // A leaf's accumulator, published once under `mu`; read lock-free.
  std::atomic<autograd::AccumulateGrad*> accumulator{nullptr};
  IntrusivePtr<autograd::AccumulateGrad> accumulator_owner;
  IntrusivePtr<autograd::RetainedGrad> retained;
  // Views: the base history they were derived from (regenerated when the
  // base's history is rewritten by an in-place op through another view).
  uint32_t base_history_version = 0;
  // Bases: bumped each time an in-place op through a view rewrites history.
  std::atomic<uint32_t> history_version{0};
};

}  // namespace bp

namespace bp::autograd {

AutogradMeta& meta(const Tensor& t);  // creates it when absent
inline AutogradMeta* meta_if(const Tensor& t) {
  return t.impl()->autograd.load(std::memory_order_acquire);
}

// --- recording, used by the ops ----------------------------------------------

// True when grad mode is on and any input requires grad.
inline bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  bool any = false;
  for (const Tensor* t : inputs) any |= t->defined() && t->requires_grad();
  return any && GradMode::is_enabled();
}

// The edge a gradient for `t` travels: its grad_fn, or its leaf accumulator.
Edge gradient_edge(const Tensor& t);
// A leaf's accumulator (holding its grad), made on first use.
AccumulateGrad& accumulator(const Tensor& leaf);

// Takes the edges of `inputs` into `node`.
void connect_inputs(Node& node, std::initializer_list<const Tensor*> inputs);

// A node for an op with these inputs (edges taken now), whose backward is
// `fn(node, grad_outputs)`.
template <class F>
IntrusivePtr<FunctionNode> make_node(const char* name, std::initializer_list<const Tensor*> inputs,
                                     F&& fn) {
  auto* p = new BackwardNode<std::decay_t<F>>(name, std::forward<F>(fn));
  p->adopt_first_reference();
  auto node = IntrusivePtr<FunctionNode>::adopt(p);
  connect_inputs(*node, inputs);
  return node;
}
// Makes `node` (output `output_nr`) the history of the fresh tensor `out`.
// An integer or bool result gets none: it never requires grad (AG-13).
void set_history(const Tensor& out, Node* node, uint32_t output_nr = 0);
// The same, handing the caller's reference to `out` (one reference count
// change fewer in each direction on the recording hot path).
void set_history(const Tensor& out, IntrusivePtr<Node> node, uint32_t output_nr = 0);

// AG-7, AG-14: an in-place op on a leaf that requires grad, on a view of
// one, or on a view made under no-grad, is an error while recording.
void check_inplace_allowed(const char* op, const Tensor& self);

// Runs an in-place op under autograd: `compute(old)` gives the result out of
// place from a recorded clone of self; its values are written into self and
// self's history (or, for a view, its base's) is rewritten to end in it.
// Returns false (and does nothing) when nothing needs recording: grad mode
// off, no input requiring grad, or an integer or bool self (AG-13).
bool record_inplace(const char* op, Tensor& self, std::initializer_list<const Tensor*> others,
                    const std::function<Tensor(const Tensor& old)>& compute);

// The same for an in-place op whose gradient needs neither self's old
// values nor its new ones (add_, sub_): `apply` writes self in place (one
// pass, no copy of the old values) and `record(self)` records the op's node
// with self as both input and output (its input edge is self's history
// before the op). Returns false, having done nothing, when there is nothing
// to record or self is a view (a view's write goes through
// record_inplace's CopySlices).
bool record_inplace_direct(const char* op, Tensor& self,
                           std::initializer_list<const Tensor*> others,
                           const std::function<void()>& apply,
                           const std::function<void(Tensor& self)>& record);

// Sums a gradient down to `shape` (undoing broadcasting, AG-11).
Tensor sum_to(const Tensor& grad, IntArrayRef shape);

}  // namespace bp::autograd
