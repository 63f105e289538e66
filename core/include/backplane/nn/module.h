// bp::nn::Module: a tree of named parameters, buffers and submodules, with
// PyTorch's behaviour (NN-1): dotted names in registration order, train/eval,
// to(device, dtype), zero_grad, state dicts.
//
// Modules are held by std::shared_ptr (a child is shared with whoever made
// it); a layer's parameters are members (fc->weight) that are references to
// the registered slots: an update or an assignment through either is seen
// by both.
#pragma once

#include <backplane/tensor.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bp::nn {

// Name -> tensor, in insertion order (dotted names for nested modules).
class NamedTensors {
 public:
  using Item = std::pair<std::string, Tensor>;
  void insert(std::string name, Tensor t);  // replaces an existing name in place
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // The tensor named `name`; an IndexError naming it when absent.
  const Tensor& operator[](const std::string& name) const;
  Tensor* find(const std::string& name);
  const Tensor* find(const std::string& name) const;
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const;
  std::vector<Tensor> values() const;
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<Item> items_;
  std::map<std::string, std::size_t> index_;
};

// What load_state_dict found (strict = false reports instead of refusing).
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module");
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  // Movable, so a layer made in place can go into a container by value
  // (Sequential(Linear(4, 3), ReLU())); the tensors keep their identity.
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;

  // The class name, as printed ("Linear").
  const std::string& type_name() const { return type_name_; }

  // The single-input forward of layers and containers; a module without one
  // raises a NotImplementedError naming it.
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  // Registration. Names are non-empty, without '.', unique among this
  // module's parameters, buffers and children. register_parameter makes `t`
  // a leaf requiring grad (when requires_grad) and returns it; an undefined
  // `t` registers "no parameter" (Linear without bias), listed nowhere.
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  // A non-persistent buffer moves with to() but is left out of state_dict().
  Tensor& register_buffer(const std::string& name, Tensor t, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }

  // Recursive unless recurse = false; this module's own first, then each
  // child's in registration order, prefixed with the child's name.
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // This module first (named ""), then every descendant, depth first.
  std::vector<std::shared_ptr<Module>> modules();
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules();

  // Training mode, for this module and every descendant.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Converts every parameter, buffer and gradient in place (the tensors
  // keep their identity: a member handle and an optimiser's list see the
  // new data). The dtype applies to floating tensors only, as PyTorch's;
  // integer buffers (num_batches_tracked) keep theirs.
  void to(Device device);
  void to(DType dtype);
  void to(Device device, DType dtype);

  // Every parameter's gradient set to none (the default, as PyTorch 2), or
  // zeroed in place where it exists.
  void zero_grad(bool set_to_none = true);

  // Calls fn on this module and every descendant, children first.
  void apply(const std::function<void(Module&)>& fn);

  // Parameters and persistent buffers by dotted name, detached: they share
  // storage with the module's tensors (an in-place change is seen by both).
  NamedTensors state_dict() const;
  // Copies each entry into the tensor of the same name, under no-grad,
  // converting device but not dtype. Refuses (changing nothing) on a shape
  // or dtype mismatch, and, when strict, on missing or unexpected keys,
  // naming them all.
  LoadResult load_state_dict(const NamedTensors& state, bool strict = true);

  // PyTorch's printed form: "Linear(in_features=4, out_features=3, bias=True)",
  // containers with their children indented.
  std::string to_string() const;
  // The text between the parentheses of this module's own line.
  virtual std::string extra_repr() const { return ""; }

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> m);

 private:
  void check_new_name(const std::string& name, const char* what) const;
  void collect_parameters(const std::string& prefix, bool recurse, NamedTensors& out) const;
  void collect_buffers(const std::string& prefix, bool recurse, bool persistent_only,
                       NamedTensors& out) const;
  void collect_state(const std::string& prefix, NamedTensors& out) const;
  void collect_modules(const std::string& prefix,
                       std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out);
  void convert(const std::optional<Device>& device, const std::optional<DType>& dtype);
  void print(std::string& out, int indent) const;

  std::string type_name_;
  bool training_ = true;
  // Entries hold undefined tensors for registered "no parameter" names. A
  // deque, so the references register_parameter and register_buffer return
  // (a layer's members) stay valid as more are registered and when the
  // module is moved.
  std::deque<std::pair<std::string, Tensor>> params_;
  std::deque<std::pair<std::string, Tensor>> buffers_;
  std::vector<bool> buffer_persistent_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// Replaces t's data with src's (shape, dtype, device and memory), keeping
// t's identity, autograd state and version count: PyTorch's
// `param.data = src`. Every handle to t sees src's values; t shares src's
// memory but is not a view; src must not require grad.
void set_data(Tensor& t, const Tensor& src);

}  // namespace bp::nn
