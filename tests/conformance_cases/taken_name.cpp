// A cases library whose case takes the name of a built-in one: refused.
#include <backplane/conformance/cases_library.h>

BP_CONFORMANCE_CASES(suite) {
  suite.add(
      {"op.add.float32.contiguous", {"VX-1"}, "vendor", [](const bp::conformance::Context&) {}});
}
