// The sim backend: a device whose memory the host cannot touch. Its memory
// is an arena kept PROT_NONE outside the plugin's own calls (arena.h), its
// device reports host_addressable = 0 and DLPack type kDLExtDev, and its
// kernels are hostref's (sdk/examples/hostref), each run inside a guard that
// opens the arena for the call. Any code outside the plugin that reads or
// writes a sim tensor's memory directly faults, which is what this backend
// is for: proving the core and the conformance suite go through the ABI's
// copies.
#include <backplane/sdk/checks.hpp>
#include <backplane/sdk/plugin.hpp>
#include <cstdlib>
#include <deque>
#include <string>

#include "arena.h"
#include "hostref.h"

namespace bp::sim {

namespace {

constexpr int32_t kDLExtDev = 12;

// Arena size: BACKPLANE_SIM_MEMORY_MB, 1024 MiB by default (address space
// only; pages are used as tensors are written).
std::size_t arena_bytes() {
  const char* env = std::getenv("BACKPLANE_SIM_MEMORY_MB");
  const long long mb = env && *env ? std::atoll(env) : 1024;
  return static_cast<std::size_t>(mb > 0 ? mb : 1024) << 20;
}

}  // namespace

class SimPlugin final : public bp::sdk::Plugin {
 public:
  SimPlugin() : arena_(arena_bytes()) {}

  const char* name() const override { return "sim"; }
  const char* version() const override { return "0.1.0"; }
  int32_t dl_device_type() const override { return kDLExtDev; }

  void device_props(int32_t device, bp_device_props& props) const override {
    BP_SDK_CHECK(device == 0, "device_props", "sim has one device (0), got " << device);
    std::snprintf(props.name, sizeof(props.name), "%s",
                  "simulated device (memory the host cannot address)");
    props.total_memory = arena_.capacity();
    props.host_addressable = 0;
  }

  // hostref's kernels, each registered with the core behind run_guarded:
  // a registrar of our own receives them and forwards a wrapped copy.
  void register_kernels(bp::sdk::Registrar& core) override {
    Forward forward{&core, this};
    // Named registrations are forwarded only to a core that takes them
    // (ABI 1.2), so that hostref's kernels see what the core can do.
    const bp_registrar inner{sizeof(bp_registrar), &forward, &forward_registration,
                             core.has_named_ops() ? &forward_named_registration : nullptr};
    bp::sdk::Registrar wrapped(inner);
    hostref::register_all_kernels(wrapped);
  }

  void* allocate(int32_t, std::size_t nbytes, std::size_t alignment) override {
    return arena_.allocate(nbytes, alignment);
  }
  void deallocate(int32_t, void* ptr, std::size_t) override { arena_.deallocate(ptr); }

  void copy_from_host(int32_t, void* dst, const void* src, std::size_t n) override {
    arena_.check(dst, n, "copy_from_host");
    Arena::Access open(arena_, {{dst, n}});
    std::memcpy(dst, src, n);
  }
  void copy_to_host(int32_t, void* dst, const void* src, std::size_t n) override {
    arena_.check(src, n, "copy_to_host");
    Arena::Access open(arena_, {{src, n}});
    std::memcpy(dst, src, n);
  }
  void copy_on_device(int32_t, void* dst, int32_t, const void* src, std::size_t n) override {
    arena_.check(dst, n, "copy_on_device");
    arena_.check(src, n, "copy_on_device");
    Arena::Access open(arena_, {{dst, n}, {src, n}});
    std::memmove(dst, src, n);
  }
  void memset(int32_t, void* dst, int32_t value, std::size_t n) override {
    arena_.check(dst, n, "memset");
    Arena::Access open(arena_, {{dst, n}});
    std::memset(dst, value, n);
  }
  void memory_stats(int32_t, bp_memory_stats& stats) override { arena_.stats(stats); }

 private:
  struct Forward {
    bp::sdk::Registrar* core;
    SimPlugin* self;
  };
  // A hostref kernel and the plugin whose arena it runs in.
  struct GuardedKernel {
    bp_kernel_fn fn;
    void* ctx;
    SimPlugin* self;
  };

  // Keeps a guarded copy of the registration's kernel and hands the copy
  // to the core with `add(kernel_ctx)`.
  template <class Reg, class Add>
  static bp_status forward(void* ctx, const Reg* reg, bp_error* error, Add add) noexcept {
    auto* f = static_cast<Forward*>(ctx);
    return bp::sdk::guarded(error, [&] {
      GuardedKernel& k =
          f->self->kernels_.emplace_back(GuardedKernel{reg->fn, reg->kernel_ctx, f->self});
      add(*f->core, &k);
    });
  }

  static bp_status forward_registration(void* ctx, const bp_kernel_registration* reg,
                                        bp_error* error) noexcept {
    return forward(ctx, reg, error, [reg](bp::sdk::Registrar& core, GuardedKernel* k) {
      core.add_raw(static_cast<bp_op>(reg->op), reg->dtype_mask, &run_guarded, k, reg->origin);
    });
  }

  static bp_status forward_named_registration(void* ctx, const bp_named_kernel_registration* reg,
                                              bp_error* error) noexcept {
    return forward(ctx, reg, error, [reg](bp::sdk::Registrar& core, GuardedKernel* k) {
      core.add_named_raw(reg->name, reg->schema, reg->dtype_mask, &run_guarded, k, reg->origin);
    });
  }

  // The bytes an operand's elements span (its first to its last element).
  static Arena::Range extent(const bp::sdk::TensorRef& t) {
    if (t.numel() == 0) return {t.base(), 0};
    const int64_t item = static_cast<int64_t>(bp::sdk::dtype_size(t.dtype()));
    int64_t lo = 0, hi = 0;
    for (int d = 0; d < t.ndim(); ++d) (t.stride(d) < 0 ? lo : hi) += (t.size(d) - 1) * t.stride(d);
    return {static_cast<const char*>(t.base()) + lo * item,
            static_cast<std::size_t>((hi - lo + 1) * item)};
  }

  // Checks that every operand lies in the arena, opens the operands' pages,
  // runs the kernel.
  static bp_status run_guarded(void* ctx, const bp_kernel_call* call, bp_error* error) noexcept {
    auto* k = static_cast<GuardedKernel*>(ctx);
    bp_status status = BP_STATUS_OK;
    const bp_status checked = bp::sdk::guarded(error, [&] {
      const char* op = bp::sdk::op_name(call->op);
      constexpr int kMaxOperands = 16;  // a named op's 8 inputs and 8 outputs
      Arena::Range ranges[kMaxOperands];
      const int n = call->num_inputs + call->num_outputs;
      if (n > kMaxOperands)
        throw bp::sdk::InvalidArgument(std::string("[") + op + "] " + std::to_string(n) +
                                       " operands");
      for (int i = 0; i < n; ++i) {
        const bp::sdk::TensorRef t(i < call->num_inputs ? call->inputs[i]
                                                        : call->outputs[i - call->num_inputs]);
        ranges[i] = extent(t);
        if (ranges[i].nbytes > 0) k->self->arena_.check(ranges[i].ptr, ranges[i].nbytes, op);
      }
      Arena::Access open(k->self->arena_, ranges, static_cast<std::size_t>(n));
      status = k->fn(k->ctx, call, error);
    });
    return checked != BP_STATUS_OK ? checked : status;
  }

  Arena arena_;
  std::deque<GuardedKernel> kernels_;  // a deque: kernel_ctx pointers stay valid
};

}  // namespace bp::sim

BP_SDK_PLUGIN(bp::sim::SimPlugin)
