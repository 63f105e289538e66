// A loaded backend plugin, and the loader that finds, opens and vets them.
#pragma once

#include <backplane/device.h>
#include <backplane/error.h>
#include <backplane/intrusive_ptr.h>
#include <backplane/plugin.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

namespace bp {

// Backends loaded at once (live ones, and unloaded ones whose tensors still
// live). A backend id names a slot (id % kMaxBackends) and that slot's
// generation, so a slot is reused once its backend is gone, and a stale id
// (a Device value kept across an unload) names nothing.
inline constexpr int kMaxBackends = 32;
static_assert((kMaxBackends & (kMaxBackends - 1)) == 0, "slot = id & (kMaxBackends - 1)");
inline constexpr int backend_slot(int id) { return id & (kMaxBackends - 1); }
inline constexpr const char* kDefaultBackend = "cpu_onednn";

// Most devices one plugin may report.
inline constexpr int kMaxDevicesPerBackend = 1024;

// What the loader read from a plugin when it loaded it, each value checked
// and copied (strings bounded, counts in range).
struct PluginFacts {
  std::string name, version;
  int device_count = 0;
  std::string no_device_reason;        // when device_count == 0
  std::vector<bp_device_props> props;  // one per device, names NUL-terminated
  std::vector<bp_tolerance> tolerances;
  // The options the plugin takes (ABI 2.1): key and one-line description.
  std::vector<std::pair<std::string, std::string>> options;
};

// Options for a plugin's entry point (--backend-option KEY=VALUE), in order.
using BackendOptions = std::vector<std::pair<std::string, std::string>>;

// "KEY=VALUE" as a pair; ValueError unless KEY is [a-z0-9_]+ and '=' is there.
std::pair<std::string, std::string> parse_backend_option(std::string_view text);

// One plugin library, opened and accepted. Storages and the loader hold it
// by reference; the library is unloaded when the last reference goes.
class Backend : public RefCounted {
 public:
  struct Library;  // the Boost.DLL handle, kept out of this header
  Backend(int id, std::unique_ptr<Library> lib, const bp_plugin* api, std::string path,
          PluginFacts facts);
  ~Backend() override;

  int id() const { return id_; }
  const std::string& name() const { return name_; }
  // The name, unique among the backends alive: a file loaded by path whose
  // plugin has the name of one already loaded is "NAME#2" (then #3, ...).
  // Devices print with it (to_string(Device): "dup#2:0").
  const std::string& label() const { return label_; }
  const std::string& version() const { return version_; }
  const std::string& path() const { return path_; }
  uint32_t abi_major() const { return api_->abi_major; }
  uint32_t abi_minor() const { return api_->abi_minor; }
  int32_t dl_device_type() const { return api_->dl_device_type; }
  const bp_plugin& api() const { return *api_; }
  // True when `lib` is the library this backend was made from: the dynamic
  // loader hands back one handle per file, whatever path opened it.
  bool made_from(const Library& lib) const;

  // Devices, as counted when the plugin was loaded.
  int device_count() const { return device_count_; }
  // Why there is no device (the plugin's words) when device_count() == 0.
  const std::string& no_device_reason() const { return no_device_reason_; }
  bp_device_props device_props(int device) const;
  bool host_addressable(int device) const;
  // Looser conformance tolerances the plugin declares (empty when none).
  const std::vector<bp_tolerance>& tolerances() const { return tolerances_; }
  // The options the plugin takes (--backend-option), key and description.
  const std::vector<std::pair<std::string, std::string>>& options() const { return options_; }
  // Allocator statistics, if the plugin keeps them.
  std::optional<bp_memory_stats> memory_stats(int device) const;
  // Gives the free blocks the plugin's allocator keeps for reuse on
  // `device` back to the system (empty_cache, ABI 2.9, optional); false
  // when the plugin has no such cache. bp::empty_cache(Device) calls it.
  bool empty_cache(int device) const;
  // Whether the plugin wraps memory it did not allocate (import_memory,
  // ABI 2.10, optional): what bp::from_dlpack needs.
  bool imports_memory() const;
  // A handle for the first `nbytes` of `external`, memory of this backend's
  // DLPack device type on `device` (ValueError when the plugin imports
  // nothing; the plugin's error when it refuses the memory).
  void* import_memory(int device, void* external, std::size_t nbytes) const;
  // Lets go of an imported handle: waits for the work `stream` and `users`
  // enqueued on it (a failure found there is raised by the next
  // synchronisation), then tells the plugin.
  void release_import(int device, void* mem, bp_stream stream, const bp_stream* users,
                      std::size_t num_users) const noexcept;

