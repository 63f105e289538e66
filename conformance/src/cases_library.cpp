// Loading a library of a vendor's own cases (cases_library.h) into a suite.
#include <backplane/conformance/cases_library.h>

#include <boost/dll/shared_library.hpp>
#include <deque>
#include <filesystem>
#include <mutex>

namespace bp::conformance {

namespace {

// The libraries stay loaded for the life of the process: their cases'
// functions live in them.
std::mutex g_mu;
std::deque<boost::dll::shared_library> g_libraries;

}  // namespace

std::size_t add_cases_from_library(Suite& suite, const std::string& path) {
  const auto fail = [&](const std::string& why) {
    throw ValueError("[conformance] --cases " + path + ": " + why);
  };
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail("no such file");
  boost::dll::shared_library lib;
  try {
    lib.load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    fail(std::string("could not be loaded: ") + e.what());
  }
  if (!lib.has("bp_conformance_cases_api") || !lib.has("bp_conformance_add_cases"))
    fail(
        "not a library of conformance cases (no BP_CONFORMANCE_CASES in it; see "
        "backplane/conformance/cases_library.h)");
  const int api = lib.get<int()>("bp_conformance_cases_api")();
  if (api != BP_CONFORMANCE_CASES_API)
    fail("built against version " + std::to_string(api) +
         " of the cases interface; this "
         "program has version " +
         std::to_string(BP_CONFORMANCE_CASES_API) + ": rebuild it");
  // Added to a copy first: a library that fails half-way adds nothing.
  Suite added = suite;
  const std::size_t before = added.cases().size();
  try {
    lib.get<void(Suite&)>("bp_conformance_add_cases")(added);
  } catch (const std::exception& e) {
    fail(e.what());
  }
  const std::size_t n = added.cases().size() - before;
  if (n == 0) fail("it adds no case");
  suite = std::move(added);
  std::lock_guard lock(g_mu);
  g_libraries.push_back(std::move(lib));
  return n;
}

}  // namespace bp::conformance
