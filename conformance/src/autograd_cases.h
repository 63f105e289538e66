// Helpers shared by the autograd case files (cases_autograd_*.cpp): leaves
// built from host values, capture of autograd warnings, and the case
// registration of the files that add_autograd_cases() pulls in.
#pragma once

#include <backplane/conformance.h>

#include <functional>
#include <iostream>
#include <string>
#include <vector>

namespace bp::conformance {

// The cases of cases_autograd_inplace.cpp (AG-7..AG-9, CP-1..CP-5, the SGD
// step) and cases_autograd_gradcheck.cpp (AG-10).
void add_autograd_inplace_cases(Suite& suite);
void add_autograd_gradcheck_cases(Suite& suite);
// cases_autograd_views.cpp (AG-14) and cases_autograd_corners.cpp (AG-4,
// AG-13, AG-15, AG-16).
void add_autograd_view_cases(Suite& suite);
void add_autograd_corner_cases(Suite& suite);

inline constexpr const char* kAutogradCategory = "autograd";

// A leaf that requires grad, on the device under test.
inline Tensor leaf(const Context& ctx, const std::vector<double>& values,
                   const std::vector<int64_t>& shape, DType dtype = DType::Float32) {
  Tensor t = from_vector(values, IntArrayRef(shape), ctx.options(dtype));
  t.requires_grad_();
  return t;
}
// A float32 leaf of rank 1. (No dtype argument here: a braced shape `{}`
// would silently pick that overload.)
inline Tensor leaf(const Context& ctx, const std::vector<double>& values) {
  return leaf(ctx, values, {static_cast<int64_t>(values.size())});
}

// A plain tensor (no grad) on the device under test.
inline Tensor host_tensor(const Context& ctx, const std::vector<double>& values,
                          const std::vector<int64_t>& shape, DType dtype = DType::Float32) {
  return from_vector(values, IntArrayRef(shape), ctx.options(dtype));
}

// Collects the warnings issued while it lives. The API cannot read the
// handler in place, so on exit it installs one that behaves like the
// default (prints "[warning] ..." to stderr); nothing else in the process
// replaces the handler.
class WarningCapture {
 public:
  WarningCapture() {
    set_warning_handler([this](const std::string& m) { messages_.push_back(m); });
  }
  ~WarningCapture() {
    set_warning_handler([](const std::string& m) { std::cerr << "[warning] " << m << "\n"; });
  }
  WarningCapture(const WarningCapture&) = delete;
  WarningCapture& operator=(const WarningCapture&) = delete;

  const std::vector<std::string>& messages() const { return messages_; }
  void clear() { messages_.clear(); }

 private:
  std::vector<std::string> messages_;
};

// fn applied to every element of a host vector: expected values.
inline std::vector<double> host_map(const std::vector<double>& v,
                                    const std::function<double(double)>& fn) {
  std::vector<double> out;
  out.reserve(v.size());
  for (double x : v) out.push_back(fn(x));
  return out;
}

}  // namespace bp::conformance
