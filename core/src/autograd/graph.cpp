// Graph construction: metadata, saved tensors, edges, and the special nodes
// (leaf accumulators, views, in-place through views).
#include "graph.h"

#include <backplane/ops.h>

#include <algorithm>

#include "../block_cache.h"
#include "../internal.h"

namespace bp {

void destroy_autograd_meta(AutogradMeta* m) noexcept { delete m; }

void* AutogradMeta::operator new(std::size_t size) {
  return detail::cached_new<AutogradMeta>(size);
}
void AutogradMeta::operator delete(void* p, std::size_t size) noexcept {
  detail::cached_delete<AutogradMeta>(p, size);
}

namespace autograd {

namespace {
// The base's history version: how many times in-place ops have rewritten it.
uint32_t history_version_of(const TensorImpl& base) {
  const AutogradMeta* m = base.autograd.load(std::memory_order_acquire);
  return m ? m->history_version.load(std::memory_order_acquire) : 0;
}

// Whether the base of `view` had its history rewritten since the view's was
// derived (or since it was made, for a view that was not recorded).
bool view_history_stale(const TensorImpl& view) {
  const AutogradMeta* m = view.autograd.load(std::memory_order_acquire);
  return (m ? m->base_history_version : 0) != history_version_of(*view.base);
}
}  // namespace

}  // namespace autograd

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

// A zero buffer (of `like`'s dtype, on its device) covering every element
// of `geoms` in storage coordinates, and the shift (lo) that maps storage
// offsets into it.
Tensor zero_buffer(std::initializer_list<const Geometry*> geoms, const Tensor& like, int64_t& lo) {
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
  return detail::full_on({n}, 0, like.dtype(), like);
}

Tensor view_in(const Tensor& buffer, const Geometry& g, int64_t lo) {
  return buffer.as_strided(g.sizes, g.strides, g.offset - lo);
}

// The storage position (relative to lo) of every element of `g`, row-major,
// as a flat int64 tensor on `device`.
Tensor positions(const Geometry& g, int64_t lo, Device device) {
  const TensorOptions opts = TensorOptions(DType::Int64).device(device);
  Tensor pos = full({}, g.offset - lo, opts);
  for (std::size_t d = 0; d < g.sizes.size(); ++d) {
    DimVector shape(g.sizes.size(), 1);
    shape[d] = g.sizes[d];
    pos = pos.add(arange(0, g.sizes[d], 1, opts).mul(g.strides[d]).reshape(shape));
  }
  return pos.expand(g.sizes).reshape({-1});
}

// Adds `grad` (of `g`'s shape) into the elements `g` addresses in the flat
// `buffer`, summing where elements of `g` share a location (expand, unfold,
// as_strided).
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
  Tensor flat_buffer = buffer;
  flat_buffer.scatter_add_(0, positions(geo, lo, buffer.device()), grad.reshape({-1}).contiguous());
}

// The backward of a view op, as PyTorch defines it per op (AG-14): the op
// is replayed on a fresh zero tensor of the source's shape, and the gradient
// lands on the elements the replayed view covers. The fresh tensor never
// overlaps itself, so an expanded or unfolded source cannot multiply the
// gradient as reasoning about the shared storage would.
class ViewNode : public Node {
 public:
  ViewNode(const char* name, const Tensor& src, const Tensor& out, ViewReplay replay)
      : name_(name), src_shape_(src.sizes()), replay_(std::move(replay)) {
    outputs.push_back({DimVector(out.sizes()), out.dtype(), out.device()});
  }
  const char* name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const Tensor& g = grads[0];
    Tensor src_grad = detail::make_empty(src_shape_, g.dtype(), g);
    Tensor v = replay_(src_grad);
    const Geometry vg = Geometry::of(v);
    if (v.numel() == src_grad.numel() && non_overlapping(vg)) {
      // A permutation of the source's elements (transpose, view, squeeze).
      // A gradient already laid out as the view of a contiguous source
      // (the gradient of a transposed weight made column by column) is
      // that source's gradient read row by row: no copy.
      if (v.storage_offset() == 0 && DimVector(g.strides()) == DimVector(v.strides()))
        return {detail::make_view_unrecorded(g, src_shape_, contiguous_strides(src_shape_),
                                             g.storage_offset(), name_)};
      v.copy_(g);  // every element is written once
      return {src_grad};
    }
    src_grad.zero_();
    accumulate_into(src_grad.as_strided({src_grad.numel()}, {1}, 0), vg, 0, g);
    return {src_grad};
  }

 private:
  const char* name_;
  DimVector src_shape_;
  ViewReplay replay_;
};

