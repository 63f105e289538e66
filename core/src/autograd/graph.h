// The autograd graph: nodes, edges, saved tensors, per-tensor metadata, and
// the recording helpers the ops call. Internal to the core.
#pragma once

#include <backplane/autograd.h>
#include <backplane/error.h>
#include <backplane/tensor.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

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

  std::vector<Edge> next_edges;      // one per input
  std::vector<OutputInfo> outputs;   // one per output
  // Per output: tensor hooks and retain_grad, sized only once one is added
  // (an allocation saved on every recorded op).
  std::vector<std::vector<Hook>> pre_hooks;
  std::vector<Hook>& hooks_of(uint32_t output_nr) {
    if (pre_hooks.size() <= output_nr) pre_hooks.resize(output_nr + 1);
    return pre_hooks[output_nr];
  }
  uint64_t sequence_nr;              // creation order: later nodes run first

 protected:
  bool released_ = false;
};

// A node whose backward is a function of the node (for saved tensors) and
// the output gradients.
class FunctionNode : public Node {
 public:
  using Backward = std::function<std::vector<Tensor>(FunctionNode&, std::vector<Tensor>&)>;
  FunctionNode(const char* name, Backward fn) : name_(name), fn_(std::move(fn)) {}

  const char* name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override;
  void release_saved() override;

  // Saves `t` for backward; returns its slot for saved().
  std::size_t save(const Tensor& t) {
    saved_.emplace_back(t, name_);
    return saved_.size() - 1;
  }
  Tensor saved(std::size_t i) const { return saved_[i].unpack(); }
  // Whether input i needs a gradient (skip work for the others).
  bool needs_grad(std::size_t i) const { return i < next_edges.size() && next_edges[i].valid(); }

 private:
  const char* name_;
  Backward fn_;
  std::vector<SavedTensor> saved_;
};

}  // namespace bp::autograd

namespace bp {
// Per-tensor autograd state (TensorImpl::autograd).
struct AutogradMeta {
  IntrusivePtr<autograd::Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;
  Tensor grad;                 // leaves' accumulated gradient
  std::vector<autograd::Hook> hooks;     // hooks of a leaf (a non-leaf's go to its grad_fn)
  // A leaf's gradient accumulator, made on first use and owned here so it
  // is not rebuilt for every recorded op.
  IntrusivePtr<autograd::Node> grad_accumulator;
  // A non-leaf's retained gradient lives in a box shared with its node's hook.
  struct RetainedGrad : RefCounted {
    Tensor grad;
  };
  IntrusivePtr<RetainedGrad> retained;
  // Views: the base history they were derived from (regenerated when the
  // base's history is rewritten by an in-place op through another view).
  uint32_t base_history_version = 0;
  // Bases: bumped each time an in-place op through a view rewrites history.
  uint32_t history_version = 0;
};

}  // namespace bp

namespace bp::autograd {

AutogradMeta& meta(const Tensor& t);  // creates it when absent
inline AutogradMeta* meta_if(const Tensor& t) { return t.impl()->autograd.get(); }

// --- recording, used by the ops ----------------------------------------------

// True when grad mode is on and any input requires grad.
inline bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  bool any = false;
  for (const Tensor* t : inputs) any |= t->defined() && t->impl()->requires_grad;
  return any && GradMode::is_enabled();
}

// The edge a gradient for `t` travels: its grad_fn, or its leaf accumulator.
Edge gradient_edge(const Tensor& t);

// A node for an op with these inputs (edges taken now).
IntrusivePtr<FunctionNode> make_node(const char* name, std::initializer_list<const Tensor*> inputs,
                                     FunctionNode::Backward fn);
// Makes `node` (output `output_nr`) the history of the fresh tensor `out`.
void set_history(const Tensor& out, Node* node, uint32_t output_nr = 0);

// AG-7: an in-place op on a leaf that requires grad, or on a view of one,
// is an error while recording.
void check_inplace_allowed(const char* op, const Tensor& self);

// Runs an in-place op under autograd: `compute(old)` gives the result out of
// place from a recorded clone of self; its values are written into self and
// self's history (or, for a view, its base's) is rewritten to end in it.
// Returns false (and does nothing) when no input needs grad.
bool record_inplace(const char* op, Tensor& self, std::initializer_list<const Tensor*> others,
                    const std::function<Tensor(const Tensor& old)>& compute);

// Records a view op: `out` is a view of `src`.
void record_view(const char* name, const Tensor& src, const Tensor& out);

// Sums a gradient down to `shape` (undoing broadcasting, AG-11).
Tensor sum_to(const Tensor& grad, IntArrayRef shape);

}  // namespace bp::autograd
