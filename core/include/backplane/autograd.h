// Autograd: the no-grad guard, backward over several roots, and gradcheck.
// Per-tensor calls (backward, grad, retain_grad, detach, ...) are on Tensor.
#pragma once

#include <backplane/tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace bp {

// Whether ops record a graph on this thread (on by default).
class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Disables recording for its scope, on this thread (AG-6).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Re-enables recording for its scope.
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(true); }
  ~EnableGradGuard() { GradMode::set_enabled(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

// Backpropagates from several roots at once; `gradients` parallel to
// `roots` (an undefined entry means 1 for a one-element root).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& gradients = {},
              bool retain_graph = false);

namespace autograd {
// During a backward pass (from a hook): runs `callback` on the same thread
// once the pass has finished, after the callbacks queued before it (what
// DistributedDataParallel waits for its gradient buckets in). Raises
// AutogradError outside a backward pass.
void queue_callback(std::function<void()> callback);
// A number unique to the backward pass running on this thread (0 when none
// is): a hook tells a new pass from the one it saw last, also when that
// one ended by an error and its callbacks never ran.
uint64_t current_pass();
}  // namespace autograd

// Where warnings go (a non-leaf's grad read without retain_grad, ...).
// The default prints "[warning] ..." to stderr.
void set_warning_handler(std::function<void(const std::string&)> handler);
void warn(const std::string& message);

// Finite-difference gradient check (AG-10): compares the analytic gradient
// of sum(fn(inputs) * random weights) with central differences, in float64.
struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  uint64_t seed = 0;  // for the random output weights
};
struct GradcheckResult {
  bool ok = true;
  std::string message;  // the first mismatch: input, element, analytic, numeric
};
// `inputs` must be float64 leaves that require grad; fn must not modify them.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace bp
