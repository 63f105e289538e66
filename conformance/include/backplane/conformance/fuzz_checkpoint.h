// Fuzzing the safetensors loader (`backplane fuzz --target checkpoint`, and
// a fixed number of cases in ctest): mutations of a valid checkpoint file
// (bit flips, bytes set, cuts, insertions, deleted and repeated runs, digits
// changed in the header), each drawn from (seed, case number) alone. Every
// case that changes the bytes must end in a bp::ValueError with the sums
// required, and in a load or a ValueError with them optional: any other
// outcome (another exception, a changed file that loads with its sums
// required) fails the case.
#pragma once

#include <backplane/backplane.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace bp::conformance::fuzz {

struct CheckpointOptions {
  std::optional<Device> device;  // where loaded tensors go (default: the default device)
  uint64_t seed = 0;
  std::optional<uint64_t> cases;      // stop after this many (with seconds: whichever first)
  double seconds = 0;                 // 0: no time limit
  std::optional<uint64_t> only_case;  // replay this case alone
  bool verbose = false;               // a line per case
  std::string replay_command;         // "backplane fuzz --target checkpoint ...", for failures
  std::function<void(uint64_t)> on_case_start;  // before each case (the CLI's crash note)
};

struct CheckpointSummary {
  uint64_t cases = 0;            // run
  uint64_t unchanged = 0;        // mutations that gave back the valid file (not checked)
  uint64_t refused = 0;          // changed files refused with their sums required
  uint64_t loaded_optional = 0;  // changed files that loaded with the sums optional
  uint64_t failed = 0;
  double slowest_seconds = 0;  // the longest single load
  uint64_t slowest_case = 0;
  std::vector<std::string> failures;  // one line each (the first 20)
};

// The valid file every case mutates: a Linear layer's state dict, an int64
// tensor and resume metadata, written by safetensors::serialize (with sums).
std::vector<std::byte> checkpoint_fuzz_base();
// Case `k` of `seed`: 1 to 3 mutations of `good`.
std::vector<std::byte> mutate_checkpoint(const std::vector<std::byte>& good, uint64_t seed,
                                         uint64_t k);
// Runs the cases, a progress line to `progress` every few seconds.
CheckpointSummary run_checkpoint(const CheckpointOptions& o, std::ostream& out,
                                 std::ostream& progress);
void print_summary(std::ostream& out, const CheckpointSummary& s);

}  // namespace bp::conformance::fuzz
