// Opening, initialising and validating a plugin file (Boost.DLL): the phases
// of PluginLoader::load_file before the backend is registered.
#include "load_phases.h"

#include <backplane/plugin.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <filesystem>
#include <sstream>
#include <vector>

#include "boundary.h"
#include "plugin_files.h"
#include "plugin_probe.h"

namespace fs = std::filesystem;

namespace bp::detail {

namespace {

// The plugin's fields that every ABI 2.x plugin must fill: the 2.0 table,
// which ends where 2.1's options begin.
constexpr std::size_t kMinPluginSize = offsetof(bp_plugin, options);
// The most a bp_plugin table of a newer minor may span: far more than any
// plausible number of appended entries, far less than a garbage value.
constexpr std::size_t kMaxPluginSize = 64 * 1024;

// The entry points a plugin must fill (ABI 2.0), in the order they are
// checked: the first one NULL is the one named.
struct RequiredEntry {
  const char* name;
  bool (*missing)(const bp_plugin&);
};
#define BP_REQUIRED_ENTRY_(field)                                 \
  {                                                               \
#field, [](const bp_plugin& p) { return p.field == nullptr; } \
  }
constexpr RequiredEntry kRequiredEntries[] = {
    BP_REQUIRED_ENTRY_(device_count),     BP_REQUIRED_ENTRY_(device_props),
    BP_REQUIRED_ENTRY_(register_kernels), BP_REQUIRED_ENTRY_(allocate),
    BP_REQUIRED_ENTRY_(deallocate),       BP_REQUIRED_ENTRY_(copy_from_host),
    BP_REQUIRED_ENTRY_(copy_to_host),     BP_REQUIRED_ENTRY_(copy_on_device),
    BP_REQUIRED_ENTRY_(memset),           BP_REQUIRED_ENTRY_(stream_create),
    BP_REQUIRED_ENTRY_(stream_destroy),   BP_REQUIRED_ENTRY_(stream_synchronize),
    BP_REQUIRED_ENTRY_(event_create),     BP_REQUIRED_ENTRY_(event_destroy),
    BP_REQUIRED_ENTRY_(event_record),     BP_REQUIRED_ENTRY_(stream_wait_event),
    BP_REQUIRED_ENTRY_(event_query),      BP_REQUIRED_ENTRY_(event_synchronize),
    BP_REQUIRED_ENTRY_(synchronize),
};
#undef BP_REQUIRED_ENTRY_

// "a, b, c, ... (n more)": what a file exports, for the missing entry point.
std::string exported_symbol_list(const std::string& path) {
  try {
    const std::vector<std::string> syms = exported_symbols(path);
    if (syms.empty()) return "(no exported symbols)";
    std::ostringstream os;
    std::size_t shown = 0;
    for (const auto& s : syms) {
      if (shown == 12) {
        os << ", ... (" << syms.size() - shown << " more)";
        break;
      }
      os << (shown++ ? ", " : "") << s;
    }
    return os.str();
  } catch (const std::exception& e) {
    return std::string("(could not list symbols: ") + e.what() + ")";
  }
}

// Why a plugin built with ASan is not opened in a process without the runtime.
std::string asan_refusal(const AsanRuntime& rt) {
  return "built with AddressSanitizer (it needs " +
         (rt.needed.empty() ? std::string("the ASan runtime") : rt.needed) +
         ", which must come first in the process): run with --asan (backplane conformance, "
         "backplane fuzz) or " +
         asan_environment(rt) + " before the command" +
         (rt.path.empty() ? " (no runtime file found: " + rt.found + ")" : std::string());
}

}  // namespace

PluginError refusal(const std::string& path, const std::string& why) {
  return PluginError(path, PluginVerdict::Refused, why);
}

void check_openable(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw refusal(path, "no such file");
  // A plugin built with ASan takes a process without the runtime down while
  // it is opened (the runtime must come first): say so instead.
  if (!asan_runtime_loaded())
    if (const std::optional<AsanRuntime> rt = asan_runtime_needed(path))
      throw refusal(path, asan_refusal(*rt));
}

std::unique_ptr<Backend::Library> open_library(const std::string& path) {
  auto lib = std::make_unique<Backend::Library>();
  load_phase("open");
  try {
    lib->lib.load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const std::optional<AsanRuntime> rt =
        what.find("asan") != std::string::npos ? asan_runtime_needed(path) : std::nullopt;
    throw refusal(path, "could not be loaded: " + what + (rt ? "; " + asan_refusal(*rt) : ""));
  }
  return lib;
}

const bp_plugin* init_plugin(Backend::Library& lib, const std::string& path,
                             const BackendOptions& options) {
  if (!lib.lib.has(BP_PLUGIN_ENTRY_SYMBOL))
    throw refusal(path, std::string("entry symbol '") + BP_PLUGIN_ENTRY_SYMBOL +
                            "' is missing; the file exports: " + exported_symbol_list(path) +
                            ". Define it with BP_SDK_PLUGIN(YourClass), or extern \"C\" "
                            "BP_PLUGIN_EXPORT.");
  auto init =
      lib.lib.get<bp_status(const bp_host*, const bp_plugin**, bp_error*)>(BP_PLUGIN_ENTRY_SYMBOL);

  std::vector<bp_option> host_options;
  for (const auto& [key, value] : options) host_options.push_back({key.c_str(), value.c_str()});
  const bp_host host{sizeof(bp_host),
                     BP_ABI_MAJOR,
                     BP_ABI_MINOR,
                     BACKPLANE_VERSION,
                     host_options.empty() ? nullptr : host_options.data(),
                     static_cast<int32_t>(host_options.size()),
                     0};
  const bp_plugin* api = nullptr;
  ErrorBuffer err;
  load_phase("init");
  bp_status st = BP_STATUS_OK;
  try {
    st = init(&host, &api, err.get());
  } catch (...) {
    throw refusal(path, std::string(BP_PLUGIN_ENTRY_SYMBOL) + " " +
                            exception_words(std::current_exception()));
  }
  const std::string entry = BP_PLUGIN_ENTRY_SYMBOL;
  if (err.overrun()) throw refusal(path, entry + ": " + err.message());
  if (st != BP_STATUS_OK) throw refusal(path, entry + " failed: " + err.message());
  if (api == nullptr) throw refusal(path, entry + " returned no plugin");
  if (api->abi_major != BP_ABI_MAJOR) {
    std::ostringstream os;
    os << "ABI major version " << api->abi_major << "." << api->abi_minor << " is not this core's "
       << BP_ABI_MAJOR << "." << BP_ABI_MINOR << "; rebuild the plugin against this SDK";
    throw refusal(path, os.str());
  }
  // A table no larger than the declared minor can have: a minor up to this
  // core's is at most this core's table; a newer one appends, within reason.
  const std::size_t max_size = api->abi_minor <= BP_ABI_MINOR ? sizeof(bp_plugin) : kMaxPluginSize;
  if (api->struct_size > max_size)
    throw refusal(path, "its bp_plugin table claims " + std::to_string(api->struct_size) +
                            " bytes, more than ABI " + std::to_string(api->abi_major) + "." +
                            std::to_string(api->abi_minor) + " can have (" +
                            std::to_string(max_size) + ")");
  // A newer minor is accepted: its table only appends fields, which this
  // core does not read, and it learnt this core's minor from bp_host (a
  // plugin that needs a newer core refuses in its entry point).
  if (api->struct_size < kMinPluginSize)
    throw refusal(path, "its bp_plugin table is " + std::to_string(api->struct_size) +
                            " bytes, smaller than ABI 2.0's " + std::to_string(kMinPluginSize));
  return api;
}

PluginError destroy_and_refuse(const bp_plugin* api, const std::string& path,
                               const std::string& why) {
  load_phase("destroy");
  if (api->struct_size >= kMinPluginSize && api->destroy)
    guarded(nullptr, [&] { api->destroy(api->ctx); });
  return refusal(path, why);
}

PluginFacts validate_plugin(const bp_plugin* api, const std::string& path,
                            const BackendOptions& options) {
  for (const RequiredEntry& e : kRequiredEntries)
    if (e.missing(*api))
      throw destroy_and_refuse(api, path,
                               std::string("required function '") + e.name + "' is NULL");
  // Optional entries that go in pairs.
  if (BP_HAS_FIELD(api, bp_plugin, release_import) &&
      (api->import_memory == nullptr) != (api->release_import == nullptr))
    throw destroy_and_refuse(api, path,
                             api->import_memory ? "it gives import_memory without release_import "
                                                  "(ABI 2.10: both or neither)"
                                                : "it gives release_import without import_memory "
                                                  "(ABI 2.10: both or neither)");
  PluginFacts facts;
  if (const std::string why = read_facts(api, facts); !why.empty())
    throw destroy_and_refuse(api, path, why);
  for (const auto& [key, value] : options)
    if (std::none_of(facts.options.begin(), facts.options.end(),
                     [&](const auto& o) { return o.first == key; })) {
      std::string takes;
      for (const auto& o : facts.options) takes += (takes.empty() ? "" : ", ") + o.first;
      throw destroy_and_refuse(
          api, path,
          "it takes no option '" + key + "' (--backend-option " + key + "=" + value + "); " +
              (takes.empty()
                   ? std::string("it takes none")
                   : "it takes: " + takes + " ('backplane devices --verbose' describes them)"));
    }
  return facts;
}

}  // namespace bp::detail
