// backplane.nn's functional ops and initialisers, and backplane.optim's
// optimisers: the C++ core's, over the same tensors Python holds.
#include <backplane/nn/init.h>
#include <backplane/optim/optimizer.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"

namespace bp::python {

namespace {

// An int or a pair of ints, as PyTorch's kernel_size=3 or (3, 2).
Size2 to_size2(nb::handle h) {
  if (PyLong_Check(h.ptr())) return Size2(nb::cast<int64_t>(h));
  std::vector<int64_t> v = to_shape(h);
  if (v.size() != 2)
    throw ValueError("expected an int or a pair of ints, got " + std::to_string(v.size()) +
                     " values");
  return Size2(v[0], v[1]);
}

std::optional<Size2> to_optional_size2(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return to_size2(h);
}

Reduction to_reduction(const std::string& r) {
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (r == "none") return Reduction::None;
  throw ValueError(r + " is not a valid value for reduction");
}

Tensor opt(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }

std::vector<optim::ParamGroup> to_groups(nb::handle params) {
  std::vector<optim::ParamGroup> groups;
  std::vector<Tensor> plain;
  for (nb::handle item : params) {
    if (nb::isinstance<nb::dict>(item)) {
      optim::ParamGroup g;
      for (auto [k, v] : nb::borrow<nb::dict>(item)) {
        std::string key = nb::cast<std::string>(k);
        if (key == "params") {
          for (nb::handle p : v) g.params.push_back(nb::cast<Tensor>(p));
        } else {
          g.options[key] =
              PyBool_Check(v.ptr()) ? (v.ptr() == Py_True ? 1.0 : 0.0) : nb::cast<double>(v);
        }
      }
      groups.push_back(std::move(g));
    } else {
      plain.push_back(nb::cast<Tensor>(item));
    }
  }
  if (!plain.empty()) {
    if (!groups.empty())
      throw TypeError("optimizer params must be tensors or dicts of param groups, not both");
    groups.push_back(optim::ParamGroup{std::move(plain), {}});
  }
  if (groups.empty()) throw ValueError("optimizer got an empty parameter list");
  return groups;
}

// Adam and AdamW take the same arguments.
template <class Opt, class Base>
void bind_adam(nb::module_& m, const char* name) {
  nb::class_<Opt, Base>(m, name).def(
      "__init__",
      [](Opt* self, nb::handle params, double lr, double b1, double b2, double eps,
         std::optional<double> wd, bool amsgrad, bool maximize) {
        optim::AdamOptions o;
        o.lr = lr, o.beta1 = b1, o.beta2 = b2, o.eps = eps, o.weight_decay = wd,
        o.amsgrad = amsgrad, o.maximize = maximize;
        new (self) Opt(to_groups(params), o);
      },
      nb::arg("params"), nb::arg("lr"), nb::arg("beta1"), nb::arg("beta2"), nb::arg("eps"),
      maybe("weight_decay"), nb::arg("amsgrad"), nb::arg("maximize"));
}

}  // namespace

void bind_nn(nb::module_& m) {
  nb::module_ f = m.def_submodule("_nn", "functional ops and initialisers");
  f.def(
      "conv2d",
      [](const Tensor& x, const Tensor& w, std::optional<Tensor> b, nb::handle stride,
         nb::handle padding, nb::handle dilation, int64_t groups) {
        return conv2d(x, w, opt(b), to_size2(stride), to_size2(padding), to_size2(dilation),
                      groups);
      },
      nb::arg("input"), nb::arg("weight"), maybe("bias") = nb::none(), nb::arg("stride") = 1,
      nb::arg("padding") = 0, nb::arg("dilation") = 1, nb::arg("groups") = 1);
  f.def(
      "linear",
      [](const Tensor& x, const Tensor& w, std::optional<Tensor> b) {
        Tensor y = matmul(x, w.t());
        return b ? add(y, *b) : y;
      },
      nb::arg("input"), nb::arg("weight"), maybe("bias") = nb::none());
  f.def(
      "max_pool2d",
      [](const Tensor& x, nb::handle k, nb::handle s, nb::handle p, nb::handle d, bool ceil) {
        return max_pool2d(x, to_size2(k), to_optional_size2(s), to_size2(p), to_size2(d), ceil);
      },
      nb::arg("input"), nb::arg("kernel_size"), maybe("stride") = nb::none(),
      nb::arg("padding") = 0, nb::arg("dilation") = 1, nb::arg("ceil_mode") = false);
  f.def(
      "avg_pool2d",
      [](const Tensor& x, nb::handle k, nb::handle s, nb::handle p, bool ceil, bool include) {
        return avg_pool2d(x, to_size2(k), to_optional_size2(s), to_size2(p), ceil, include);
      },
      nb::arg("input"), nb::arg("kernel_size"), maybe("stride") = nb::none(),
      nb::arg("padding") = 0, nb::arg("ceil_mode") = false, nb::arg("count_include_pad") = true);
  f.def(
      "adaptive_avg_pool2d",
      [](const Tensor& x, nb::handle size) { return adaptive_avg_pool2d(x, to_size2(size)); },
      nb::arg("input"), nb::arg("output_size"));
  f.def(
      "batch_norm",
      [](const Tensor& x, std::optional<Tensor> rm, std::optional<Tensor> rv,
         std::optional<Tensor> w, std::optional<Tensor> b, bool training, double momentum,
         double eps) {
        return batch_norm(x, opt(rm), opt(rv), opt(w), opt(b), training, momentum, eps);
      },
      nb::arg("input"), maybe("running_mean"), maybe("running_var"), maybe("weight") = nb::none(),
      maybe("bias") = nb::none(), nb::arg("training") = false, nb::arg("momentum") = 0.1,
      nb::arg("eps") = 1e-5);
  f.def(
      "layer_norm",
      [](const Tensor& x, std::vector<int64_t> shape, std::optional<Tensor> w,
         std::optional<Tensor> b, double eps) { return layer_norm(x, shape, opt(w), opt(b), eps); },
      nb::arg("input"), nb::arg("normalized_shape"), maybe("weight") = nb::none(),
      maybe("bias") = nb::none(), nb::arg("eps") = 1e-5);
  f.def(
      "dropout",
      [](Tensor& x, double p, bool training, bool inplace) {
        return inplace ? dropout_(x, p, training) : dropout(x, p, training);
      },
      nb::arg("input"), nb::arg("p") = 0.5, nb::arg("training") = true, nb::arg("inplace") = false);
  f.def(
      "gelu",
      [](const Tensor& x, const std::string& approximate) {
        if (approximate != "none" && approximate != "tanh")
          throw ValueError("approximate must be 'none' or 'tanh', got '" + approximate + "'");
        return gelu(x, approximate == "tanh");
      },
      nb::arg("input"), nb::arg("approximate") = "none");
  f.def(
      "cross_entropy",
      [](const Tensor& x, const Tensor& target, std::optional<Tensor> w, int64_t ignore,
         const std::string& reduction, double smoothing) {
        return cross_entropy(x, target, opt(w), ignore, to_reduction(reduction), smoothing);
      },
      nb::arg("input"), nb::arg("target"), maybe("weight") = nb::none(),
      nb::arg("ignore_index") = -100, nb::arg("reduction") = "mean",
      nb::arg("label_smoothing") = 0.0);
  f.def(
      "nll_loss",
      [](const Tensor& x, const Tensor& target, std::optional<Tensor> w, int64_t ignore,
         const std::string& reduction) {
        return nll_loss(x, target, opt(w), ignore, to_reduction(reduction));
      },
      nb::arg("input"), nb::arg("target"), maybe("weight") = nb::none(),
      nb::arg("ignore_index") = -100, nb::arg("reduction") = "mean");
  f.def(
      "mse_loss",
      [](const Tensor& x, const Tensor& target, const std::string& reduction) {
        return mse_loss(x, target, to_reduction(reduction));
      },
      nb::arg("input"), nb::arg("target"), nb::arg("reduction") = "mean");
  f.def(
      "embedding",
      [](const Tensor& idx, const Tensor& w, std::optional<int64_t> padding_idx) {
        return embedding(idx, w, padding_idx);
      },
      nb::arg("input"), nb::arg("weight"), maybe("padding_idx") = nb::none());
  // Initialisers: in place, without recording (as torch.nn.init's).
  f.def(
      "uniform_",
      [](Tensor& t, double a, double b) -> Tensor& { return nn::init::uniform_(t, a, b); },
      nb::arg("tensor"), nb::arg("a") = 0.0, nb::arg("b") = 1.0, nb::rv_policy::reference);
  f.def(
      "normal_",
      [](Tensor& t, double mean, double std) -> Tensor& { return nn::init::normal_(t, mean, std); },
      nb::arg("tensor"), nb::arg("mean") = 0.0, nb::arg("std") = 1.0, nb::rv_policy::reference);
  f.def(
      "constant_", [](Tensor& t, double v) -> Tensor& { return nn::init::constant_(t, v); },
      nb::arg("tensor"), nb::arg("val"), nb::rv_policy::reference);
  f.def(
      "kaiming_uniform_",
      [](Tensor& t, double a, const std::string& mode, const std::string& nl) -> Tensor& {
        return nn::init::kaiming_uniform_(
            t, a, mode == "fan_out" ? nn::init::FanMode::FanOut : nn::init::FanMode::FanIn, nl);
      },
      nb::arg("tensor"), nb::arg("a") = 0.0, nb::arg("mode") = "fan_in",
      nb::arg("nonlinearity") = "leaky_relu", nb::rv_policy::reference);
  f.def(
      "xavier_uniform_",
      [](Tensor& t, double gain) -> Tensor& { return nn::init::xavier_uniform_(t, gain); },
      nb::arg("tensor"), nb::arg("gain") = 1.0, nb::rv_policy::reference);

  // --- optimisers ----------------------------------------------------------------
  nb::class_<optim::Optimizer>(m, "_Optimizer")
      .def("step", &optim::Optimizer::step)
      .def("zero_grad", &optim::Optimizer::zero_grad, nb::arg("set_to_none"))
      .def("_num_groups", [](optim::Optimizer& o) { return o.param_groups().size(); })
      .def("_group_params",
           [](optim::Optimizer& o, std::size_t i) { return o.param_groups().at(i).params; })
      .def("_group_options",
           [](optim::Optimizer& o, std::size_t i) { return o.param_groups().at(i).options; })
      .def("_set_group_option", [](optim::Optimizer& o, std::size_t i, const std::string& k,
                                   double v) { o.param_groups().at(i)[k] = v; });
  nb::class_<optim::SGD, optim::Optimizer>(m, "_SGD").def(
      "__init__", [](optim::SGD* self, nb::handle params, double lr, double momentum,
                     double dampening, double weight_decay, bool nesterov, bool maximize) {
        optim::SGDOptions o;
        o.lr = lr, o.momentum = momentum, o.dampening = dampening, o.weight_decay = weight_decay,
        o.nesterov = nesterov, o.maximize = maximize;
        new (self) optim::SGD(to_groups(params), o);
      });
  bind_adam<optim::Adam, optim::Optimizer>(m, "_Adam");
  bind_adam<optim::AdamW, optim::Adam>(m, "_AdamW");
}

}  // namespace bp::python
