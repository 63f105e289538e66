// Conformance cases: a name, the rule IDs it checks (defined in
// docs/semantics.md), a category and a function of a Context (the device
// under test and the reference device).
//
// A case fails by throwing CaseFailure (the BP_EXPECT* macros do this with
// expected and actual values in the message); a NotImplementedError escaping
// it marks it unsupported, CaseSkipped marks it skipped, and any other
// exception fails it with the exception's type and message.
#pragma once

#include <backplane/backplane.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace bp::conformance {

// The device under test and the device it is compared with, handed to every
// case, with the run's seed.
class Context {
 public:
  // A context whose reference is the device under test itself.
  Context(Backend& backend, Device device, uint64_t seed = 0)
      : Context(backend, device, backend, device, seed) {}
  Context(Backend& backend, Device device, Backend& reference, Device reference_device,
          uint64_t seed)
      : backend_(&backend),
        device_(device),
        reference_(&reference),
        reference_device_(reference_device),
        seed_(seed) {}

  Device device() const { return device_; }
  Backend& backend() const { return *backend_; }
  // Options that put a tensor of `dtype` on the device under test.
  TensorOptions options(DType dtype = kDefaultFloat) const {
    return TensorOptions(dtype).device(device_);
  }

  // The backend whose results the device under test must reproduce (DV-2).
  Backend& reference() const { return *reference_; }
  Device reference_device() const { return reference_device_; }
  TensorOptions reference_options(DType dtype = kDefaultFloat) const {
    return TensorOptions(dtype).device(reference_device_);
  }

  // The run's seed (printed at the start, stored in the report).
  uint64_t seed() const { return seed_; }
  // Whether this case has the process to itself (a child per case): cases
  // that unload the backend under test need it.
  bool own_process() const { return own_process_; }
  Context& set_own_process(bool own) {
    own_process_ = own;
    return *this;
  }
  // A seed for one case, from the run's seed and the case's name: a case
  // sees the same inputs whichever other cases run, so `--seed N --filter
  // NAME` replays it.
  uint64_t case_seed(std::string_view case_name) const;

 private:
  Backend* backend_;
  Device device_;
  Backend* reference_;
  Device reference_device_;
  uint64_t seed_;
  bool own_process_ = false;
};

// Thrown by the check macros: the case broke the rule it checks.
class CaseFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown by a case that cannot run here (a missing capability that is not an
// op, such as host-addressable memory, or an op the reference lacks);
// reported as skipped.
class CaseSkipped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Case {
  std::string name;               // "inplace.zero_.float32": category first
  std::vector<std::string> spec;  // rule IDs of docs/semantics.md: {"IP-2"}
  std::string category;           // "inplace", "view", ...
  std::function<void(const Context&)> run;
  // Its tensors are empty: it may pass without any kernel computing a value,
  // so it never counts as covering the kernels it reaches (certification).
  bool empty = false;
  // Run without the guards the runner puts around every allocation
  // (debug.h): for a stress case whose tens of thousands of frees would each
  // read a guard back synchronously, and whose purpose is not bounds.
  bool unguarded = false;
};

// An ordered list of cases. Registration is explicit: each cases_*.cpp file
// has one add_*_cases(Suite&) function.
class Suite {
 public:
  // Throws ValueError when a case of that name is already there.
  void add(Case c);
  const std::vector<Case>& cases() const { return cases_; }
  // The case of that name, or nullptr.
  const Case* find(std::string_view name) const;

 private:
  std::vector<Case> cases_;
};

void add_inplace_cases(Suite& suite);
void add_view_cases(Suite& suite);
// The rule cases of CR-*, IP-4..9, VW-1..6, CP-1/CP-5 and DV-*.
void add_construction_cases(Suite& suite);
void add_random_cases(Suite& suite);
void add_inplace_rule_cases(Suite& suite);
void add_view_rule_cases(Suite& suite);
void add_view_op_cases(Suite& suite);
void add_copy_cases(Suite& suite);
void add_device_cases(Suite& suite);
// The differential op cases (op_case.h): every op against the reference.
void add_op_cases(Suite& suite);
// Rank and size limits, undefined tensors, failed ops (CR-8, CR-9, IP-10).
void add_limit_cases(Suite& suite);
// Unloading and reloading the backend under test (DV-4, DV-5).
void add_lifecycle_cases(Suite& suite);
void add_dlpack_cases(Suite& suite);
void add_composite_cases(Suite& suite);
// The CNN layers (NN-4, NN-5): cases_nn.cpp, cases_nn_torch.cpp.
void add_nn_cases(Suite& suite);
// Sorting and running sums (SO-1..SO-3): cases_sort.cpp.
void add_sort_cases(Suite& suite);
// Sparse COO tensors (SP-1): cases_sparse.cpp.
void add_sparse_cases(Suite& suite);
// The model layer (NN-1..NN-3): cases_model.cpp, cases_optim.cpp.
void add_model_cases(Suite& suite);
void add_stream_cases(Suite& suite);
void add_dtype_cases(Suite& suite);
// Autograd and copies/detach (AG-*, CP-*): cases_autograd_*.cpp.
void add_autograd_cases(Suite& suite);
// Every case of the library.
Suite default_suite();

// Adds the cases of a vendor's library (cases_library.h) at `path` to
// `suite`, keeping the library loaded; returns how many. ValueError naming
// the file and the reason when it cannot (not such a library, another
// version of the interface, a case name already taken); `suite` is then
// unchanged.
std::size_t add_cases_from_library(Suite& suite, const std::string& path);

// --- checks -------------------------------------------------------------------

namespace detail {

template <class T>
void format_value(std::ostream& os, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "true" : "false");
  } else if constexpr (requires {
                         v.begin();
                         v.end();
                       } &&
                       !std::is_convertible_v<T, std::string_view>) {
    os << '[';
    std::size_t i = 0;
    for (const auto& e : v) {
      if (i) os << ", ";
      if (i == 64) {
        os << "...";
        break;
      }
      format_value(os, e);
      ++i;
    }
    os << ']';
  } else {
    os << v;
  }
}

