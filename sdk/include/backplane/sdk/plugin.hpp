// Header-only C++ layer over the plugin ABI.
//
// An author derives from bp::sdk::Plugin, overrides what the device needs,
// writes kernels as plain functions `void k(const bp::sdk::KernelCall&)`,
// registers them in register_kernels(), and exports the class with
// BP_SDK_PLUGIN(MyPlugin). Exceptions never cross the boundary: every entry
// point catches them and returns a status with the message.
//
// This header is the whole layer: the Plugin base class and BP_SDK_PLUGIN
// here, with kernel_call.hpp (KernelCall and the kernel entries),
// registrar.hpp (Registrar, BP_ORIGIN) and host_buffers.hpp (HostBuffers).
#pragma once

#include <backplane/plugin.h>

#include <backplane/sdk/host_buffers.hpp>
#include <backplane/sdk/kernel_call.hpp>
#include <backplane/sdk/op_scope.hpp>
#include <backplane/sdk/options.hpp>
#include <backplane/sdk/registrar.hpp>
#include <backplane/sdk/tensor.hpp>
#include <backplane/sdk/widen.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <initializer_list>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace bp::sdk {

// Base class of a plugin. Host memory by default: override for devices.
class Plugin {
 public:
  virtual ~Plugin() = default;

  virtual const char* name() const = 0;
  virtual const char* version() const { return "0.1.0"; }
  virtual int32_t dl_device_type() const { return 1; /* kDLCPU */ }

  // Devices. Return 0 and fill `reason` when none is usable.
  virtual int32_t device_count(std::string& reason) const {
    (void)reason;
    return 1;
  }
  virtual void device_props(int32_t device, bp_device_props& props) const {
    (void)device;
    std::snprintf(props.name, sizeof(props.name), "%s", "host memory");
    props.host_addressable = 1;
  }

  virtual void register_kernels(Registrar& registrar) = 0;

