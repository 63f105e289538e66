// Host-side whole-tensor comparisons, for tests and the conformance suite.
#include <backplane/ops.h>

#include <cmath>

#include "../internal.h"

namespace bp {

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (!(DimVector(a.sizes()) == DimVector(b.sizes()))) return false;
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      if (std::isnan(x[i]) != std::isnan(y[i])) return false;
      continue;
    }
    if (x[i] == y[i]) continue;  // equal infinities
    if (!(std::fabs(x[i] - y[i]) <= atol + rtol * std::fabs(y[i]))) return false;
  }
  return true;
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !(DimVector(a.sizes()) == DimVector(b.sizes()))) return false;
  return visit(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return a.to_vector<T>() == b.to_vector<T>();
  });
}

}  // namespace bp