// as_strided addresses storage, not its source's elements, so its backward
// is geometric, as PyTorch's: the gradient is scattered by storage position,
// then read back with the source's layout; where the source itself maps
// several elements to one position (an expanded source), each gets an equal
// share, so that the total is right.
class AsStridedNode : public Node {
 public:
  AsStridedNode(const char* name, Geometry src, Geometry out, DType dtype, Device device)
      : name_(name), src_(std::move(src)), out_(std::move(out)) {
    outputs.push_back({out_.sizes, dtype, device});
  }
  const char* name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const Tensor& g = grads[0];
    int64_t lo;
    Tensor buffer = zero_buffer({&src_, &out_}, g, lo);
    accumulate_into(buffer, out_, lo, g);
    if (!non_overlapping(src_)) {
      Tensor count = detail::full_on(buffer.sizes(), 0, g.dtype(), g);
      Tensor pos = positions(src_, lo, g.device());
      count.scatter_add_(0, pos, detail::full_on(pos.sizes(), 1, g.dtype(), g));
      // Positions the source does not reach get no gradient: 0/0 would be NaN.
      buffer = where(eq(count, 0), buffer, buffer.div(count));
    }
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
    Tensor buffer = zero_buffer({&base_, &view_}, g, lo);
    view_in(buffer, base_, lo).copy_(g);
    Tensor region = view_in(buffer, view_, lo);
    Tensor grad_result = region.clone(MemoryFormat::Contiguous);
    region.zero_();
    return {view_in(buffer, base_, lo).clone(MemoryFormat::Contiguous), grad_result};
  }

 private:
  Geometry base_, view_;
};

}  // namespace

namespace {
// retain_grad() follows a tensor through an in-place op (AG-4): its box
// moves from the node of the old value to the node of the new one.
void move_retained(AutogradMeta& m, const Edge& from, const Edge& to) {
  if (!m.retained) return;
  if (from.valid())
    std::erase_if(from.fn->retained, [&](const auto& r) { return r.second == m.retained; });
  if (to.valid()) to.fn->retained.emplace_back(to.input_nr, m.retained);
}
}  // namespace

AutogradMeta& meta(const Tensor& t) {
  std::atomic<AutogradMeta*>& slot = t.impl()->autograd;
  AutogradMeta* m = slot.load(std::memory_order_acquire);
  if (m) return *m;
  // Two threads recording on one new leaf may both get here: one wins.
  auto* fresh = new AutogradMeta();
  if (slot.compare_exchange_strong(m, fresh, std::memory_order_acq_rel)) return *fresh;
  delete fresh;
  return *m;
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
  BP_CHECK_T(AutogradError, data_.version() == version_,
             "[backward] one of the tensors needed "
             "for gradient computation has been modified by an in-place operation: ",
             saved_by_, " saved a ", detail::describe_tensor(data_), " at version ", version_,
             "; it is now at version ", data_.version(),
             ". Clone it before modifying it in place, or modify it under no_grad");
  return data_;
}

void FunctionNode::release_saved() {
  Node::release_saved();
  for (auto& s : saved_) s.reset();
}

namespace {

// A leaf's first gradient: the tensor itself when nothing else can reach
// its memory and it lies contiguous over all of it, as PyTorch steals such
// a gradient; a view of a tensor held by nothing else (the transposed
// result of a matmul's backward) is made the owner of that memory. Else a
// contiguous copy.
Tensor take_or_clone(Tensor g) {
  TensorImpl* t = g.impl();
  const StorageImpl& st = *t->storage;
  TensorImpl* base = t->base.get();
  const bool whole = t->contiguous && t->offset == 0 && !t->own_version &&
                     st.nbytes() == static_cast<std::size_t>(t->numel) * itemsize(t->dtype);
  const bool alone = t->use_count() == 1 && (base == nullptr || base->use_count() == 1) &&
                     st.use_count() == (base == nullptr ? 1u : 2u);
  if (!whole || !alone || t->requires_grad.load(std::memory_order_relaxed) ||
      t->autograd.load(std::memory_order_acquire) != nullptr)
    return g.clone(MemoryFormat::Contiguous);
  if (base == nullptr) return g;
  auto owner = make_intrusive<TensorImpl>();
  owner->storage = t->storage;
  owner->version = t->version;
  owner->sizes = t->sizes;
  owner->strides = t->strides;
  owner->dtype = t->dtype;
  owner->device = t->device;
  owner->refresh();
  return Tensor(std::move(owner));
}

}  // namespace

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>& grads) {
  Tensor g = std::move(grads[0]);
  std::vector<Hook> hooks;
  {
    std::lock_guard lock(mu_);
    hooks = hooks_;
  }
  // Hooks are the user's code: they run outside the lock.
  for (const Hook& h : hooks) {
    Tensor r = h(g);
    if (r.defined()) g = r;
  }
  if (g.dtype() != outputs[0].dtype) g = g.to(outputs[0].dtype);
  std::vector<std::function<void(const Tensor&)>> post;
  Tensor accumulated;
  {
    std::lock_guard lock(mu_);
    if (!grad_.defined())
      grad_ = take_or_clone(std::move(g));
    else
      grad_.add_(g);
    post = post_hooks_;
    accumulated = grad_;
  }
  for (const auto& h : post) h(accumulated);
  return {};
}

