// Finding, opening and vetting plugins (Boost.DLL), and the Backend wrapper.
#include <backplane/backend.h>
#include <backplane/dispatcher.h>
#include <backplane/error.h>

#include "internal.h"

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>

#ifndef BACKPLANE_INSTALL_PLUGIN_DIR
#define BACKPLANE_INSTALL_PLUGIN_DIR "/usr/local/lib/backplane"
#endif

namespace fs = std::filesystem;

namespace bp {

struct Backend::Library {
  boost::dll::shared_library lib;
};

bool Backend::made_from(const Library& lib) const {
  return lib_->lib.native() == lib.lib.native();
}

void forget_default_backend();  // below: the default's id after an unload

namespace {

constexpr const char* kFilePrefix = "libbackplane_";
constexpr const char* kFileSuffix = ".so";

bool looks_like_path(std::string_view s) {
  return s.find('/') != std::string_view::npos ||
         (s.size() > 3 && s.substr(s.size() - 3) == ".so");
}


// The plugin's fields that every ABI 2.x plugin must fill.
// (2.0 was the first minor of this major: its table is sizeof(bp_plugin)
// today; when a minor appends, this stays at the end of the 2.0 table.)
constexpr std::size_t kMinPluginSize = sizeof(bp_plugin);

struct RegistrarState {
  int backend = -1;
  std::string plugin_name;
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
    if (BP_HAS_FIELD(reg, Reg, origin) && reg->origin != nullptr)
      origin += std::string(" at ") + reg->origin;
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
                         KernelRegistry::instance().add(st.backend, full, std::move(o));
                       });
}

bp_status register_named_kernel_c(void* ctx, const bp_named_kernel_registration* reg,
                                  bp_error* error) noexcept {
  return register_with(
      ctx, reg, "register_named_kernel", error,
      [](RegistrarState& st, const bp_named_kernel_registration& r, std::string o) {
        detail::register_named_kernel(st.backend, st.plugin_name, r, std::move(o));
      });
}

// Every kernel of a backend, primitive and named.
void remove_kernels(int backend) {
  KernelRegistry::instance().remove_backend(backend);
  detail::remove_named_kernels(backend);
}

