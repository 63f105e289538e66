// bp::nn::Module: registration, traversal, modes, conversion and state dicts.
#include <backplane/autograd.h>
#include <backplane/error.h>
#include <backplane/nn/module.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "../internal.h"

namespace bp::nn {

// --- NamedTensors ------------------------------------------------------------------

void NamedTensors::insert(std::string name, Tensor t) {
  if (auto it = index_.find(name); it != index_.end()) {
    items_[it->second].second = std::move(t);
    return;
  }
  index_.emplace(name, items_.size());
  items_.emplace_back(std::move(name), std::move(t));
}

const Tensor& NamedTensors::operator[](const std::string& name) const {
  const Tensor* t = find(name);
  BP_CHECK_INDEX(t, "no tensor named '", name, "'");
  return *t;
}

Tensor* NamedTensors::find(const std::string& name) {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

const Tensor* NamedTensors::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

std::vector<std::string> NamedTensors::keys() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& [k, v] : items_) out.push_back(k);
  return out;
}

std::vector<Tensor> NamedTensors::values() const {
  std::vector<Tensor> out;
  out.reserve(items_.size());
  for (const auto& [k, v] : items_) out.push_back(v);
  return out;
}

// --- set_data ----------------------------------------------------------------------

void set_data(Tensor& t, const Tensor& src) {
  BP_CHECK_T(AutogradError, !src.requires_grad(),
             "[set_data] the new data must not require grad (detach it first)");
  TensorImpl* dst = t.impl();
  const TensorImpl* s = src.impl();
  if (dst == s) return;
  // t keeps its own version count (as PyTorch's `.data =`), continued in a
  // counter of its own: the new memory's other users have their own history.
  const uint32_t version = dst->version->get();
  dst->storage = s->storage;
  if (!dst->own_version) {
    dst->own_version = make_intrusive<SharedVersionCounter>();
    dst->own_version->counter.reset_to(version);
  }
  dst->version = &dst->own_version->counter;
  dst->base.reset();  // not a view, even of src's base: t owns its handle to the memory
  dst->sizes = s->sizes;
  dst->strides = s->strides;
  dst->offset = s->offset;
  dst->dtype = s->dtype;
  dst->device = s->device;
  dst->refresh();
}

// --- Module ------------------------------------------------------------------------

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

Tensor Module::forward(const Tensor&) {
  detail::raise<NotImplementedError>("[", type_name_,
                                     "] this module has no single-input forward; call its own");
}

void Module::check_new_name(const std::string& name, const char* what) const {
  BP_CHECK(!name.empty(), "[", type_name_, "] a ", what, " name must not be empty");
  BP_CHECK(name.find('.') == std::string::npos, "[", type_name_, "] a ", what,
           " name must not contain a dot (got '", name, "')");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& e) { return e.first == name; });
  };
  BP_CHECK(!taken(params_), "[", type_name_, "] a parameter named '", name, "' already exists");
  BP_CHECK(!taken(buffers_), "[", type_name_, "] a buffer named '", name, "' already exists");
  BP_CHECK(!taken(children_), "[", type_name_, "] a submodule named '", name, "' already exists");
}

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name(name, "parameter");
  if (t.defined()) {
    BP_CHECK_T(AutogradError, t.is_leaf(), "[", type_name_, "] parameter '", name,
               "' must be a leaf tensor (detach it first)");
    if (requires_grad) {
      BP_CHECK_TYPE(is_floating(t.dtype()), "[", type_name_, "] parameter '", name,
                    "' requires grad but has dtype ", t.dtype(), "; only floating tensors can");
    }
    t.requires_grad_(requires_grad);
  }
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  check_new_name(name, "buffer");
  buffers_.emplace_back(name, std::move(t));
  buffer_persistent_.push_back(persistent);
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_new_name(name, "submodule");
  BP_CHECK(m != nullptr, "[", type_name_, "] submodule '", name, "' is null");
  BP_CHECK(m.get() != this, "[", type_name_, "] a module cannot be its own submodule");
  children_.emplace_back(name, std::move(m));
}

void Module::collect_parameters(const std::string& prefix, bool recurse, NamedTensors& out) const {
  for (const auto& [name, t] : params_)
    if (t.defined()) out.insert(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, child] : children_)
    child->collect_parameters(prefix + name + ".", true, out);
}

