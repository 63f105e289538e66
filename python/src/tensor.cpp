// backplane.Tensor: metadata, views and indexing, in-place and out-of-place
// ops with Python's operators, autograd, host values and printing.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"

namespace bp::python {

namespace {

using T = Tensor;
constexpr auto self_ref = nb::rv_policy::reference;  // in-place ops return the same object

std::string py_type_name(nb::handle h) { return nb::type_name(h.type()).c_str(); }

bool is_int(nb::handle h) { return PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr()); }

std::optional<int64_t> slice_bound(PyObject* v) {
  if (v == Py_None) return std::nullopt;
  if (!PyLong_Check(v) || PyBool_Check(v))
    throw TypeError("slice indices must be integers or None");
  return nb::cast<int64_t>(nb::handle(v));
}

// t[key] for ints, slices, None, Ellipsis, a 1-D integer tensor, or a tuple
// of them: views, except for a tensor index (a copy, as in PyTorch).
Tensor index(const Tensor& t, nb::handle key) {
  std::vector<nb::handle> items;
  if (PyTuple_Check(key.ptr())) {
    for (nb::handle h : nb::borrow<nb::tuple>(key)) items.push_back(h);
  } else {
    items.push_back(key);
  }
  int64_t consumed = 0;
  bool ellipsis = false;
  for (nb::handle h : items) {
    if (h.ptr() == Py_Ellipsis) {
      if (ellipsis) throw IndexError("an index can only have a single ellipsis ('...')");
      ellipsis = true;
    } else if (!h.is_none()) {
      ++consumed;
    }
  }
  if (consumed > t.dim())
    throw IndexError("too many indices for tensor of dimension " + std::to_string(t.dim()));
  Tensor r = t;
  int64_t dim = 0;
  for (nb::handle h : items) {
    if (is_int(h)) {
      r = r.select(dim, nb::cast<int64_t>(h));
    } else if (PySlice_Check(h.ptr())) {
      auto* s = reinterpret_cast<PySliceObject*>(h.ptr());
      std::optional<int64_t> step = slice_bound(s->step);
      if (step && *step <= 0) throw ValueError("step must be greater than zero");
      r = r.slice(dim, slice_bound(s->start), slice_bound(s->stop), step.value_or(1));
      ++dim;
    } else if (h.is_none()) {
      r = r.unsqueeze(dim);
      ++dim;
    } else if (h.ptr() == Py_Ellipsis) {
      dim += t.dim() - consumed;
    } else if (nb::isinstance<Tensor>(h)) {
      const Tensor& idx = nb::cast<const Tensor&>(h);
      if (idx.dim() != 1 || is_floating(idx.dtype()) || idx.dtype() == DType::Bool)
        throw NotImplementedError("indexing with a tensor takes a 1-D integer tensor here; got " +
                                  std::to_string(idx.dim()) + "-D " +
                                  std::string(name(idx.dtype())));
      r = r.index_select(dim, idx);
      ++dim;
    } else {
      throw TypeError(
          "only integers, slices (`:`), ellipsis (`...`), None and 1-D integer "
          "tensors are valid indices (got " +
          py_type_name(h) + ")");
    }
  }
  return r;
}

void set_index(Tensor& t, nb::handle key, nb::handle value) {
  Tensor target = index(t, key);
  if (!target.shares_storage(t))
    throw NotImplementedError("assignment through a tensor index (index_put_) is not bound yet");
  if (nb::isinstance<Tensor>(value)) {
    target.copy_(nb::cast<const Tensor&>(value));
  } else {
    target.fill_(nb::cast<Scalar>(value));
  }
}

// Nested lists of Python numbers, as Tensor.tolist().
template <class V>
nb::object nested(const std::vector<V>& values, IntArrayRef sizes, std::size_t dim,
                  std::size_t& pos) {
  if (dim == sizes.size()) return nb::cast(values[pos++]);
  nb::list out;
  for (int64_t i = 0; i < sizes[dim]; ++i) out.append(nested(values, sizes, dim + 1, pos));
  return out;
}

nb::object tolist(const Tensor& t) {
  std::size_t pos = 0;
  if (t.dtype() == DType::Bool) return nested(t.to_vector<bool>(), t.sizes(), 0, pos);
  if (is_floating(t.dtype())) return nested(t.to_vector<double>(), t.sizes(), 0, pos);
  return nested(t.to_vector<int64_t>(), t.sizes(), 0, pos);
}

// A 0-d tensor holding `s`, of `t`'s device and of the dtype `t op s` has.
Tensor scalar_like(const Tensor& t, const Scalar& s) {
  return full({}, s, TensorOptions(t.device()).dtype(result_type(t.dtype(), s)));
}

nb::tuple int_tuple(IntArrayRef v) {
  nb::list l;
  for (int64_t x : v) l.append(x);
  return nb::tuple(l);
}

nb::object grad_or_none(const Tensor& t) {
  Tensor g = t.grad();
  return g.defined() ? nb::cast(g) : nb::none();
}

}  // namespace