  // Memory, through the plugin. Each throws a typed error on failure.
  // Handles are the plugin's (never dereferenced or offset here); a null
  // stream is the device's default stream.
  // With guarded allocations on (backplane/debug.h), `lead`, when given,
  // receives the bytes of guard placed before the memory the caller uses
  // (it then addresses it at that byte offset of the handle); without
  // `lead` the guard is only after the end.
  void* allocate(int device, std::size_t nbytes, bp_stream stream = nullptr,
                 std::size_t* lead = nullptr) const;
  // Frees `mem` (allocated for `stream`) in stream order. When other
  // streams used it (`users`), the plugin is told only once the work they
  // had enqueued has finished: until then it waits, with an event per user
  // stream, in a list that allocate() and synchronize() go through.
  void deallocate(int device, void* mem, std::size_t nbytes, bp_stream stream,
                  const bp_stream* users = nullptr, std::size_t num_users = 0) const noexcept;
  void copy_from_host(int device, bp_stream stream, void* mem, uint64_t offset, const void* host,
                      std::size_t n) const;
  // Enqueues a copy to host memory; `host` holds the bytes once `stream`
  // has reached it (read_to_host waits for that).
  void copy_to_host(int device, bp_stream stream, void* host, const void* mem, uint64_t offset,
                    std::size_t n) const;
  void read_to_host(int device, bp_stream stream, void* host, const void* mem, uint64_t offset,
                    std::size_t n) const;
  void copy_on_device(bp_stream stream, int dst_device, void* dst, uint64_t dst_offset,
                      int src_device, const void* src, uint64_t src_offset, std::size_t n) const;
  void memset(int device, bp_stream stream, void* mem, uint64_t offset, int value,
              std::size_t n) const;
  // The host address of `mem` + `offset` on a host-addressable device.
  void* host_pointer(int device, const void* mem, uint64_t offset) const;
  // Page-locked host memory for staging, when the plugin offers it (ABI
  // 2.0's host_alloc): two buffers of kStagingChunk bytes, made on first
  // use and kept; one copy at a time holds them (nullptr when another does
  // or the plugin has none). release_staging gives them back.
  static constexpr std::size_t kStagingChunk = std::size_t{2} << 20;
  void* const* try_acquire_staging() const;
  void release_staging() const;

  // Streams made here live as long as the backend (destroyed with it).
  bp_stream create_stream(int device);
  void stream_synchronize(int device, bp_stream stream) const;
  bp_event event_create(int device) const;
  void event_destroy(int device, bp_event event) const noexcept;
  void event_record(int device, bp_event event, bp_stream stream) const;
  void stream_wait_event(int device, bp_stream stream, bp_event event) const;
  bool event_query(int device, bp_event event) const;
  // Whether `stream` has run all its work; nullopt when the plugin has no
  // stream_query (ABI 2.1, optional).
  std::optional<bool> stream_query(int device, bp_stream stream) const;
  void event_synchronize(int device, bp_event event) const;
  // Whether the plugin times events with the device's own clock
  // (event_elapsed, ABI 2.4, optional).
  bool has_event_timing() const;
  // The device time between two reached marks, in milliseconds.
  double event_elapsed_ms(int device, bp_event start, bp_event end) const;
  // Waits for every stream of `device`; frees what waited for them.
  void synchronize(int device) const;
  // Frees deferred memory whose streams are done; with `wait`, waits for all.
  void reap_deferred_frees(bool wait) const noexcept;
  std::size_t deferred_frees() const;

 private:
  friend class PluginLoader;  // sets label_ before anyone sees the backend
  struct DeferredFree {
    int device;
    void* mem;
    std::size_t nbytes;
    bp_stream stream;
    std::vector<bp_event> events;  // recorded on each user stream
  };

