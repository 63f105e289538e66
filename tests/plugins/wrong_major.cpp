// A plugin built for the next ABI major. The core must refuse it before it
// touches anything but the version fields, so the rest of the table is empty.
#include <backplane/plugin.h>

namespace {
bp_plugin table = [] {
  bp_plugin p{};
  p.struct_size = sizeof(bp_plugin);
  p.abi_major = BP_ABI_MAJOR + 1;
  p.abi_minor = 0;
  p.name = "wrong_major";
  p.version = "9.0.0";
  p.dl_device_type = 1;
  return p;
}();
}  // namespace

extern "C" BP_PLUGIN_EXPORT bp_status bp_plugin_init(const bp_host*, const bp_plugin** plugin,
                                                     bp_error*) {
  *plugin = &table;
  return BP_STATUS_OK;
}