  // Memory: 64-byte aligned host memory unless overridden; handles are
  // host pointers. Streams: unless overridden, work runs before each call
  // returns (a host device), so streams and events are tokens and every
  // synchronisation returns at once.
  virtual void* allocate(int32_t device, bp_stream stream, std::size_t nbytes,
                         std::size_t alignment) {
    (void)device;
    (void)stream;
    std::size_t a = alignment < 64 ? 64 : alignment;
    std::size_t n = (nbytes + a - 1) / a * a;
    void* p = std::aligned_alloc(a, n);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  virtual void deallocate(int32_t device, bp_stream stream, void* mem, std::size_t nbytes) {
    (void)device;
    (void)stream;
    (void)nbytes;
    std::free(mem);
  }
  virtual void copy_from_host(int32_t device, bp_stream stream, void* mem, uint64_t offset,
                              const void* host, std::size_t n) {
    (void)device;
    (void)stream;
    std::memcpy(static_cast<char*>(mem) + offset, host, n);
  }
  virtual void copy_to_host(int32_t device, bp_stream stream, void* host, const void* mem,
                            uint64_t offset, std::size_t n) {
    (void)device;
    (void)stream;
    std::memcpy(host, static_cast<const char*>(mem) + offset, n);
  }
  virtual void copy_on_device(bp_stream stream, int32_t dst_device, void* dst, uint64_t dst_offset,
                              int32_t src_device, const void* src, uint64_t src_offset,
                              std::size_t n) {
    (void)stream;
    (void)dst_device;
    (void)src_device;
    std::memmove(static_cast<char*>(dst) + dst_offset, static_cast<const char*>(src) + src_offset,
                 n);
  }
  virtual void memset(int32_t device, bp_stream stream, void* mem, uint64_t offset, int32_t value,
                      std::size_t n) {
    (void)device;
    (void)stream;
    std::memset(static_cast<char*>(mem) + offset, value, n);
  }
  // Page-locked host memory for the core's staging buffers (optional): a
  // device whose copies from such memory run asynchronously returns true
  // from has_host_alloc and overrides host_alloc and host_free.
  virtual bool has_host_alloc() const { return false; }
  virtual void* host_alloc(std::size_t nbytes) {
    (void)nbytes;
    throw Unsupported("this plugin has no page-locked host memory");
  }
  virtual void host_free(void* host) { (void)host; }

  // For devices whose props say host_addressable.
  virtual void* host_pointer(int32_t device, const void* mem, uint64_t offset) {
    (void)device;
    return const_cast<char*>(static_cast<const char*>(mem)) + offset;
  }

  virtual bp_stream stream_create(int32_t device) {
    (void)device;
    return reinterpret_cast<bp_stream>(new char('s'));
  }
  virtual void stream_destroy(int32_t device, bp_stream stream) {
    (void)device;
    delete reinterpret_cast<char*>(stream);
  }
  virtual void stream_synchronize(int32_t device, bp_stream stream) {
    (void)device;
    (void)stream;
  }
  virtual bp_event event_create(int32_t device) {
    (void)device;
    return reinterpret_cast<bp_event>(new char('e'));
  }
  virtual void event_destroy(int32_t device, bp_event event) {
    (void)device;
    delete reinterpret_cast<char*>(event);
  }
  virtual void event_record(int32_t device, bp_event event, bp_stream stream) {
    (void)device;
    (void)event;
    (void)stream;
  }
  virtual void stream_wait_event(int32_t device, bp_stream stream, bp_event event) {
    (void)device;
    (void)stream;
    (void)event;
  }
  // True once the event's mark is reached.
  // Whether the stream has run all its work (stream_query); a device whose
  // work runs before each call returns has none left.
  virtual bool stream_query(int32_t device, bp_stream stream) {
    (void)device;
    (void)stream;
    return true;
  }
  virtual bool event_query(int32_t device, bp_event event) {
    (void)device;
    (void)event;
    return true;
  }
  virtual void event_synchronize(int32_t device, bp_event event) {
    (void)device;
    (void)event;
  }
  virtual void synchronize(int32_t device) { (void)device; }
  // The device time between two events' marks in milliseconds, or nullopt
  // while either is pending (event_elapsed, ABI 2.4); only called when
  // has_event_timing() says the device has a clock of its own.
  virtual bool has_event_timing() const { return false; }
  virtual std::optional<double> event_elapsed(int32_t device, bp_event start, bp_event end) {
    (void)device;
    (void)start;
    (void)end;
    throw Unsupported("this plugin does not time events");
  }
  virtual void memory_stats(int32_t device, bp_memory_stats& stats) {
    (void)device;
    (void)stats;
    throw Unsupported("memory statistics are not tracked by this plugin");
  }
  // Gives the allocator's cached free blocks of `device` back to the system
  // (empty_cache, ABI 2.9); only called when has_memory_cache() says the
  // allocator keeps such blocks.
  virtual bool has_memory_cache() const { return false; }
  virtual void empty_cache(int32_t device) { (void)device; }
  // Memory this plugin did not allocate (import_memory, ABI 2.10): a plugin
  // that returns true from has_memory_import wraps `external` (memory of
  // its dl_device_type, as DLPack's data gives it) in a handle the core uses
  // like allocate()'s, and release_import lets go of it; the core never
  // passes such a handle to deallocate. The default handle is `external`.
  virtual bool has_memory_import() const { return false; }
  virtual void* import_memory(int32_t device, void* external, std::size_t nbytes) {
    (void)device;
    (void)nbytes;
    return external;
  }
  virtual void release_import(int32_t device, void* mem) {
    (void)device;
    (void)mem;
  }

  // Looser conformance tolerances for named (op, dtype) pairs; shown in the
  // conformance report. Empty by default.
  virtual std::vector<bp_tolerance> tolerances() const { return {}; }
  // The options the plugin takes (see Options): keys and one-line
  // descriptions naming the default, static strings.
  virtual std::vector<bp_option_info> options() const { return {}; }

  // Builds the C table that points back at this object.
  const bp_plugin* table() {
    table_.struct_size = sizeof(bp_plugin);
    table_.abi_major = BP_ABI_MAJOR;
    table_.abi_minor = BP_ABI_MINOR;
    table_.name = name();
    table_.version = version();
    table_.dl_device_type = dl_device_type();
    table_.ctx = this;
    table_.device_count = &device_count_c;
    table_.device_props = &device_props_c;
    table_.register_kernels = &register_kernels_c;
    table_.allocate = &allocate_c;
    table_.deallocate = &deallocate_c;
    table_.copy_from_host = &copy_from_host_c;
    table_.copy_to_host = &copy_to_host_c;
    table_.copy_on_device = &copy_on_device_c;
    table_.memset = &memset_c;
    table_.stream_create = &stream_create_c;
    table_.stream_destroy = &stream_destroy_c;
    table_.stream_synchronize = &stream_synchronize_c;
    table_.event_create = &event_create_c;
    table_.event_destroy = &event_destroy_c;
    table_.event_record = &event_record_c;
    table_.stream_wait_event = &stream_wait_event_c;
    table_.event_query = &event_query_c;
    table_.stream_query = &stream_query_c;
    table_.event_synchronize = &event_synchronize_c;
    table_.synchronize = &synchronize_c;
    table_.host_pointer = &host_pointer_c;
    table_.host_alloc = has_host_alloc() ? &host_alloc_c : nullptr;
    table_.host_free = has_host_alloc() ? &host_free_c : nullptr;
    table_.destroy = &destroy_c;
    table_.memory_stats = &memory_stats_c;
    table_.event_elapsed = has_event_timing() ? &event_elapsed_c : nullptr;
    table_.empty_cache = has_memory_cache() ? &empty_cache_c : nullptr;
    table_.import_memory = has_memory_import() ? &import_memory_c : nullptr;
    table_.release_import = has_memory_import() ? &release_import_c : nullptr;
    tolerances_ = tolerances();
    table_.tolerances = tolerances_.empty() ? nullptr : tolerances_.data();
    table_.num_tolerances = static_cast<int32_t>(tolerances_.size());
    options_ = options();
    table_.options = options_.empty() ? nullptr : options_.data();
    table_.num_options = static_cast<int32_t>(options_.size());
    return &table_;
  }

 private:
  static Plugin* self(void* ctx) { return static_cast<Plugin*>(ctx); }

  static int32_t device_count_c(void* ctx, char* reason, size_t cap) noexcept {
    try {
      std::string why;
      int32_t n = self(ctx)->device_count(why);
      if (reason != nullptr && cap > 0) std::snprintf(reason, cap, "%s", why.c_str());
      return n;
    } catch (const std::exception& e) {
      if (reason != nullptr && cap > 0) std::snprintf(reason, cap, "%s", e.what());
      return 0;
    }
  }
  // A struct the core owns may be older (smaller) than this plugin's
  // header: fill a whole one here, hand back only what its struct_size
  // covers, and leave its struct_size as the core set it.
  template <class T, class Fill>
  static void fill_within(T* out, Fill&& fill) {
    T full{};
    full.struct_size = sizeof(T);
    fill(full);
    const std::size_t n = out->struct_size < sizeof(T) ? out->struct_size : sizeof(T);
    constexpr std::size_t head = sizeof(full.struct_size);
    if (n > head)
      std::memcpy(reinterpret_cast<char*>(out) + head, reinterpret_cast<const char*>(&full) + head,
                  n - head);
  }
  static bp_status device_props_c(void* ctx, int32_t d, bp_device_props* p, bp_error* e) noexcept {
    return guarded(e, [&] {
      fill_within(p, [&](bp_device_props& full) { self(ctx)->device_props(d, full); });
    });
  }
  static bp_status register_kernels_c(void* ctx, const bp_registrar* r, bp_error* e) noexcept {
    return guarded(e, [&] {
      Registrar reg(*r);
      self(ctx)->register_kernels(reg);
    });
  }
  static bp_status allocate_c(void* ctx, int32_t d, bp_stream s, size_t n, size_t a, void** out,
                              bp_error* e) noexcept {
    return guarded(e, [&] { *out = self(ctx)->allocate(d, s, n, a); });
  }
  static void deallocate_c(void* ctx, int32_t d, bp_stream s, void* p, size_t n) noexcept {
    try {
      self(ctx)->deallocate(d, s, p, n);
    } catch (...) {
    }
  }
  static bp_status copy_from_host_c(void* ctx, int32_t d, bp_stream s, void* mem, uint64_t off,
                                    const void* host, size_t n, bp_error* e) noexcept {
    return guarded(e, [&] { self(ctx)->copy_from_host(d, s, mem, off, host, n); });
  }
  static bp_status copy_to_host_c(void* ctx, int32_t d, bp_stream s, void* host, const void* mem,
                                  uint64_t off, size_t n, bp_error* e) noexcept {
    return guarded(e, [&] { self(ctx)->copy_to_host(d, s, host, mem, off, n); });
  }
  static bp_status copy_on_device_c(void* ctx, bp_stream s, int32_t dd, void* dst, uint64_t doff,
                                    int32_t sd, const void* src, uint64_t soff, size_t n,
                                    bp_error* e) noexcept {
    return guarded(e, [&] { self(ctx)->copy_on_device(s, dd, dst, doff, sd, src, soff, n); });
  }
  static bp_status memset_c(void* ctx, int32_t d, bp_stream s, void* mem, uint64_t off, int32_t v,
                            size_t n, bp_error* e) noexcept {
    return guarded(e, [&] { self(ctx)->memset(d, s, mem, off, v, n); });
  }
  static bp_status stream_create_c(void* ctx, int32_t d, bp_stream* out, bp_error* e) noexcept {
    return guarded(e, [&] { *out = self(ctx)->stream_create(d); });
  }
  static void stream_destroy_c(void* ctx, int32_t d, bp_stream s) noexcept {
    try {
      self(ctx)->stream_destroy(d, s);
    } catch (...) {
    }
  }
  static bp_status stream_synchronize_c(void* ctx, int32_t d, bp_stream s, bp_error* e) noexcept {
    return guarded(e, [&] { self(ctx)->stream_synchronize(d, s); });
  }
  static bp_status event_create_c(void* ctx, int32_t d, bp_event* out, bp_error* e) noexcept {
    return guarded(e, [&] { *out = self(ctx)->event_create(d); });
  }
  static void event_destroy_c(void* ctx, int32_t d, bp_event ev) noexcept {
    try {
      self(ctx)->event_destroy(d, ev);
    } catch (...) {
    }
  }
  static bp_status event_record_c(void* ctx, int32_t d, bp_event ev, bp_stream s,
                                  bp_error* e) noexcept {
    return guarded(e, [&] { self(ctx)->event_record(d, ev, s); });
  }
  static bp_status stream_wait_event_c(void* ctx, int32_t d, bp_stream s, bp_event ev,
                                       bp_error* e) noexcept {
    return guarded(e, [&] { self(ctx)->stream_wait_event(d, s, ev); });
  }
  static bp_status stream_query_c(void* ctx, int32_t d, bp_stream s, bp_error* e) noexcept {
    bool done = false;
    const bp_status st = guarded(e, [&] { done = self(ctx)->stream_query(d, s); });
    return st != BP_STATUS_OK ? st : done ? BP_STATUS_OK : BP_STATUS_NOT_READY;
  }
  static bp_status event_query_c(void* ctx, int32_t d, bp_event ev, bp_error* e) noexcept {
    bool done = false;
    const bp_status st = guarded(e, [&] { done = self(ctx)->event_query(d, ev); });
    return st != BP_STATUS_OK ? st : done ? BP_STATUS_OK : BP_STATUS_NOT_READY;
  }
  static bp_status event_synchronize_c(void* ctx, int32_t d, bp_event ev, bp_error* e) noexcept {
    return guarded(e, [&] { self(ctx)->event_synchronize(d, ev); });
  }
  static bp_status event_elapsed_c(void* ctx, int32_t d, bp_event a, bp_event b, double* ms,
                                   bp_error* e) noexcept {
    std::optional<double> t;
    const bp_status st = guarded(e, [&] { t = self(ctx)->event_elapsed(d, a, b); });
    if (st != BP_STATUS_OK) return st;
    if (!t) return BP_STATUS_NOT_READY;
    *ms = *t;
    return BP_STATUS_OK;
  }
  static bp_status synchronize_c(void* ctx, int32_t d, bp_error* e) noexcept {
    return guarded(e, [&] { self(ctx)->synchronize(d); });
  }
  static bp_status host_alloc_c(void* ctx, size_t n, void** out, bp_error* e) noexcept {
    return guarded(e, [&] { *out = self(ctx)->host_alloc(n); });
  }
  static void host_free_c(void* ctx, void* host) noexcept {
    try {
      self(ctx)->host_free(host);
    } catch (...) {
    }
  }
  static bp_status host_pointer_c(void* ctx, int32_t d, const void* mem, uint64_t off, void** out,
                                  bp_error* e) noexcept {
    return guarded(e, [&] { *out = self(ctx)->host_pointer(d, mem, off); });
  }
  static void destroy_c(void* ctx) noexcept { delete self(ctx); }
  static bp_status memory_stats_c(void* ctx, int32_t d, bp_memory_stats* s, bp_error* e) noexcept {
    return guarded(e, [&] {
      fill_within(s, [&](bp_memory_stats& full) { self(ctx)->memory_stats(d, full); });
    });
  }

  static bp_status empty_cache_c(void* ctx, int32_t d, bp_error* e) noexcept {
    return guarded(e, [&] { self(ctx)->empty_cache(d); });
  }
  static bp_status import_memory_c(void* ctx, int32_t d, void* external, size_t n, void** out,
                                   bp_error* e) noexcept {
    return guarded(e, [&] { *out = self(ctx)->import_memory(d, external, n); });
  }
  static void release_import_c(void* ctx, int32_t d, void* mem) noexcept {
    try {
      self(ctx)->release_import(d, mem);
    } catch (...) {
    }
  }

  bp_plugin table_{};
  std::vector<bp_tolerance> tolerances_;
  std::vector<bp_option_info> options_;
};

// A new Class, given the options when it has a constructor that takes them.
template <class Class>
Plugin* make_plugin(const bp_host* host) {
  if constexpr (std::is_constructible_v<Class, const Options&>)
    return new Class(Options(host));
  else
    return new Class();
}

}  // namespace bp::sdk

// Exports `Class` (derived from bp::sdk::Plugin) as this library's plugin.
// The object is created when the core calls the entry point, not at load.
#define BP_SDK_PLUGIN(Class)                                                                    \
  extern "C" BP_PLUGIN_EXPORT bp_status bp_plugin_init(                                         \
      const bp_host* host, const bp_plugin** plugin, bp_error* error) {                         \
    return ::bp::sdk::guarded(error,                                                            \
                              [&] { *plugin = ::bp::sdk::make_plugin<Class>(host)->table(); }); \
  }
