// A plugin that fills only the entries every plugin must: no memory_stats,
// no host_pointer, no tolerances, no destroy. The core must load it, run its
// kernels, and treat each optional entry as absent because it is NULL. The
// bytes of the table past what it fills stay zero, as a C plugin's static
// table would be.
#include <cstddef>

#include "fake_kernels.hpp"

namespace {

class MinimalPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "minimal"; }
  const char* version() const override { return "2.0.0"; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_basic(r);
    r.add<&bp::fake::add_f32>(BP_OP_ADD, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
  }

  // The SDK's table without its optional entries. Owned by this object, so
  // a second load of the library gets a table of its own.
  const bp_plugin* minimal_table() {
    minimal_ = *table();
    minimal_.memory_stats = nullptr;
    minimal_.host_pointer = nullptr;
    minimal_.tolerances = nullptr;
    minimal_.num_tolerances = 0;
    minimal_.destroy = nullptr;
    return &minimal_;
  }

 private:
  bp_plugin minimal_{};
};

}  // namespace

extern "C" BP_PLUGIN_EXPORT bp_status bp_plugin_init(const bp_host*, const bp_plugin** plugin,
                                                     bp_error* error) {
  return bp::sdk::guarded(error, [&] { *plugin = (new MinimalPlugin())->minimal_table(); });
}