template <class T>
std::string format(const T& v) {
  std::ostringstream os;
  format_value(os, v);
  return os.str();
}

// Throws CaseFailure: "<what> (<file>:<line>)[: <note>]".
[[noreturn]] void fail(const char* file, int line, const std::string& what,
                       const std::string& note = {});

template <class... Args>
std::string note(Args&&... args) {
  if constexpr (sizeof...(Args) == 0) {
    return {};
  } else {
    std::ostringstream os;
    (os << ... << args);
    return os.str();
  }
}

}  // namespace detail

// Host-side checks of a tensor, with the tensor's expression for the message.
// Values are compared exactly through to_vector<double>(): the suite uses
// small integers, which every dtype holds exactly.
void expect_values(const Tensor& t, const std::vector<double>& expected, const char* expr,
                   const char* file, int line);
// Shape equality.
void expect_shape(const Tensor& t, const std::vector<int64_t>& expected, const char* expr,
                  const char* file, int line);
// Stride equality, ignoring dims of size 1 (their stride never addresses
// memory, and backends and PyTorch differ on what to store there).
void expect_strides(const Tensor& t, const std::vector<int64_t>& expected, const char* expr,
                    const char* file, int line);

}  // namespace bp::conformance

// Fails the case unless `cond` holds; extra arguments are streamed into the
// message.
#define BP_EXPECT(cond, ...)                                                         \
  do {                                                                               \
    if (!(cond))                                                                     \
      ::bp::conformance::detail::fail(__FILE__, __LINE__, "expected " #cond,         \
                                      ::bp::conformance::detail::note(__VA_ARGS__)); \
  } while (0)

// Fails unless actual == expected, printing both.
#define BP_EXPECT_EQ(actual, expected, ...)                                                      \
  do {                                                                                           \
    const auto& bp_actual_ = (actual);                                                           \
    const auto& bp_expected_ = (expected);                                                       \
    if (!(bp_actual_ == bp_expected_))                                                           \
      ::bp::conformance::detail::fail(                                                           \
          __FILE__, __LINE__,                                                                    \
          std::string(#actual ": expected ") + ::bp::conformance::detail::format(bp_expected_) + \
              ", got " + ::bp::conformance::detail::format(bp_actual_),                          \
          ::bp::conformance::detail::note(__VA_ARGS__));                                         \
  } while (0)

// Fails unless `expr` throws `ErrorType` (a bp error class, e.g. bp::ValueError).
#define BP_EXPECT_THROWS(expr, ErrorType)                                                        \
  do {                                                                                           \
    bool bp_thrown_ = false;                                                                     \
    try {                                                                                        \
      (void)(expr);                                                                              \
    } catch (const ErrorType&) {                                                                 \
      bp_thrown_ = true;                                                                         \
    }                                                                                            \
    if (!bp_thrown_)                                                                             \
      ::bp::conformance::detail::fail(__FILE__, __LINE__,                                        \
                                      "expected " #expr " to throw " #ErrorType ", it did not"); \
  } while (0)

// BP_EXPECT_VALUES(t, {0, 1, 2}) or BP_EXPECT_VALUES(t, host_vector): every
// element of t, row-major.
#define BP_EXPECT_VALUES(t, ...) \
  ::bp::conformance::expect_values((t), std::vector<double>(__VA_ARGS__), #t, __FILE__, __LINE__)
// BP_EXPECT_SHAPE(t, {3, 3}); BP_EXPECT_SHAPE(t, {}) for 0-d.
#define BP_EXPECT_SHAPE(t, ...) \
  ::bp::conformance::expect_shape((t), std::vector<int64_t>(__VA_ARGS__), #t, __FILE__, __LINE__)
// BP_EXPECT_STRIDES(t, {4, 1}).
#define BP_EXPECT_STRIDES(t, ...) \
  ::bp::conformance::expect_strides((t), std::vector<int64_t>(__VA_ARGS__), #t, __FILE__, __LINE__)

// Marks the running case skipped, with a reason.
#define BP_SKIP(...) \
  throw ::bp::conformance::CaseSkipped(::bp::conformance::detail::note(__VA_ARGS__))
