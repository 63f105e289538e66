// Named ops: the kernels plugins register under names of their own, the
// parser of their schemas, and bp::call_op, which checks a call against the
// schema before the kernel runs.
#include <backplane/autograd.h>
#include <backplane/backend.h>
#include <backplane/error.h>
#include <backplane/named_ops.h>
#include <backplane/ops.h>

#include <array>
#include <cctype>
#include <map>
#include <optional>
#include <shared_mutex>
#include <sstream>

#include "internal.h"

namespace bp {

namespace {

enum class Param { Tensor, Int, Float, Bool };

constexpr int kMaxNamedTensors = 8;

struct Schema {
  std::string text;
  std::vector<Param> params;
  int tensors = 0, ints = 0, floats = 0, outputs = 0;
  // The types alone: two schemas with the same types are the same schema,
  // whatever their parameter names and spacing.
  bool same_as(const Schema& o) const { return params == o.params && outputs == o.outputs; }
};

struct Impl {
  bp_kernel_fn fn = nullptr;
  void* ctx = nullptr;
  uint32_t mask = 0;
  int backend = -1;  // the full id: a later backend in the slot is another
  std::string backend_name, origin;
};

struct Entry {
  Schema schema;
  std::array<Impl, kMaxBackends> impl;
};

std::shared_mutex g_mu;
std::map<std::string, Entry, std::less<>> g_ops;

thread_local bool t_composite_only = false;

// The composite ops a backend may override, with the schema its kernel gets.
const CompositeOverride* find_overridable(std::string_view name) {
  for (const CompositeOverride& c : overridable_composites())
    if (name == c.name) return &c;
  return nullptr;
}

// "<namespace>::<op>", both [a-z0-9_]+; in the namespace "core", only a
// composite op the core lets a backend override.
std::string check_name(const char* name) {
  BP_CHECK(name != nullptr, "[register_named_kernel] the name is missing");
  const std::string_view n(name);
  const auto sep = n.find("::");
  BP_CHECK(sep != std::string_view::npos && detail::is_plain_name(n.substr(0, sep)) &&
               detail::is_plain_name(n.substr(sep + 2)),
           "[register_named_kernel] '", n,
           "' is not a named op name: <namespace>::<op>, each [a-z0-9_]+");
  if (n.substr(0, sep) == "core" && find_overridable(n) == nullptr) {
    std::string known;
    for (const CompositeOverride& c : overridable_composites())
      known.append(known.empty() ? "" : ", ").append(c.name);
    throw ValueError("[register_named_kernel] '" + std::string(n) +
                     "': the namespace 'core' is the core's own; a backend may override " + known);
  }
  return std::string(n);
}

// A small tokenizer over the schema text: identifiers and punctuation.
class Tokens {
 public:
  explicit Tokens(std::string_view s) : s_(s) {}
  std::string_view next() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (i_ >= s_.size()) return {};
    const std::size_t b = i_;
    if (std::isalpha(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_') {
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
        ++i_;
    } else if (s_.compare(i_, 2, "->") == 0) {
      i_ += 2;
    } else {
      ++i_;
    }
    return s_.substr(b, i_ - b);
  }
  std::string_view peek() {
    const std::size_t keep = i_;
    std::string_view t = next();
    i_ = keep;
    return t;
  }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

// "(Tensor x, float alpha, int n, bool b) -> Tensor" or "... -> (Tensor, Tensor)".
Schema parse_schema(const std::string& op, const char* text) {
  BP_CHECK(text != nullptr, "[register_named_kernel] ", op, ": the schema is missing");
  Schema s;
  s.text = text;
  auto bad = [&](const std::string& why) {
    return ValueError("[register_named_kernel] " + op + ": schema '" + s.text + "': " + why +
                      " (expected e.g. '(Tensor x, float alpha) -> Tensor')");
  };
  Tokens t(s.text);
  if (t.next() != "(") throw bad("it must start with '('");
  if (t.peek() == ")") {
    t.next();
  } else {
    for (;;) {
      const std::string_view type = t.next();
      const std::string_view name = t.next();
      Param p;
      if (type == "Tensor")
        p = Param::Tensor;
      else if (type == "int")
        p = Param::Int;
      else if (type == "float")
        p = Param::Float;
      else if (type == "bool")
        p = Param::Bool;
      else
        throw bad("unknown parameter type '" + std::string(type) + "' (Tensor, int, float, bool)");
      if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
        throw bad("parameter " + std::to_string(s.params.size()) + " has no name");
      s.params.push_back(p);
      const std::string_view sep = t.next();
      if (sep == ")") break;
      if (sep != ",") throw bad("expected ',' or ')' after '" + std::string(name) + "'");
    }
  }
  for (Param p : s.params) {
    s.tensors += p == Param::Tensor;
    s.ints += p == Param::Int || p == Param::Bool;
    s.floats += p == Param::Float;
  }
  if (t.next() != "->") throw bad("expected '->' after the parameters");
  std::string_view tok = t.next();
  if (tok == "Tensor") {
    s.outputs = 1;
  } else if (tok == "(") {
    for (;;) {
      if (t.next() != "Tensor") throw bad("outputs are Tensors");
      ++s.outputs;
      tok = t.next();
      if (tok == ")") break;
      if (tok != ",") throw bad("expected ',' or ')' in the outputs");
    }
  } else {
    throw bad("expected 'Tensor' or '(Tensor, ...)' after '->'");
  }
  if (!t.next().empty()) throw bad("unexpected text after the outputs");
  if (s.tensors == 0) throw bad("a named op takes at least one Tensor (its device and dtype)");
  if (s.tensors > kMaxNamedTensors || s.outputs > kMaxNamedTensors)
    throw bad("at most " + std::to_string(kMaxNamedTensors) + " input and " +
              std::to_string(kMaxNamedTensors) + " output tensors");
  if (s.ints > BP_MAX_INTS)
    throw bad("at most " + std::to_string(BP_MAX_INTS) + " int and bool parameters");
  if (s.floats > BP_MAX_SCALARS)
    throw bad("at most " + std::to_string(BP_MAX_SCALARS) + " float parameters");
  return s;
}

std::string dtype_list(uint32_t mask) {
  std::string out;
  for (int d = 0; d < kNumDTypes; ++d)
    if (mask & BP_DTYPE_BIT(d))
      out.append(out.empty() ? "" : ", ").append(name(static_cast<DType>(d)));
  return out.empty() ? "none" : out;
}

const char* kind_name(Param p) {
  switch (p) {
    case Param::Tensor:
      return "Tensor";
    case Param::Int:
      return "int";
    case Param::Float:
      return "float";
    case Param::Bool:
      return "bool";
  }
  return "?";
}

// The schema and kernel for (name, backend), or an error saying what is missing.
// A named op as one backend registered it: its schema and kernel.
struct Found {
  Schema schema;
  Impl impl;
};

// `name` as backend `b` registered it; nothing when b lacks it.
std::optional<Found> find(std::string_view name, const Backend& b) {
  std::shared_lock lock(g_mu);
  const auto it = g_ops.find(name);
  if (it == g_ops.end()) return std::nullopt;
  const Impl& impl = it->second.impl[backend_slot(b.id())];
  if (impl.fn == nullptr || impl.backend != b.id()) return std::nullopt;
  return Found{it->second.schema, impl};
}

// The same, or an error naming the backends that have it.
Found lookup(std::string_view name, const Backend& b) {
  if (std::optional<Found> f = find(name, b)) return std::move(*f);
  std::string have;
  for (const NamedOpInfo& op : named_ops())
    if (op.name == name) have.append(have.empty() ? "" : ", ").append(op.backend);
  std::ostringstream os;
  os << "[" << name << "] is not a named op of backend '" << b.name() << "'";
  if (have.empty())
    os << "; no loaded backend registered it ('backplane ops' lists the named ops)";
  else
    os << "; backends that have it: " << have;
  throw NotImplementedError(os.str());
}

// The call against the schema: tensor and attribute counts and kinds.
bp_attrs make_named_attrs(std::string_view name, const Schema& s, std::size_t num_inputs,
                          std::size_t num_outputs, const std::vector<OpAttr>& attrs) {
  auto mismatch = [&](const std::string& why) {
    return ValueError("[" + std::string(name) + "] " + why + " (schema: " + s.text + ")");
  };
  if (num_inputs != static_cast<std::size_t>(s.tensors))
    throw mismatch("expects " + std::to_string(s.tensors) + " tensor(s), got " +
                   std::to_string(num_inputs));
  if (num_outputs != static_cast<std::size_t>(s.outputs))
    throw mismatch("writes " + std::to_string(s.outputs) + " output(s), got " +
                   std::to_string(num_outputs));
  const std::size_t num_attrs = static_cast<std::size_t>(s.ints + s.floats);
  if (attrs.size() != num_attrs)
    throw mismatch("expects " + std::to_string(num_attrs) + " attribute(s), got " +
                   std::to_string(attrs.size()));
  bp_attrs a = detail::make_attrs();
  std::size_t k = 0;
  for (Param p : s.params) {
    if (p == Param::Tensor) continue;
    const OpAttr& v = attrs[k];
    const bool ok = (p == Param::Int && std::holds_alternative<int64_t>(v)) ||
                    (p == Param::Bool && std::holds_alternative<bool>(v)) ||
                    (p == Param::Float && !std::holds_alternative<bool>(v));
    if (!ok)
      throw mismatch("attribute " + std::to_string(k) + " must be " + kind_name(p) + ", got " +
                     (std::holds_alternative<bool>(v)     ? "bool"
                      : std::holds_alternative<double>(v) ? "float"
                                                          : "int"));
    if (p == Param::Float) {
      bp_scalar& sc = a.scalars[a.num_scalars++];
      sc.dtype = BP_DTYPE_FLOAT64;
      sc.reserved = 0;
      sc.value.f = std::holds_alternative<double>(v) ? std::get<double>(v)
                                                     : static_cast<double>(std::get<int64_t>(v));
    } else {
      a.ints[a.num_ints++] =
          std::holds_alternative<bool>(v) ? (std::get<bool>(v) ? 1 : 0) : std::get<int64_t>(v);
    }
    ++k;
  }
  return a;
}

}  // namespace

namespace detail {

void register_named_kernel(int backend, const std::string& backend_name,
                           const bp_named_kernel_registration& reg, std::string origin) {
  const std::string name = check_name(reg.name);
  Schema schema = parse_schema(name, reg.schema);
  if (const CompositeOverride* c = find_overridable(name))
    BP_CHECK(schema.same_as(parse_schema(name, c->schema)), "[register_named_kernel] ", name,
             " overrides a core op: its schema is '", c->schema, "', not '", schema.text, "'");
  BP_CHECK(reg.fn != nullptr, "[register_named_kernel] ", name, ": the kernel is NULL");
  std::unique_lock lock(g_mu);
  Entry& e = g_ops[name];
  bool known = false;
  for (const Impl& i : e.impl) known = known || i.fn != nullptr;
  if (known && !e.schema.same_as(schema)) {
    std::string by;
    for (const Impl& i : e.impl)
      if (i.fn != nullptr) by = i.backend_name;
    throw ValueError("[register_named_kernel] " + name + " is registered by '" + by +
                     "' with schema '" + e.schema.text + "', not '" + schema.text + "'");
  }
  Impl& impl = e.impl[backend_slot(backend)];
  if (impl.fn != nullptr && impl.backend == backend)
    throw ValueError("[register_named_kernel] " + name + " is registered twice: first by " +
                     impl.origin + ", again by " + origin);
  if (!known) e.schema = std::move(schema);
  impl = Impl{reg.fn, reg.kernel_ctx, reg.dtype_mask, backend, backend_name, std::move(origin)};
}

void remove_named_kernels(int backend) {
  std::unique_lock lock(g_mu);
  for (auto it = g_ops.begin(); it != g_ops.end();) {
    it->second.impl[backend_slot(backend)] = Impl{};
    bool any = false;
    for (const Impl& i : it->second.impl) any = any || i.fn != nullptr;
    it = any ? std::next(it) : g_ops.erase(it);
  }
}

}  // namespace detail

std::vector<NamedOpInfo> named_ops() {
  std::shared_lock lock(g_mu);
  std::vector<NamedOpInfo> out;
  for (const auto& [name, e] : g_ops)
    for (const Impl& i : e.impl)
      if (i.fn != nullptr && PluginLoader::instance().by_id(i.backend) != nullptr)
        out.push_back({name, e.schema.text, i.backend_name, i.mask, i.origin});
  return out;
}

namespace {

// There is a first input, and every tensor of the call is defined.
void check_defined(std::string_view name, const std::vector<Tensor>& inputs,
                   const std::vector<Tensor>& outputs) {
  BP_CHECK(!inputs.empty(), "[", name, "] a named op needs its Tensor inputs");
  for (std::size_t i = 0; i < inputs.size(); ++i)
    BP_CHECK(inputs[i].defined(), "[", name, "] input ", i, " is an undefined tensor");
  for (std::size_t i = 0; i < outputs.size(); ++i)
    BP_CHECK(outputs[i].defined(), "[", name, "] output ", i, " is an undefined tensor");
}

// The backend a call runs on: the first input's storage's, which works for
// a backend unloaded while its tensors live.
const Backend& backend_of_call(const std::vector<Tensor>& inputs) {
  return detail::backend_of(inputs[0]);
}

// Runs the named kernel `found` of the inputs' backend on the call. With
// `may_decline` (a composite's override), a kernel that declines returns
// false instead of raising.
bool run_named(std::string_view name, const Found& found, const std::vector<Tensor>& inputs,
               const std::vector<Tensor>& outputs, const std::vector<OpAttr>& attrs,
               bool may_decline) {
  const std::string op(name);
  const Tensor& first = inputs[0];
  const Backend& b = backend_of_call(inputs);
  const Schema& schema = found.schema;
  const Impl& impl = found.impl;
  bp_attrs a = make_named_attrs(name, schema, inputs.size(), outputs.size(), attrs);
  for (const Tensor& t : inputs) detail::check_same_device(op.c_str(), first, t);
  for (const Tensor& t : outputs) detail::check_same_device(op.c_str(), first, t);
  const DType dtype = first.dtype();
  if (!(impl.mask & BP_DTYPE_BIT(static_cast<int>(dtype))))
    throw NotImplementedError("[" + op + "] not implemented for dtype " +
                              std::string(bp::name(dtype)) + " on backend '" + b.name() +
                              "' (it takes " + dtype_list(impl.mask) + ")");
  if (GradMode::is_enabled()) {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      BP_CHECK_T(Error, !inputs[i].requires_grad(), "[", op, "] has no gradient, and input ", i,
                 " requires one: call it on detached inputs or under bp::NoGradGuard");
    for (std::size_t i = 0; i < outputs.size(); ++i)
      BP_CHECK_T(Error, !outputs[i].requires_grad(), "[", op, "] has no gradient, and output ", i,
                 " requires one: call it under bp::NoGradGuard");
  }
  for (const Tensor& t : outputs) {
    detail::check_writable(op.c_str(), t);
    for (const Tensor& in : inputs) detail::check_no_partial_overlap(op.c_str(), t, in);
  }

  const int32_t dl = b.dl_device_type();
  std::vector<bp_tensor> in, out;
  for (const Tensor& t : inputs) in.push_back(detail::abi_descriptor(t, dl));
  for (const Tensor& t : outputs) out.push_back(detail::abi_descriptor(t, dl));
  const bp_kernel_call call = detail::make_call(BP_OP_NAMED, dtype, inputs[0].device(), in, out, a);
  detail::ErrorBuffer err;
  const bp_status st = detail::call_plugin_kernel(impl.fn, impl.ctx, call, err.get(), b.id());
  if (st == BP_STATUS_UNSUPPORTED && may_decline) return false;
  detail::check_status(st, op, b.name(), err);
  for (const Tensor& t : outputs) t.impl()->version->bump();
  if (debug::KernelRecording* r = detail::kernel_recording())
    r->note_named(b.id(), name, static_cast<int>(dtype));
  return true;
}

// A composite's override runs only through its composite (which checks
// what the schema cannot say), never by name.
void check_callable(std::string_view name) {
  if (name.substr(0, 6) == "core::")
    throw ValueError("[" + std::string(name) + "] overrides a composite op of the core: call " +
                     std::string(name.substr(6)) + "(), which runs it where it applies");
}

}  // namespace

void call_op_out(std::string_view name, const std::vector<Tensor>& inputs,
                 const std::vector<Tensor>& outputs, const std::vector<OpAttr>& attrs) {
  check_callable(name);
  check_defined(name, inputs, outputs);
  run_named(name, lookup(name, backend_of_call(inputs)), inputs, outputs, attrs, false);
}

std::vector<Tensor> call_op(std::string_view name, const std::vector<Tensor>& inputs,
                            const std::vector<OpAttr>& attrs) {
  check_callable(name);
  check_defined(name, inputs, {});
  const Found found = lookup(name, backend_of_call(inputs));
  const Tensor& first = inputs[0];
  std::vector<Tensor> out;
  for (int i = 0; i < found.schema.outputs; ++i)
    out.push_back(detail::make_empty(first.sizes(), first.dtype(), first));
  run_named(name, found, inputs, out, attrs, false);
  return out;
}

const std::vector<CompositeOverride>& overridable_composites() {
  static const std::vector<CompositeOverride> table = {
      {"core::silu", BP_SCHEMA_CORE_SILU, "out = x * sigmoid(x)"},
      {"core::gelu", BP_SCHEMA_CORE_GELU,
       "out = x / 2 * (1 + erf(x / sqrt(2))), or with tanh_approximation "
       "x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))"},
      {"core::layer_norm", BP_SCHEMA_CORE_LAYER_NORM,
       "layer_norm over the last normalized_dims dims of x, weight and bias given (of those dims)"},
      {"core::conv2d", BP_SCHEMA_CORE_CONV2D,
       "conv2d (NCHW) into a caller-allocated output; bias always given (zeros when the call has "
       "none); "
       "runs with or without a gradient recorded"},
      {"core::conv2d_backward", BP_SCHEMA_CORE_CONV2D_BACKWARD,
       "conv2d's gradients for the input (output_mask bit 0) and the weight (bit 1), outputs of "
       "x's and "
       "weight's shapes; an output whose bit is clear is left unwritten"},
      {"core::max_pool2d", BP_SCHEMA_CORE_MAX_POOL2D,
       "max_pool2d (NCHW) into caller-allocated values and int64 indices (h * W + w in the input "
       "plane) of "
       "the output's shape, which fixes ceil_mode; the first maximum in window order, a NaN wins; "
       "runs with "
       "or without a gradient recorded"},
      {"core::avg_pool2d", BP_SCHEMA_CORE_AVG_POOL2D,
       "avg_pool2d (NCHW) into a caller-allocated output; the divisor counts the window's part "
       "inside the "
       "padded input (count_include_pad) or inside the input; runs with or without a gradient "
       "recorded"},
      {"core::avg_pool2d_backward", BP_SCHEMA_CORE_AVG_POOL2D_BACKWARD,
       "avg_pool2d's input gradient, into an output of the input's shape"},
      {"core::batch_norm", BP_SCHEMA_CORE_BATCH_NORM,
       "training batch_norm: the output, and the batch's per-channel mean and biased variance [C]; "
       "weight "
       "and bias always given; runs with or without a gradient recorded"},
      {"core::batch_norm_inference", BP_SCHEMA_CORE_BATCH_NORM_INFERENCE,
       "batch_norm with the running statistics; weight and bias always given"},
      {"core::sparse_mm", BP_SCHEMA_CORE_SPARSE_MM,
       "a coalesced sparse COO matrix (values [nnz], int64 indices [2, nnz] sorted by row then "
       "column) times "
       "a dense [k, m], into a caller-allocated [rows, m]"},
      {"core::batch_norm_backward", BP_SCHEMA_CORE_BATCH_NORM_BACKWARD,
       "training batch_norm's gradients for x (output_mask bit 0), weight (bit 1) and bias (bit 2) "
       "from the "
       "batch's mean and biased variance; an output whose bit is clear is left unwritten"},
      {"core::sgd_step", BP_SCHEMA_CORE_SGD_STEP,
       "SGD with momentum on one parameter: outputs param and momentum_buffer, updated in place; "
       "weight "
       "decay already in grad; first_step writes the buffer without reading it"},
      {"core::adam_step", BP_SCHEMA_CORE_ADAM_STEP,
       "Adam on one parameter (no amsgrad): outputs param, exp_avg and exp_avg_sq, updated in "
       "place; weight "
       "decay already applied; step counts from 1"},
  };
  return table;
}

CompositeOnlyGuard::CompositeOnlyGuard() : prev_(t_composite_only) { t_composite_only = true; }
CompositeOnlyGuard::~CompositeOnlyGuard() { t_composite_only = prev_; }

namespace {
// `name` as t's backend registered it for t's dtype; nothing otherwise.
std::optional<Found> find_for(std::string_view name, const Tensor& t) {
  if (!t.defined()) return std::nullopt;
  std::optional<Found> f = find(name, detail::backend_of(t));
  if (f && !(f->impl.mask & BP_DTYPE_BIT(static_cast<int>(t.dtype())))) return std::nullopt;
  return f;
}
}  // namespace

bool has_override(std::string_view name, const Tensor& t) { return find_for(name, t).has_value(); }

namespace detail {

Tensor run_override(std::string_view name, const std::vector<Tensor>& inputs,
                    const std::vector<OpAttr>& attrs) {
  if (t_composite_only) return Tensor();
  if (GradMode::is_enabled())
    for (const Tensor& t : inputs)
      if (t.requires_grad()) return Tensor();
  const std::optional<Found> found = find_for(name, inputs[0]);
  if (!found) return Tensor();
  const Tensor& x = inputs[0];
  Tensor out = make_empty(x.sizes(), x.dtype(), x);
  return run_named(name, *found, inputs, {out}, attrs, true) ? out : Tensor();
}

bool run_kernel_override(std::string_view name, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& outputs, const std::vector<OpAttr>& attrs) {
  if (t_composite_only) return false;
  const std::optional<Found> found = find_for(name, inputs[0]);
  if (!found) return false;
  std::vector<Tensor> in;
  for (const Tensor& t : inputs) in.push_back(t.detach());
  NoGradGuard no_grad;  // the caller records the op; the kernel computes it
  return run_named(name, *found, in, outputs, attrs, true);
}

}  // namespace detail

}  // namespace bp
