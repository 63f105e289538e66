// A kernel call as a plugin's kernel sees it (bp::sdk::KernelCall), the
// entries that turn the C calls into calls of `void k(const KernelCall&)`
// with every exception stopped at the boundary (guarded, kernel_thunk), and
// the scalar-operand form of ADD..DIV made into two inputs. Part of the
// SDK's plugin layer (plugin.hpp includes it).
#pragma once

#include <backplane/plugin.h>

#include <backplane/sdk/op_scope.hpp>
#include <backplane/sdk/tensor.hpp>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <type_traits>

namespace bp::sdk {

inline void set_error(bp_error* error, const char* message) {
  if (error == nullptr || error->message == nullptr || error->capacity == 0) return;
  std::snprintf(error->message, error->capacity, "%s", message);
}

// Runs f(); maps exceptions to a status and message.
template <class F>
bp_status guarded(bp_error* error, F&& f) noexcept {
  try {
    f();
    return BP_STATUS_OK;
  } catch (const Unsupported& e) {
    set_error(error, e.what());
    return BP_STATUS_UNSUPPORTED;
  } catch (const InvalidArgument& e) {
    set_error(error, e.what());
    return BP_STATUS_INVALID_ARGUMENT;
  } catch (const DeviceError& e) {
    set_error(error, e.what());
    return BP_STATUS_DEVICE_ERROR;
  } catch (const std::bad_alloc&) {
    set_error(error, "out of memory");
    return BP_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_error(error, e.what());
    return BP_STATUS_RUNTIME_ERROR;
  } catch (...) {
    set_error(error, "unknown exception");
    return BP_STATUS_RUNTIME_ERROR;
  }
}

// One kernel call, as C++ sees it.
class KernelCall {
 public:
  explicit KernelCall(const bp_kernel_call& c) : c_(c) {}
  bp_op op() const { return static_cast<bp_op>(c_.op); }
  bp_dtype dtype() const { return static_cast<bp_dtype>(c_.dtype); }
  int num_inputs() const { return c_.num_inputs; }
  int num_outputs() const { return c_.num_outputs; }
  TensorRef input(int i) const { return TensorRef(c_.inputs[i]); }
  TensorRef output(int i) const { return TensorRef(c_.outputs[i]); }
  const bp_attrs& attrs() const { return *c_.attrs; }
  const bp_scalar& scalar(int i) const { return c_.attrs->scalars[i]; }
  int32_t device() const { return c_.device; }
  bp_stream stream() const { return c_.stream; }
  const bp_kernel_call& raw() const { return c_; }

 private:
  const bp_kernel_call& c_;
};

using KernelFn = void (*)(const KernelCall&);

// The entry of a kernel registered with Registrar::add.
template <KernelFn Fn>
bp_status kernel_thunk(void*, const bp_kernel_call* call, bp_error* error) noexcept {
  return guarded(error, [&] { Fn(KernelCall(*call)); });
}

// kernel_thunk with the call's op as the current op (OpScope) while Fn runs,
// for a plugin whose kernels check with BP_SDK_REQUIRE and so do not name
// the op themselves (register it with add_raw). It costs a thread-local
// write on entry and exit, which kernels that name their op do not pay.
template <KernelFn Fn>
bp_status scoped_kernel_thunk(void* ctx, const bp_kernel_call* call, bp_error* error) noexcept {
  const OpScope scope(op_name(call->op));
  return kernel_thunk<Fn>(ctx, call, error);
}

// The one-input form of a BP_KERNEL_SCALAR_OPERAND call made again with two
// inputs: the second is a broadcast (every stride 0, the output's shape) of
// the scalar, converted to the dispatch dtype and held here, in host memory.
class ScalarOperandCall {
 public:
  explicit ScalarOperandCall(const bp_kernel_call& c) : call_(c) {
    const bp_tensor& out = c.outputs[0];
    const auto dt = static_cast<bp_dtype>(c.dtype);
    const bp_scalar& s = c.attrs->scalars[1];
    visit_any_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      static_assert(sizeof(T) <= sizeof(value_));
      T v;
      // The narrow floats through float32, as their emulated FILL does.
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
        v = T(scalar_as<float>(s));
      else
        v = scalar_as<T>(s);
      std::memcpy(value_, &v, sizeof v);
    });
    inputs_[0] = c.inputs[0];
    inputs_[1] = bp_tensor{value_, out.device, out.ndim, to_dl(dt), out.shape, zeros_, 0};
    call_.inputs = inputs_;
    call_.num_inputs = 2;
  }
  ScalarOperandCall(const ScalarOperandCall&) = delete;
  ScalarOperandCall& operator=(const ScalarOperandCall&) = delete;
  const bp_kernel_call& call() const { return call_; }

 private:
  alignas(16) unsigned char value_[16] = {};
  int64_t zeros_[BP_MAX_DIMS] = {};
  bp_tensor inputs_[2] = {};
  bp_kernel_call call_;
};

// The entry of a kernel registered with Registrar::add_scalar_operand: a
// one-input call (the scalar form) reaches Fn as two inputs, so a kernel
// that reads its operands in host memory takes scalars unchanged.
template <KernelFn Fn>
bp_status scalar_operand_thunk(void*, const bp_kernel_call* call, bp_error* error) noexcept {
  return guarded(error, [&] {
    if (call->num_inputs != 1 || call->num_outputs != 1 || call->attrs->num_scalars < 2) {
      Fn(KernelCall(*call));
      return;
    }
    const ScalarOperandCall two(*call);
    Fn(KernelCall(two.call()));
  });
}

}  // namespace bp::sdk