  std::unique_ptr<Library> lib_;  // declared first: unloaded last
  const bp_plugin* api_;
  int id_;
  std::string name_, version_, path_, label_;
  int device_count_ = 0;
  std::string no_device_reason_;
  std::vector<bp_device_props> props_;
  std::vector<bp_tolerance> tolerances_;
  std::vector<std::pair<std::string, std::string>> options_;
  mutable std::mutex streams_mu_;
  std::vector<std::pair<int, bp_stream>> streams_;  // made by create_stream
  mutable std::mutex deferred_mu_;
  mutable std::vector<DeferredFree> deferred_;
  mutable std::mutex staging_mu_;
  mutable bool staging_busy_ = false;
  mutable void* staging_[2] = {nullptr, nullptr};
  mutable std::atomic<std::size_t> num_deferred_{0};
  // A device failure a deferred free's event reported (which clears it in
  // the plugin): raised by the next synchronisation instead.
  mutable std::string pending_error_;
  mutable std::atomic<bool> has_pending_error_{false};
  // Throws the kept failure, if there is one (every synchronisation ends with it).
  void raise_pending_error() const;
  // Keeps a failure found where it cannot be raised (the first one kept
  // wins), for the next synchronisation to raise; deferred_mu_ held.
  void keep_pending_error_locked(std::string message) const noexcept;
  // For a guarded allocation (backplane/debug.h): reads its guard back,
  // records a change, and returns the size to free.
  std::size_t check_guard(int device, void* mem, std::size_t nbytes,
                          bp_stream stream) const noexcept;
};

// What the loader saw for one candidate file (for `backplane devices`).
struct PluginCandidate {
  std::string path;
  std::string name;  // from the plugin, or guessed from the file name
  bool loaded = false;
  std::string reason;             // why it was rejected, when !loaded
  IntrusivePtr<Backend> backend;  // when loaded
  // When not loaded: refused (the plugin's answers broke a rule), or what
  // became of the probe process: crashed, hung, exited.
  PluginVerdict verdict = PluginVerdict::Refused;
  std::string probe;  // how the file was vetted before loading (see ProbeMode)
};

// Whether a plugin file is first loaded in a child process (a probe) before
// the host process opens it: a plugin that crashes, hangs or exits while
// loading then takes the probe down, not the host. A passed probe is cached
// by the file's content (sha256), so a file is probed once. Set with
// PluginLoader::set_probe_mode or BACKPLANE_PROBE=on|off|fresh; on by default.
enum class ProbeMode {
  Off,    // load in the host process directly
  On,     // probe first; use a cached verdict when there is one
  Fresh,  // probe first, ignoring (and replacing) cached verdicts
};

// Finds, opens and vets plugins. Search order for a name: the --plugin-path
// folders, BACKPLANE_PLUGIN_PATH, the folder of the running program, the
// plugin folder beside libbackplane, the install's plugin folder.
class PluginLoader {
 public:
  static PluginLoader& instance();

  // Adds a folder searched before every other (--plugin-path), in order.
  void add_search_path(std::string dir);
  // The folders searched, in order, existing or not.
  std::vector<std::string> search_dirs() const;

  // Loads a backend by name ("cpu_onednn": libbackplane_cpu_onednn.so in
  // the search folders) or by path (anything with a '/' or ending in .so).
  // Returns the already loaded one for a known name. Throws PluginError
  // saying why (not found: the folders searched; or the rejection reason).
  Backend& load(std::string_view name_or_path);
  // A loaded backend by name, or nullptr. When two files of one name are
  // loaded (each given by path), the first one loaded.
  Backend* find(std::string_view name) const;
  // The file a name would load: libbackplane_NAME.so in the first search
  // folder that has it. Throws PluginError naming the folders searched.
  std::string locate(std::string_view name) const;
  // A loaded backend by id (O(1)); nullptr when none. The pointer stays
  // valid while the backend is loaded or a tensor of it lives; to keep one
  // across a concurrent unload, use acquire().
  Backend* by_id(int id) const noexcept {
    if (id < 0) return nullptr;
    Backend* b = by_id_[backend_slot(id)].load(std::memory_order_acquire);
    return b && b->id() == id ? b : nullptr;
  }
  // The same, with a reference that keeps it alive (safe against unload on
  // another thread); null when the id names no loaded backend.
  IntrusivePtr<Backend> acquire(int id) const;
  // Every loaded backend.
  std::vector<Backend*> loaded() const;
  // Opens every candidate file in the search folders (libbackplane_*.so),
  // loading those not loaded yet, and reports each one.
  std::vector<PluginCandidate> discover();
  // Forgets a backend (DV-4): its name and id no longer find it, so no new
  // tensor is made on it. Tensors that still live on it keep working (their
  // memory keeps the library loaded, its kernels stay registered); when the
  // last one goes the plugin is destroyed and its slot is free for reuse.
  // Safe while other threads run ops on its tensors.
  void unload(std::string_view name);

  // Options handed to the entry point of the backend loaded as
  // `name_or_path` (as given to load(); a later key replaces an earlier
  // one). The plugin must list each key it takes (bp_plugin.options), else
  // the load fails naming the key and the ones it takes. Set before loading.
  void set_backend_options(std::string name_or_path, BackendOptions options);
  BackendOptions backend_options(std::string_view name_or_path) const;
  // How plugin files are vetted before they are loaded (see ProbeMode).
  void set_probe_mode(ProbeMode mode);
  ProbeMode probe_mode() const;

