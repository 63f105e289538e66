// Finding, opening and vetting plugins (Boost.DLL), and the Backend wrapper.
#include <backplane/backend.h>
#include <backplane/dispatcher.h>
#include <backplane/error.h>
#include <backplane/named_ops.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>

#include "../internal.h"
#include "backend_library.h"
#include "load_phases.h"
#include "plugin_probe.h"

#ifndef BACKPLANE_INSTALL_PLUGIN_DIR
#define BACKPLANE_INSTALL_PLUGIN_DIR "/usr/local/lib/backplane"
#endif

namespace fs = std::filesystem;

namespace bp {

bool Backend::made_from(const Library& lib) const { return lib_->lib.native() == lib.lib.native(); }

void forget_default_backend();  // device_spec.cpp: the default's id after an unload

namespace detail {
std::optional<std::string> bounded_string(const char* s, std::size_t max_bytes) {
  if (s == nullptr) return std::string();
  const std::size_t n = strnlen(s, max_bytes);
  if (n == max_bytes) return std::nullopt;
  return std::string(s, n);
}

bool looks_like_path(std::string_view s) {
  return s.find('/') != std::string_view::npos || (s.size() > 3 && s.substr(s.size() - 3) == ".so");
}
}  // namespace detail

namespace {

constexpr const char* kFilePrefix = "libbackplane_";
constexpr const char* kFileSuffix = ".so";

struct RegistrarState {
  int backend = -1;
  std::string plugin_name;
  uint32_t abi_minor = 0;  // the plugin's: flags it could not know are cleared
};

// One registration from the plugin: checks the struct, builds the origin
// ("plugin at file:line"), and turns an exception into a status.
template <class Reg, class Add>
bp_status register_with(void* ctx, const Reg* reg, const char* what, bp_error* error,
                        Add add) noexcept {
  auto* st = static_cast<RegistrarState*>(ctx);
  try {
    BP_CHECK(reg != nullptr && reg->struct_size >= offsetof(Reg, origin), "[", what,
             "] registration struct is missing or too small");
    std::string origin = st->plugin_name;
    if (BP_HAS_FIELD(reg, Reg, origin) && reg->origin != nullptr) {
      const std::optional<std::string> at = detail::bounded_string(reg->origin, 1024);
      BP_CHECK(at.has_value(), "[", what, "] the origin is not NUL-terminated within 1024 bytes");
      origin += " at " + *at;
    }
    add(*st, *reg, std::move(origin));
    return BP_STATUS_OK;
  } catch (const std::exception& e) {
    detail::write_error(error, e.what());
    return BP_STATUS_INVALID_ARGUMENT;
  }
}

bp_status register_kernel_c(void* ctx, const bp_kernel_registration* reg,
                            bp_error* error) noexcept {
  return register_with(ctx, reg, "register_kernel", error,
                       [](RegistrarState& st, const bp_kernel_registration& r, std::string o) {
                         bp_kernel_registration full{};
                         std::memcpy(&full, &r, std::min(sizeof(full), r.struct_size));
                         if (!BP_HAS_FIELD(&r, bp_kernel_registration, flags)) full.flags = 0;
                         // A bit a plugin set before 2.5 defined it is not the promise
                         // to take the one-input form.
                         if (st.abi_minor < 5) full.flags &= ~BP_KERNEL_SCALAR_OPERAND;
                         // (since 2.8) An op this core does not know, from a plugin of
                         // a later minor: ignored, as an unknown override is.
                         if (st.abi_minor > BP_ABI_MINOR && (full.op < 0 || full.op >= kNumOps))
                           return;
                         KernelRegistry::instance().add(st.backend, full, std::move(o));
                       });
}

bp_status register_named_kernel_c(void* ctx, const bp_named_kernel_registration* reg,
                                  bp_error* error) noexcept {
  return register_with(
      ctx, reg, "register_named_kernel", error,
      [](RegistrarState& st, const bp_named_kernel_registration& r, std::string o) {
        BP_CHECK(detail::bounded_string(r.name, 256).has_value(),
                 "[register_named_kernel] the name is not NUL-terminated within 256 bytes");
        BP_CHECK(detail::bounded_string(r.schema, 4096).has_value(),
                 "[register_named_kernel] the schema is not NUL-terminated within 4096 bytes");
        // An override this core does not know, from a plugin of a later
        // minor: ignored, and the composite runs (a refusal would make
        // every newer plugin unloadable here).
        if (st.abi_minor > BP_ABI_MINOR && std::string_view(r.name).starts_with("core::")) {
          const auto& known = overridable_composites();
          if (std::none_of(known.begin(), known.end(), [&](const CompositeOverride& c) {
                return r.name == std::string_view(c.name);
              }))
            return;
        }
        detail::register_named_kernel(st.backend, st.plugin_name, r, std::move(o));
      });
}

// Every kernel of a backend, primitive and named.
void remove_kernels(int backend) {
  KernelRegistry::instance().remove_backend(backend);
  detail::remove_named_kernels(backend);
}

}  // namespace

// --- PluginLoader ---------------------------------------------------------------

PluginLoader& PluginLoader::instance() {
  // Never destroyed: unloading plugins (and their thread pools) during
  // static destruction at exit is a classic source of crashes.
  static PluginLoader* loader = new PluginLoader();
  return *loader;
}

void PluginLoader::add_search_path(std::string dir) {
  std::lock_guard lock(mu_);
  if (std::find(extra_dirs_.begin(), extra_dirs_.end(), dir) == extra_dirs_.end())
    extra_dirs_.push_back(std::move(dir));
}

std::vector<std::string> PluginLoader::search_dirs() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> dirs = extra_dirs_;
  if (const char* env = std::getenv("BACKPLANE_PLUGIN_PATH")) {
    std::stringstream ss(env);
    for (std::string d; std::getline(ss, d, ':');)
      if (!d.empty()) dirs.push_back(d);
  }
  auto add = [&](const fs::path& p) {
    std::string s = p.lexically_normal().string();
    if (!s.empty() && s.back() == '/') s.pop_back();
    if (std::find(dirs.begin(), dirs.end(), s) == dirs.end()) dirs.push_back(s);
  };
  try {
    add(fs::path(boost::dll::program_location().parent_path().string()));
  } catch (const std::exception&) {
  }
  try {
    fs::path core = boost::dll::this_line_location().string();
    add(core.parent_path() / "backplane");
  } catch (const std::exception&) {
  }
  add(fs::path(BACKPLANE_INSTALL_PLUGIN_DIR));
  return dirs;
}

