// Graph construction: metadata, saved tensors, edges, and the special nodes
// (leaf accumulators, views, in-place through views).
#include "graph.h"

#include <backplane/ops.h>

#include "../internal.h"

#include <atomic>

namespace bp {


namespace autograd {

namespace {

// Creation order only has to be monotonic within the thread that builds a
// graph; a thread-local counter avoids a locked increment per node.
thread_local uint64_t t_next_sequence_nr = 0;

// Sizes, strides and offset of a tensor, in its storage's elements.
struct Geometry {
  DimVector sizes, strides;
  int64_t offset = 0;

  static Geometry of(const Tensor& t) {
    return {DimVector(t.sizes()), DimVector(t.strides()), t.storage_offset()};
  }
  // [lo, hi] storage elements reached (lo > hi when empty).
  std::pair<int64_t, int64_t> extent() const {
    int64_t lo = offset, hi = offset;
    for (std::size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] == 0) return {offset, offset - 1};
      (strides[d] < 0 ? lo : hi) += (sizes[d] - 1) * strides[d];
    }
    return {lo, hi};
  }
};

// No two elements share a location: with dims sorted by stride, each stride
// exceeds the span of all smaller ones.
bool non_overlapping(const Geometry& g) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (std::size_t d = 0; d < g.sizes.size(); ++d) {
    if (g.sizes[d] == 0) return true;
    if (g.sizes[d] > 1) dims.emplace_back(g.strides[d], g.sizes[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t span = 0;
  for (auto [stride, size] : dims) {
    if (stride <= span) return false;
    span += (size - 1) * stride;
  }
  return true;
}

// A zero buffer covering every element of `geoms` in storage coordinates,
// and the shift (lo) that maps storage offsets into it.
Tensor zero_buffer(std::initializer_list<const Geometry*> geoms, DType dtype, Device device,
                   int64_t& lo) {
  int64_t hi = -1;
  lo = 0;
  bool first = true;
  for (const Geometry* g : geoms) {
    auto [l, h] = g->extent();
    if (l > h) continue;
    if (first || l < lo) lo = l;
    if (first || h > hi) hi = h;
    first = false;
  }
  const int64_t n = first ? 0 : hi - lo + 1;
  return zeros({n}, TensorOptions(dtype).device(device));
}

Tensor view_in(const Tensor& buffer, const Geometry& g, int64_t lo) {
  return buffer.as_strided(g.sizes, g.strides, g.offset - lo);
}

// Adds `grad` (of `g`'s shape) into the elements `g` addresses in `buffer`,
// summing where elements of `g` share a location (expand, as_strided).
void accumulate_into(const Tensor& buffer, const Geometry& g, int64_t lo, Tensor grad) {
  Geometry geo = g;
  // Broadcast dims first: sum them away.
  std::vector<int64_t> zero_dims;
  for (std::size_t d = 0; d < geo.sizes.size(); ++d)
    if (geo.strides[d] == 0 && geo.sizes[d] > 1) zero_dims.push_back(static_cast<int64_t>(d));
  if (!zero_dims.empty()) {
    grad = grad.sum(zero_dims, /*keepdim=*/true);
    for (int64_t d : zero_dims) geo.sizes[d] = 1;
  }
  if (non_overlapping(geo)) {
    view_in(buffer, geo, lo).add_(grad);
    return;
  }
  // Elements still overlap: scatter-add by storage position.
  Tensor pos = full({}, geo.offset - lo, TensorOptions(DType::Int64).device(buffer.device()));
  for (std::size_t d = 0; d < geo.sizes.size(); ++d) {
    DimVector shape(geo.sizes.size(), 1);
    shape[d] = geo.sizes[d];
    Tensor step = arange(0, geo.sizes[d], 1, TensorOptions(DType::Int64).device(buffer.device()))
                      .mul(scalar_tensor(geo.strides[d], TensorOptions(DType::Int64).device(buffer.device())))
                      .reshape(shape);
    pos = pos.add(step);
  }
  pos = pos.expand(geo.sizes).reshape({-1});
  Tensor flat_buffer = buffer;
  flat_buffer.scatter_add_(0, pos, grad.reshape({-1}).contiguous());
}

}  // namespace

// Accumulates into a leaf's grad (AG-3). The leaf owns it (so it is made
// once, not per recorded op); it points back at the leaf without owning it,
// and the leaf's metadata clears that pointer when the leaf goes, after
// which gradients reaching it are dropped.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(TensorImpl* leaf) : leaf_(leaf) {
    outputs.push_back({DimVector(leaf->sizes), leaf->dtype, leaf->device});
  }
  void forget_leaf() { leaf_ = nullptr; }
  const char* name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (leaf_ == nullptr) return {};
    Tensor leaf{IntrusivePtr<TensorImpl>(leaf_)};
    AutogradMeta& m = meta(leaf);
    Tensor g = grads[0];
    for (const Hook& h : m.hooks) {
      Tensor r = h(g);
      if (r.defined()) g = r;
    }
    if (g.dtype() != leaf.dtype()) g = g.to(leaf.dtype());
    if (!m.grad.defined())
      m.grad = g.clone(MemoryFormat::Contiguous);
    else
      m.grad.add_(g);
    return {};
  }

 private:
  TensorImpl* leaf_;
};

}  // namespace autograd

