// The plugin error idiom: every message a plugin raises begins with "[op]",
// the op or entry point the user reached, however deep in a helper the
// check is.
//
//   bp_status my_allocate(...) {
//     bp::sdk::OpScope scope("allocate");   // what BP_SDK_REQUIRE names
//     BP_SDK_REQUIRE(bytes <= limit, "asked for " << bytes << " bytes");
//   }                                        // "[allocate] asked for ..."
//
// A kernel registered through bp::sdk::scoped_kernel_thunk<Fn> (add_raw)
// runs with the scope set to its call's op (bp::sdk::op_name(c.op())), so a
// helper's check names the op without being told it. Where the op is
// at hand, BP_SDK_CHECK(cond, op, ...) (checks.hpp) names it explicitly.
#pragma once

#include <backplane/plugin.h>

#include <backplane/sdk/tensor.hpp>
#include <sstream>

namespace bp::sdk {

// The op's name as the core and its messages spell it ("add", "log_softmax").
inline const char* op_name(int op) {
  static constexpr const char* kNames[BP_OP_COUNT] = {
#define BP_OP_SDK_NAME_(NAME, Name, text, value) text,
      BP_OP_LIST(BP_OP_SDK_NAME_)
#undef BP_OP_SDK_NAME_
  };
  if (op == BP_OP_NAMED) return "named op";
  return op >= 0 && op < BP_OP_COUNT ? kNames[op] : "op?";
}

namespace detail {
inline thread_local const char* t_current_op = nullptr;
inline const char*& default_op() {
  static const char* name = "plugin";
  return name;
}
}  // namespace detail

// The op or entry point the calling thread runs in this plugin: the
// innermost OpScope's name; outside every scope, the default name.
inline const char* current_op() {
  return detail::t_current_op ? detail::t_current_op : detail::default_op();
}
// The name outside every scope: the plugin's own ("cuda"). Set once, before
// any call runs (a static string).
inline void set_default_op(const char* name) { detail::default_op() = name; }

// Sets current_op() for the lifetime of the scope (scopes nest).
class OpScope {
 public:
  explicit OpScope(const char* name) : previous_(detail::t_current_op) {
    detail::t_current_op = name;
  }
  ~OpScope() { detail::t_current_op = previous_; }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  const char* previous_;
};

}  // namespace bp::sdk

// Throws Type("[current op] message"); the message is streamed.
#define BP_SDK_FAIL(Type, ...)                                                \
  do {                                                                        \
    std::ostringstream bp_sdk_fail_os_;                                       \
    bp_sdk_fail_os_ << "[" << ::bp::sdk::current_op() << "] " << __VA_ARGS__; \
    throw Type(bp_sdk_fail_os_.str());                                        \
  } while (0)
// The user's mistake: InvalidArgument("[op] ...") unless `cond`.
#define BP_SDK_REQUIRE(cond, ...)                                      \
  do {                                                                 \
    if (!(cond)) BP_SDK_FAIL(::bp::sdk::InvalidArgument, __VA_ARGS__); \
  } while (0)
// A dtype or layout this plugin does not handle: Unsupported("[op] ..."),
// which sends the call to the fallback policy.
#define BP_SDK_UNSUPPORTED(...) BP_SDK_FAIL(::bp::sdk::Unsupported, __VA_ARGS__)
