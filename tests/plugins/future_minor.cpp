// A plugin built against a future minor of the ABI: the header it includes is
// generated from today's with BP_ABI_MINOR one higher and a field appended to
// every struct (future_abi.cmake). The current core must load and run it, and
// the plugin must behave as a future SDK plugin should with an older core: it
// reads a field of a core-filled struct only when that struct's struct_size
// covers it, and writes into core-owned structs only what struct_size covers
// (bp::sdk::Plugin does that for device_props and memory_stats). The version
// string reports what the plugin saw of the core, for loader_test to check.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "fake_kernels.hpp"

static_assert(BP_ABI_MINOR == BACKPLANE_CURRENT_ABI_MINOR + 1,
              "future_minor.cpp must be compiled against the generated future header");

namespace {

// Would be the future minor's new entry point: the current core must never
// call it, since it does not know the field.
bp_status future_entry(void*, bp_error*) { std::abort(); }

void future_override(const bp::sdk::KernelCall&) { std::abort(); }

// The add kernel checks that no call hands it the future fields.
void add_checking_call(const bp::sdk::KernelCall& call) {
  if (BP_HAS_FIELD(&call.raw(), bp_kernel_call, future_call_field))
    throw std::runtime_error("the core passed a bp_kernel_call from the future");
  bp::fake::add_f32(call);
}

class FutureMinorPlugin final : public bp::sdk::Plugin {
 public:
  explicit FutureMinorPlugin(const bp_host* host) {
    saw_ = "core-abi-" + std::to_string(host->abi_major) + "." + std::to_string(host->abi_minor);
    saw_ += BP_HAS_FIELD(host, bp_host, future_host_field) ? "-with-future-host-field"
                                                           : "-without-future-host-field";
  }
  const char* name() const override { return "future_minor"; }
  const char* version() const override { return saw_.c_str(); }
  void device_props(int32_t, bp_device_props& props) const override {
    std::snprintf(props.name, sizeof(props.name), "%s", "future host memory");
    props.host_addressable = 1;
    for (char& c : props.future_props) c = 'F';  // past the core's struct: must not reach it
  }
  void memory_stats(int32_t, bp_memory_stats& stats) override {
    stats.allocated_bytes = 4242;
    stats.future_stat = 0xF00D;  // likewise
  }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_basic(r);
    // An override the future minor would add: this core must load the
    // plugin, ignore the name and never call the kernel.
    r.add_named<&future_override>("core::future_fused", "(Tensor x) -> Tensor", {BP_DTYPE_FLOAT32},
                                  BP_ORIGIN);
    // A primitive op the future minor would add: ignored likewise.
    r.add<&future_override>(static_cast<bp_op>(BP_OP_COUNT), {BP_DTYPE_FLOAT32}, BP_ORIGIN);
    r.add<&add_checking_call>(BP_OP_ADD, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
  }
  const bp_plugin* future_table() {
    bp_plugin* t = const_cast<bp_plugin*>(table());
    t->future_entry = &future_entry;
    t->future_value = 7;
    return t;
  }

 private:
  std::string saw_;
};

}  // namespace

extern "C" BP_PLUGIN_EXPORT bp_status bp_plugin_init(const bp_host* host, const bp_plugin** plugin,
                                                     bp_error* error) {
  return bp::sdk::guarded(error, [&] { *plugin = (new FutureMinorPlugin(host))->future_table(); });
}