void Module::collect_buffers(const std::string& prefix, bool recurse, bool persistent_only,
                             NamedTensors& out) const {
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    if (!buffers_[i].second.defined() || (persistent_only && !buffer_persistent_[i])) continue;
    out.insert(prefix + buffers_[i].first, buffers_[i].second);
  }
  if (!recurse) return;
  for (const auto& [name, child] : children_)
    child->collect_buffers(prefix + name + ".", true, persistent_only, out);
}

namespace {
// A tensor reachable by two paths (a module registered twice) once, under
// its first name, as PyTorch's named_parameters and named_buffers.
NamedTensors without_repeats(const NamedTensors& all) {
  NamedTensors out;
  std::set<const TensorImpl*> seen;
  for (const auto& [name, t] : all)
    if (seen.insert(t.impl()).second) out.insert(name, t);
  return out;
}
}  // namespace

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors all;
  collect_parameters("", recurse, all);
  return without_repeats(all);
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  return named_parameters(recurse).values();
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors all;
  collect_buffers("", recurse, false, all);
  return without_repeats(all);
}

std::vector<Tensor> Module::buffers(bool recurse) const { return named_buffers(recurse).values(); }

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [name, child] : children_) out.push_back(child);
  return out;
}

void Module::collect_modules(const std::string& prefix,
                             std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out) {
  for (const auto& [name, child] : children_) {
    const std::string full = prefix.empty() ? name : prefix + "." + name;
    // A module reachable twice is listed once, as PyTorch's named_modules.
    if (std::any_of(out.begin(), out.end(), [&](const auto& e) { return e.second == child; }))
      continue;
    out.emplace_back(full, child);
    child->collect_modules(full, out);
  }
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::shared_ptr<Module> self;
  try {
    self = shared_from_this();
  } catch (const std::bad_weak_ptr&) {
    // A module on the stack: list it through a non-owning pointer.
    self = std::shared_ptr<Module>(this, [](Module*) {});
  }
  out.emplace_back("", self);
  collect_modules("", out);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules() {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [name, m] : named_modules()) out.push_back(m);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::convert(const std::optional<Device>& device, const std::optional<DType>& dtype) {
  auto convert_one = [&](Tensor& t) {
    if (!t.defined()) return;
    const Device dev = device.value_or(t.device());
    const DType dt = dtype && is_floating(t.dtype()) ? *dtype : t.dtype();
    if (dev == t.device() && dt == t.dtype()) return;
    Tensor grad = t.requires_grad() ? t.grad() : Tensor();
    {
      NoGradGuard no_grad;
      set_data(t, t.detach().to(dev, dt));
    }
    if (grad.defined()) {
      Tensor converted = grad.to(dev, dt);
      t.set_grad(converted);
    }
  };
  for (auto& [name, t] : params_) convert_one(t);
  for (auto& [name, t] : buffers_) convert_one(t);
  for (auto& [name, child] : children_) child->convert(device, dtype);
}

void Module::to(Device device) { convert(device, std::nullopt); }

void Module::to(DType dtype) {
  BP_CHECK_TYPE(is_floating(dtype), "[", type_name_,
                ".to] modules convert to floating dtypes only, got ", dtype);
  convert(std::nullopt, dtype);
}

void Module::to(Device device, DType dtype) {
  BP_CHECK_TYPE(is_floating(dtype), "[", type_name_,
                ".to] modules convert to floating dtypes only, got ", dtype);
  convert(device, dtype);
}

}  // namespace bp::nn

namespace bp::detail {
void clear_grad(Tensor& p, bool set_to_none) {
  Tensor g = p.grad();
  if (!g.defined()) return;
  if (set_to_none) {
    p.set_grad(Tensor());
    return;
  }
  NoGradGuard no_grad;
  // A gradient that is part of a graph (create_graph) is cut loose first, as PyTorch.
  if (g.requires_grad()) {
    g = g.detach();
    p.set_grad(g);
  }
  g.zero_();
}
}  // namespace bp::detail

namespace bp::nn {

void Module::zero_grad(bool set_to_none) {
  for (Tensor& p : parameters()) detail::clear_grad(p, set_to_none);
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [name, child] : children_) child->apply(fn);
  fn(*this);
}

