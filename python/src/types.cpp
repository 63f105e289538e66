// dtype and device objects, errors as Python's exception types, backend
// selection (init, backends) and the grad mode.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <exception>

#include "bindings.h"

namespace bp::python {

namespace {

// Borrowed: the module's attributes own them.
std::array<PyObject*, kNumDTypes>& dtype_objects() {
  static std::array<PyObject*, kNumDTypes> objects{};  // filled by bind_types
  return objects;
}

std::string device_type(Device d) {
  Backend* b = PluginLoader::instance().by_id(d.backend);
  return b ? b->label() : std::string("?");
}

// PyTorch's mapping of its C++ errors: c10::IndexError is IndexError,
// c10::ValueError ValueError, c10::TypeError TypeError,
// c10::NotImplementedError NotImplementedError, every other RuntimeError.
void translate_errors(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const IndexError& e) {
    PyErr_SetString(PyExc_IndexError, e.what());
  } catch (const ValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const TypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
  } catch (const NotImplementedError& e) {
    PyErr_SetString(PyExc_NotImplementedError, e.what());
  } catch (const Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

nb::dict candidate_dict(const PluginCandidate& c) {
  nb::dict d;
  d["name"] = c.name;
  d["path"] = c.path;
  d["loaded"] = c.loaded;
  d["verdict"] = c.loaded ? std::string("loaded") : std::string(to_string(c.verdict));
  d["reason"] = c.reason;
  nb::list devices;
  if (c.loaded && c.backend) {
    for (int i = 0; i < c.backend->device_count(); ++i) {
      bp_device_props p = c.backend->device_props(i);
      nb::dict dev;
      dev["index"] = i;
      dev["name"] = std::string(p.name);
      dev["total_memory"] = p.total_memory;
      dev["host_addressable"] = p.host_addressable != 0;
      devices.append(dev);
    }
    d["version"] = c.backend->version();
    d["no_device_reason"] = c.backend->no_device_reason();
  }
  d["devices"] = devices;
  return d;
}

}  // namespace

nb::object dtype_object(DType d) { return nb::borrow(dtype_objects()[static_cast<int>(d)]); }

DType to_dtype(nb::handle h) {
  if (!nb::isinstance<DTypeObject>(h))
    throw TypeError("expected a backplane.dtype (backplane.float32, ...), got " +
                    std::string(nb::type_name(h.type()).c_str()));
  return nb::cast<DTypeObject&>(h).value;
}

std::optional<Device> to_device(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  if (nb::isinstance<Device>(h)) return nb::cast<Device>(h);
  if (nb::isinstance<nb::str>(h)) return device(nb::cast<std::string>(h));
  throw TypeError("expected a backplane.device or a string such as \"cpu_onednn:0\", got " +
                  std::string(nb::type_name(h.type()).c_str()));
}

TensorOptions make_options(nb::handle dtype, nb::handle dev, bool requires_grad) {
  TensorOptions o;
  if (!dtype.is_none()) o = o.dtype(to_dtype(dtype));
  if (auto d = to_device(dev)) o = o.device(*d);
  return o.requires_grad(requires_grad);
}

std::vector<int64_t> to_shape(nb::handle seq) {
  std::vector<int64_t> shape;
  for (nb::handle item : seq) {
    if (!PyLong_Check(item.ptr()) || PyBool_Check(item.ptr()))
      throw TypeError("a size must be a sequence of ints, got an element of type " +
                      std::string(nb::type_name(item.type()).c_str()));
    shape.push_back(nb::cast<int64_t>(item));
  }
  return shape;
}

void bind_types(nb::module_& m) {
  nb::register_exception_translator(translate_errors);

  nb::class_<DTypeObject>(m, "dtype")
      .def("__repr__",
           [](const DTypeObject& d) { return "backplane." + std::string(name(d.value)); })
      .def_prop_ro("is_floating_point", [](const DTypeObject& d) { return is_floating(d.value); })
      .def_prop_ro("itemsize", [](const DTypeObject& d) { return itemsize(d.value); })
      .def(
          "__eq__",
          [](const DTypeObject& a, nb::handle b) {
            return nb::isinstance<DTypeObject>(b) && nb::cast<DTypeObject&>(b).value == a.value;
          },
          maybe("other"))
      .def("__hash__", [](const DTypeObject& d) { return static_cast<int>(d.value); });
  for (DType d : kAllDTypes) {
    nb::object o = nb::cast(DTypeObject{d});
    m.attr(std::string(name(d)).c_str()) = o;
    dtype_objects()[static_cast<int>(d)] = o.ptr();
  }

  nb::class_<Device>(m, "device")
      .def("__init__", [](Device* self, std::string_view spec) { new (self) Device(device(spec)); })
      .def("__init__",
           [](Device* self, std::string_view type, int index) {
             new (self) Device(device(std::string(type) + ":" + std::to_string(index)));
           })
      .def_prop_ro("type", [](Device d) { return device_type(d); })
      .def_prop_ro("index", [](Device d) { return static_cast<int>(d.index); })
      .def("__str__", [](Device d) { return to_string(d); })
      .def("__repr__",
           [](Device d) {
             return "device(type='" + device_type(d) + "', index=" + std::to_string(d.index) + ")";
           })
      .def(
          "__eq__",
          [](Device a, nb::handle b) {
            return nb::isinstance<Device>(b) && nb::cast<Device>(b) == a;
          },
          maybe("other"))
      .def("__hash__", [](Device d) { return d.backend * 65536 + d.index; });
  nb::implicitly_convertible<std::string_view, Device>();

  m.def(
      "_init",
      [](std::string backend, std::vector<std::string> plugin_path, std::string fallback,
         std::string reference, std::string probe, std::vector<std::string> options) {
        BackendFlags flags;
        flags.backend = std::move(backend);
        flags.plugin_paths = std::move(plugin_path);
        flags.fallback = std::move(fallback);
        flags.reference = std::move(reference);
        flags.probe = std::move(probe);
        flags.options = std::move(options);
        apply_backend_flags(flags);
        return device(flags.backend);  // loaded now: a bad name fails here
      },
      nb::arg("backend"), nb::arg("plugin_path"), nb::arg("fallback"), nb::arg("reference"),
      nb::arg("probe"), nb::arg("backend_options"));
  m.def("_discover", [] {
    nb::list out;
    for (const PluginCandidate& c : PluginLoader::instance().discover())
      out.append(candidate_dict(c));
    return out;
  });
  m.def("_search_dirs", [] { return PluginLoader::instance().search_dirs(); });
  m.def("default_device", [] { return default_device(); });
  m.def("is_grad_enabled", [] { return GradMode::is_enabled(); });
  m.def("_set_grad_enabled", [](bool on) { GradMode::set_enabled(on); });
  m.def("manual_seed", [](uint64_t seed) { manual_seed(seed); });
  m.def(
      "synchronize",
      [](nb::handle dev) {
        std::optional<Device> d = to_device(dev);
        Device target = d ? *d : default_device();
        if (Backend* b = PluginLoader::instance().by_id(target.backend))
          b->synchronize(target.index);
      },
      nb::arg("device") = nb::none());
}

}  // namespace bp::python
