// What happens when the selected backend lacks a kernel: an error (deny, the
// default), or the op runs on the reference backend (reference_backend(),
// --reference; cpu_onednn by default) with its operands copied there and
// back (allow; warn also prints one line per op and dtype).
// Never applied to factories or random numbers (views never reach a kernel).
// Conformance always runs with deny.
#pragma once

#include <backplane/dtype.h>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace bp {

enum class FallbackPolicy { Deny, Warn, Allow };

void set_fallback_policy(FallbackPolicy policy);
FallbackPolicy fallback_policy();
// "deny" | "warn" | "allow"; throws ValueError otherwise.
FallbackPolicy parse_fallback_policy(std::string_view text);
std::string_view to_string(FallbackPolicy policy);

// One op that fell back, and how often.
struct FallbackRecord {
  std::string op;
  DType dtype;
  std::string backend;  // the backend that lacked it
  uint64_t count = 0;
};
std::vector<FallbackRecord> fallback_records();
void reset_fallback_records();

// Prints the ops that ran on the reference backend and how often, in the
// form every Backplane program ends with ("[fallback] ops run on cpu_onednn
// because the backend lacks them (--fallback warn): ..."); nothing when no
// op fell back.
void print_fallback_summary(std::ostream& os);

}  // namespace bp