std::string PluginLoader::locate(std::string_view name) const {
  const std::string file = kFilePrefix + std::string(name) + kFileSuffix;
  std::vector<std::string> dirs = search_dirs();
  for (const auto& d : dirs) {
    std::error_code ec;
    fs::path p = fs::path(d) / file;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  std::ostringstream os;
  os << "[plugin] backend '" << name << "' not found: no " << file << " in";
  for (const auto& d : dirs) os << "\n  " << d;
  os << "\nGive a folder with --plugin-path DIR or BACKPLANE_PLUGIN_PATH, or a file with "
        "--backend path/to/libmine.so.";
  throw PluginError(os.str());
}

Backend& PluginLoader::load(std::string_view name_or_path) {
  std::lock_guard lock(mu_);
  if (!detail::looks_like_path(name_or_path)) {
    if (Backend* b = find(name_or_path)) return *b;
    BP_CHECK_T(PluginError, detail::is_plain_name(name_or_path), "[plugin] '", name_or_path,
               "' is neither a backend name ([a-z0-9_]+) nor a path to a .so file");
    return load_file(locate(name_or_path), backend_options(name_or_path), false);
  }
  return load_file(std::string(name_or_path), backend_options(name_or_path), true);
}

std::pair<std::string, std::string> parse_backend_option(std::string_view text) {
  const auto eq = text.find('=');
  BP_CHECK(eq != std::string_view::npos && eq > 0, "[--backend-option] '", text,
           "' is not KEY=VALUE");
  const std::string key(text.substr(0, eq));
  BP_CHECK(detail::is_plain_name(key), "[--backend-option] '", key,
           "' is not an option name ([a-z0-9_]+)");
  return {key, std::string(text.substr(eq + 1))};
}

void PluginLoader::set_backend_options(std::string name_or_path, BackendOptions options) {
  std::lock_guard lock(mu_);
  BackendOptions unique;
  for (auto& [key, value] : options) {
    std::erase_if(unique, [&](const auto& o) { return o.first == key; });
    unique.emplace_back(std::move(key), std::move(value));
  }
  std::erase_if(options_, [&](const auto& o) { return o.first == name_or_path; });
  if (!unique.empty()) options_.emplace_back(std::move(name_or_path), std::move(unique));
}

BackendOptions PluginLoader::backend_options(std::string_view name_or_path) const {
  std::lock_guard lock(mu_);
  for (const auto& [spec, options] : options_)
    if (spec == name_or_path) return options;
  return {};
}

void PluginLoader::set_probe_mode(ProbeMode mode) {
  std::lock_guard lock(mu_);
  probe_mode_ = mode;
}

ProbeMode PluginLoader::probe_mode() const {
  std::lock_guard lock(mu_);
  if (probe_mode_) return *probe_mode_;
  const char* env = std::getenv("BACKPLANE_PROBE");
  const std::string v = env ? env : "";
  if (v == "off" || v == "0") return ProbeMode::Off;
  if (v == "fresh") return ProbeMode::Fresh;
  return ProbeMode::On;
}

Backend& PluginLoader::load_file(const std::string& path_in, const BackendOptions& options,
                                 bool by_path) {
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(fs::absolute(path_in, ec), ec);
  const std::string path = abs.empty() ? path_in : abs.string();
  for (auto& b : backends_)
    if (b->path() == path) return *b;

  // open: vetted, in a child process first, then in this one.
  detail::check_openable(path);
  probe_first(path, options);
  std::unique_ptr<Backend::Library> lib = detail::open_library(path);
  // The same file under another path (a hard link, a second mount): the
  // dynamic loader handed back the library already open, and the backend
  // made from it is the answer. A second bp_plugin_init runs only for a
  // library whose backend was unloaded while its tensors live.
  for (auto& b : backends_)
    if (b->made_from(*lib)) return *b;
  // init, validate, register.
  const bp_plugin* api = detail::init_plugin(*lib, path, options);
  PluginFacts facts = detail::validate_plugin(api, path, options);
  return register_backend(std::move(lib), api, path, std::move(facts), by_path);
}

void PluginLoader::probe_first(const std::string& path, const BackendOptions& options) {
  // The file is loaded in a child process first: what would take this
  // process down takes the probe down instead.
  const ProbeMode mode = probe_mode();
  std::erase_if(probe_notes_, [&](const auto& n) { return n.first == path; });
  if (mode == ProbeMode::Off) return;
  const detail::ProbeResult probe = detail::probe_plugin(path, options, mode == ProbeMode::Fresh);
  probe_notes_.emplace_back(path, probe.note);
  if (!probe.passed) throw PluginError(path, probe.verdict, probe.reason);
}

Backend& PluginLoader::register_backend(std::unique_ptr<Backend::Library> lib, const bp_plugin* api,
                                        const std::string& path, PluginFacts facts, bool by_path) {
  const std::string name = facts.name;
  // Another file of the same name (a second build of one plugin) loads only
  // when it is asked for by path; its label tells the two apart.
  std::string label = name;
  if (Backend* other = find(name)) {
    if (!by_path)
      throw detail::destroy_and_refuse(api, path,
                                       "a plugin named '" + name + "' is already loaded from " +
                                           other->path() +
                                           " (give this file by path to load it beside it)");
    label = unused_label(name);
  }
  const int slot = free_slot();
  if (slot < 0)
    throw detail::destroy_and_refuse(
        api, path,
        "too many backends loaded (at most " + std::to_string(kMaxBackends) +
            " at once, counting unloaded ones whose tensors still live)");
  // The slot's next generation: an id kept from an earlier backend in this
  // slot names nothing (int16 Device ids wrap after 1024 generations).
  generation_[slot] = static_cast<uint16_t>((generation_[slot] + 1) % 1024);
  const int id = slot + kMaxBackends * generation_[slot];
  RegistrarState state{id, label, api->abi_minor};
  bp_registrar registrar{sizeof(bp_registrar), &state, &register_kernel_c,
                         &register_named_kernel_c};
  detail::ErrorBuffer reg_err;
  detail::load_phase("register_kernels");
  std::exception_ptr thrown;
  bp_status reg_st = BP_STATUS_OK;
  try {
    reg_st = api->register_kernels(api->ctx, &registrar, reg_err.get());
  } catch (...) {
    thrown = std::current_exception();
  }
  if (thrown || reg_st != BP_STATUS_OK || reg_err.overrun()) {
    remove_kernels(id);
    throw detail::destroy_and_refuse(api, path,
                                     thrown ? "register_kernels " + detail::exception_words(thrown)
                                            : "registering kernels failed: " + reg_err.message());
  }
  auto backend = make_intrusive<Backend>(id, std::move(lib), api, path, std::move(facts));
  backend->label_ = label;
  backends_.push_back(backend);
  slots_[slot] = backend;
  by_id_[slot].store(backend.get(), std::memory_order_release);
  return *backend;
}

std::string PluginLoader::unused_label(const std::string& name) const {
  for (int n = 2;; ++n) {
    const std::string label = name + "#" + std::to_string(n);
    if (std::none_of(std::begin(slots_), std::end(slots_),
                     [&](const auto& b) { return b && b->label() == label; }))
      return label;
  }
}

int PluginLoader::free_slot() {
  for (int i = 0; i < kMaxBackends; ++i)
    if (!slots_[i]) return i;
  // Unloaded backends that no tensor uses any more (only this table holds
  // them): destroy them now. Nothing can dispatch on them (no tensor) or
  // find them (by_id is cleared); acquire() is kept out by the lock.
  int found = -1;
  std::unique_lock lock(slots_mu_);
  for (int i = 0; i < kMaxBackends; ++i) {
    if (by_id_[i].load(std::memory_order_relaxed) != nullptr || slots_[i]->use_count() != 1)
      continue;
    remove_kernels(i);
    slots_[i].reset();
    if (found < 0) found = i;
  }
  return found;
}

IntrusivePtr<Backend> PluginLoader::acquire(int id) const {
  std::shared_lock lock(slots_mu_);
  return IntrusivePtr<Backend>(by_id(id));
}

Backend* PluginLoader::find(std::string_view name) const {
  std::lock_guard lock(mu_);
  for (const auto& b : backends_)
    if (b->name() == name) return b.get();
  return nullptr;
}

std::vector<Backend*> PluginLoader::loaded() const {
  std::lock_guard lock(mu_);
  std::vector<Backend*> out;
  for (const auto& b : backends_) out.push_back(b.get());
  return out;
}

std::vector<PluginCandidate> PluginLoader::discover() {
  std::lock_guard lock(mu_);
  std::vector<PluginCandidate> out;
  std::vector<std::string> seen;
  for (const auto& dir : search_dirs()) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      std::string f = e.path().filename().string();
      if (f.rfind(kFilePrefix, 0) == 0 && f.size() > 3 && f.substr(f.size() - 3) == kFileSuffix)
        files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::string p = fs::weakly_canonical(f, ec).string();
      if (std::find(seen.begin(), seen.end(), p) != seen.end()) continue;
      seen.push_back(p);
      PluginCandidate c;
      c.path = p;
      std::string fname = f.filename().string();
      c.name = fname.substr(std::strlen(kFilePrefix), fname.size() - std::strlen(kFilePrefix) - 3);
      try {
        // Options given for the backend by name reach it here too.
        BackendOptions options = backend_options(p);
        if (options.empty()) options = backend_options(c.name);
        Backend& b = load_file(p, options, false);
        if (b.path() == p) {
          c.loaded = true;
          c.name = b.name();
          c.backend = IntrusivePtr<Backend>(&b);
        } else {  // another path to a library loaded from b.path(): listed there
          c.name = b.name();
          c.reason = "the same file as " + b.path() + ", which is loaded";
        }
      } catch (const PluginError& e) {
        c.verdict = e.verdict();
        c.reason = e.reason().empty() ? e.what() : e.reason();
      }
      for (const auto& [file, note] : probe_notes_)
        if (file == p) c.probe = note;
      out.push_back(std::move(c));
    }
  }
  // Backends loaded by path from elsewhere (--backend path/to/x.so).
  for (const auto& b : backends_)
    if (std::find(seen.begin(), seen.end(), b->path()) == seen.end())
      out.push_back(PluginCandidate{b->path(), b->name(), true, "", b, PluginVerdict::Refused, ""});
  return out;
}

void PluginLoader::unload(std::string_view name) {
  std::lock_guard lock(mu_);
  for (auto it = backends_.begin(); it != backends_.end(); ++it) {
    if ((*it)->name() != name) continue;
    const int slot = backend_slot((*it)->id());
    {
      // Once this returns, no acquire() can find it; storages still holding
      // it keep it (and its kernels) alive until the last one goes.
      std::unique_lock slots_lock(slots_mu_);
      by_id_[slot].store(nullptr, std::memory_order_release);
      if (slots_[slot]->use_count() == 2) {  // this list and the slot table only
        remove_kernels(slot);
        slots_[slot].reset();
      }
    }
    backends_.erase(it);
    forget_default_backend();
    return;
  }
}

}  // namespace bp
