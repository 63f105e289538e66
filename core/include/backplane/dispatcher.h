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

enum class Op : int32_t {
  Fill = BP_OP_FILL,
  Copy = BP_OP_COPY,
  Add = BP_OP_ADD,
  Sub = BP_OP_SUB,
  Mul = BP_OP_MUL,
  Div = BP_OP_DIV,
  Relu = BP_OP_RELU,
  Sum = BP_OP_SUM,
  Matmul = BP_OP_MATMUL,
  Neg = BP_OP_NEG,
  Abs = BP_OP_ABS,
  Exp = BP_OP_EXP,
  Log = BP_OP_LOG,
  Sqrt = BP_OP_SQRT,
  Sigmoid = BP_OP_SIGMOID,
  Tanh = BP_OP_TANH,
  Clamp = BP_OP_CLAMP,
  LogicalNot = BP_OP_LOGICAL_NOT,
  Maximum = BP_OP_MAXIMUM,
  Minimum = BP_OP_MINIMUM,
  Pow = BP_OP_POW,
  Eq = BP_OP_EQ,
  Ne = BP_OP_NE,
  Lt = BP_OP_LT,
  Le = BP_OP_LE,
  Gt = BP_OP_GT,
  Ge = BP_OP_GE,
  LogicalAnd = BP_OP_LOGICAL_AND,
  LogicalOr = BP_OP_LOGICAL_OR,
  Where = BP_OP_WHERE,
  Prod = BP_OP_PROD,
  Max = BP_OP_MAX,
  Min = BP_OP_MIN,
  Argmax = BP_OP_ARGMAX,
  Argmin = BP_OP_ARGMIN,
  Softmax = BP_OP_SOFTMAX,
  LogSoftmax = BP_OP_LOG_SOFTMAX,
  Gather = BP_OP_GATHER,
  Scatter = BP_OP_SCATTER,
  IndexSelect = BP_OP_INDEX_SELECT,
  Random = BP_OP_RANDOM,
  Erf = BP_OP_ERF,
  Argsort = BP_OP_ARGSORT,
  Cumsum = BP_OP_CUMSUM,
};
inline constexpr int kNumOps = BP_OP_COUNT;

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