void Module::collect_state(const std::string& prefix, NamedTensors& out) const {
  // PyTorch's order: each module's parameters, then its persistent buffers,
  // then its children's.
  collect_parameters(prefix, false, out);
  collect_buffers(prefix, false, true, out);
  for (const auto& [name, child] : children_) child->collect_state(prefix + name + ".", out);
}

NamedTensors Module::state_dict() const {
  NamedTensors all;
  collect_state("", all);
  NamedTensors out;
  for (const auto& [name, t] : all) out.insert(name, t.detach());
  return out;
}

namespace {
std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "\"" : ", \"") + n + "\"";
  return s;
}
}  // namespace

LoadResult Module::load_state_dict(const NamedTensors& state, bool strict) {
  NamedTensors own;
  collect_state("", own);

  // A BatchNorm's num_batches_tracked missing from the state, as in the files
  // PyTorch before 0.4.1 wrote: PyTorch loads such a state (a state dict
  // without version metadata, as every Backplane one is) and resets the
  // counter to 0; so does this.
  std::vector<Tensor> counters_reset;
  auto old_batchnorm_counter = [&](const std::string& name) {
    static const std::string counter = "num_batches_tracked";
    if (name.size() < counter.size() ||
        name.compare(name.size() - counter.size(), counter.size(), counter) != 0)
      return false;
    const std::string prefix = name.substr(0, name.size() - counter.size());
    if (!prefix.empty() && prefix.back() != '.') return false;
    const std::string owner = prefix.empty() ? "" : prefix.substr(0, prefix.size() - 1);
    for (const auto& [path, m] : named_modules())
      if (path == owner) return m->type_name().rfind("BatchNorm", 0) == 0;
    return false;
  };

  LoadResult result;
  std::vector<std::string> mismatches;
  for (const auto& [name, t] : own) {
    const Tensor* src = state.find(name);
    if (!src) {
      if (old_batchnorm_counter(name))
        counters_reset.push_back(t);
      else
        result.missing_keys.push_back(name);
      continue;
    }
    BP_CHECK(src->defined(), "[load_state_dict] the entry for '", name, "' is an undefined tensor");
    if (DimVector(src->sizes()) != DimVector(t.sizes())) {
      mismatches.push_back(detail::concat("size mismatch for ", name,
                                          ": copying a param with shape ", src->sizes(),
                                          ", the shape in the current model is ", t.sizes()));
    } else if (src->dtype() != t.dtype()) {
      mismatches.push_back(detail::concat("dtype mismatch for ", name,
                                          ": copying a param of dtype ", src->dtype(),
                                          ", the dtype in the current model is ", t.dtype()));
    }
  }
  for (const auto& [name, t] : state)
    if (!own.contains(name)) result.unexpected_keys.push_back(name);

  std::string errors;
  if (strict && !result.missing_keys.empty())
    errors += "\n  Missing key(s) in state_dict: " + join(result.missing_keys) + ".";
  if (strict && !result.unexpected_keys.empty())
    errors += "\n  Unexpected key(s) in state_dict: " + join(result.unexpected_keys) + ".";
  for (const auto& m : mismatches) errors += "\n  " + m + ".";
  BP_CHECK(errors.empty(), "[load_state_dict] error(s) in loading the state_dict for ", type_name_,
           ":", errors, "\nNothing was loaded.");

  // Every check passed: copy. The sources are converted to each tensor's
  // device first, so a failing transfer leaves the module as it was.
  std::vector<std::pair<Tensor, Tensor>> copies;
  for (const auto& [name, t] : own)
    if (const Tensor* src = state.find(name)) copies.emplace_back(t, src->detach().to(t.device()));
  NoGradGuard no_grad;
  for (auto& [dst, src] : copies) {
    Tensor d = dst;
    d.copy_(src);
  }
  for (Tensor c : counters_reset) c.zero_();
  return result;
}

void Module::print(std::string& out, int indent) const {
  out += type_name_ + "(";
  const std::string extra = extra_repr();
  if (children_.empty()) {
    out += extra + ")";
    return;
  }
  const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
  if (!extra.empty()) out += "\n" + pad + extra;
  for (const auto& [name, child] : children_) {
    out += "\n" + pad + "(" + name + "): ";
    child->print(out, indent + 2);
  }
  out += "\n" + std::string(static_cast<std::size_t>(indent), ' ') + ")";
}

std::string Module::to_string() const {
  std::string out;
  print(out, 0);
  return out;
}

}  // namespace bp::nn
