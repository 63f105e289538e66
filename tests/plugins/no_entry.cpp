// A shared library that exports functions, but not bp_plugin_init (its
// author misspelt it): the loader must refuse it and list what it exports.
#include <backplane/plugin.h>

extern "C" BP_PLUGIN_EXPORT int bp_plugin_initialise(const bp_host*, const bp_plugin**, bp_error*) {
  return 0;
}

extern "C" BP_PLUGIN_EXPORT int no_entry_helper(int x) { return x + 1; }
