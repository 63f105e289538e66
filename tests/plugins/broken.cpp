// One plugin broken in one way, chosen by BROKEN (a number, see the list
// below; CMakeLists.txt builds each as libbackplane_broken_<kind>.so). The
// rest is a working host plugin, so that the break is the only reason for
// the verdict the loader must give. Each kind stands for a class of real
// mistakes: a plugin that aborts, exits, crashes or hangs while loading, lets
// a C++ exception out through the C ABI, writes past a buffer the core hands
// it, returns a string without its NUL, or reports absurd values.
#include <unistd.h>

#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "fake_kernels.hpp"

#define INIT_ABORT 1
#define INIT_EXIT 2
#define INIT_SEGV 3
#define INIT_HANG 4
#define STATIC_ABORT 5
#define STATIC_HANG 6
#define DESTROY_SEGV 7
#define DESTROY_HANG 8
#define INIT_THROW_STD 9
#define INIT_THROW_INT 10
#define REGISTER_THROW 11
#define ERROR_OVERFLOW 12
#define NAME_NO_NUL 13
#define PROPS_OVERFLOW 14
#define PROPS_NO_NUL 15
#define COUNT_HUGE 16
#define COUNT_NEGATIVE 17
#define STRUCT_HUGE 18
#define ALLOC_NULL 19
#define IMPORT_HALF 20

#ifndef BROKEN
#error "BROKEN must name the way this plugin is broken"
#endif

namespace {

[[noreturn]] void hang() {
  for (;;) pause();
}

#if BROKEN == STATIC_ABORT || BROKEN == STATIC_HANG
// A static initialiser: runs inside dlopen, before any entry point.
struct Initialiser {
  Initialiser() {
    if (BROKEN == STATIC_ABORT) std::abort();
    hang();
  }
} initialiser;
#endif

class BrokenPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return BROKEN_NAME; }
  const char* version() const override { return "1.0.0"; }
  void register_kernels(bp::sdk::Registrar& r) override { bp::fake::register_basic(r); }
};

// 300 letters and no NUL: a name (or device name) that never ends.
char endless[300];

int32_t huge_device_count(void*, char*, size_t) { return BROKEN == COUNT_HUGE ? INT32_MAX : -5; }

bp_status props_overflow(void*, int32_t, bp_device_props* props, bp_error*) {
  std::memset(props, 'p', sizeof(bp_device_props) + 64);
  return BP_STATUS_OK;
}

bp_status props_no_nul(void*, int32_t, bp_device_props* props, bp_error*) {
  std::memset(props->name, 'n', sizeof props->name);
  props->total_memory = 1 << 20;
  props->host_addressable = 1;
  return BP_STATUS_OK;
}

bp_status register_throws(void*, const bp_registrar*, bp_error*) { throw 42; }

bp_status allocate_null(void*, int32_t, bp_stream, size_t, size_t, void** out, bp_error*) {
  *out = nullptr;
  return BP_STATUS_OK;
}

bp_status import_any(void*, int32_t, void* external, size_t, void** out, bp_error*) {
  *out = external;
  return BP_STATUS_OK;
}

void destroy_breaks(void*) {
  if (BROKEN == DESTROY_SEGV) std::raise(SIGSEGV);
  hang();
}

bp_plugin table;

}  // namespace

extern "C" BP_PLUGIN_EXPORT bp_status bp_plugin_init(const bp_host*, const bp_plugin** plugin,
                                                     bp_error* error) {
  switch (BROKEN) {
    case INIT_ABORT:
      std::abort();
    case INIT_EXIT:
      std::exit(0);
    case INIT_SEGV:
      std::raise(SIGSEGV);
      break;
    case INIT_HANG:
      hang();
    case INIT_THROW_STD:
      throw std::runtime_error("broken on purpose");
    case INIT_THROW_INT:
      throw 42;
    case ERROR_OVERFLOW:
      // 100 bytes more than the capacity it was given (and no NUL).
      std::memset(error->message, 'e', error->capacity + 100);
      return BP_STATUS_RUNTIME_ERROR;
    default:
      break;
  }
  table = *(new BrokenPlugin())->table();
  switch (BROKEN) {
    case DESTROY_SEGV:
    case DESTROY_HANG:
      table.name = "Not-A-Valid-Name";  // refused, then destroyed
      table.destroy = &destroy_breaks;
      break;
    case REGISTER_THROW:
      table.register_kernels = &register_throws;
      break;
    case NAME_NO_NUL:
      std::memset(endless, 'x', sizeof endless);
      table.name = endless;
      break;
    case PROPS_OVERFLOW:
      table.device_props = &props_overflow;
      break;
    case PROPS_NO_NUL:
      table.device_props = &props_no_nul;
      break;
    case COUNT_HUGE:
    case COUNT_NEGATIVE:
      table.device_count = &huge_device_count;
      break;
    case STRUCT_HUGE:
      table.struct_size = std::size_t{1} << 30;
      break;
    case ALLOC_NULL:
      table.allocate = &allocate_null;
      break;
    case IMPORT_HALF:
      // import_memory without release_import (ABI 2.10): the pair goes together.
      table.import_memory = &import_any;
      table.release_import = nullptr;
      break;
    default:
      break;
  }
  *plugin = &table;
  return BP_STATUS_OK;
}
