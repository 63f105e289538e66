// Conformance cases of your own, in a library that `backplane conformance
// --cases libmine_cases.so` loads beside the built-in suite: checks of a
// device's named ops, of behaviour a profile does not cover, of a bug once
// fixed. Build it with backplane_add_conformance_cases() (the Backplane CMake
// package) and write, in one source file:
//
//   #include <backplane/conformance/cases_library.h>
//
//   BP_CONFORMANCE_CASES(suite) {
//     suite.add({"mine.lerp.quarter", {"NO-1"}, "mine",
//                [](const bp::conformance::Context& ctx) {
//                  bp::Tensor a = bp::zeros({4}, ctx.options()), b = bp::ones({4}, ctx.options());
//                  bp::Tensor y = bp::call_op("mine::lerp", {a, b}, {0.25})[0];
//                  BP_EXPECT_VALUES(y, {0.25, 0.25, 0.25, 0.25});
//                }});
//   }
//
// Each case runs like a built-in one: in a process of its own, on the device
// under test, failing on a BP_EXPECT* (the message names this file and line),
// unsupported when an op it needs is missing, skipped on BP_SKIP. Names must
// not repeat a built-in case's; begin them with your own category.
#pragma once

#include <backplane/conformance.h>

// The version of this interface; the program refuses a library built
// against another.
#define BP_CONFORMANCE_CASES_API 1

#define BP_CONFORMANCE_CASES(suite)                                                  \
  extern "C" __attribute__((visibility("default"))) int bp_conformance_cases_api() { \
    return BP_CONFORMANCE_CASES_API;                                                 \
  }                                                                                  \
  extern "C" __attribute__((visibility("default"))) void bp_conformance_add_cases(   \
      ::bp::conformance::Suite& suite)
