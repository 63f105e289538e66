// The Python module's shared pieces: how Python numbers become bp::Scalar,
// the dtype and device objects, and the parts each binding file adds.
#pragma once

#include <backplane/backplane.h>
#include <nanobind/nanobind.h>

#include <optional>
#include <string>
#include <vector>

namespace nb = nanobind;

// Python bool, int and float as bp::Scalar, keeping their category (PyTorch's
// rule: `t + 2` keeps an int tensor int, `t + 2.5` makes it float).
namespace nanobind::detail {
template <>
struct type_caster<bp::Scalar> {
  NB_TYPE_CASTER(bp::Scalar, const_name("bool | int | float"))
  bool from_python(handle src, uint32_t, cleanup_list*) noexcept {
    PyObject* o = src.ptr();
    if (PyBool_Check(o)) {
      value = bp::Scalar(o == Py_True);
      return true;
    }
    if (PyLong_Check(o)) {
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
      if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return false;
      }
      value = bp::Scalar(static_cast<int64_t>(v));
      return true;
    }
    if (PyFloat_Check(o)) {
      value = bp::Scalar(PyFloat_AS_DOUBLE(o));
      return true;
    }
    return false;
  }
  static handle from_cpp(const bp::Scalar& s, rv_policy, cleanup_list*) noexcept {
    if (s.is_bool()) return PyBool_FromLong(s.to<int64_t>() != 0);
    if (s.is_floating()) return PyFloat_FromDouble(s.to_double());
    return PyLong_FromLongLong(s.to<int64_t>());
  }
};
}  // namespace nanobind::detail

namespace bp::python {

// backplane.dtype: one object per dtype, so `t.dtype is backplane.float32`.
struct DTypeObject {
  DType value;
};
nb::object dtype_object(DType d);
DType to_dtype(nb::handle h);  // a backplane.dtype; TypeError otherwise
// A device from a backplane.device, a string ("opencl:0") or None (nullopt).
std::optional<Device> to_device(nb::handle h);
// Options from the keyword arguments factories take.
TensorOptions make_options(nb::handle dtype, nb::handle device, bool requires_grad);
// A shape from a sequence of ints.
std::vector<int64_t> to_shape(nb::handle seq);
// An argument that may be None (nanobind refuses None unless told).
inline auto maybe(const char* name) { return nb::arg(name).none(); }

void bind_types(nb::module_& m);      // dtype, device, errors, backends, grad mode
void bind_tensor(nb::module_& m);     // Tensor: views, ops, autograd, printing
void bind_factories(nb::module_& m);  // tensor, zeros, arange, rand, *_like
void bind_dlpack(nb::module_& m);     // __dlpack__, __dlpack_device__, from_dlpack
void bind_nn(nb::module_& m);         // functional ops, initialisers, optimisers

}  // namespace bp::python