void AccumulateGrad::add_post_hook(std::function<void(const Tensor&)> hook) {
  std::lock_guard lock(mu_);
  post_hooks_.push_back(std::move(hook));
}

Tensor AccumulateGrad::grad() const {
  std::lock_guard lock(mu_);
  return grad_;
}

void AccumulateGrad::set_grad(const Tensor& g) {
  std::lock_guard lock(mu_);
  grad_ = g;
}

void AccumulateGrad::add_hook(Hook hook) {
  std::lock_guard lock(mu_);
  hooks_.push_back(std::move(hook));
}

AccumulateGrad& accumulator(const Tensor& leaf) {
  AutogradMeta& m = meta(leaf);
  if (AccumulateGrad* a = m.accumulator.load(std::memory_order_acquire)) return *a;
  std::lock_guard lock(m.mu);
  if (!m.accumulator_owner) {
    m.accumulator_owner = make_intrusive<AccumulateGrad>(*leaf.impl());
    m.accumulator.store(m.accumulator_owner.get(), std::memory_order_release);
  }
  return *m.accumulator_owner;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  // The common cases first: a tensor that is not a view, with a history or
  // an accumulator already made.
  if (!t.is_view())
    if (const AutogradMeta* m = meta_if(t)) {
      if (m->grad_fn) return {m->grad_fn, m->output_nr};
      if (AccumulateGrad* a = m->accumulator.load(std::memory_order_acquire))
        return {IntrusivePtr<Node>(a), 0};
    }
  AutogradMeta& m = meta(t);
  if (t.is_view() && view_history_stale(*t.impl())) {
    // The base's history was rewritten by an in-place op since this view's
    // was derived: derive it anew from the base's (AG-14).
    std::lock_guard lock(m.mu);
    const Tensor base = t.base();
    const uint32_t hv = history_version_of(*base.impl());
    if (m.base_history_version != hv) {
      auto node = make_intrusive<AsStridedNode>("AsStridedBackward0", Geometry::of(base),
                                                Geometry::of(t), t.dtype(), t.device());
      node->next_edges.push_back(gradient_edge(base));
      move_retained(m, {m.grad_fn, m.output_nr}, {node, 0});
      m.grad_fn = node;
      m.output_nr = 0;
      m.base_history_version = hv;
    }
  }
  if (m.grad_fn) return {m.grad_fn, m.output_nr};
  // A leaf the user flagged accumulates; a view made under no-grad (which
  // requires grad through its base, but has no history) passes nothing on.
  if (!t.impl()->requires_grad) return {};
  return {IntrusivePtr<Node>(&accumulator(t)), 0};
}

void connect_inputs(Node& node, std::initializer_list<const Tensor*> inputs) {
  node.next_edges.reserve(inputs.size());
  for (const Tensor* t : inputs) node.next_edges.push_back(gradient_edge(*t));
}

void set_history(const Tensor& out, IntrusivePtr<Node> node, uint32_t output_nr) {
  if (!is_floating(out.dtype())) return;  // AG-13
  OutputInfo info{DimVector(out.sizes()), out.dtype(), out.device()};
  if (node->outputs.size() == output_nr) {
    node->outputs.push_back(std::move(info));
  } else {
    if (node->outputs.size() < output_nr) node->outputs.resize(output_nr + 1);
    node->outputs[output_nr] = std::move(info);
  }
  // (`out` may be an in-place op's self, which other threads can reach
  // through references that do not count: its metadata is made by
  // compare-and-swap, as for any tensor.)
  AutogradMeta& m = meta(out);
  m.grad_fn = std::move(node);
  m.output_nr = output_nr;
  out.impl()->requires_grad = true;
}

void set_history(const Tensor& out, Node* node, uint32_t output_nr) {
  set_history(out, IntrusivePtr<Node>(node), output_nr);
}

