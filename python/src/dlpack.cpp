// DLPack from Python: Tensor.__dlpack__ / __dlpack_device__ and
// backplane.from_dlpack, over the C++ side's to_dlpack / from_dlpack, with
// DLPack's capsule protocol ("dltensor", renamed "used_dltensor" once taken).
#include <dlpack/dlpack.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>

#include "bindings.h"

namespace bp::python {

namespace {

constexpr const char* kCapsule = "dltensor";
constexpr const char* kUsedCapsule = "used_dltensor";

// A capsule nobody took still owns its tensor: its deleter runs here.
void capsule_destructor(PyObject* capsule) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  if (PyCapsule_IsValid(capsule, kCapsule)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsule));
    if (m && m->deleter) m->deleter(m);
  }
  PyErr_Restore(type, value, traceback);
}

nb::object to_capsule(DLManagedTensor* m) {
  PyObject* capsule = PyCapsule_New(m, kCapsule, capsule_destructor);
  if (!capsule) {
    if (m->deleter) m->deleter(m);
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

// A producer's deleter may be Python code (numpy's drops a reference to its
// array), and Backplane may drop an imported tensor on any thread: the
// producer's deleter runs holding the GIL. After the interpreter has gone,
// the producer's memory is left alone rather than touched without it.
struct GilManaged {
  DLManagedTensor outer;
  DLManagedTensor* inner;
};

void gil_deleter(DLManagedTensor* self) {
  auto* w = static_cast<GilManaged*>(self->manager_ctx);
  if (Py_IsInitialized() && !_Py_IsFinalizing()) {
    PyGILState_STATE state = PyGILState_Ensure();
    if (w->inner->deleter) w->inner->deleter(w->inner);
    PyGILState_Release(state);
  }
  delete w;
}

Tensor from_capsule(nb::handle capsule, std::optional<Device> device) {
  auto* inner = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsule));
  if (!inner) {
    PyErr_Clear();
    throw ValueError(PyCapsule_IsValid(capsule.ptr(), kUsedCapsule)
                         ? "from_dlpack: this DLPack capsule was already consumed (a capsule "
                           "hands its tensor over once)"
                         : "from_dlpack: expected a DLPack capsule named \"dltensor\"");
  }
  auto* w = new GilManaged{*inner, inner};
  w->outer.manager_ctx = w;
  w->outer.deleter = gil_deleter;
  Tensor t;
  try {
    t = bp::from_dlpack(&w->outer, device);
  } catch (...) {
    delete w;  // nothing taken: the capsule still owns `inner`
    throw;
  }
  PyCapsule_SetName(capsule.ptr(), kUsedCapsule);
  return t;
}

}  // namespace

void bind_dlpack(nb::module_& m) {
  nb::object cls = m.attr("Tensor");
  auto method = [&](const char* name, auto&& fn, auto&&... extra) {
    nb::setattr(cls, name,
                nb::cpp_function(std::forward<decltype(fn)>(fn), nb::name(name), nb::scope(cls),
                                 nb::is_method(), extra...));
  };
  method(
      "__dlpack__",
      [](const Tensor& t, nb::handle stream) {
        if (!stream.is_none() && !PyLong_Check(stream.ptr()))
          throw TypeError("__dlpack__: stream must be None or an int (DLPack's stream protocol)");
        return to_capsule(to_dlpack(t));
      },
      nb::arg("stream") = nb::none());
  method("__dlpack_device__", [](const Tensor& t) { return dlpack_device(t); });
  m.def(
      "from_dlpack",
      [](nb::handle obj, nb::handle device) {
        std::optional<Device> dev = to_device(device);
        if (PyCapsule_CheckExact(obj.ptr())) return from_capsule(obj, dev);
        if (!nb::hasattr(obj, "__dlpack__"))
          throw TypeError(
              "from_dlpack: expected an object with __dlpack__ (a numpy array, a "
              "torch tensor, ...) or a DLPack capsule, got " +
              std::string(nb::type_name(obj.type()).c_str()));
        nb::object capsule = obj.attr("__dlpack__")();
        return from_capsule(capsule, dev);
      },
      nb::arg("ext_tensor"), nb::arg("device") = nb::none());
}

}  // namespace bp::python