void bind_tensor(nb::module_& m) {
  nb::class_<Tensor> c(m, "Tensor");
  // Tensor(other): the same tensor (memory, version counter, autograd), for
  // subclasses such as backplane.nn.Parameter.
  c.def(nb::init<const Tensor&>(), nb::arg("data"));
  m.def("_set_data", [](Tensor& t, const Tensor& src) { nn::set_data(t, src); });
  // --- metadata ----------------------------------------------------------
  c.def("_sizes", [](const T& t) { return int_tuple(t.sizes()); })
      .def("stride", [](const T& t) { return int_tuple(t.strides()); })
      .def("stride", [](const T& t, int64_t d) { return t.stride(d); })
      .def("dim", &T::dim)
      .def_prop_ro("ndim", &T::dim)
      .def("numel", &T::numel)
      .def("element_size", &T::itemsize)
      .def("storage_offset", &T::storage_offset)
      .def("is_contiguous", &T::is_contiguous)
      .def_prop_ro("dtype", [](const T& t) { return dtype_object(t.dtype()); })
      .def_prop_ro("device", &T::device)
      .def_prop_ro("_version", &T::version)
      .def("_is_view", &T::is_view)
      .def("_shares_storage", &T::shares_storage)
      .def("__len__", [](const T& t) {
        if (t.dim() == 0) throw TypeError("len() of a 0-d tensor");
        return t.size(0);
      });
  // --- views -------------------------------------------------------------
  c.def("_view", [](const T& t, std::vector<int64_t> s) { return t.view(s); })
      .def("_reshape", [](const T& t, std::vector<int64_t> s) { return t.reshape(s); })
      .def("_expand", [](const T& t, std::vector<int64_t> s) { return t.expand(s); })
      .def("_permute", [](const T& t, std::vector<int64_t> s) { return t.permute(s); })
      .def("transpose", &T::transpose)
      .def("t", &T::t)
      .def_prop_ro("T",
                   [](const T& t) {
                     std::vector<int64_t> dims;
                     for (int64_t d = t.dim() - 1; d >= 0; --d) dims.push_back(d);
                     return t.permute(dims);
                   })
      .def("narrow", &T::narrow)
      .def("select", &T::select)
      .def("squeeze", [](const T& t) { return t.squeeze(); })
      .def("squeeze", [](const T& t, int64_t d) { return t.squeeze(d); })
      .def("unsqueeze", &T::unsqueeze)
      .def("flatten", &T::flatten, nb::arg("start_dim") = 0, nb::arg("end_dim") = -1)
      .def("diagonal", &T::diagonal, nb::arg("offset") = 0, nb::arg("dim1") = 0,
           nb::arg("dim2") = 1)
      .def("unfold", &T::unfold)
      .def(
          "as_strided",
          [](const T& t, std::vector<int64_t> size, std::vector<int64_t> stride,
             std::optional<int64_t> offset) { return t.as_strided(size, stride, offset); },
          nb::arg("size"), nb::arg("stride"), nb::arg("storage_offset") = nb::none())
      .def("__getitem__", &index, maybe("key"))
      .def("__setitem__", &set_index, maybe("key"), nb::arg("value"));
  // --- copies and conversion ---------------------------------------------
  c.def("clone", [](const T& t) { return t.clone(); })
      .def("contiguous", &T::contiguous)
      .def("_to_device", [](const T& t, Device d) { return t.to(d); })
      .def("_to_dtype", [](const T& t, nb::handle d) { return t.to(to_dtype(d)); })
      .def("_to", [](const T& t, Device d, nb::handle dt) { return t.to(d, to_dtype(dt)); })
      .def("copy_", &T::copy_, self_ref)
      .def("fill_", &T::fill_, self_ref)
      .def("zero_", &T::zero_, self_ref);
  // --- autograd ----------------------------------------------------------
  c.def_prop_rw(
       "requires_grad", [](const T& t) { return t.requires_grad(); },
       [](T& t, bool r) { t.requires_grad_(r); })
      .def("requires_grad_", &T::requires_grad_, nb::arg("requires_grad") = true, self_ref)
      .def_prop_ro("is_leaf", &T::is_leaf)
      .def_prop_rw(
          "grad", &grad_or_none,
          [](T& t, std::optional<Tensor> g) { t.set_grad(g ? *g : Tensor()); },
          nb::for_setter(maybe("value")))
      .def("_grad_fn_name", &T::grad_fn_name)
      .def("retain_grad", [](T& t) { t.retain_grad(); })
      .def_prop_ro("retains_grad", &T::retains_grad)
      .def(
          "backward",
          [](const T& t, std::optional<Tensor> gradient, bool retain_graph) {
            t.backward(gradient ? *gradient : Tensor(), retain_graph);
          },
          nb::arg("gradient") = nb::none(), nb::arg("retain_graph") = false)
      .def("detach", &T::detach)
      .def("detach_", &T::detach_, self_ref)
      .def_prop_ro("data", &T::data);
  // --- arithmetic: Python's operators, in place where Python's are ------
  c.def(
       "add", [](const T& a, const T& b, const Scalar& alpha) { return a.add(b, alpha); },
       nb::arg("other"), nb::kw_only(), nb::arg("alpha") = 1)
      .def("add", [](const T& a, const Scalar& b) { return a.add(b); })
      .def(
          "sub", [](const T& a, const T& b, const Scalar& alpha) { return a.sub(b, alpha); },
          nb::arg("other"), nb::kw_only(), nb::arg("alpha") = 1)
      .def("sub", [](const T& a, const Scalar& b) { return a.sub(b); })
      .def("mul", [](const T& a, const T& b) { return a.mul(b); })
      .def("mul", [](const T& a, const Scalar& b) { return a.mul(b); })
      .def("div", [](const T& a, const T& b) { return a.div(b); })
      .def("div", [](const T& a, const Scalar& b) { return a.div(b); })
      .def(
          "add_", [](T& a, const T& b, const Scalar& alpha) -> T& { return a.add_(b, alpha); },
          nb::arg("other"), nb::kw_only(), nb::arg("alpha") = 1, self_ref)
      .def(
          "add_", [](T& a, const Scalar& b) -> T& { return a.add_(b); }, self_ref)
      .def(
          "sub_", [](T& a, const T& b, const Scalar& alpha) -> T& { return a.sub_(b, alpha); },
          nb::arg("other"), nb::kw_only(), nb::arg("alpha") = 1, self_ref)
      .def(
          "sub_", [](T& a, const Scalar& b) -> T& { return a.sub_(b); }, self_ref)
      .def(
          "mul_", [](T& a, const T& b) -> T& { return a.mul_(b); }, self_ref)
      .def(
          "mul_", [](T& a, const Scalar& b) -> T& { return a.mul_(b); }, self_ref)
      .def(
          "div_", [](T& a, const T& b) -> T& { return a.div_(b); }, self_ref)
      .def(
          "div_", [](T& a, const Scalar& b) -> T& { return a.div_(b); }, self_ref)
      .def("__add__", [](const T& a, const T& b) { return a.add(b); })
      .def("__add__", [](const T& a, const Scalar& b) { return a.add(b); })
      .def("__radd__", [](const T& a, const Scalar& b) { return a.add(b); })
      .def("__sub__", [](const T& a, const T& b) { return a.sub(b); })
      .def("__sub__", [](const T& a, const Scalar& b) { return a.sub(b); })
      .def("__rsub__", [](const T& a, const Scalar& b) { return scalar_like(a, b).sub(a); })
      .def("__mul__", [](const T& a, const T& b) { return a.mul(b); })
      .def("__mul__", [](const T& a, const Scalar& b) { return a.mul(b); })
      .def("__rmul__", [](const T& a, const Scalar& b) { return a.mul(b); })
      .def("__truediv__", [](const T& a, const T& b) { return a.div(b); })
      .def("__truediv__", [](const T& a, const Scalar& b) { return a.div(b); })
      .def("__rtruediv__", [](const T& a, const Scalar& b) { return scalar_like(a, b).div(a); })
      .def("__matmul__", [](const T& a, const T& b) { return a.matmul(b); })
      .def("__pow__", [](const T& a, const Scalar& e) { return a.pow(e); })
      .def("__pow__", [](const T& a, const T& e) { return bp::pow(a, e); })
      .def("__neg__", [](const T& a) { return a.neg(); })
      .def("__abs__", [](const T& a) { return a.abs(); })
      .def(
          "__iadd__", [](T& a, const T& b) -> T& { return a.add_(b); }, self_ref)
      .def(
          "__iadd__", [](T& a, const Scalar& b) -> T& { return a.add_(b); }, self_ref)
      .def(
          "__isub__", [](T& a, const T& b) -> T& { return a.sub_(b); }, self_ref)
      .def(
          "__isub__", [](T& a, const Scalar& b) -> T& { return a.sub_(b); }, self_ref)
      .def(
          "__imul__", [](T& a, const T& b) -> T& { return a.mul_(b); }, self_ref)
      .def(
          "__imul__", [](T& a, const Scalar& b) -> T& { return a.mul_(b); }, self_ref)
      .def(
          "__itruediv__", [](T& a, const T& b) -> T& { return a.div_(b); }, self_ref)
      .def(
          "__itruediv__", [](T& a, const Scalar& b) -> T& { return a.div_(b); }, self_ref);
  // Comparisons give bool tensors, as in PyTorch (so no __hash__ by value).
#define BP_COMPARE(py, fn)                                               \
  c.def(py, [](const T& a, const T& b) { return bp::fn(a, b); })         \
      .def(py, [](const T& a, const Scalar& b) { return bp::fn(a, b); }) \
      .def(#fn, [](const T& a, const T& b) { return bp::fn(a, b); })     \
      .def(#fn, [](const T& a, const Scalar& b) { return bp::fn(a, b); })
  BP_COMPARE("__eq__", eq);
  BP_COMPARE("__ne__", ne);
  BP_COMPARE("__lt__", lt);
  BP_COMPARE("__le__", le);
  BP_COMPARE("__gt__", gt);
  BP_COMPARE("__ge__", ge);
#undef BP_COMPARE
  c.attr("__hash__") = nb::steal(PyObject_GetAttrString((PyObject*)&PyBaseObject_Type, "__hash__"));
  // --- unary, reductions, matmul -----------------------------------------
  c.def("relu", &T::relu)
      .def("relu_", &T::relu_, self_ref)
      .def("neg", &T::neg)
      .def("neg_", &T::neg_, self_ref)
      .def("abs", &T::abs)
      .def("abs_", &T::abs_, self_ref)
      .def("exp", &T::exp)
      .def("exp_", &T::exp_, self_ref)
      .def("log", &T::log)
      .def("log_", &T::log_, self_ref)
      .def("sqrt", &T::sqrt)
      .def("sqrt_", &T::sqrt_, self_ref)
      .def("sigmoid", &T::sigmoid)
      .def("sigmoid_", &T::sigmoid_, self_ref)
      .def("tanh", &T::tanh)
      .def("tanh_", &T::tanh_, self_ref)
      .def("pow", [](const T& a, const Scalar& e) { return a.pow(e); })
      .def("pow_", &T::pow_, self_ref)
      .def("clamp", &T::clamp, nb::arg("min") = nb::none(), nb::arg("max") = nb::none())
      .def("clamp_", &T::clamp_, nb::arg("min") = nb::none(), nb::arg("max") = nb::none(), self_ref)
      .def("sum", [](const T& t) { return t.sum(); })
      .def(
          "sum", [](const T& t, std::vector<int64_t> dims, bool k) { return t.sum(dims, k); },
          nb::arg("dim"), nb::arg("keepdim") = false)
      .def(
          "sum", [](const T& t, int64_t dim, bool k) { return t.sum({dim}, k); }, nb::arg("dim"),
          nb::arg("keepdim") = false)
      .def("mean", [](const T& t) { return t.mean(); })
      .def(
          "mean", [](const T& t, std::vector<int64_t> dims, bool k) { return t.mean(dims, k); },
          nb::arg("dim"), nb::arg("keepdim") = false)
      .def(
          "mean", [](const T& t, int64_t dim, bool k) { return t.mean({dim}, k); }, nb::arg("dim"),
          nb::arg("keepdim") = false)
      .def("max", [](const T& t) { return t.max(); })
      .def("min", [](const T& t) { return t.min(); })
      .def("argmax", &T::argmax, nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def("argmin", &T::argmin, nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def("softmax", &T::softmax)
      .def("log_softmax", &T::log_softmax)
      .def("matmul", &T::matmul);
  // --- host values and text ----------------------------------------------
  c.def("item", [](const T& t) { return t.item(); })
      .def("tolist", &tolist)
      .def("__bool__",
           [](const T& t) {
             if (t.numel() != 1)
               throw Error("Boolean value of Tensor with more than one value is ambiguous");
             return t.item<double>() != 0;
           })
      .def("__float__", [](const T& t) { return t.item<double>(); })
      .def("__int__", [](const T& t) { return t.item<int64_t>(); })
      .def("_text", &T::to_string);
}

}  // namespace bp::python
