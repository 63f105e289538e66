// The kernel registry and dispatcher: a flat table indexed by
// (op, backend id, dtype), so finding a kernel is three array indexings with
// no hashing and no allocation.
#pragma once

#include <backplane/backend.h>
#include <backplane/dtype.h>
#include <backplane/plugin.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bp {

// The primitive ops of the C ABI (bp_op), from its one list: BP_OP_LIST.
enum class Op : int32_t {
#define BP_OP_CORE_ENUMERATOR_(NAME, Name, text, value) Name = BP_OP_##NAME,
  BP_OP_LIST(BP_OP_CORE_ENUMERATOR_)
#undef BP_OP_CORE_ENUMERATOR_
};
inline constexpr int kNumOps = BP_OP_COUNT;

namespace detail {
// The list's values are its positions (0, 1, ...): what lets the registry,
// the names and every per-op table index by the op.
constexpr bool op_values_are_dense() {
  constexpr int values[] = {
#define BP_OP_VALUE_(NAME, Name, text, value) value,
      BP_OP_LIST(BP_OP_VALUE_)
#undef BP_OP_VALUE_
  };
  for (int i = 0; i < kNumOps; ++i)
    if (values[i] != i) return false;
  return static_cast<int>(sizeof values / sizeof values[0]) == kNumOps;
}
}  // namespace detail
static_assert(detail::op_values_are_dense(), "BP_OP_LIST values must be 0, 1, ... in order");

std::string_view op_name(Op op);

struct KernelEntry {
  bp_kernel_fn fn = nullptr;
  void* ctx = nullptr;
  uint32_t flags = 0;  // BP_KERNEL_* (BP_KERNEL_EMULATED: computed in a wider dtype)
};

class KernelRegistry {
 public:
  static KernelRegistry& instance();

  // O(1); an entry with fn == nullptr when absent.
  const KernelEntry& lookup(Op op, int backend, DType dtype) const noexcept {
    return table_[static_cast<int>(op)][backend_slot(backend)][static_cast<int>(dtype)];
  }
  // Registers for every dtype in the mask. A duplicate throws naming both origins.
  void add(int backend, const bp_kernel_registration& reg, std::string origin);
  // Removes every kernel of a backend (when it is destroyed: no tensor of
  // it is left to dispatch on).
  void remove_backend(int backend);
  // Names of loaded backends that have (op, dtype).
  std::vector<std::string> backends_with(Op op, DType dtype) const;
  // The registration origin of (op, backend, dtype), empty when absent.
  const std::string& origin(Op op, int backend, DType dtype) const;

 private:
  KernelEntry table_[kNumOps][kMaxBackends][kNumDTypes] = {};
  std::string origin_[kNumOps][kMaxBackends][kNumDTypes];
};

// Calls the kernel for (op, device's backend, dtype). Throws
// NotImplementedError when it is missing (naming the backends that have it)
// and a typed error carrying the plugin's message when the kernel fails.
void call_kernel(Op op, DType dtype, Device device, std::span<const bp_tensor> inputs,
                 std::span<const bp_tensor> outputs, const bp_attrs& attrs);

// The scalar form of a binary op (BP_KERNEL_SCALAR_OPERAND): one input, the
// second operand in attrs.scalars[1]. False, having written nothing, when
// the backend's kernel does not take the form or declines the call: the
// caller then makes the operand a tensor. Throws as call_kernel does when
// the kernel fails.
bool call_kernel_scalar_form(Op op, DType dtype, Device device, const bp_tensor& input,
                             const bp_tensor& output, const bp_attrs& attrs);

}  // namespace bp
