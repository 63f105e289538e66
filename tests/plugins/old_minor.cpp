// An ABI 1.0 plugin: it reports minor 0 and a bp_plugin table that ends
// before `memory_stats` (added in 1.1, like `tolerances`). The bytes past its
// struct_size hold a function that must never be called and a tolerance that
// must never be read: the core has to treat both fields as absent because of
// struct_size, not because the pointers happen to be NULL.
#include <cstddef>

#include "fake_kernels.hpp"

namespace {

bp_status stats_past_the_end(void*, int32_t, bp_memory_stats* stats, bp_error*) {
  stats->allocated_bytes = 0xBADBADu;  // a value no test can mistake for real
  return BP_STATUS_OK;
}

// A tolerance no backend would declare, so a test sees at once if it leaked.
const bp_tolerance kTolerancePastTheEnd[] = {{BP_OP_ADD, BP_DTYPE_FLOAT32, 0.5, 0.5}};

class OldMinorPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "old_minor"; }
  const char* version() const override { return "1.0.0"; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_basic(r);
    r.add<&bp::fake::add_f32>(BP_OP_ADD, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
  }

  // A copy of the SDK's table, as a 1.0 build would have filled it. Owned by
  // this object, so a second load of the library gets a table of its own.
  const bp_plugin* legacy_table() {
    legacy_ = *table();
    legacy_.abi_minor = 0;
    legacy_.struct_size = offsetof(bp_plugin, memory_stats);
    legacy_.memory_stats = &stats_past_the_end;
    legacy_.tolerances = kTolerancePastTheEnd;
    legacy_.num_tolerances = 1;
    return &legacy_;
  }

 private:
  bp_plugin legacy_{};
};

}  // namespace

extern "C" BP_PLUGIN_EXPORT bp_status bp_plugin_init(const bp_host*, const bp_plugin** plugin,
                                                     bp_error* error) {
  return bp::sdk::guarded(error, [&] { *plugin = (new OldMinorPlugin())->legacy_table(); });
}
