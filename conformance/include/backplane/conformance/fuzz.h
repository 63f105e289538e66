// Property-based fuzzing of a backend (`backplane fuzz`).
//
// Each case is drawn from (seed, case number) alone, so one case replays
// without the others. A case is one of four kinds:
//   view     a base tensor (rank 0-8, zero-size dims included) and a chain of
//            views; every view's layout and values are checked against a
//            host model of the storage positions it addresses;
//   op       ops on views (unary, binary with broadcasting, reductions,
//            softmax, matmul, comparisons, where, ...), each compared with
//            the same op computed on the reference device from contiguous
//            copies of its inputs;
//   inplace  in-place ops and copy_ into views of one base, with operands
//            that may alias it; a host shadow of the base's memory gives the
//            expected base after each op, or predicts the error the contract
//            demands (IP-4, IP-5, IP-6), after which the base must be unchanged;
//   grad     random op and view chains on float64 leaves whose gradients are
//            compared with central differences (AG-10), plus the rules that
//            finite differences cannot check (integer results never require
//            grad; max/min route the gradient to a NaN).
// A failing case is shrunk (fewer steps, smaller and fewer dims, plainer
// values) while it fails the same way, then printed as a C++ snippet.
#pragma once

#include <backplane/backplane.h>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bp::conformance::fuzz {

struct Options {
  Device device;     // the device under test
  Device reference;  // computes the expected op values from contiguous copies
  uint64_t seed = 0;
  std::optional<uint64_t> cases;      // stop after this many cases
  double seconds = 0;                 // stop after this long (0: no time limit)
  std::optional<uint64_t> only_case;  // run this case alone (a replay)
  bool verbose = false;               // a line per case; with only_case, every statement
  std::vector<std::string> skip;      // generator exclusions (see skip_names())
  double shrink_seconds = 20;         // time limit for shrinking one failure
  // Each op case runs twice on the device under test, its allocations filled
  // first with 0x00 bytes and then with 0xFF (debug::set_poison); a result
  // element that differs between the two was never written by the kernel
  // (an "unwritten-result" failure).
  bool poison = false;
  // A family of failures (one check on one op, or one error message) is no
  // longer shrunk once this many in a row shrank to reproducers already printed.
  int shrink_per_family = 3;
  double progress_every_s = 5;  // seconds between progress lines
  std::string replay_command;   // "backplane fuzz --backend sim", for the replay lines
  // Called before each case runs, with its number (a crash handler's hint).
  std::function<void(uint64_t case_index)> on_case_start;
};

struct Summary {
  uint64_t cases = 0, passed = 0, failed = 0, unsupported = 0;
  double seconds = 0;
  // Failures counted by "kind op": "inplace-values add_", "grad-mismatch grad".
  std::map<std::string, uint64_t> failures_by_kind;
  uint64_t distinct = 0;  // reproducers printed
};

// The names --skip accepts, each with what it leaves out of the generated cases.
std::vector<std::pair<std::string, std::string>> skip_names();
// Throws ValueError naming the first unknown name.
void check_skip_names(const std::vector<std::string>& names);

// Runs cases until a limit is reached. Reproducers of distinct failures go to
// `out` as they are found; progress lines go to `progress` every few seconds.
Summary run(const Options& options, std::ostream& out, std::ostream& progress);

// "cases: 3000 in 12.3 s (244/s); 2990 passed, 10 failed, 0 unsupported" and
// the failures by kind.
void print_summary(std::ostream& os, const Summary& summary);

}  // namespace bp::conformance::fuzz
