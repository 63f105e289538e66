// Certification profiles: the kernels (op x dtype) a backend must have, and
// run without failure, to be certified for a use.
//   core      construction, copy and fill, element-wise arithmetic,
//             comparisons, reductions and views, for float32 and int64
//   training  core, plus every op for float32 and the float64 kernels that
//             gradient checks run on (what autograd needs)
//   full      every kernel the reference backend has
// A profile only asks for kernels the reference backend itself has (no
// backend has an int64 true division), so every profile is attainable.
#pragma once

#include <backplane/backend.h>
#include <backplane/conformance/runner.h>

#include <string>
#include <vector>

namespace bp::conformance {

inline constexpr const char* kProfiles[] = {"core", "training", "full"};
inline constexpr const char* kDefaultProfile = "core";

// Whether `name` is a profile.
bool is_profile(const std::string& name);

// "add (int64)" for each kernel `profile` requires, given the reference's.
std::vector<std::string> required_kernels(const std::string& profile, const Backend& reference);

// Fills report.certification: the profile, the required kernels `backend`
// lacks, the cases that could not run for lack of a required kernel, and
// the verdict. `complete` says whether the whole suite ran (no --filter):
// a subset cannot certify.
void certify(Report& report, const std::string& profile, const Backend& backend,
             const Backend& reference, bool complete);

}  // namespace bp::conformance