std::string exported_symbols(const std::string& path) {
  try {
    const std::vector<std::string> syms = detail::exported_symbols(path);
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

}  // namespace

// --- Backend ------------------------------------------------------------------

Backend::Backend(int id, std::unique_ptr<Library> lib, const bp_plugin* api, std::string path)
    : lib_(std::move(lib)), api_(api), id_(id), name_(api->name), path_(std::move(path)) {
  version_ = api->version ? api->version : "unknown";
  char reason[512] = {0};
  device_count_ = std::max<int32_t>(0, api_->device_count(api_->ctx, reason, sizeof(reason)));
  if (device_count_ == 0)
    no_device_reason_ = reason[0] ? reason : "the plugin reported no device and gave no reason";
}

Backend::~Backend() {
  // Memory waiting for other streams, then the streams made here, then the
  // instance (the ABI destroys streams once their work is done).
  reap_deferred_frees(true);
  for (void* b : staging_)
    if (b) api_->host_free(api_->ctx, b);
  for (auto [device, s] : streams_) {
    detail::ErrorBuffer err;
    (void)api_->stream_synchronize(api_->ctx, device, s, err.get());
    api_->stream_destroy(api_->ctx, device, s);
  }
  if (api_->destroy) api_->destroy(api_->ctx);
}

bp_device_props Backend::device_props(int device) const {
  bp_device_props p{};
  p.struct_size = sizeof(p);
  detail::check_status(api_->device_props(api_->ctx, device, &p, detail::ErrorBuffer().get()),
                       "device_props", name_);
  return p;
}

bool Backend::host_addressable(int device) const { return device_props(device).host_addressable; }

std::vector<bp_tolerance> Backend::tolerances() const {
  if (!BP_HAS_FIELD(api_, bp_plugin, num_tolerances) || api_->tolerances == nullptr) return {};
  return {api_->tolerances, api_->tolerances + std::max<int32_t>(api_->num_tolerances, 0)};
}

std::optional<bp_memory_stats> Backend::memory_stats(int device) const {
  if (!BP_HAS_FIELD(api_, bp_plugin, memory_stats) || api_->memory_stats == nullptr)
    return std::nullopt;
  bp_memory_stats s{};
  s.struct_size = sizeof(s);
  detail::ErrorBuffer err;
  if (api_->memory_stats(api_->ctx, device, &s, err.get()) != BP_STATUS_OK) return std::nullopt;
  return s;
}

void* Backend::allocate(int device, std::size_t nbytes, bp_stream stream) const {
  BP_CHECK(device >= 0 && device < device_count_, "[allocate] backend '", name_,
           "' has no device ", device, " (it has ", device_count_, ")",
           device_count_ == 0 ? ": " + no_device_reason_ : std::string());
  if (__builtin_expect(num_deferred_.load(std::memory_order_relaxed) != 0, 0))
    reap_deferred_frees(false);
  void* p = nullptr;
  detail::ErrorBuffer err;
  // Cache-line alignment pays for vector loads on large buffers; small ones
  // take malloc's natural 16 so plugins can serve them from a fast path.
  const std::size_t alignment = nbytes >= 512 ? 64 : 16;
  detail::check_status(api_->allocate(api_->ctx, device, stream, nbytes, alignment, &p, err.get()),
                       "allocate", name_, err);
  if (p == nullptr) throw PluginError("[allocate] backend '" + name_ + "' returned no memory");
  return p;
}

void Backend::deallocate(int device, void* mem, std::size_t nbytes, bp_stream stream,
                         const bp_stream* users, std::size_t num_users) const noexcept {
  if (num_users == 0) {
    api_->deallocate(api_->ctx, device, stream, mem, nbytes);
    return;
  }
  // Like a caching allocator's record_stream: the memory goes back to the
  // plugin only when each stream that used it has finished what it had
  // enqueued by now, so no other stream can be handed it while they run.
  DeferredFree f{device, mem, nbytes, stream, {}};
  try {
    for (std::size_t k = 0; k < num_users; ++k) {
      bp_event e = event_create(device);
      f.events.push_back(e);
      event_record(device, e, users[k]);
    }
  } catch (...) {
    // Without an event to wait on, wait for the device instead.
    for (bp_event e : f.events) event_destroy(device, e);
    try {
      synchronize(device);
    } catch (...) {
    }
    api_->deallocate(api_->ctx, device, stream, mem, nbytes);
    return;
  }
  std::lock_guard lock(deferred_mu_);
  deferred_.push_back(std::move(f));
  num_deferred_.store(deferred_.size(), std::memory_order_relaxed);
}

void Backend::reap_deferred_frees(bool wait) const noexcept {
  std::vector<DeferredFree> done;
  {
    std::lock_guard lock(deferred_mu_);
    for (auto it = deferred_.begin(); it != deferred_.end();) {
      bool ready = true;
      for (bp_event e : it->events) {
        // The plugin's entries directly: the Backend's raise what is pending.
        detail::ErrorBuffer err;
        const bp_status st = wait ? api_->event_synchronize(api_->ctx, it->device, e, err.get())
                                  : api_->event_query(api_->ctx, it->device, e, err.get());
        if (st == BP_STATUS_NOT_READY) {
          ready = false;
        } else if (st == BP_STATUS_DEVICE_ERROR) {
          // The user stream's work is over, so the memory is free; the
          // plugin has handed its failure to us: the next synchronisation
          // raises it.
          if (pending_error_.empty())
            pending_error_ = "[synchronize] backend '" + name_ + "': " + err.message();
          has_pending_error_.store(true, std::memory_order_release);
        }
        if (!ready) break;
      }
      if (ready) {
        done.push_back(std::move(*it));
        it = deferred_.erase(it);
      } else {
        ++it;
      }
    }
    num_deferred_.store(deferred_.size(), std::memory_order_relaxed);
  }
  for (DeferredFree& f : done) {
    for (bp_event e : f.events) event_destroy(f.device, e);
    api_->deallocate(api_->ctx, f.device, f.stream, f.mem, f.nbytes);
  }
}

std::size_t Backend::deferred_frees() const {
  std::lock_guard lock(deferred_mu_);
  return deferred_.size();
}

void Backend::copy_from_host(int device, bp_stream stream, void* mem, uint64_t offset,
                             const void* host, std::size_t n) const {
  detail::ErrorBuffer err;
  detail::check_status(
      api_->copy_from_host(api_->ctx, device, stream, mem, offset, host, n, err.get()),
      "copy_from_host", name_, err);
}

void Backend::copy_to_host(int device, bp_stream stream, void* host, const void* mem,
                           uint64_t offset, std::size_t n) const {
  detail::ErrorBuffer err;
  detail::check_status(
      api_->copy_to_host(api_->ctx, device, stream, host, mem, offset, n, err.get()),
      "copy_to_host", name_, err);
}

void Backend::read_to_host(int device, bp_stream stream, void* host, const void* mem,
                           uint64_t offset, std::size_t n) const {
  copy_to_host(device, stream, host, mem, offset, n);
  stream_synchronize(device, stream);
}

void Backend::copy_on_device(bp_stream stream, int dst_device, void* dst, uint64_t dst_offset,
                             int src_device, const void* src, uint64_t src_offset,
                             std::size_t n) const {
  detail::ErrorBuffer err;
  detail::check_status(api_->copy_on_device(api_->ctx, stream, dst_device, dst, dst_offset,
                                            src_device, src, src_offset, n, err.get()),
                       "copy_on_device", name_, err);
}

void Backend::memset(int device, bp_stream stream, void* mem, uint64_t offset, int value,
                     std::size_t n) const {
  detail::ErrorBuffer err;
  detail::check_status(
      api_->memset(api_->ctx, device, stream, mem, offset, value, n, err.get()), "memset",
      name_, err);
}

void* Backend::host_pointer(int device, const void* mem, uint64_t offset) const {
  if (api_->host_pointer == nullptr)
    throw ValueError("[host_pointer] backend '" + name_ +
                     "' gives no host address for its memory (it is not host addressable)");
  void* p = nullptr;
  detail::ErrorBuffer err;
  detail::check_status(api_->host_pointer(api_->ctx, device, mem, offset, &p, err.get()),
                       "host_pointer", name_, err);
  return p;
}

void* const* Backend::try_acquire_staging() const {
  if (api_->host_alloc == nullptr || api_->host_free == nullptr) return nullptr;
  std::lock_guard lock(staging_mu_);
  if (staging_busy_) return nullptr;
  for (void*& b : staging_) {
    if (b != nullptr) continue;
    detail::ErrorBuffer err;
    if (api_->host_alloc(api_->ctx, kStagingChunk, &b, err.get()) != BP_STATUS_OK || !b) {
      b = nullptr;
      return nullptr;  // pageable memory instead
    }
  }
  staging_busy_ = true;
  return staging_;
}

void Backend::release_staging() const {
  std::lock_guard lock(staging_mu_);
  staging_busy_ = false;
}

bp_stream Backend::create_stream(int device) {
  BP_CHECK(device >= 0 && device < device_count_, "[stream] backend '", name_,
           "' has no device ", device);
  bp_stream s = nullptr;
  detail::ErrorBuffer err;
  detail::check_status(api_->stream_create(api_->ctx, device, &s, err.get()), "stream_create",
                       name_, err);
  if (s == nullptr)
    throw PluginError("[stream_create] backend '" + name_ + "' returned no stream");
  std::lock_guard lock(streams_mu_);
  streams_.emplace_back(device, s);
  return s;
}

void Backend::raise_pending_error() const {
  if (!has_pending_error_.load(std::memory_order_acquire)) return;
  std::string m;
  {
    std::lock_guard lock(deferred_mu_);
    m.swap(pending_error_);
    has_pending_error_.store(false, std::memory_order_relaxed);
  }
  if (!m.empty()) throw DeviceError(m);
}

void Backend::stream_synchronize(int device, bp_stream stream) const {
  detail::ErrorBuffer err;
  detail::check_status(api_->stream_synchronize(api_->ctx, device, stream, err.get()),
                       "synchronize", name_, err);
  raise_pending_error();
}

bp_event Backend::event_create(int device) const {
  bp_event e = nullptr;
  detail::ErrorBuffer err;
  detail::check_status(api_->event_create(api_->ctx, device, &e, err.get()), "event_create",
                       name_, err);
  if (e == nullptr) throw PluginError("[event_create] backend '" + name_ + "' returned no event");
  return e;
}

void Backend::event_destroy(int device, bp_event event) const noexcept {
  api_->event_destroy(api_->ctx, device, event);
}

void Backend::event_record(int device, bp_event event, bp_stream stream) const {
  detail::ErrorBuffer err;
  detail::check_status(api_->event_record(api_->ctx, device, event, stream, err.get()),
                       "event_record", name_, err);
}

void Backend::stream_wait_event(int device, bp_stream stream, bp_event event) const {
  detail::ErrorBuffer err;
  detail::check_status(api_->stream_wait_event(api_->ctx, device, stream, event, err.get()),
                       "stream_wait_event", name_, err);
}

bool Backend::event_query(int device, bp_event event) const {
  detail::ErrorBuffer err;
  const bp_status st = api_->event_query(api_->ctx, device, event, err.get());
  if (st == BP_STATUS_NOT_READY) return false;
  detail::check_status(st, "event_query", name_, err);
  raise_pending_error();
  return true;
}

void Backend::event_synchronize(int device, bp_event event) const {
  detail::ErrorBuffer err;
  detail::check_status(api_->event_synchronize(api_->ctx, device, event, err.get()),
                       "synchronize", name_, err);
  raise_pending_error();
}

void Backend::synchronize(int device) const {
  detail::ErrorBuffer err;
  const bp_status st = api_->synchronize(api_->ctx, device, err.get());
  if (num_deferred_.load(std::memory_order_relaxed) != 0) reap_deferred_frees(false);
  detail::check_status(st, "synchronize", name_, err);
  raise_pending_error();
}

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
  if (!looks_like_path(name_or_path)) {
    if (Backend* b = find(name_or_path)) return *b;
    BP_CHECK_T(PluginError, detail::is_plain_name(name_or_path), "[plugin] '", name_or_path,
               "' is neither a backend name ([a-z0-9_]+) nor a path to a .so file");
    return load_file(locate(name_or_path));
  }
  return load_file(std::string(name_or_path));
}

