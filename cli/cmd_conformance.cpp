// `backplane conformance`: runs the conformance suite on a device of the
// selected backend (device 0, NAME:N, or each with --all-devices), each case
// in a child process of this program (the hidden --run-one flag, which calls
// conformance::child_main), compares values with a reference backend, and
// reports to the console, JSON and JUnit XML.
#include <backplane/backplane.h>
#include <backplane/conformance.h>
#include <backplane/conformance/profile.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <string>

#include "asan_reexec.h"
#include "commands.h"
#include "device_loading.h"

namespace bp::cli {

namespace {

const char* kDetails =
    "Each case checks rules of the behavioural contract on a device of the backend:\n"
    "device 0, the one --backend NAME:N names, or each in turn with --all-devices.\n"
    "The rules' IDs (IP-6, AG-7, ...) are defined in docs/semantics.md; --list shows\n"
    "the IDs each case checks, and --filter 'AG-*' selects the cases of a rule.\n"
    "A case is passed, failed (with expected and actual values), unsupported (the\n"
    "backend lacks an op it needs) or skipped.\n\n"
    "Certification: a profile (--profile, default core) names the kernels (op x\n"
    "dtype) a backend must have: core (construction, copy and fill, arithmetic,\n"
    "comparisons, reductions, views; float32 and int64), training (core, every op\n"
    "in float32, the float64 kernels gradient checks use), full (every kernel the\n"
    "reference has). The run exits 0 only when the backend is certified: every\n"
    "required kernel registered, no case unsupported for lack of one, no case\n"
    "failed, and the whole suite run (a --filter run exits 0 when nothing failed,\n"
    "but certifies nothing). A rule with unsupported cases is \"partial\". The report\n"
    "names the plugin file's sha256, the core's version, the date and the machine.\n"
    "--list-profile NAME prints the kernels a profile requires.\n\n"
    "--cases FILE adds cases of your own, built with backplane_add_conformance_cases()\n"
    "(backplane/conformance/cases_library.h), to the run; they count like the others.\n\n"
    "Each case runs in a child process with a time limit, so a crash or a hang fails\n"
    "that case (\"killed by signal 11 (SIGSEGV)\", \"timed out after 60 s\") and the run\n"
    "goes on. The op cases (category op) run every op on the backend and on the\n"
    "reference backend (--compare-to) with random inputs from the seed, which is\n"
    "printed at the start: --seed N replays a run.\n\n"
    "Conformance always runs with --fallback deny: an op the backend lacks makes a\n"
    "case unsupported, it never runs on another backend.\n\n"
    "Examples:\n"
    "  backplane conformance\n"
    "  backplane conformance --backend cuda --json cuda.json --junit cuda.xml\n"
    "  backplane --backend ./libbackplane_mine.so conformance --filter 'IP-*'\n"
    "  backplane conformance --filter 'op.matmul.*' --seed 1234 --verbose\n"
    "  backplane conformance --backend cuda --compare-to cpu_onednn --timeout 20\n"
    "  backplane conformance --list --filter 'view.*'\n"
    "  backplane conformance --backend ./libbackplane_mine.so --profile training\n"
    "  backplane conformance --list-profile core\n"
    "  backplane conformance --backend ./libbackplane_mine.so --cases ./libmine_cases.so\n"
    "  backplane conformance --backend cuda:1 --json cuda1.json\n"
    "  backplane conformance --backend cuda --all-devices --json cuda.json\n";

// Whether `path` can be opened for writing; a file made to find out is
// removed again.
bool can_write(const std::string& path) {
  const bool existed = ::access(path.c_str(), F_OK) == 0;
  {
    std::ofstream probe(path, std::ios::app);
    if (!probe) return false;
  }
  if (!existed) std::remove(path.c_str());
  return true;
}

class ConformanceCommand : public Command {
 public:
  const char* name() const override { return "conformance"; }
  const char* summary() const override {
    return "Run the conformance suite on a backend and report which cases pass";
  }
  const char* details() const override { return kDetails; }

