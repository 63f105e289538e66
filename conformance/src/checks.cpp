// The host-side checks behind the BP_EXPECT* macros.
#include <backplane/conformance/case.h>

namespace bp::conformance {

namespace {

std::string base_name(const char* path) {
  std::string_view p(path);
  auto slash = p.find_last_of('/');
  return std::string(slash == std::string_view::npos ? p : p.substr(slash + 1));
}

}  // namespace

namespace detail {

void fail(const char* file, int line, const std::string& what, const std::string& note) {
  // The case's name and rule say where a built-in check is; a vendor's case
  // (cases_library.h) also names its own file and line.
  // Built-in cases are compiled from this library's folder (src/ and
  // include/), so their __FILE__ starts as this one's does: the folder as
  // the compiler was given it, absolute or (through a compiler cache that
  // rewrites paths) relative.
  constexpr std::string_view kThisFile = __FILE__;  // ".../conformance/src/checks.cpp"
  const std::size_t src = kThisFile.rfind("/src/");
  const std::string_view folder =
      src == std::string_view::npos ? std::string_view() : kThisFile.substr(0, src + 1);
  bool ours = !folder.empty() && std::string_view(file).starts_with(folder);
#ifdef BACKPLANE_CONFORMANCE_SOURCES
  ours = ours || std::string_view(file).starts_with(BACKPLANE_CONFORMANCE_SOURCES);
#endif
  std::string msg = ours ? what : what + " (" + base_name(file) + ":" + std::to_string(line) + ")";
  if (!note.empty()) msg += ": " + note;
  throw CaseFailure(msg);
}

}  // namespace detail

void expect_values(const Tensor& t, const std::vector<double>& expected, const char* expr,
                   const char* file, int line) {
  if (t.numel() != static_cast<int64_t>(expected.size()))
    detail::fail(file, line,
                 std::string(expr) + ": expected " + std::to_string(expected.size()) +
                     " elements, got " + std::to_string(t.numel()) + " (shape " +
                     detail::format(t.sizes()) + ")");
  std::vector<double> actual = t.to_vector<double>();
  if (actual != expected)
    detail::fail(file, line,
                 std::string(expr) + ": expected values " + detail::format(expected) + ", got " +
                     detail::format(actual));
}

void expect_shape(const Tensor& t, const std::vector<int64_t>& expected, const char* expr,
                  const char* file, int line) {
  std::vector<int64_t> actual(t.sizes().begin(), t.sizes().end());
  if (actual != expected)
    detail::fail(file, line,
                 std::string(expr) + ": expected shape " + detail::format(expected) + ", got " +
                     detail::format(actual));
}

void expect_strides(const Tensor& t, const std::vector<int64_t>& expected, const char* expr,
                    const char* file, int line) {
  std::vector<int64_t> actual(t.strides().begin(), t.strides().end());
  bool same = actual.size() == expected.size();
  for (std::size_t i = 0; same && i < actual.size(); ++i)
    same = t.size(static_cast<int64_t>(i)) == 1 || actual[i] == expected[i];
  if (!same)
    detail::fail(file, line,
                 std::string(expr) + ": expected strides " + detail::format(expected) + ", got " +
                     detail::format(actual) + " (shape " + detail::format(t.sizes()) + ")");
}

}  // namespace bp::conformance
