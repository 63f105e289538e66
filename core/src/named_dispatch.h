// Named ops as the core dispatches them (named_ops.cpp): registration,
// removal with their backend, and running a backend's override of a
// composite; not installed.
#pragma once

#include <backplane/named_ops.h>
#include <backplane/plugin.h>
#include <backplane/tensor.h>

#include <string>
#include <string_view>
#include <vector>

namespace bp::detail {

// A name of [a-z0-9_]+: a backend's, or either half of a named op's.
inline bool is_plain_name(std::string_view n) {
  if (n.empty()) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

// Named ops (named_ops.cpp): a plugin's registration, checked (name, schema,
// a name it registered already, another backend's schema for the name), and
// the removal of every named kernel of a backend when it is destroyed.
void register_named_kernel(int backend, const std::string& backend_name,
                           const bp_named_kernel_registration& reg, std::string origin);
void remove_named_kernels(int backend);
// Runs the backend's override of the composite `name` ("core::silu") when
// there is one for the first input's dtype, no gradient is being recorded
// and no CompositeOnlyGuard is alive, into a new tensor like the first
// input; an undefined tensor when the composite must run (also when the
// kernel declined the call).
Tensor run_override(std::string_view name, const std::vector<Tensor>& inputs,
                    const std::vector<OpAttr>& attrs);
// For an op whose gradient the core defines itself (conv2d and its
// backward): runs the backend's "core::<name>" into `outputs` (allocated by
// the caller) whether or not a gradient is being recorded (the inputs are
// passed detached), unless a CompositeOnlyGuard is alive. False when the
// composite must run: no override for the dtype, or the kernel declined.
bool run_kernel_override(std::string_view name, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& outputs, const std::vector<OpAttr>& attrs);

}  // namespace bp::detail
