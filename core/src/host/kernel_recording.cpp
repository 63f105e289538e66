// Which kernels a thread's ops reach (debug::KernelRecording, backplane/debug.h).
// call_plugin_kernel (boundary.h) asks kernel_recording() before each
// kernel call and notes the kernel when the thread records.
#include <backplane/backend.h>
#include <backplane/debug.h>
#include <backplane/dispatcher.h>
#include <backplane/error.h>

#include "../abi_tensor.h"
#include "boundary.h"

namespace bp {

namespace detail {
std::atomic<int> g_kernel_recordings{0};
constinit thread_local debug::KernelRecording* t_kernel_recording = nullptr;
}  // namespace detail

namespace debug {

KernelRecording::KernelRecording() : outer_(detail::t_kernel_recording) {
  detail::t_kernel_recording = this;
  detail::g_kernel_recordings.fetch_add(1, std::memory_order_relaxed);
}

KernelRecording::~KernelRecording() {
  detail::g_kernel_recordings.fetch_sub(1, std::memory_order_relaxed);
  detail::t_kernel_recording = outer_;
}

void KernelRecording::note(int backend, int op, int dtype) noexcept {
  // Builtin ops only: a named op's call carries no name to report.
  if (op < 0 || op >= kNumOps || dtype < 0 || dtype >= kNumDTypes) return;
  for (const Entry& e : entries_)
    if (e.backend == backend && e.op == op && e.dtype == dtype) return;
  try {
    const Backend* b = PluginLoader::instance().by_id(backend);
    entries_.push_back({backend, op, dtype, b ? b->label() : "?", {}});
  } catch (...) {
    // Out of memory while recording: this kernel goes unrecorded.
  }
}

void KernelRecording::note_named(int backend, std::string_view name, int dtype) noexcept {
  for (const Entry& e : entries_)
    if (e.backend == backend && e.named == name && e.dtype == dtype) return;
  try {
    const Backend* b = PluginLoader::instance().by_id(backend);
    entries_.push_back({backend, -1, dtype, b ? b->label() : "?", std::string(name)});
  } catch (...) {
    // Out of memory while recording: this kernel goes unrecorded.
  }
}

std::vector<ReachedKernel> KernelRecording::kernels() const {
  std::vector<ReachedKernel> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_)
    out.push_back({e.backend_name,
                   e.named.empty() ? std::string(op_name(static_cast<Op>(e.op))) : e.named,
                   std::string(name(static_cast<DType>(e.dtype)))});
  return out;
}

void call_kernel_directly(Op op, const std::vector<Tensor>& inputs, const Tensor& out,
                          int64_t calls) {
  const Device device = out.device();
  const IntrusivePtr<Backend> backend = PluginLoader::instance().acquire(device.backend);
  BP_CHECK(backend, "[debug] the output's backend is not loaded");
  const KernelEntry& k = KernelRegistry::instance().lookup(op, device.backend, out.dtype());
  if (!k.fn)
    throw NotImplementedError("[debug] backend '" + backend->name() + "' has no " +
                              std::string(op_name(op)) + " kernel for " +
                              std::string(name(out.dtype())));
  std::vector<bp_tensor> in;
  for (const Tensor& t : inputs) {
    BP_CHECK(
        t.device() == device && t.dtype() == out.dtype() && t.sizes().equals(out.sizes()),
        "[debug::call_kernel_directly] every input must have the output's device, dtype and shape");
    in.push_back(detail::abi_descriptor(t, backend->dl_device_type()));
  }
  const bp_tensor o = detail::abi_descriptor(out, backend->dl_device_type());
  bp_attrs attrs{};
  attrs.struct_size = sizeof attrs;
  const bp_kernel_call call = detail::make_call(static_cast<int32_t>(op), out.dtype(), device, in,
                                                std::span<const bp_tensor>(&o, 1), attrs);
  detail::ErrorBuffer err;
  for (int64_t i = 0; i < calls; ++i)
    if (const bp_status st =
            detail::call_plugin_kernel(k.fn, k.ctx, call, err.get(), device.backend);
        st != BP_STATUS_OK)
      detail::raise_status(st, op_name(op), backend->name(),
                           err.message("(the kernel gave no message)"));
}

}  // namespace debug
}  // namespace bp
