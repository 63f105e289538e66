// Finite-difference gradient checking in float64 (AG-10).
#include <backplane/autograd.h>
#include <backplane/ops.h>

#include <cmath>
#include <sstream>

#include "../internal.h"

namespace bp {

namespace {

// sum(fn(inputs) * weights) as a double, without recording.
double objective(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                 const std::vector<Tensor>& inputs, const Tensor& weights) {
  NoGradGuard no_grad;
  const Tensor out = fn(inputs);
  return mul(out.to(DType::Float64), weights).sum().item<double>();
}

// Sets the k-th element (row-major) of `t` to `value`, any layout or device.
void set_element(Tensor& t, int64_t k, double value) {
  NoGradGuard no_grad;
  std::vector<double> v = t.to_vector<double>();
  v[static_cast<std::size_t>(k)] = value;
  t.copy_(from_vector(v, t.sizes(), TensorOptions(DType::Float64).device(t.device())));
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs_in, const GradcheckOptions& o) {
  std::vector<Tensor> inputs = inputs_in;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    BP_CHECK_TYPE(inputs[i].dtype() == DType::Float64, "[gradcheck] input ", i,
                  " must be float64 (finite differences need the precision), got ",
                  detail::describe_tensor(inputs[i]));
    BP_CHECK(inputs[i].requires_grad() && inputs[i].is_leaf(), "[gradcheck] input ", i,
             " must be a leaf that requires grad");
  }
  // Random output weights make every output element matter.
  const GeneratorState saved = generator_state();
  Tensor out = fn(inputs);
  manual_seed(o.seed);
  const Tensor weights = randn(out.sizes(), TensorOptions(DType::Float64).device(out.device()));
  set_generator_state(saved);
  BP_CHECK(out.requires_grad(), "[gradcheck] the function's output does not require grad");

  // Analytic gradients.
  for (Tensor& x : inputs) x.set_grad(Tensor());
  mul(out.to(DType::Float64), weights).sum().backward();
  std::vector<std::vector<double>> analytic;
  for (Tensor& x : inputs) {
    const Tensor g = x.grad();
    analytic.push_back(g.defined() ? g.to_vector<double>()
                                   : std::vector<double>(static_cast<std::size_t>(x.numel()), 0));
    x.set_grad(Tensor());
  }

  // Central differences, element by element.
  GradcheckResult result;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    Tensor& x = inputs[i];
    const std::vector<double> base = x.to_vector<double>();
    for (int64_t k = 0; k < x.numel(); ++k) {
      const double v = base[static_cast<std::size_t>(k)];
      set_element(x, k, v + o.eps);
      const double fp = objective(fn, inputs, weights);
      set_element(x, k, v - o.eps);
      const double fm = objective(fn, inputs, weights);
      set_element(x, k, v);
      const double numeric = (fp - fm) / (2 * o.eps);
      const double a = analytic[i][static_cast<std::size_t>(k)];
      if (!(std::fabs(a - numeric) <= o.atol + o.rtol * std::fabs(numeric))) {
        std::ostringstream os;
        os << "[gradcheck] input " << i << " (shape " << x.sizes() << "), element " << k
           << ": analytic gradient " << a << ", numerical " << numeric << " (eps " << o.eps
           << ", atol " << o.atol << ", rtol " << o.rtol << ")";
        result.ok = false;
        result.message = os.str();
        return result;
      }
    }
  }
  return result;
}

}  // namespace bp