void check_inplace_allowed(const char* op, const Tensor& self) {
  if (!GradMode::is_enabled()) return;
  if (self.is_view()) {
    if (self.impl()->view_made_in_no_grad)
      detail::raise<AutogradError>(
          "[", op,
          "] a view was created in no_grad mode and is being modified in place with "
          "grad mode enabled (",
          detail::describe_tensor(self),
          "). This is ambiguous and "
          "forbidden: make the view and the in-place op both inside the no_grad block (if the "
          "change should not be tracked) or both outside it (if it should)");
    const AutogradMeta* bm = meta_if(self.base());
    BP_CHECK_T(AutogradError, !(self.requires_grad() && !(bm && bm->grad_fn)), "[", op,
               "] a view of a leaf tensor that requires grad is being used in an in-place "
               "operation (",
               detail::describe_tensor(self),
               "). Do it under NoGradGuard (as "
               "optimizer steps do), or on a clone()");
    return;
  }
  BP_CHECK_T(AutogradError, !(self.requires_grad() && self.is_leaf()), "[", op,
             "] a leaf tensor that requires grad is being used in an in-place operation (",
             detail::describe_tensor(self),
             "). Do it under NoGradGuard (as optimizer steps "
             "do), or on a clone()");
}

bool record_inplace(const char* op, Tensor& self, std::initializer_list<const Tensor*> others,
                    const std::function<Tensor(const Tensor& old)>& compute) {
  if (!GradMode::is_enabled() || !is_floating(self.dtype())) return false;  // AG-13
  bool any = self.requires_grad();
  for (const Tensor* o : others) any |= o->requires_grad();
  if (!any) return false;
  check_inplace_allowed(op, self);
  const Edge old_edge = !self.is_view() && self.requires_grad() ? gradient_edge(self) : Edge{};
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
  AutogradMeta& sm = meta(self);
  if (!self.is_view()) {
    sm.grad_fn = rm.grad_fn;
    sm.output_nr = rm.output_nr;
    self.impl()->requires_grad = true;
    // Views taken before this write see the new values: they must derive
    // their history anew from self's (gradient_edge).
    sm.history_version.fetch_add(1, std::memory_order_acq_rel);
    move_retained(sm, old_edge, {sm.grad_fn, sm.output_nr});
    return true;
  }
  Tensor base = self.base();
  auto node = make_intrusive<CopySlices>(Geometry::of(base), Geometry::of(self), base.dtype(),
                                         base.device());
  node->next_edges.push_back(gradient_edge(base));
  node->next_edges.push_back({rm.grad_fn, rm.output_nr});
  set_history(base, node.get());
  meta(base).history_version.fetch_add(1, std::memory_order_acq_rel);
  // Self (and every other view of the base) now derives its history from
  // the base's new one, which carries its retained grad along.
  gradient_edge(self);
  return true;
}

bool record_inplace_direct(const char* op, Tensor& self,
                           std::initializer_list<const Tensor*> others,
                           const std::function<void()>& apply,
                           const std::function<void(Tensor& self)>& record) {
  if (!GradMode::is_enabled() || !is_floating(self.dtype()) || self.is_view()) return false;
  bool any = self.requires_grad();
  for (const Tensor* o : others) any |= o->requires_grad();
  if (!any) return false;
  check_inplace_allowed(op, self);
  const Edge old_edge = self.requires_grad() ? gradient_edge(self) : Edge{};
  {
    NoGradGuard no_grad;
    apply();
    self.impl()->version->bump();
  }
  record(self);  // its edge for self is taken before it sets self's new history
  AutogradMeta& sm = meta(self);
  // Views taken before this write derive their history anew from self's.
  sm.history_version.fetch_add(1, std::memory_order_acq_rel);
  move_retained(sm, old_edge, {sm.grad_fn, sm.output_nr});
  return true;
}

void record_view(const char* name, const Tensor& src, const Tensor& out, ViewReplay replay) {
  AutogradMeta& om = meta(out);
  om.base_history_version = history_version_of(*out.impl()->base);
  if (!GradMode::is_enabled()) return;
  auto node = make_intrusive<ViewNode>(name, src, out, std::move(replay));
  node->next_edges.push_back(gradient_edge(src));
  set_history(out, node.get());
}

void record_as_strided(const Tensor& src, const Tensor& out) {
  AutogradMeta& om = meta(out);
  om.base_history_version = history_version_of(*out.impl()->base);
  if (!GradMode::is_enabled()) return;
  auto node = make_intrusive<AsStridedNode>("AsStridedBackward0", Geometry::of(src),
                                            Geometry::of(out), out.dtype(), out.device());
  node->next_edges.push_back(gradient_edge(src));
  set_history(out, node.get());
}

Tensor sum_to(const Tensor& grad, IntArrayRef shape) {
  if (grad.sizes().equals(shape)) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && grad.size(d) != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? grad : grad.sum(dims, /*keepdim=*/true);
  return r.reshape(shape);
}

}  // namespace autograd
}  // namespace bp
