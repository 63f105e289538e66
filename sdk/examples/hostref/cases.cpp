// Conformance cases of hostref's own, for what the built-in suite cannot
// know: its named op hostref::lerp. Built into libhostref_cases.so by
// backplane_add_conformance_cases() (CMakeLists.txt) and run beside the
// built-in suite:
//   backplane --backend build/lib/backplane/libbackplane_hostref.so conformance \
//       --cases build/libhostref_cases.so
// The IDs (HR-1, HR-2) are this plugin's own rules; a failure names the
// case, its rule, and the line of this file.
#include <backplane/conformance/cases_library.h>

namespace {

using bp::conformance::Context;

// out = a + w * (b - a), elementwise, on the device under test.
void lerp_values(const Context& ctx) {
  bp::Tensor a = bp::arange(6, ctx.options()).view({2, 3});
  bp::Tensor b = bp::full({2, 3}, 10.0, ctx.options());
  bp::Tensor y = bp::call_op("hostref::lerp", {a, b}, {0.25})[0];
  BP_EXPECT_SHAPE(y, {2, 3});
  BP_EXPECT_VALUES(y, {2.5, 3.25, 4.0, 4.75, 5.5, 6.25});
}

// A strided operand: the kernel reads through the view's strides.
void lerp_strided(const Context& ctx) {
  bp::Tensor base = bp::arange(12, ctx.options()).view({3, 4});
  bp::Tensor a = base.index({bp::Slice(), bp::Slice(0, bp::None, 2)});  // strides {4, 2}
  bp::Tensor b = bp::zeros({3, 2}, ctx.options());
  bp::Tensor y = bp::call_op("hostref::lerp", {a, b}, {0.5})[0];
  BP_EXPECT_VALUES(y, {0, 1, 2, 3, 4, 5});
}

}  // namespace

BP_CONFORMANCE_CASES(suite) {
  suite.add({"hostref.lerp.values", {"HR-1"}, "hostref", &lerp_values});
  suite.add({"hostref.lerp.strided", {"HR-2"}, "hostref", &lerp_strided});
}