  po::options_description options() override {
    po::options_description own("Options");
    own.add_options()("profile",
                      po::value<std::string>(&profile_)->value_name("core|training|full"),
                      "certification profile: the kernels the backend must have (default core)")(
        "list-profile", po::value<std::string>(&list_profile_)->value_name("PROFILE"),
        "print the kernels PROFILE requires (of the reference backend's) and exit")(
        "json", po::value<std::string>(&json_path_)->value_name("FILE"),
        "also write the report to FILE as JSON")(
        "junit", po::value<std::string>(&junit_path_)->value_name("FILE"),
        "also write the report to FILE as JUnit XML")(
        "filter", po::value<std::vector<std::string>>(&filters_)->composing()->value_name("GLOB"),
        "run only the cases whose name, category or rule ID (docs/semantics.md) matches GLOB "
        "(shell-style: 'IP-*', 'op.add.*', view); repeatable: a case matching any runs")(
        "seed", po::value<uint64_t>()->value_name("N")->notifier([this](uint64_t s) { seed_ = s; }),
        "seed of the random inputs (default: a random one, printed at the start)")(
        "compare-to", po::value<std::string>(&compare_to_)->value_name("BACKEND"),
        "backend whose results the op cases must match (default: the reference backend, "
        "--reference)")("timeout", po::value<double>(&timeout_s_)->value_name("SECONDS"),
                        "time limit of one case (default 60); a case over it is killed and fails")(
        "all-devices", po::bool_switch(&all_devices_),
        "run the suite on every device of the backend in turn (reports FILE-devN.json, ...); "
        "exit 0 only when every device is certified")(
        "asan", po::bool_switch(&asan_),
        "for a plugin built with AddressSanitizer: run again with its ASan runtime preloaded "
        "(LD_PRELOAD; the line is printed); a memory error fails the case with ASan's report")(
        "no-isolate", po::bool_switch(&no_isolate_),
        "run every case in this process (for a debugger; a crash ends the run)")(
        "cases",
        po::value<std::vector<std::string>>(&case_libraries_)->composing()->value_name("FILE"),
        "also run the cases of FILE, a library of cases of your own "
        "(backplane_add_conformance_cases; repeatable)")(
        "list", po::bool_switch(&list_), "list the cases, their categories and IDs; run nothing")(
        "verbose,v", po::bool_switch(&verbose_), "show every case in the report, with its time");
    return own;
  }

  po::options_description hidden_options() override {
    po::options_description hidden;
    hidden.add_options()("run-one", po::value<std::string>(&run_one_),
                         "run one case (the child's side)")(
        "result-fd", po::value<int>(&result_fd_), "where --run-one writes its result");
    return hidden;
  }

  int run(const BackendFlags& flags) override {
    if (asan_)
      if (const auto code = restart_with_asan(
              "conformance",
              {flags.backend, compare_to_.empty() ? reference_backend() : compare_to_}))
        return *code;
    if (flags.fallback != "deny")
      std::cerr << "[conformance] --fallback " << flags.fallback
                << " ignored: conformance always runs with deny\n";
    set_fallback_policy(FallbackPolicy::Deny);
    if (!(timeout_s_ > 0)) {
      std::cerr << "[conformance] --timeout must be a positive number of seconds\n";
      return kExitUsage;
    }
    for (const std::string* p : {&profile_, &list_profile_})
      if (!p->empty() && !conformance::is_profile(*p)) {
        std::cerr << "[conformance] '" << *p << "' is not a profile: core, training or full\n";
        return kExitUsage;
      }
    if (profile_.empty()) profile_ = conformance::kDefaultProfile;
    if (!seed_) seed_ = std::random_device{}();
    if (compare_to_.empty()) compare_to_ = reference_backend();
    if (!list_profile_.empty()) {
      Backend* ref = nullptr;
      try {
        ref = &PluginLoader::instance().load(reference_backend());
      } catch (const Error& e) {
        std::cerr << e.what() << "\n";
        return kExitUsage;
      }
      const auto kernels = conformance::required_kernels(list_profile_, *ref);
      std::cout << "profile " << list_profile_ << ": " << kernels.size() << " kernels (of "
                << ref->name() << "'s)\n";
      for (const auto& k : kernels) std::cout << "  " << k << "\n";
      return kExitOk;
    }
    conformance::Suite suite = conformance::default_suite();
    for (auto& path : case_libraries_) {
      std::error_code ec;
      path = std::filesystem::absolute(path, ec).string();  // for the cases' processes
      try {
        const std::size_t n = conformance::add_cases_from_library(suite, path);
        if (run_one_.empty() && !list_) std::cout << "cases of " << path << ": " << n << "\n";
      } catch (const Error& e) {
        std::cerr << e.what() << "\n";
        return kExitUsage;
      }
    }
    if (!run_one_.empty())
      return conformance::child_main(suite, run_one_, flags.backend, compare_to_, *seed_,
                                     result_fd_);

    auto selected = conformance::select_cases(suite, filters_);
    if (selected.empty()) {
      std::cerr << "[conformance] no case matches --filter";
      for (const auto& f : filters_) std::cerr << " '" << f << "'";
      std::cerr << "; 'backplane conformance --list' shows the cases\n";
      return kExitUsage;
    }
    if (list_) {
      for (const auto* c : selected) {
        std::cout << c->name << "  [" << c->category << "]";
        for (const auto& id : c->spec) std::cout << " " << id;
        std::cout << "\n";
      }
      return kExitOk;
    }

    // A report that cannot be written is found now, not after the run.
    for (const std::string* path : {&json_path_, &junit_path_})
      if (!path->empty() && !can_write(*path)) {
        std::cerr << "[conformance] cannot write the report to '" << *path
                  << "': " << std::strerror(errno) << "\n";
        return kExitUsage;
      }

    BackendPair backends;
    if (int code = load_backends(flags.backend, compare_to_, backends); code != kExitOk)
      return code;
    if (!all_devices_)
      return run_on(flags, backends, suite, selected.size(), json_path_, junit_path_);
    if (parse_device_spec(flags.backend).index) {
      std::cerr << "[conformance] --all-devices runs on every device of the backend; give "
                   "--backend without ':N'\n";
      return kExitUsage;
    }
    // Each device in turn, with reports of their own (r.json: r-dev0.json, ...).
    const int devices = backends.dut->device_count();
    int worst = kExitOk;
    for (int i = 0; i < devices; ++i) {
      BackendFlags one = flags;
      one.backend += ":" + std::to_string(i);
      backends.dut_device.index = static_cast<int16_t>(i);
      std::cout << (i ? "\n" : "") << "== device " << i << " of " << devices << "\n";
      const int code = run_on(one, backends, suite, selected.size(), per_device(json_path_, i),
                              per_device(junit_path_, i));
      if (code != kExitOk && (worst == kExitOk || code < worst)) worst = code;
    }
    if (devices > 1)
      std::cout << "\n"
                << backends.dut->name() << ": " << devices << " devices, "
                << (worst == kExitOk ? "every one passed" : "not every one passed") << "\n";
    return worst;
  }