void AutogradMetaDeleter::operator()(AutogradMeta* m) const {
  // A graph may outlive its leaf: its accumulator then drops gradients.
  if (m->grad_accumulator)
    static_cast<autograd::AccumulateGrad*>(m->grad_accumulator.get())->forget_leaf();
  delete m;
}

namespace autograd {

namespace {

// d(view)/d(src): the gradient of a view lands on the elements it covers.
class ViewNode : public Node {
 public:
  ViewNode(const char* name, Geometry src, Geometry out, DType dtype, Device device)
      : name_(name), src_(std::move(src)), out_(std::move(out)) {
    outputs.push_back({out_.sizes, dtype, device});
  }
  const char* name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const Tensor& g = grads[0];
    int64_t lo;
    Tensor buffer = zero_buffer({&src_, &out_}, g.dtype(), g.device(), lo);
    accumulate_into(buffer, out_, lo, g);
    return {view_in(buffer, src_, lo).clone(MemoryFormat::Contiguous)};
  }

 private:
  const char* name_;
  Geometry src_, out_;
};

// A base whose view was modified in place: the view's region takes the
// gradient of the in-place result, the rest flows to the old base.
class CopySlices : public Node {
 public:
  CopySlices(Geometry base, Geometry view, DType dtype, Device device)
      : base_(std::move(base)), view_(std::move(view)) {
    outputs.push_back({base_.sizes, dtype, device});
  }
  const char* name() const override { return "CopySlices"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const Tensor& g = grads[0];
    int64_t lo;
    Tensor buffer = zero_buffer({&base_, &view_}, g.dtype(), g.device(), lo);
    view_in(buffer, base_, lo).copy_(g);
    Tensor region = view_in(buffer, view_, lo);
    Tensor grad_result = region.clone(MemoryFormat::Contiguous);
    region.zero_();
    return {view_in(buffer, base_, lo).clone(MemoryFormat::Contiguous), grad_result};
  }

 private:
  Geometry base_, view_;
};

Tensor root_base(const Tensor& t) { return t.is_view() ? t.base() : t; }

}  // namespace

AutogradMeta& meta(const Tensor& t) {
  auto& p = t.impl()->autograd;
  if (!p) p.reset(new AutogradMeta());
  return *p;
}

Node::Node() : sequence_nr(t_next_sequence_nr++) {}

SavedTensor::SavedTensor(const Tensor& t, const char* saved_by)
    : data_(t.defined() ? t.detach() : Tensor()),
      was_defined_(t.defined()),
      version_(t.defined() ? t.version() : 0),
      saved_by_(saved_by) {}

Tensor SavedTensor::unpack() const {
  if (!was_defined_) return Tensor();
  BP_CHECK_T(AutogradError, data_.defined(), "[backward] ", saved_by_,
             ": trying to backward through the graph a second time; its saved tensors were "
             "freed by the first backward. Pass retain_graph=true to the first backward if you "
             "need to run backward twice");
  BP_CHECK_T(AutogradError, data_.version() == version_, "[backward] one of the tensors needed "
             "for gradient computation has been modified by an in-place operation: ", saved_by_,
             " saved a ", detail::describe_tensor(data_), " at version ", version_,
             "; it is now at version ", data_.version(),
             ". Clone it before modifying it in place, or modify it under no_grad");
  return data_;
}

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>& grads) { return fn_(*this, grads); }

