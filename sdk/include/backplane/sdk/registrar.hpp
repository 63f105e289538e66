// Registering kernels with the core (bp::sdk::Registrar: plain, scalar
// operand, widened and named kernels, the narrow dtypes emulated), and
// BP_ORIGIN, the file:line a registration names. Part of the SDK's plugin
// layer (plugin.hpp includes it).
#pragma once

#include <backplane/plugin.h>

#include <backplane/sdk/kernel_call.hpp>
#include <backplane/sdk/tensor.hpp>
#include <backplane/sdk/widen.hpp>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace bp::sdk {

// Wraps the core's registrar.
class Registrar {
 public:
  explicit Registrar(const bp_registrar& r) : r_(r) {}

  // Registers Fn for `op` and the listed dtypes; `origin` is "file:line".
  template <KernelFn Fn>
  void add(bp_op op, std::initializer_list<bp_dtype> dtypes, const char* origin = nullptr) {
    add_raw(op, mask_of(dtypes), &kernel_thunk<Fn>, nullptr, origin);
  }

  // Registers Fn as the named op `name` ("vendor::op") with its `schema`
  // (see bp_named_kernel_registration) for the listed dtypes of its first
  // input.
  template <KernelFn Fn>
  void add_named(const char* name, const char* schema, std::initializer_list<bp_dtype> dtypes,
                 const char* origin = nullptr) {
    add_named_raw(name, schema, mask_of(dtypes), &kernel_thunk<Fn>, nullptr, origin);
  }

  // True when the registrar takes named ops (every core of this ABI does).
  bool has_named_ops() const {
    return BP_HAS_FIELD(&r_, bp_registrar, register_named_kernel) &&
           r_.register_named_kernel != nullptr;
  }

  // Registers Fn, an ADD, SUB, MUL or DIV kernel that reads its operands in
  // host memory (at once, or later from a copy of the call on a queue of
  // the plugin's own), as also taking its second operand as an attribute
  // (BP_KERNEL_SCALAR_OPERAND): `x + 2.0` then costs no device tensor and
  // no fill, and Fn sees the scalar as a broadcast operand (scalar_operand_thunk).
  template <KernelFn Fn>
  void add_scalar_operand(bp_op op, std::initializer_list<bp_dtype> dtypes,
                          const char* origin = nullptr) {
    add_raw(op, mask_of(dtypes), &scalar_operand_thunk<Fn>, nullptr, origin,
            BP_KERNEL_SCALAR_OPERAND);
  }

  // Registers a C kernel directly.
  void add_raw(bp_op op, uint32_t dtype_mask, bp_kernel_fn fn, void* kernel_ctx, const char* origin,
               uint32_t flags = 0) {
    bp_kernel_registration reg{};
    reg.op = op;
    reg.flags = flags;
    submit(reg, dtype_mask, fn, kernel_ctx, origin, r_.register_kernel, "kernel");
    seen_.push_back({op, dtype_mask, fn, kernel_ctx});
  }

