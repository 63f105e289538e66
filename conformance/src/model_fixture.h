// PyTorch 1.13's results for the model-layer cases (model_fixtures.inc,
// written by conformance/fixtures/model_reference.py, which says how every
// tensor is made), and the values the script makes.
#pragma once

#include <backplane/conformance.h>

#include <cmath>
#include <string>
#include <vector>

namespace bp::conformance::model {

struct Fixture {
  const char* name;
  std::vector<std::vector<double>> tensors;
  const char* text;
};

inline const std::vector<Fixture>& fixtures() {
  static const std::vector<Fixture> f = {
#include "model_fixtures.inc"
  };
  return f;
}

inline const Fixture& fixture(const std::string& name) {
  for (const Fixture& f : fixtures())
    if (name == f.name) return f;
  throw InternalError("no model fixture named " + name);
}

inline const std::vector<double>& part(const std::string& name, std::size_t i) {
  return fixture(name).tensors.at(i);
}

// scale * sin(0.37 i + phase), row-major in `shape`, made in float64 on the
// host and moved to (device, dt), as the script's vals().
inline Tensor vals(Device device, DType dt, std::vector<int64_t> shape, double phase,
                   double scale) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = scale * std::sin(0.37 * static_cast<double>(i) + phase);
  return from_vector(v, IntArrayRef(shape), TensorOptions(DType::Float64).device(device)).to(dt);
}

// Agreement with PyTorch's float64 results: float32 runs carry its rounding
// through a few dozen operations.
inline double tolerance(DType dt) { return dt == DType::Float64 ? 1e-10 : 2e-4; }

}  // namespace bp::conformance::model

namespace bp::conformance {
// The optimiser cases (cases_optim.cpp), added by add_model_cases.
void add_optim_cases(Suite& suite);

// DV-6 for the fused optimiser updates (core::sgd_step, core::adam_step),
// part of composite.overrides_match: three steps with the backend's kernels
// agree with three steps of the composite, for a large, a small and a
// transposed parameter (whose gradient has another layout, which a kernel
// may decline), with every option set that reaches them. Returns how many
// option sets it compared (0 when the backend has neither kernel for dt).
int check_fused_updates(const Context& ctx, DType dt);
}  // namespace bp::conformance