Backend& PluginLoader::load_file(const std::string& path_in) {
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(fs::absolute(path_in, ec), ec);
  const std::string path = abs.empty() ? path_in : abs.string();
  for (auto& b : backends_)
    if (b->path() == path) return *b;

  auto reject = [&](const std::string& why) -> PluginError {
    return PluginError("[plugin] " + path + " rejected: " + why);
  };
  if (!fs::exists(path, ec)) throw reject("no such file");

  auto lib = std::make_unique<Backend::Library>();
  try {
    lib->lib.load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    throw reject(std::string("could not be loaded: ") + e.what());
  }
  // The same file under another path (a hard link, a second mount): the
  // dynamic loader handed back the library already open, and the backend
  // made from it is the answer. A second bp_plugin_init runs only for a
  // library whose backend was unloaded while its tensors live.
  for (auto& b : backends_)
    if (b->made_from(*lib)) return *b;
  if (!lib->lib.has(BP_PLUGIN_ENTRY_SYMBOL))
    throw reject(std::string("entry symbol '") + BP_PLUGIN_ENTRY_SYMBOL +
                 "' is missing; the file exports: " + exported_symbols(path) +
                 ". Define it with BP_SDK_PLUGIN(YourClass), or extern \"C\" BP_PLUGIN_EXPORT.");
  auto init = lib->lib.get<bp_status(const bp_host*, const bp_plugin**, bp_error*)>(
      BP_PLUGIN_ENTRY_SYMBOL);

  bp_host host{sizeof(bp_host), BP_ABI_MAJOR, BP_ABI_MINOR, BACKPLANE_VERSION};
  const bp_plugin* api = nullptr;
  detail::ErrorBuffer err;
  bp_status st = init(&host, &api, err.get());
  if (st != BP_STATUS_OK)
    throw reject(std::string(BP_PLUGIN_ENTRY_SYMBOL) + " failed: " + err.message());
  if (api == nullptr) throw reject(std::string(BP_PLUGIN_ENTRY_SYMBOL) + " returned no plugin");
  if (api->abi_major != BP_ABI_MAJOR) {
    std::ostringstream os;
    os << "ABI major version " << api->abi_major << "." << api->abi_minor
       << " is not this core's " << BP_ABI_MAJOR << "." << BP_ABI_MINOR
       << "; rebuild the plugin against this SDK";
    throw reject(os.str());
  }
  // From here on the table's layout is ours: release it on every rejection.
  auto destroy_and_reject = [&](const std::string& why) -> PluginError {
    if (api->struct_size >= kMinPluginSize && api->destroy) api->destroy(api->ctx);
    return reject(why);
  };
  // A newer minor is accepted: its table only appends fields, which this
  // core does not read, and it learnt this core's minor from bp_host (a
  // plugin that needs a newer core refuses in its entry point).
  if (api->struct_size < kMinPluginSize)
    throw reject("its bp_plugin table is " + std::to_string(api->struct_size) +
                 " bytes, smaller than ABI 2.0's " + std::to_string(kMinPluginSize));
  const char* missing = nullptr;
  if (!api->device_count) missing = "device_count";
  else if (!api->device_props) missing = "device_props";
  else if (!api->register_kernels) missing = "register_kernels";
  else if (!api->allocate) missing = "allocate";
  else if (!api->deallocate) missing = "deallocate";
  else if (!api->copy_from_host) missing = "copy_from_host";
  else if (!api->copy_to_host) missing = "copy_to_host";
  else if (!api->copy_on_device) missing = "copy_on_device";
  else if (!api->memset) missing = "memset";
  else if (!api->stream_create) missing = "stream_create";
  else if (!api->stream_destroy) missing = "stream_destroy";
  else if (!api->stream_synchronize) missing = "stream_synchronize";
  else if (!api->event_create) missing = "event_create";
  else if (!api->event_destroy) missing = "event_destroy";
  else if (!api->event_record) missing = "event_record";
  else if (!api->stream_wait_event) missing = "stream_wait_event";
  else if (!api->event_query) missing = "event_query";
  else if (!api->event_synchronize) missing = "event_synchronize";
  else if (!api->synchronize) missing = "synchronize";
  if (missing) throw destroy_and_reject(std::string("required function '") + missing + "' is NULL");
  const std::string name = api->name ? api->name : "";
  if (!detail::is_plain_name(name))
    throw destroy_and_reject("its name '" + name + "' is not a valid backend name ([a-z0-9_]+)");
  if (Backend* other = find(name))
    throw destroy_and_reject("a plugin named '" + name + "' is already loaded from " +
                             other->path());
  const int slot = free_slot();
  if (slot < 0)
    throw destroy_and_reject("too many backends loaded (at most " +
                             std::to_string(kMaxBackends) +
                             " at once, counting unloaded ones whose tensors still live)");
  // The slot's next generation: an id kept from an earlier backend in this
  // slot names nothing (int16 Device ids wrap after 1024 generations).
  generation_[slot] = static_cast<uint16_t>((generation_[slot] + 1) % 1024);
  const int id = slot + kMaxBackends * generation_[slot];
  RegistrarState state{id, name};
  bp_registrar registrar{sizeof(bp_registrar), &state, &register_kernel_c,
                         &register_named_kernel_c};
  detail::ErrorBuffer reg_err;
  if (api->register_kernels(api->ctx, &registrar, reg_err.get()) != BP_STATUS_OK) {
    remove_kernels(id);
    throw destroy_and_reject("registering kernels failed: " + reg_err.message());
  }
  auto backend = make_intrusive<Backend>(id, std::move(lib), api, path);
  backends_.push_back(backend);
  slots_[slot] = backend;
  by_id_[slot].store(backend.get(), std::memory_order_release);
  return *backend;
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
      c.name = fname.substr(std::strlen(kFilePrefix),
                            fname.size() - std::strlen(kFilePrefix) - 3);
      try {
        Backend& b = load_file(p);
        if (b.path() == p) {
          c.loaded = true;
          c.name = b.name();
          c.backend = IntrusivePtr<Backend>(&b);
        } else {  // another path to a library loaded from b.path(): listed there
          c.name = b.name();
          c.reason = "the same file as " + b.path() + ", which is loaded";
        }
      } catch (const PluginError& e) {
        c.reason = e.what();
        const std::string prefix = "[plugin] " + p + " rejected: ";
        if (c.reason.rfind(prefix, 0) == 0) c.reason = c.reason.substr(prefix.size());
      }
      out.push_back(std::move(c));
    }
  }
  // Backends loaded by path from elsewhere (--backend path/to/x.so).
  for (const auto& b : backends_)
    if (std::find(seen.begin(), seen.end(), b->path()) == seen.end())
      out.push_back(PluginCandidate{b->path(), b->name(), true, "", b});
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

