// A vendor's cases library (backplane/conformance/cases_library.h), for the
// tests of `backplane conformance --cases`: one case that passes on any
// backend with float32 add, and one that always fails, so that the report of
// a vendor's failure can be checked (its case, its rule, this file's line).
#include <backplane/conformance/cases_library.h>

namespace {

void add_ones(const bp::conformance::Context& ctx) {
  bp::Tensor y = bp::add(bp::ones({3}, ctx.options()), bp::ones({3}, ctx.options()));
  BP_EXPECT_VALUES(y, {2, 2, 2});
}

void wrong_on_purpose(const bp::conformance::Context& ctx) {
  bp::Tensor y = bp::add(bp::ones({2}, ctx.options()), bp::ones({2}, ctx.options()));
  BP_EXPECT_VALUES(y, {3, 3});  // the line the failure must cite
}

}  // namespace

BP_CONFORMANCE_CASES(suite) {
  suite.add({"vendor.add.ones", {"VX-1"}, "vendor", &add_ones});
  suite.add({"vendor.wrong_on_purpose", {"VX-2"}, "vendor", &wrong_on_purpose});
}
