// Checks shared by the rule cases (construction, in-place rules, views,
// copies, devices): the message of an expected error, approximate values,
// and a second backend to move tensors to.
#pragma once

#include <backplane/conformance.h>

#include <cmath>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace bp::conformance {

// Runs `f`, which must throw E, and returns the error's message. Any other
// exception propagates, so a missing kernel still reads as unsupported.
template <class E, class F>
std::string thrown_message(F&& f, const char* expr, const char* type, const char* file, int line) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  detail::fail(file, line, std::string("expected ") + expr + " to throw " + type + ", it did not");
}

// BP_ERROR_MESSAGE(bp::ValueError, x.add_(y)): the message of the error.
#define BP_ERROR_MESSAGE(ErrorType, ...)                                                   \
  ::bp::conformance::thrown_message<ErrorType>([&] { (void)(__VA_ARGS__); }, #__VA_ARGS__, \
                                               #ErrorType, __FILE__, __LINE__)

// Fails unless `message` contains every one of `parts`.
inline void expect_mentions(const std::string& message,
                            std::initializer_list<std::string_view> parts, const char* file,
                            int line) {
  for (std::string_view p : parts)
    if (message.find(p) == std::string::npos)
      detail::fail(file, line, "the error message should mention '" + std::string(p) + "'",
                   "it was: " + message);
}
#define BP_EXPECT_MENTIONS(message, ...) \
  ::bp::conformance::expect_mentions((message), {__VA_ARGS__}, __FILE__, __LINE__)

// Every element of t within atol + rtol*|expected| (for transcendental
// results and accumulated float sums, which need not be exact); a NaN
// expected wants a NaN, an infinity the same infinity.
inline void expect_close(const Tensor& t, const std::vector<double>& expected, double rtol,
                         double atol, const char* expr, const char* file, int line) {
  if (t.numel() != static_cast<int64_t>(expected.size()))
    detail::fail(file, line,
                 std::string(expr) + ": expected " + std::to_string(expected.size()) +
                     " elements, got " + std::to_string(t.numel()));
  std::vector<double> actual = t.to_vector<double>();
  for (std::size_t i = 0; i < actual.size(); ++i)
    if (!(std::isnan(actual[i]) && std::isnan(expected[i])) &&
        !(std::isinf(expected[i]) && actual[i] == expected[i]) &&
        !(std::fabs(actual[i] - expected[i]) <= atol + rtol * std::fabs(expected[i])))
      detail::fail(file, line,
                   std::string(expr) + ": element " + std::to_string(i) + " is " +
                       detail::format(actual[i]) + ", expected " + detail::format(expected[i]),
                   "all: " + detail::format(actual) + " vs " + detail::format(expected));
}
#define BP_EXPECT_CLOSE(t, rtol, atol, ...)                                                  \
  ::bp::conformance::expect_close((t), std::vector<double>(__VA_ARGS__), (rtol), (atol), #t, \
                                  __FILE__, __LINE__)

// The reference backend's device (--reference, BACKPLANE_REFERENCE, else
// cpu_onednn), which the DV and CR-6 cases compare with or move tensors to.
// It is the device under test when that backend is the one being tested.
inline Device reference_device() { return device(reference_backend()); }

// A device other than the one under test, or a skip: the two-device rules
// cannot be checked with a single backend.
inline Device second_device(const Context& ctx) {
  Device other = reference_device();
  if (other == ctx.device()) BP_SKIP("needs a second backend");
  return other;
}

}  // namespace bp::conformance