// --- default backend and device parsing -------------------------------------------

namespace {
std::mutex g_default_mu;
std::string g_default_spec = kDefaultBackend;
std::atomic<int> g_default_id{-1};
}  // namespace

void forget_default_backend() { g_default_id.store(-1, std::memory_order_release); }

void set_default_backend(std::string_view name_or_path) {
  std::lock_guard lock(g_default_mu);
  g_default_spec = std::string(name_or_path);
  g_default_id.store(-1, std::memory_order_release);
}

namespace {
std::mutex g_reference_mu;
std::optional<std::string> g_reference_spec;  // unset: the environment, else the default
}  // namespace

void set_reference_backend(std::string_view name_or_path) {
  std::lock_guard lock(g_reference_mu);
  if (name_or_path.empty())
    g_reference_spec.reset();
  else
    g_reference_spec = std::string(name_or_path);
}

std::string reference_backend() {
  std::lock_guard lock(g_reference_mu);
  if (g_reference_spec) return *g_reference_spec;
  const char* env = std::getenv(kReferenceEnv);
  return env != nullptr && *env != '\0' ? env : kDefaultBackend;
}

Device default_device() {
  int id = g_default_id.load(std::memory_order_acquire);
  if (__builtin_expect(id >= 0, 1)) return Device{static_cast<int16_t>(id), 0};
  std::lock_guard lock(g_default_mu);
  Backend& b = PluginLoader::instance().load(g_default_spec);
  g_default_id.store(b.id(), std::memory_order_release);
  return Device{static_cast<int16_t>(b.id()), 0};
}

