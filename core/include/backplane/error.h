// Typed errors. BP_CHECK* report the user's mistakes with a typed exception
// whose message starts with the op name ("[add] ..."); BP_ASSERT reports a
// broken invariant of the framework itself.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace bp {

// Base of every error Backplane throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A bad value: shapes that do not broadcast, a zero step, a bad option.
class ValueError : public Error {
 public:
  using Error::Error;
};
// A dim or index out of range.
class IndexError : public Error {
 public:
  using Error::Error;
};
// A dtype that an op does not accept, or a cast the op refuses.
class TypeError : public Error {
 public:
  using Error::Error;
};
// An op that the selected backend does not implement.
class NotImplementedError : public Error {
 public:
  using Error::Error;
};
// A gradient rule broken (used by autograd).
class AutogradError : public Error {
 public:
  using Error::Error;
};
// What became of a plugin file that was not loaded: its answers broke a
// rule (Refused), or the process loading it crashed, hung or exited.
enum class PluginVerdict { Refused, Crashed, Hung, Exited };
const char* to_string(PluginVerdict v);

// A plugin that could not be found, loaded or accepted.
class PluginError : public Error {
 public:
  using Error::Error;
  // A file's verdict: "[plugin] PATH <verdict>: <reason>".
  PluginError(const std::string& path, PluginVerdict verdict, const std::string& reason)
      : Error("[plugin] " + path + " " + to_string(verdict) + ": " + reason),
        verdict_(verdict),
        reason_(reason) {}
  PluginVerdict verdict() const { return verdict_; }
  // The reason alone, for a file's verdict (empty for other errors).
  const std::string& reason() const { return reason_; }

 private:
  PluginVerdict verdict_ = PluginVerdict::Refused;
  std::string reason_;
};
// A backend ran out of memory.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// Work already enqueued on a device failed (an index out of range found by
// a kernel): raised at the next synchronisation, naming the op (ABI 2.0).
class DeviceError : public Error {
 public:
  using Error::Error;
};

// A broken internal invariant: a bug in Backplane, not in the caller's code.
class InternalError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
template <class E, class... Args>
[[noreturn]] void raise(Args&&... args) {
  throw E(concat(std::forward<Args>(args)...));
}
}  // namespace detail

}  // namespace bp

#define BP_CHECK_T(ErrorType, cond, ...)                                                 \
  do {                                                                                   \
    if (__builtin_expect(!(cond), 0)) ::bp::detail::raise<::bp::ErrorType>(__VA_ARGS__); \
  } while (0)

// User errors.
#define BP_CHECK(cond, ...) BP_CHECK_T(ValueError, cond, __VA_ARGS__)
#define BP_CHECK_INDEX(cond, ...) BP_CHECK_T(IndexError, cond, __VA_ARGS__)
#define BP_CHECK_TYPE(cond, ...) BP_CHECK_T(TypeError, cond, __VA_ARGS__)
#define BP_CHECK_NOT_IMPLEMENTED(cond, ...) BP_CHECK_T(NotImplementedError, cond, __VA_ARGS__)

// Invariants of the framework.
#define BP_ASSERT(cond, ...)                                                                  \
  BP_CHECK_T(InternalError, cond, "internal error at ", __FILE__, ":", __LINE__, ": ", #cond, \
             " failed. ", ##__VA_ARGS__)
