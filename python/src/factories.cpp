// Tensors from Python data and the factories: tensor, zeros/ones/empty/full,
// arange/linspace/logspace, rand/randn, *_like and new_*.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "bindings.h"

namespace bp::python {

namespace {

// Nested lists or tuples of numbers, read as PyTorch reads them: the shape
// from the first element at each depth, the dtype from the widest category.
struct Nested {
  std::vector<int64_t> shape;
  std::vector<double> floats;
  std::vector<int64_t> ints;
  int category = 0;  // 0 bool, 1 int, 2 float
};

bool is_sequence(nb::handle h) { return PyList_Check(h.ptr()) || PyTuple_Check(h.ptr()); }

void read_number(nb::handle h, Nested& out) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) {
    out.ints.push_back(o == Py_True);
    out.floats.push_back(o == Py_True);
  } else if (PyLong_Check(o)) {
    int64_t v = nb::cast<int64_t>(h);
    out.ints.push_back(v);
    out.floats.push_back(static_cast<double>(v));
    out.category = std::max(out.category, 1);
  } else if (PyFloat_Check(o)) {
    out.ints.push_back(0);
    out.floats.push_back(PyFloat_AS_DOUBLE(o));
    out.category = 2;
  } else if (nb::isinstance<Tensor>(h) && nb::cast<const Tensor&>(h).numel() == 1) {
    const Tensor& t = nb::cast<const Tensor&>(h);
    out.ints.push_back(t.item<int64_t>());
    out.floats.push_back(t.item<double>());
    out.category = std::max(out.category, t.dtype() == DType::Bool ? 0
                                          : is_floating(t.dtype()) ? 2
                                                                   : 1);
  } else {
    throw TypeError("Could not infer dtype of " + std::string(nb::type_name(h.type()).c_str()));
  }
}

void read(nb::handle h, std::size_t dim, Nested& out) {
  if (dim == out.shape.size()) {
    if (is_sequence(h))
      throw ValueError("expected a number at dim " + std::to_string(dim) + " (got a sequence)");
    read_number(h, out);
    return;
  }
  if (!is_sequence(h))
    throw ValueError("expected sequence of length " + std::to_string(out.shape[dim]) + " at dim " +
                     std::to_string(dim) + " (got " + nb::type_name(h.type()).c_str() + ")");
  nb::sequence seq = nb::borrow<nb::sequence>(h);
  int64_t n = static_cast<int64_t>(nb::len(seq));
  if (n != out.shape[dim])
    throw ValueError("expected sequence of length " + std::to_string(out.shape[dim]) + " at dim " +
                     std::to_string(dim) + " (got " + std::to_string(n) + ")");
  for (nb::handle item : seq) read(item, dim + 1, out);
}

Tensor from_python(nb::handle data, nb::handle dtype, nb::handle device, bool requires_grad) {
  Nested n;
  for (nb::handle h = data; is_sequence(h);) {
    int64_t len = static_cast<int64_t>(nb::len(h));
    n.shape.push_back(len);
    if (len == 0) break;
    h = nb::borrow<nb::sequence>(h)[0];
  }
  read(data, 0, n);
  std::optional<Device> dev = to_device(device);
  Device target = dev ? *dev : default_device();
  Tensor host;
  if (n.category == 2 || n.floats.empty()) {
    host = from_blob(n.floats.data(), DType::Float64, n.shape, target);
  } else if (n.category == 1) {
    host = from_blob(n.ints.data(), DType::Int64, n.shape, target);
  } else {
    std::vector<uint8_t> b(n.ints.begin(), n.ints.end());
    host = from_blob(b.data(), DType::Bool, n.shape, target);
  }
  DType want = !dtype.is_none()                        ? to_dtype(dtype)
               : (n.category == 2 || n.floats.empty()) ? kDefaultFloat
               : n.category == 1                       ? DType::Int64
                                                       : DType::Bool;
  Tensor t = host.dtype() == want ? host : host.to(want);
  if (requires_grad) t.requires_grad_(true);
  return t;
}

std::optional<TensorOptions> like_options(nb::handle dtype, nb::handle device, bool rg) {
  if (dtype.is_none() && device.is_none() && !rg) return std::nullopt;
  return make_options(dtype, device, rg);
}

}  // namespace

