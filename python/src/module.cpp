// The backplane._C extension: the parts, in the order they depend on each other.
#include "bindings.h"

NB_MODULE(_C, m) {
  m.doc() = "Backplane's C++ core (the backplane package wraps it)";
  bp::python::bind_types(m);
  bp::python::bind_tensor(m);
  bp::python::bind_factories(m);
  bp::python::bind_dlpack(m);
  bp::python::bind_nn(m);
}
