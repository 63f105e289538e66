// Operands: how an op's other operands are planned from its primary's shape
// and layout (a broadcastable shape; a fresh tensor, plain or a strided view
// of a bigger one; or a view of the primary's own memory), and how planned
// tensors are built on a device with the C++ that builds them.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "case_util.h"
#include "fuzz_internal.h"

namespace bp::conformance::fuzz {

namespace {

// Fills in how a Fresh operand is laid out (a strided view of a bigger
// tensor) or an Alias one (strides and offset in the primary's memory).
void plan_layout(OperandPlan& o, const Operand& spec, const PrimaryInfo& primary) {
  const std::size_t q = o.shape.size();
  o.pre_expand = o.shape;
  o.front.assign(q, 0);
  o.step.assign(q, 1);
  o.perm.resize(q);
  for (std::size_t d = 0; d < q; ++d) o.perm[d] = static_cast<int64_t>(d);
  Rng g(spec.layout_seed);
  const int64_t n = numel(o.shape);
  if (o.source == Source::Alias && (primary.capacity > 0 || n == 0)) {
    Layout& a = o.alias;
    a.sizes = o.shape;
    const int mode = static_cast<int>(g.uniform_int(0, 2));
    if (mode == 0 && primary.layout.sizes.size() >= q) {
      // The primary's own strides, shifted: the same elements, or nearly.
      const std::size_t lead = primary.layout.sizes.size() - q;
      a.strides.assign(primary.layout.strides.begin() + static_cast<std::ptrdiff_t>(lead),
                       primary.layout.strides.end());
      const int64_t s =
          q ? a.strides[static_cast<std::size_t>(g.uniform_int(0, int64_t(q) - 1))] : 1;
      a.offset = primary.layout.offset + g.pick(std::vector<int64_t>{0, 0, 1, -1, s, -s});
    } else {
      a.strides = contiguous_layout(o.shape).strides;
      if (mode == 2)
        for (int64_t& st : a.strides) st = g.uniform_int(0, 4);
      a.offset = g.uniform_int(0, std::max<int64_t>(primary.capacity - 1, 0));
    }
    // Inside the memory: move the offset back, then flatten strides to 0.
    for (std::size_t k = 0;; ++k) {
      int64_t span = 0;
      for (std::size_t d = 0; d < q; ++d) span += (a.sizes[d] - 1) * a.strides[d];
      if (n == 0) {
        a.offset = std::clamp<int64_t>(a.offset, 0, primary.capacity);
        break;
      }
      a.offset =
          std::clamp<int64_t>(a.offset, 0, std::max<int64_t>(primary.capacity - 1 - span, 0));
      if (a.offset + span < primary.capacity) break;
      auto widest = std::max_element(a.strides.begin(), a.strides.end());
      *widest = 0;
    }
    return;
  }
  if (o.source == Source::Alias) o.source = Source::Fresh;  // nothing to alias
  o.strided = spec.strided && q > 0;
  std::vector<int64_t> back(q, 0);
  if (o.strided) {
    for (std::size_t d = 0; d < q; ++d) {
      if (o.shape[d] > 1 && g.chance(0.2)) {
        o.pre_expand[d] = 1;
        continue;
      }
      o.step[d] = g.pick(std::vector<int64_t>{1, 1, 2, 3});
      o.front[d] = g.pick(std::vector<int64_t>{0, 0, 1, 2});
      back[d] = g.uniform_int(0, 1);
    }
    if (q > 1 && g.chance(0.5))
      for (std::size_t i = q - 1; i > 0; --i)
        std::swap(o.perm[i], o.perm[static_cast<std::size_t>(g.uniform_int(0, int64_t(i)))]);
  }
  o.alloc.resize(q);
  for (std::size_t k = 0; k < q; ++k) {
    const auto d = static_cast<std::size_t>(o.perm[k]);
    const int64_t span = o.pre_expand[d] == 0 ? 0 : (o.pre_expand[d] - 1) * o.step[d] + 1;
    o.alloc[k] = o.front[d] + span + back[d];
  }
}

}  // namespace

std::vector<int64_t> related_shape(const std::vector<int64_t>& p, uint64_t seed, bool grow) {
  Rng g(seed);
  const double u = g.uniform(0, 1);
  const int64_t r = static_cast<int64_t>(p.size());
  if (u < 0.45) return p;
  if (u < 0.75) {
    const int64_t drop = g.chance(0.5) ? 0 : g.uniform_int(0, r);
    std::vector<int64_t> q(p.begin() + drop, p.end());
    for (int64_t& n : q)
      if (g.chance(0.3)) n = 1;
    return q;
  }
  if (u < 0.87 || !grow) return {};
  std::vector<int64_t> q = p;
  bool grew = false;
  for (int64_t& n : q)
    if (n == 1 && g.chance(0.5)) {
      n = g.uniform_int(2, 3);
      grew = true;
    }
  if ((!grew || g.chance(0.3)) && r < kMaxDims) q.insert(q.begin(), g.uniform_int(2, 3));
  return q;
}

std::vector<int64_t> grown_shape(const std::vector<int64_t>& p, uint64_t seed) {
  Rng g(seed >> 3);
  std::vector<std::vector<int64_t>> options;
  if (p.size() < static_cast<std::size_t>(kMaxDims)) {  // a new leading dim
    options.push_back(p);
    options.back().insert(options.back().begin(), g.uniform_int(2, 3));
  }
  for (std::size_t d = 0; d < p.size(); ++d) {  // bigger where p has 1, or not broadcastable
    options.push_back(p);
    options.back()[d] = p[d] == 1 ? g.uniform_int(2, 3) : p[d] + 1;
  }
  return options.empty() ? std::vector<int64_t>{} : g.pick(options);
}

OperandPlan plan_operand(const Operand& spec, std::vector<int64_t> shape, const PrimaryInfo& p) {
  OperandPlan o;
  o.source = spec.source;
  o.values = spec.values;
  o.dtype = spec.source == Source::Self || spec.source == Source::Alias ? p.dtype
            : p.grad && spec.values.dtype != DType::Bool                ? DType::Float64
                                                                        : spec.values.dtype;
  o.values.dtype = o.dtype;
  o.leaf = spec.leaf;
  o.shape = spec.source == Source::Self ? p.layout.sizes : std::move(shape);
  if (o.source == Source::Fresh || o.source == Source::Alias) plan_layout(o, spec, p);
  // gradcheck perturbs each element of each leaf in turn: big ones are constants.
  if (o.leaf && numel(o.strided ? o.alloc : o.shape) > 64) o.leaf = false;
  return o;
}

// --- building tensors -------------------------------------------------------------

std::string dtype_cpp(DType d) {
  switch (d) {
    case DType::Bool:
      return "b8";
    case DType::Int32:
      return "i32";
    case DType::Int64:
      return "i64";
    case DType::Float32:
      return "f32";
    case DType::Float64:
      return "f64";
    case DType::Float16:
      return "f16";
    case DType::BFloat16:
      return "bf16";
    case DType::Int8:
      return "i8";
    case DType::UInt8:
      return "u8";
    case DType::Int16:
      return "i16";
  }
  return "?";
}

std::string dtype_enum(DType d) {
  switch (d) {
    case DType::Bool:
      return "bp::DType::Bool";
    case DType::Int32:
      return "bp::DType::Int32";
    case DType::Int64:
      return "bp::DType::Int64";
    case DType::Float32:
      return "bp::DType::Float32";
    case DType::Float64:
      return "bp::DType::Float64";
    case DType::Float16:
      return "bp::DType::Float16";
    case DType::BFloat16:
      return "bp::DType::BFloat16";
    case DType::Int8:
      return "bp::DType::Int8";
    case DType::UInt8:
      return "bp::DType::UInt8";
    case DType::Int16:
      return "bp::DType::Int16";
  }
  return "?";
}

namespace {

std::string number(double v, DType d) {
  if (d == DType::Bool) return v != 0 ? "true" : "false";
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "-INFINITY";
  if (is_integral(d)) return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  // The shortest text that reads back as the same value.
  auto r = d == DType::Float32 ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v))
                               : std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (d == DType::Float32) s += s.find_first_of(".e") == std::string::npos ? ".f" : "f";
  return s;
}