 private:
  // The suite on the devices of `backends` (flags.backend names the one
  // under test, for the cases' own processes): report, certification and
  // the exit code.
  int run_on(const BackendFlags& flags, const BackendPair& backends,
             const conformance::Suite& suite, std::size_t cases, const std::string& json_path,
             const std::string& junit_path) {
    conformance::Context ctx(*backends.dut, backends.dut_device, *backends.ref, backends.ref_device,
                             *seed_);
    std::cout << "conformance of " << to_string(backends.dut_device) << " against "
              << to_string(backends.ref_device) << ": " << cases << " cases, seed " << *seed_
              << " (replay with --seed " << *seed_ << ")" << std::endl;

    conformance::RunOptions options;
    options.filters = filters_;
    if (!no_isolate_) options.isolation = conformance::Isolation{child_command(flags), timeout_s_};
    conformance::ProgressLine progress(std::cout, STDOUT_FILENO);
    options.on_start = [&](std::size_t i, std::size_t n, const conformance::Case& c) {
      progress.update(i, n, c);
    };
    conformance::Report report = conformance::run_suite(suite, ctx, options);
    progress.clear();
    conformance::describe_backends(report, ctx);
    // The profile's kernels are the reference backend's; when it cannot be
    // loaded (a --reference given only for the fallback), the one compared with.
    const Backend* reference = backends.ref;
    try {
      reference = &PluginLoader::instance().load(reference_backend());
    } catch (const PluginError&) {
    }
    conformance::certify(report, profile_, *backends.dut, *reference, filters_.empty());
    conformance::print_report(std::cout, report,
                              {conformance::wants_colour(STDOUT_FILENO), verbose_});
    // A subset of the suite (--filter) certifies nothing, and fails only by
    // its failures.
    const int code = report.summary().failed != 0                          ? kExitFailed
                     : !filters_.empty() || report.certification.certified ? kExitOk
                                                                           : kExitFailed;
    try {
      if (!json_path.empty()) {
        conformance::write_json(json_path, report);
        std::cout << "JSON report written to " << json_path << "\n";
      }
      if (!junit_path.empty()) {
        conformance::write_junit(junit_path, report);
        std::cout << "JUnit report written to " << junit_path << "\n";
      }
    } catch (const Error& e) {
      // The run's outcome still decides the exit code when it failed.
      std::cerr << e.what() << "\n";
      return code != kExitOk ? code : kExitUsage;
    }
    return code;
  }

  // "r.json" for device 2: "r-dev2.json".
  static std::string per_device(const std::string& path, int device) {
    if (path.empty()) return path;
    const auto slash = path.rfind('/');
    auto dot = path.rfind('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) dot = path.size();
    return path.substr(0, dot) + "-dev" + std::to_string(device) + path.substr(dot);
  }

  // This program again, with the flags that select the same backends and
  // seed; the runner appends --result-fd and --run-one NAME. The plugins
  // passed their probe in this process before any case runs: a case's
  // process loads them directly.
  std::vector<std::string> child_command(const BackendFlags& flags) const {
    std::vector<std::string> cmd = {
        "/proc/self/exe", "conformance", "--backend", flags.backend,
        "--compare-to",   compare_to_,   "--seed",    std::to_string(*seed_),
        "--probe",        "off"};
    for (const auto& p : flags.plugin_paths) cmd.insert(cmd.end(), {"--plugin-path", p});
    for (const auto& o : flags.options) cmd.insert(cmd.end(), {"--backend-option", o});
    for (const auto& c : case_libraries_) cmd.insert(cmd.end(), {"--cases", c});
    cmd.insert(cmd.end(), {"--reference", reference_backend()});
    return cmd;
  }

  std::string json_path_, junit_path_, compare_to_, run_one_, profile_, list_profile_;
  std::vector<std::string> filters_, case_libraries_;
  std::optional<uint64_t> seed_;
  double timeout_s_ = 60;
  int result_fd_ = -1;
  bool no_isolate_ = false, list_ = false, verbose_ = false, all_devices_ = false;
  bool asan_ = false;
};

}  // namespace

std::unique_ptr<Command> make_conformance_command() {
  return std::make_unique<ConformanceCommand>();
}

}  // namespace bp::cli
