#include <backplane/dispatcher.h>
#include <backplane/error.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string_view>
#include <system_error>

#include "internal.h"

namespace bp {

std::string_view op_name(Op op) {
  switch (op) {
#define BP_OP_NAME_CASE_(NAME, Name, text, value) \
  case Op::Name:                                  \
    return text;
    BP_OP_LIST(BP_OP_NAME_CASE_)
#undef BP_OP_NAME_CASE_
  }
  return "unknown";
}

KernelRegistry& KernelRegistry::instance() {
  static KernelRegistry* registry = new KernelRegistry();  // outlives every backend
  return *registry;
}

void KernelRegistry::add(int backend_id, const bp_kernel_registration& reg, std::string origin) {
  BP_CHECK(backend_id >= 0 && backend_id <= INT16_MAX, "[register_kernel] bad backend id ",
           backend_id);
  const int backend = backend_slot(backend_id);
  BP_CHECK(reg.op >= 0 && reg.op < kNumOps, "[register_kernel] unknown op ", reg.op,
           " (this core knows ops 0 to ", kNumOps - 1, "; was the plugin built for a newer ABI?)");
  BP_CHECK(reg.fn != nullptr, "[register_kernel] ", op_name(static_cast<Op>(reg.op)),
           ": kernel function is NULL (", origin, ")");
  BP_CHECK(reg.dtype_mask != 0 && (reg.dtype_mask & ~BP_DTYPE_MASK_ALL) == 0, "[register_kernel] ",
           op_name(static_cast<Op>(reg.op)), ": dtype mask 0x", std::hex, reg.dtype_mask, std::dec,
           " names no dtype or unknown ones (", origin, ")");
  for (int d = 0; d < kNumDTypes; ++d) {
    if (!(reg.dtype_mask & BP_DTYPE_BIT(d))) continue;
    BP_CHECK(table_[reg.op][backend][d].fn == nullptr, "[register_kernel] ",
             op_name(static_cast<Op>(reg.op)), " for ", static_cast<DType>(d),
             " is registered twice: first by ", origin_[reg.op][backend][d], ", again by ", origin);
  }
  for (int d = 0; d < kNumDTypes; ++d) {
    if (!(reg.dtype_mask & BP_DTYPE_BIT(d))) continue;
    table_[reg.op][backend][d] = KernelEntry{reg.fn, reg.kernel_ctx, reg.flags};
    origin_[reg.op][backend][d] = origin;
  }
}

void KernelRegistry::remove_backend(int backend_id) {
  const int backend = backend_slot(backend_id);
  for (int op = 0; op < kNumOps; ++op)
    for (int d = 0; d < kNumDTypes; ++d) {
      table_[op][backend][d] = KernelEntry{};
      origin_[op][backend][d].clear();
    }
}

std::vector<std::string> KernelRegistry::backends_with(Op op, DType dtype) const {
  std::vector<std::string> out;
  for (Backend* b : PluginLoader::instance().loaded())
    if (lookup(op, b->id(), dtype).fn) out.push_back(b->name());
  return out;
}

const std::string& KernelRegistry::origin(Op op, int backend, DType dtype) const {
  return origin_[static_cast<int>(op)][backend_slot(backend)][static_cast<int>(dtype)];
}

namespace {
// The plugins in the search folders that are not loaded (by file name:
// libbackplane_NAME.so), which a missing kernel's message names: one of
// them may have it. Nothing is loaded to find out.
std::vector<std::string> plugins_not_loaded() {
  std::vector<std::string> loaded, out;
  for (Backend* b : PluginLoader::instance().loaded()) loaded.push_back(b->name());
  for (const std::string& dir : PluginLoader::instance().search_dirs()) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string file = entry.path().filename().string();
      constexpr std::string_view kPrefix = "libbackplane_", kSuffix = ".so";
      if (file.size() <= kPrefix.size() + kSuffix.size() || !file.starts_with(kPrefix) ||
          !file.ends_with(kSuffix))
        continue;
      std::string name = file.substr(kPrefix.size(), file.size() - kPrefix.size() - kSuffix.size());
      if (std::find(loaded.begin(), loaded.end(), name) == loaded.end() &&
          std::find(out.begin(), out.end(), name) == out.end())
        out.push_back(std::move(name));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

[[noreturn]] __attribute__((noinline)) void missing_kernel(Op op, DType dtype, Device device) {
  std::ostringstream os;
  const IntrusivePtr<Backend> b = PluginLoader::instance().acquire(device.backend);
  os << "[" << op_name(op) << "] not implemented for dtype " << dtype << " on backend '"
     << (b ? b->name() : "?") << "'";
  auto have = KernelRegistry::instance().backends_with(op, dtype);
  if (have.empty()) {
    os << "; no loaded backend has it";
    const std::vector<std::string> others = plugins_not_loaded();
    if (!others.empty()) {
      os << " (plugins found but not loaded, which may: ";
      for (std::size_t i = 0; i < others.size(); ++i) os << (i ? ", " : "") << others[i];
      os << "; `backplane ops` lists who has it)";
    }
  } else {
    os << "; backends that have it: ";
    for (std::size_t i = 0; i < have.size(); ++i) os << (i ? ", " : "") << have[i];
  }
  throw NotImplementedError(os.str());
}
}  // namespace

void call_kernel(Op op, DType dtype, Device device, std::span<const bp_tensor> inputs,
                 std::span<const bp_tensor> outputs, const bp_attrs& attrs) {
  const KernelEntry& k = KernelRegistry::instance().lookup(op, device.backend, dtype);
  if (__builtin_expect(k.fn == nullptr, 0)) {
    if (detail::try_fallback(op, dtype, device, inputs, outputs, attrs)) return;
    missing_kernel(op, dtype, device);
  }
  const bp_kernel_call call =
      detail::make_call(static_cast<int32_t>(op), dtype, device, inputs, outputs, attrs);
  detail::BasicErrorBuffer<512> err;
  bp_status st = detail::call_plugin_kernel(k.fn, k.ctx, call, err.get(), device.backend);
  if (__builtin_expect(st != BP_STATUS_OK, 0)) {
    // A kernel that declines this call (a layout or a size it does not
    // handle) has written nothing: the fallback policy decides, as for a
    // kernel that is not registered at all.
    if (st == BP_STATUS_UNSUPPORTED &&
        detail::try_fallback(op, dtype, device, inputs, outputs, attrs))
      return;
    const IntrusivePtr<Backend> b = PluginLoader::instance().acquire(device.backend);
    detail::raise_status(st, op_name(op), b ? b->name() : "?",
                         err.message("(the kernel gave no message)"));
  }
}

bool call_kernel_scalar_form(Op op, DType dtype, Device device, const bp_tensor& input,
                             const bp_tensor& output, const bp_attrs& attrs) {
  const KernelEntry& k = KernelRegistry::instance().lookup(op, device.backend, dtype);
  if (k.fn == nullptr || !(k.flags & BP_KERNEL_SCALAR_OPERAND)) return false;
  const bp_kernel_call call =
      detail::make_call(static_cast<int32_t>(op), dtype, device, {&input, 1}, {&output, 1}, attrs);
  detail::BasicErrorBuffer<512> err;
  const bp_status st = detail::call_plugin_kernel(k.fn, k.ctx, call, err.get(), device.backend);
  if (__builtin_expect(st == BP_STATUS_OK, 1)) return true;
  if (st == BP_STATUS_UNSUPPORTED) return false;
  const IntrusivePtr<Backend> b = PluginLoader::instance().acquire(device.backend);
  detail::raise_status(st, op_name(op), b ? b->name() : "?",
                       err.message("(the kernel gave no message)"));
}

namespace detail {

void raise_status(bp_status st, std::string_view what, std::string_view backend,
                  const std::string& message) {
  std::string m;
  m.reserve(what.size() + backend.size() + message.size() + 16);
  m.append("[").append(what).append("] backend '").append(backend).append("': ").append(message);
  switch (st) {
    case BP_STATUS_INVALID_ARGUMENT:
      throw ValueError(m);
    case BP_STATUS_UNSUPPORTED:
      throw NotImplementedError(m);
    case BP_STATUS_OUT_OF_MEMORY:
      throw OutOfMemoryError(m);
    case BP_STATUS_DEVICE_ERROR:
      throw DeviceError(m);
    default:
      throw Error(m);
  }
}

}  // namespace detail
}  // namespace bp