 private:
  PluginLoader() = default;
  // Loads one file in its phases: open (vetted by the probe first), init,
  // validate (host/load_phases.h), register.
  Backend& load_file(const std::string& path, const BackendOptions& options, bool by_path);
  // The probe's verdict on the file, noted; throws when it failed.
  void probe_first(const std::string& path, const BackendOptions& options);
  // The backend made from an initialised and validated plugin: its label,
  // slot and id, its kernels registered. Destroys the plugin when it fails.
  Backend& register_backend(std::unique_ptr<Backend::Library> lib, const bp_plugin* api,
                            const std::string& path, PluginFacts facts, bool by_path);
  // "NAME#2", "NAME#3", ...: the first no backend alive has.
  std::string unused_label(const std::string& name) const;
  // A free slot, reclaiming those of unloaded backends nothing uses; -1 if none.
  int free_slot();

  mutable std::recursive_mutex mu_;  // loading, unloading, the lists
  // Taken shared by acquire(), exclusively to destroy an unloaded backend,
  // so that no acquire() can pick up a backend being destroyed.
  mutable std::shared_mutex slots_mu_;
  std::vector<std::string> extra_dirs_;
  std::vector<std::pair<std::string, BackendOptions>> options_;   // by name or path as given
  std::optional<ProbeMode> probe_mode_;                           // unset: BACKPLANE_PROBE, else On
  std::vector<std::pair<std::string, std::string>> probe_notes_;  // path, how it was vetted
  std::vector<IntrusivePtr<Backend>> backends_;                   // loaded, by name
  IntrusivePtr<Backend> slots_[kMaxBackends];                     // loaded or unloaded-but-used
  uint16_t generation_[kMaxBackends] = {};
  std::atomic<Backend*> by_id_[kMaxBackends] = {};
};

// A plugin built with AddressSanitizer (-fsanitize=address) needs the ASan
// runtime loaded first in the process, before any other library
// (docs/conformance.md, "Plugins built with AddressSanitizer").
struct AsanRuntime {
  std::string needed;  // what the file names: "libasan.so.8" (empty: it imports __asan_* only)
  std::string path;    // the runtime to preload; empty when none was found
  std::string found;   // where `path` was found, or where it was looked for
};
// The ASan runtime `plugin_path` needs; nothing for a file not built with
// ASan (or not an ELF file).
std::optional<AsanRuntime> asan_runtime_needed(const std::string& plugin_path);
// Whether an ASan runtime is in this process (an ASan build, or preloaded).
bool asan_runtime_loaded();
// ASAN_OPTIONS for a host that is not instrumented: no leak check (the
// host's allocations are not tracked), and an allocation too large for ASan
// fails as it would without it (the suite's size limits ask for one).
inline constexpr const char* kAsanOptions = "detect_leaks=0:allocator_may_return_null=1";
// What to run a program with to load `plugin_path`:
// "LD_PRELOAD=/usr/lib/.../libasan.so.8 ASAN_OPTIONS=detect_leaks=0:...".
std::string asan_environment(const AsanRuntime& runtime);

// The sha256 of a file's content as 64 hex digits ("" if it cannot be read):
// what ties a plugin's probe verdict, and a conformance report, to a binary.
std::string file_sha256(const std::string& path);

// The default backend used when TensorOptions name no device. Set by
// --backend (see options.h) or set_default_backend; cpu_onednn otherwise.
void set_default_backend(std::string_view name_or_path);
Device default_device();

// The allocator statistics of `device`'s backend (nullopt when it keeps
// none), and a way to give its cached free blocks back to the system, as
// torch.cuda.memory_stats and torch.cuda.empty_cache: false when the
// backend's allocator keeps no cache.
std::optional<bp_memory_stats> memory_stats(Device device);
bool empty_cache(Device device);

// The reference backend: the one ops run on when the selected backend lacks
// them (--fallback warn|allow), and the one `backplane conformance` and
// `backplane fuzz` compare with unless told otherwise. Chosen by --reference
// (options.h) or set_reference_backend, else by the environment variable
// BACKPLANE_REFERENCE, else kDefaultBackend. A name or a path, as --backend;
// it is loaded when first used, and must address host memory to serve as
// the fallback. set_reference_backend("") goes back to the environment.
inline constexpr const char* kReferenceEnv = "BACKPLANE_REFERENCE";
void set_reference_backend(std::string_view name_or_path);
std::string reference_backend();

}  // namespace bp