Device device(std::string_view spec) {
  int16_t index = 0;
  std::string_view name = spec;
  if (!looks_like_path(spec)) {
    if (auto colon = spec.rfind(':'); colon != std::string_view::npos) {
      name = spec.substr(0, colon);
      std::string idx(spec.substr(colon + 1));
      char* end = nullptr;
      long v = std::strtol(idx.c_str(), &end, 10);
      BP_CHECK(!idx.empty() && *end == '\0' && v >= 0 && v < 32768, "[device] '", spec,
               "' has an invalid device index; expected NAME or NAME:INDEX");
      index = static_cast<int16_t>(v);
    }
  }
  Backend& b = PluginLoader::instance().load(name);
  BP_CHECK_INDEX(index < b.device_count(), "[device] backend '", b.name(), "' has no device ",
                 index, " (it has ", b.device_count(), ")",
                 b.device_count() == 0 ? ": " + b.no_device_reason() : std::string());
  return Device{static_cast<int16_t>(b.id()), index};
}

std::string to_string(Device d) {
  const IntrusivePtr<Backend> b = PluginLoader::instance().acquire(d.backend);
  return (b ? b->name() : "backend#" + std::to_string(d.backend)) + ":" +
         std::to_string(d.index);
}

std::ostream& operator<<(std::ostream& os, Device d) { return os << to_string(d); }

}  // namespace bp