void FunctionNode::release_saved() {
  Node::release_saved();
  for (auto& s : saved_) s.reset();
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.impl()->requires_grad) return {};
  AutogradMeta& m = meta(t);
  if (t.is_view()) {
    // A view whose base's history was rewritten since: derive it anew.
    Tensor base = t.base();
    AutogradMeta* bm = meta_if(base);
    const uint32_t hv = bm ? bm->history_version : 0;
    if (m.base_history_version != hv && base.impl()->requires_grad) {
      auto node = make_intrusive<ViewNode>("AsStridedBackward0", Geometry::of(base),
                                           Geometry::of(t), t.dtype(), t.device());
      node->next_edges.push_back(gradient_edge(base));
      m.grad_fn = node;
      m.output_nr = 0;
      m.base_history_version = hv;
    }
  }
  if (m.grad_fn) return {m.grad_fn, m.output_nr};
  if (!m.grad_accumulator) m.grad_accumulator = make_intrusive<AccumulateGrad>(t.impl());
  return {m.grad_accumulator, 0};
}

IntrusivePtr<FunctionNode> make_node(const char* name, std::initializer_list<const Tensor*> inputs,
                                     FunctionNode::Backward fn) {
  auto node = make_intrusive<FunctionNode>(name, std::move(fn));
  node->next_edges.reserve(inputs.size());
  for (const Tensor* t : inputs) node->next_edges.push_back(gradient_edge(*t));
  return node;
}

void set_history(const Tensor& out, Node* node, uint32_t output_nr) {
  if (node->outputs.size() <= output_nr) node->outputs.resize(output_nr + 1);
  node->outputs[output_nr] = {DimVector(out.sizes()), out.dtype(), out.device()};
  AutogradMeta& m = meta(out);
  m.grad_fn = IntrusivePtr<Node>(node);
  m.output_nr = output_nr;
  out.impl()->requires_grad = true;
}

void check_inplace_allowed(const char* op, const Tensor& self) {
  if (!GradMode::is_enabled()) return;
  const Tensor base = root_base(self);
  const bool leaf = !(meta_if(base) && meta_if(base)->grad_fn);
  BP_CHECK_T(AutogradError, !(leaf && base.requires_grad()), "[", op, "] ",
             self.is_view() ? "a view of a leaf tensor that requires grad"
                            : "a leaf tensor that requires grad",
             " is being used in an in-place operation (", detail::describe_tensor(self),
             "). Do it under NoGradGuard (as optimizer steps do), or on a clone()");
}

bool record_inplace(const char* op, Tensor& self, std::initializer_list<const Tensor*> others,
                    const std::function<Tensor(const Tensor& old)>& compute) {
  bool any = self.requires_grad();
  for (const Tensor* o : others) any |= o->requires_grad();
  if (!any || !GradMode::is_enabled()) return false;
  check_inplace_allowed(op, self);
  const Tensor old = self.clone();
  Tensor result = compute(old);
  if (result.dtype() != self.dtype()) result = result.to(self.dtype());
  if (!result.requires_grad()) {
    // The new values do not depend on anything that requires grad (fill_):
    // the old values get no gradient, but self stays in the graph.
    auto node = make_node("FillBackward0", {&old}, [](FunctionNode&, std::vector<Tensor>&) {
      return std::vector<Tensor>{Tensor()};
    });
    set_history(result, node.get());
  }
  {
    NoGradGuard no_grad;
    detail::copy_into(self, result);
    self.impl()->version->bump();
  }
  const AutogradMeta& rm = meta(result);
  if (!self.is_view()) {
    AutogradMeta& m = meta(self);
    m.grad_fn = rm.grad_fn;
    m.output_nr = rm.output_nr;
    self.impl()->requires_grad = true;
    // Views taken before this write see the new values: they must derive
    // their history anew from self's (gradient_edge).
    ++m.history_version;
    return true;
  }
  Tensor base = self.base();
  auto node = make_intrusive<CopySlices>(Geometry::of(base), Geometry::of(self), base.dtype(),
                                         base.device());
  node->next_edges.push_back(gradient_edge(base));
  node->next_edges.push_back({rm.grad_fn, rm.output_nr});
  set_history(base, node.get());
  ++meta(base).history_version;
  return true;
}

void record_view(const char* name, const Tensor& src, const Tensor& out) {
  if (!needs_grad({&src})) return;
  auto node = make_intrusive<ViewNode>(name, Geometry::of(src), Geometry::of(out), out.dtype(),
                                       out.device());
  node->next_edges.push_back(gradient_edge(src));
  set_history(out, node.get());
  const Tensor base = root_base(out);
  AutogradMeta* bm = meta_if(base);
  meta(out).base_history_version = bm ? bm->history_version : 0;
}

Tensor sum_to(const Tensor& grad, IntArrayRef shape) {
  if (DimVector(grad.sizes()) == DimVector(shape)) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && grad.size(d) != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? grad : grad.sum(dims, /*keepdim=*/true);
  return r.reshape(shape);
}

}  // namespace autograd
}  // namespace bp