  // For a plugin whose memory is host memory: registers the narrow dtypes
  // (float16, bfloat16, int8, uint8, int16) for every op registered so far
  // for their compute dtype (float32, int64) and not for them, computed
  // through that kernel (widen.hpp) and flagged BP_KERNEL_EMULATED; and a
  // COPY from each narrow dtype. The plugin's COPY kernels must convert to
  // the narrow dtypes (bp::sdk::cast_copy does). Call once, last. `store`
  // keeps the adapters; it must live as long as the plugin.
  void emulate_narrow_dtypes(std::deque<WideKernel>& store) {
    constexpr bp_dtype kNarrow[] = {BP_DTYPE_FLOAT16, BP_DTYPE_BFLOAT16, BP_DTYPE_INT8,
                                    BP_DTYPE_UINT8, BP_DTYPE_INT16};
    std::uint32_t copy_mask = 0;
    for (bp_dtype d : kNarrow) copy_mask |= BP_DTYPE_BIT(d);
    const auto seen = seen_;
    for (int op = 0; op < BP_OP_COUNT; ++op) {
      if (op == BP_OP_COPY) continue;
      std::uint32_t native = 0;
      for (const Seen& r : seen)
        if (r.op == op) native |= r.mask;
      for (bp_dtype d : kNarrow) {
        if (native & BP_DTYPE_BIT(d)) continue;
        for (const Seen& r : seen) {
          if (r.op != op || !(r.mask & BP_DTYPE_BIT(compute_dtype(d)))) continue;
          store.push_back({r.fn, r.ctx});
          add_raw(static_cast<bp_op>(op), BP_DTYPE_BIT(d), &widened_thunk, &store.back(),
                  "bp::sdk::emulate_narrow_dtypes", BP_KERNEL_EMULATED);
          break;
        }
      }
    }
    std::uint32_t copy_native = 0;
    for (const Seen& r : seen)
      if (r.op == BP_OP_COPY) copy_native |= r.mask;
    if (copy_mask & ~copy_native)
      add_raw(BP_OP_COPY, copy_mask & ~copy_native, &cast_thunk, nullptr,
              "bp::sdk::emulate_narrow_dtypes");
  }

  // Registers a C kernel as a named op directly.
  void add_named_raw(const char* name, const char* schema, uint32_t dtype_mask, bp_kernel_fn fn,
                     void* kernel_ctx, const char* origin) {
    if (!has_named_ops())
      throw std::runtime_error(std::string("named op ") + name +
                               ": this core does not take named ops");
    bp_named_kernel_registration reg{};
    reg.name = name;
    reg.schema = schema;
    submit(reg, dtype_mask, fn, kernel_ctx, origin, r_.register_named_kernel, "named kernel");
  }

 private:
  struct Seen {
    int op;
    std::uint32_t mask;
    bp_kernel_fn fn;
    void* ctx;
  };
  static bp_status widened_thunk(void* ctx, const bp_kernel_call* call, bp_error* error) noexcept {
    bp_status st = BP_STATUS_OK;
    const bp_status g =
        guarded(error, [&] { st = run_widened(*static_cast<WideKernel*>(ctx), *call, error); });
    return g != BP_STATUS_OK ? g : st;
  }
  static bp_status cast_thunk(void*, const bp_kernel_call* call, bp_error* error) noexcept {
    return guarded(error,
                   [&] { cast_copy(TensorRef(call->outputs[0]), TensorRef(call->inputs[0])); });
  }

  static uint32_t mask_of(std::initializer_list<bp_dtype> dtypes) {
    uint32_t mask = 0;
    for (bp_dtype d : dtypes) mask |= BP_DTYPE_BIT(d);
    return mask;
  }

  // Fills the fields both registrations share and hands `reg` to the core.
  template <class Reg>
  void submit(Reg& reg, uint32_t dtype_mask, bp_kernel_fn fn, void* kernel_ctx, const char* origin,
              bp_status (*to)(void*, const Reg*, bp_error*), const char* what) {
    reg.struct_size = sizeof(reg);
    reg.dtype_mask = dtype_mask;
    reg.fn = fn;
    reg.kernel_ctx = kernel_ctx;
    reg.origin = origin;
    char buf[512] = {0};
    bp_error err{sizeof(bp_error), buf, sizeof(buf)};
    if (to(r_.ctx, &reg, &err) != BP_STATUS_OK)
      throw std::runtime_error(buf[0] ? buf : std::string(what) + " registration refused");
  }

 private:
  const bp_registrar& r_;
  std::vector<Seen> seen_;
};

#define BP_SDK_STR2(x) #x
#define BP_SDK_STR(x) BP_SDK_STR2(x)
// "file:line" of the registration, for duplicate-kernel messages.
#define BP_ORIGIN (__FILE__ ":" BP_SDK_STR(__LINE__))

}  // namespace bp::sdk
