// Named ops: ops a plugin adds beside the primitive ones ("vendor::name",
// with a schema; see bp_named_kernel_registration in backplane/plugin.h),
// called through the core:
//
//   bp::Tensor y = bp::call_op("fake::axpby", {x, z}, {2.0, 0.5})[0];
//
// The call runs on the backend of the inputs' device, which must have
// registered the op. The core checks it against the op's schema first.
#pragma once

#include <backplane/tensor.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace bp {

// One attribute of a named op call, matched to the schema's int, float and
// bool parameters in order (an int is accepted for a float parameter).
using OpAttr = std::variant<int64_t, double, bool>;

// Calls `name` on `inputs` (its Tensor parameters, in order) and `attrs`
// (its other parameters, in order). Each output is allocated with the first
// input's shape, dtype and device. Throws NotImplementedError when the
// inputs' backend lacks the op or the dtype, ValueError for a call that does
// not match the schema, and Error when an input requires a gradient while
// grad mode is on (named ops have none).
std::vector<Tensor> call_op(std::string_view name, const std::vector<Tensor>& inputs,
                            const std::vector<OpAttr>& attrs = {});

// Same, writing into outputs the caller allocated (any shape the op
// expects, on the inputs' device). An output may be one of the inputs.
void call_op_out(std::string_view name, const std::vector<Tensor>& inputs,
                 const std::vector<Tensor>& outputs, const std::vector<OpAttr>& attrs = {});

// The core's composite ops that a backend may replace with a fused kernel,
// registered as the named op "core::<name>" with exactly this schema. The
// core runs the kernel in place of the composite when no gradient is being
// recorded (grad mode off, or no input requiring one); otherwise, or when
// the kernel declines the call (BP_STATUS_UNSUPPORTED), the composite runs.
struct CompositeOverride {
  const char* name;     // "core::silu"
  const char* schema;   // what the kernel receives
  const char* meaning;  // one line
};
const std::vector<CompositeOverride>& overridable_composites();

// While alive, composite ops on this thread ignore overrides and run their
// composite: what the conformance suite compares an override with.
class CompositeOnlyGuard {
 public:
  CompositeOnlyGuard();
  ~CompositeOnlyGuard();
  CompositeOnlyGuard(const CompositeOnlyGuard&) = delete;
  CompositeOnlyGuard& operator=(const CompositeOnlyGuard&) = delete;

 private:
  bool prev_;
};

// Whether the backend of `t` overrides the composite `name` ("core::silu")
// for t's dtype.
bool has_override(std::string_view name, const Tensor& t);

// A named op as a loaded backend registered it, for listings (`backplane ops`).
struct NamedOpInfo {
  std::string name;
  std::string schema;   // as registered
  std::string backend;  // the backend's label (its name; "dup#2" for a second file named dup)
  uint32_t dtype_mask;  // BP_DTYPE_BIT()s of the first input
  std::string origin;   // the backend's label, and "file:line" when given
};
std::vector<NamedOpInfo> named_ops();

}  // namespace bp