void bind_factories(nb::module_& m) {
  m.def("_tensor", &from_python, nb::arg("data"), maybe("dtype"), maybe("device"),
        nb::arg("requires_grad"));
  m.def(
      "_factory",
      [](const std::string& kind, nb::handle shape, nb::handle dtype, nb::handle device, bool rg) {
        std::vector<int64_t> s = to_shape(shape);
        TensorOptions o = make_options(dtype, device, rg);
        if (kind == "zeros") return zeros(s, o);
        if (kind == "ones") return ones(s, o);
        if (kind == "empty") return empty(s, o);
        if (kind == "rand") return rand(s, o);
        if (kind == "randn") return randn(s, o);
        throw ValueError("unknown factory " + kind);
      },
      nb::arg("kind"), nb::arg("shape"), maybe("dtype"), maybe("device"), nb::arg("requires_grad"));
  m.def(
      "_full",
      [](nb::handle shape, const Scalar& value, nb::handle dtype, nb::handle device, bool rg) {
        return full(to_shape(shape), value, make_options(dtype, device, rg));
      },
      nb::arg("size"), nb::arg("fill_value"), maybe("dtype"), maybe("device"),
      nb::arg("requires_grad"));
  m.def(
      "_arange",
      [](const Scalar& start, const Scalar& end, const Scalar& step, nb::handle dtype,
         nb::handle device,
         bool rg) { return arange(start, end, step, like_options(dtype, device, rg)); },
      nb::arg("start"), nb::arg("end"), nb::arg("step"), maybe("dtype"), maybe("device"),
      nb::arg("requires_grad"));
  m.def(
      "_linspace",
      [](const Scalar& start, const Scalar& end, int64_t steps, nb::handle dtype, nb::handle device,
         bool rg) { return linspace(start, end, steps, make_options(dtype, device, rg)); },
      nb::arg("start"), nb::arg("end"), nb::arg("steps"), maybe("dtype"), maybe("device"),
      nb::arg("requires_grad"));
  m.def(
      "_logspace",
      [](const Scalar& start, const Scalar& end, int64_t steps, double base, nb::handle dtype,
         nb::handle device,
         bool rg) { return logspace(start, end, steps, base, make_options(dtype, device, rg)); },
      nb::arg("start"), nb::arg("end"), nb::arg("steps"), nb::arg("base"), maybe("dtype"),
      maybe("device"), nb::arg("requires_grad"));
  m.def(
      "_like",
      [](const std::string& kind, const Tensor& t, nb::handle dtype, nb::handle device, bool rg) {
        std::optional<TensorOptions> o = like_options(dtype, device, rg);
        if (kind == "zeros") return zeros_like(t, o);
        if (kind == "ones") return ones_like(t, o);
        if (kind == "empty") return empty_like(t, o);
        if (kind == "rand") return rand_like(t, o);
        if (kind == "randn") return randn_like(t, o);
        throw ValueError("unknown factory " + kind + "_like");
      },
      nb::arg("kind"), nb::arg("input"), maybe("dtype"), maybe("device"), nb::arg("requires_grad"));
  m.def(
      "_full_like",
      [](const Tensor& t, const Scalar& v, nb::handle dtype, nb::handle device, bool rg) {
        return full_like(t, v, like_options(dtype, device, rg));
      },
      nb::arg("input"), nb::arg("fill_value"), maybe("dtype"), maybe("device"),
      nb::arg("requires_grad"));
  m.def(
      "_new",
      [](const std::string& kind, const Tensor& t, nb::handle shape, nb::handle dtype,
         nb::handle device, bool rg) {
        std::vector<int64_t> s = to_shape(shape);
        std::optional<TensorOptions> o = like_options(dtype, device, rg);
        if (kind == "zeros") return t.new_zeros(s, o);
        if (kind == "ones") return t.new_ones(s, o);
        if (kind == "empty") return t.new_empty(s, o);
        throw ValueError("unknown factory new_" + kind);
      },
      nb::arg("kind"), nb::arg("self"), nb::arg("size"), maybe("dtype"), maybe("device"),
      nb::arg("requires_grad"));
  m.def(
      "_new_full",
      [](const Tensor& t, nb::handle shape, const Scalar& v, nb::handle dtype, nb::handle device,
         bool rg) { return t.new_full(to_shape(shape), v, like_options(dtype, device, rg)); },
      nb::arg("self"), nb::arg("size"), nb::arg("fill_value"), maybe("dtype"), maybe("device"),
      nb::arg("requires_grad"));
  m.def(
      "_new_tensor",
      [](const Tensor& t, const Tensor& data, nb::handle dtype, nb::handle device, bool rg) {
        Tensor r = t.new_tensor(data, like_options(dtype, device, false));
        if (rg) r.requires_grad_(true);
        return r;
      },
      nb::arg("self"), nb::arg("data"), maybe("dtype"), maybe("device"), nb::arg("requires_grad"));
  // Free functions PyTorch users call as torch.add, torch.matmul, ...
  m.def(
      "add", [](const Tensor& a, const Tensor& b, const Scalar& alpha) { return add(a, b, alpha); },
      nb::arg("input"), nb::arg("other"), nb::kw_only(), nb::arg("alpha") = 1);
  m.def("add", [](const Tensor& a, const Scalar& b) { return add(a, b); });
  m.def(
      "sub", [](const Tensor& a, const Tensor& b, const Scalar& alpha) { return sub(a, b, alpha); },
      nb::arg("input"), nb::arg("other"), nb::kw_only(), nb::arg("alpha") = 1);
  m.def("mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); });
  m.def("mul", [](const Tensor& a, const Scalar& b) { return mul(a, b); });
  m.def("div", [](const Tensor& a, const Tensor& b) { return div(a, b); });
  m.def("div", [](const Tensor& a, const Scalar& b) { return div(a, b); });
  m.def("matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  m.def("mm", [](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  m.def("bmm", [](const Tensor& a, const Tensor& b) { return bmm(a, b); });
  m.def("relu", [](const Tensor& a) { return relu(a); });
  m.def("exp", [](const Tensor& a) { return exp(a); });
  m.def("log", [](const Tensor& a) { return log(a); });
  m.def("sqrt", [](const Tensor& a) { return sqrt(a); });
  m.def("tanh", [](const Tensor& a) { return tanh(a); });
  m.def("sigmoid", [](const Tensor& a) { return sigmoid(a); });
  m.def("where", [](const Tensor& c, const Tensor& a, const Tensor& b) { return where(c, a, b); });
  m.def("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); });
  m.def("minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); });
  m.def("softmax", [](const Tensor& a, int64_t dim) { return softmax(a, dim); });
  m.def("log_softmax", [](const Tensor& a, int64_t dim) { return log_softmax(a, dim); });
}

}  // namespace bp::python