const char* ctype(DType d) {
  switch (d) {
    case DType::Bool:
      return "bool";
    case DType::Int32:
      return "int32_t";
    case DType::Int64:
      return "int64_t";
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
    case DType::Float16:
    case DType::BFloat16:
      return "float";  // written as float values, converted by the dtype option
    case DType::Int8:
      return "int8_t";
    case DType::UInt8:
      return "uint8_t";
    case DType::Int16:
      return "int16_t";
  }
  return "?";
}

}  // namespace

std::string values_cpp(const std::vector<double>& values, const std::vector<int64_t>& shape,
                       DType dtype, bool iota, bool requires_grad) {
  const std::string opts = dtype_cpp(dtype) + (requires_grad ? ".requires_grad()" : "");
  if (iota && dtype != DType::Bool && !requires_grad)
    return "bp::arange(" + std::string(values.empty() || values[0] == 0 ? "" : "1, ") +
           std::to_string(values.size() + (values.empty() || values[0] == 0 ? 0 : 1)) + ", " +
           opts + ").view(" + braces(shape) + ")";
  std::string s = std::string("bp::from_vector(std::vector<") + ctype(dtype) + ">{";
  for (std::size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + number(values[i], dtype);
  return s + "}, " + braces(shape) + ", " + opts + ")";
}

namespace {

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (std::size_t k = 0; k < perm.size(); ++k)
    inv[static_cast<std::size_t>(perm[k])] = static_cast<int64_t>(k);
  return inv;
}

bool identity(const std::vector<int64_t>& perm) {
  for (std::size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

}  // namespace

std::string scalar_cpp(const Scalar& s) {
  if (s.is_bool()) return s.to<bool>() ? "true" : "false";
  if (!s.is_floating()) return std::to_string(s.to<int64_t>());
  std::string t = number(s.to_double(), DType::Float64);
  return t.find_first_of(".eIN") == std::string::npos ? t + ".0" : t;
}

Tensor build_base(const BaseSpec& base, Device device, bool requires_grad, Transcript& tr,
                  const std::string& name) {
  const std::vector<double> v = make_values(base.values, numel(base.shape));
  tr.add("auto " + name + " = " +
         values_cpp(v, base.shape, base.values.dtype, base.values.kind == ValueKind::Iota,
                    requires_grad) +
         ";");
  return from_vector(v, base.shape,
                     TensorOptions(base.values.dtype).device(device).requires_grad(requires_grad));
}

Tensor operand_view(const OperandPlan& o, const Tensor& root) {
  Tensor t = root;
  if (!o.strided) return t;
  if (!identity(o.perm)) t = t.permute(inverse(o.perm));
  const std::vector<int64_t> inv = inverse(o.perm);
  for (std::size_t d = 0; d < o.shape.size(); ++d) {
    const int64_t span = o.pre_expand[d] == 0 ? 0 : (o.pre_expand[d] - 1) * o.step[d] + 1;
    if (o.step[d] != 1 || o.front[d] != 0 || span != o.alloc[static_cast<std::size_t>(inv[d])])
      t = t.slice(static_cast<int64_t>(d), o.front[d], o.front[d] + span, o.step[d]);
  }
  if (o.pre_expand != o.shape) t = t.expand(o.shape);
  return t;
}

std::string operand_view_cpp(const OperandPlan& o) {
  std::string s;
  if (!o.strided) return s;
  const std::vector<int64_t> inv = inverse(o.perm);
  if (!identity(o.perm)) s += ".permute(" + braces(inv) + ")";
  for (std::size_t d = 0; d < o.shape.size(); ++d) {
    const int64_t span = o.pre_expand[d] == 0 ? 0 : (o.pre_expand[d] - 1) * o.step[d] + 1;
    if (o.step[d] != 1 || o.front[d] != 0 || span != o.alloc[static_cast<std::size_t>(inv[d])])
      s += ".slice(" + std::to_string(d) + ", " + std::to_string(o.front[d]) + ", " +
           std::to_string(o.front[d] + span) + ", " + std::to_string(o.step[d]) + ")";
  }
  if (o.pre_expand != o.shape) s += ".expand(" + braces(o.shape) + ")";
  return s;
}

BuiltOperand build_operand(const OperandPlan& o, Device device, Transcript& tr, const Tensor* owner,
                           const std::string& owner_name, const std::vector<double>* owner_values) {
  BuiltOperand b;
  if (o.source == Source::Alias) {
    b.name = tr.fresh();
    const Layout& a = o.alias;
    tr.add("auto " + b.name + " = " + owner_name + ".as_strided(" + braces(a.sizes) + ", " +
           braces(a.strides) + ", " + std::to_string(a.offset) + ");");
    b.t = owner->as_strided(a.sizes, a.strides, a.offset);
    b.values = gather(*owner_values, a.sizes, a.strides, a.offset);
    b.root = b.t;
    return b;
  }
  const std::vector<int64_t>& shape = o.strided ? o.alloc : o.shape;
  const std::vector<double> v = make_values(o.values, numel(shape));
  b.root_name = tr.fresh();
  b.name = o.strided ? tr.fresh() : b.root_name;
  tr.add("auto " + b.root_name + " = " +
         values_cpp(v, shape, o.dtype, o.values.kind == ValueKind::Iota, o.leaf) + ";");
  b.root = from_vector(v, shape, TensorOptions(o.dtype).device(device).requires_grad(o.leaf));
  if (o.strided) tr.add("auto " + b.name + " = " + b.root_name + operand_view_cpp(o) + ";");
  b.t = operand_view(o, b.root);
  if (!o.strided) {
    b.values = v;
    return b;
  }
  // Where each element of the view lies in the allocation, worked out here.
  const Layout alloc = contiguous_layout(o.alloc);
  const std::vector<int64_t> inv = inverse(o.perm);
  Layout l;
  l.sizes = o.shape;
  l.strides.assign(o.shape.size(), 0);
  for (std::size_t d = 0; d < o.shape.size(); ++d) {
    const int64_t s = alloc.strides[static_cast<std::size_t>(inv[d])];
    l.offset += o.front[d] * s;
    if (o.pre_expand[d] == o.shape[d]) l.strides[d] = s * o.step[d];
  }
  b.values = numel(o.shape) ? gather(v, l.sizes, l.strides, l.offset) : std::vector<double>{};
  return b;
}

}  // namespace bp::conformance::fuzz
