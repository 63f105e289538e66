// `backplane fuzz`: property-based fuzzing of a backend (the engine is
// conformance/fuzz.h), or of the checkpoint loader (--target checkpoint,
// conformance/fuzz_checkpoint.h). This file parses the options, loads the backends,
// keeps a crash from losing the number of the case that caused it, and maps
// the outcome to an exit code.
#include <backplane/backplane.h>
#include <backplane/conformance/fuzz.h>
#include <backplane/conformance/fuzz_checkpoint.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
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
    "Each case is drawn from the seed and its number alone, and is one of:\n"
    "  view     a base tensor (rank 0-8, zero-size dims included) and a chain of views\n"
    "           (narrow, slice with steps, select, transpose, permute, expand, unfold,\n"
    "           as_strided, squeeze, unsqueeze, diagonal, view, reshape, flatten); each\n"
    "           view's layout and values are checked against a host model of the memory;\n"
    "  op       ops on views (unary, binary with broadcasting, reductions, softmax,\n"
    "           matmul, comparisons, where), compared with the same op computed by the\n"
    "           --compare-to backend from contiguous copies of the inputs;\n"
    "  inplace  in-place ops and copy_ into views of one base, with operands that may\n"
    "           overlap it; a host shadow of the base gives the expected base after each\n"
    "           op, or the error the contract demands (IP-4, IP-5, IP-6), after which\n"
    "           the base must be unchanged;\n"
    "  grad     chains of views and ops on float64 leaves, gradients compared with\n"
    "           central differences (eps 1e-6, atol 1e-5, rtol 1e-3), plus: integer\n"
    "           results never require grad, and max/min send the gradient to a NaN.\n"
    "Dtypes: float32, float64, int32, int64 and bool where the op allows them; integer\n"
    "and bool results are compared exactly, floating ones within a few ulps (scaled by\n"
    "the number of accumulated terms, loosened only by tolerances a backend declares).\n\n"
    "Each failure is counted by kind and op, and shrunk (fewer steps, smaller and fewer\n"
    "dims, plainer values) while it fails the same way; each new reproducer is printed\n"
    "as a C++ snippet with the command that replays the case. An op the\n"
    "backend lacks makes a case 'unsupported', not failed. A progress line goes to\n"
    "stderr every few seconds; if a plugin crashes, the number of the case it crashed\n"
    "in is printed to stderr, so that --case replays it.\n\n"
    "--skip takes a case kind (view, op, inplace, grad), an op or view name as the\n"
    "summary prints it (add_, prod, max(dim), unfold, as_strided, ...) or a feature:\n"
    "  probe, overflow, rank9, zero-size, special, alias, grad-overlap, grad-zeros,\n"
    "  nan-grad, int-grad\n"
    "(replaying a case needs the same --skip list, which the replay line repeats).\n\n"
    "--poison also checks that an op writes every element of its result: each op case\n"
    "runs twice more with the device's new memory filled with 0x00 bytes, then 0xFF,\n"
    "and an element that differs between the two fails the case (unwritten-result).\n\n"
    "--target checkpoint fuzzes the safetensors loader instead (what train --resume and\n"
    "load_file read): each case is 1 to 3 mutations of a valid checkpoint (bit flips, bytes\n"
    "set, cuts, insertions, deleted and repeated runs, digits changed in the header),\n"
    "loaded onto --backend's device with the sums required (it must be refused with a\n"
    "ValueError) and optional (it loads or is refused, nothing else). --seconds, --cases,\n"
    "--seed, --case and --verbose apply; the ops-only options do not.\n\n"
    "Examples:\n"
    "  backplane fuzz --seconds 120 --seed 1\n"
    "  backplane fuzz --target checkpoint --cases 100000 --seed 1\n"
    "  backplane fuzz --backend sim --cases 3000 --seed 1\n"
    "  backplane fuzz --backend sim --seed 1 --case 1234 --verbose   # replay one case\n"
    "  backplane fuzz --backend ./libbackplane_mine.so --seconds 600\n"
    "  backplane fuzz --seconds 60 --skip grad --skip 'max(dim)'\n";

// What the crash handler writes: prepared before each case, since a signal
// handler may only call async-signal-safe functions.
char g_crash_note[512];
std::size_t g_crash_note_len = 0;

extern "C" void on_fatal_signal(int sig) {
  char num[8];
  int n = 0;
  for (int s = sig; n == 0 || s > 0; s /= 10) num[n++] = static_cast<char>('0' + s % 10);
  const char head[] = "\n[fuzz] crashed with signal ";
  ssize_t ignored = write(STDERR_FILENO, head, sizeof head - 1);
  while (n > 0) ignored = write(STDERR_FILENO, &num[--n], 1);
  ignored = write(STDERR_FILENO, g_crash_note, g_crash_note_len);
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// The crash note for case `k`: its number and the command that replays it.
void note_case(uint64_t k, uint64_t seed, const std::string& replay_command) {
  const int n =
      std::snprintf(g_crash_note, sizeof g_crash_note,
                    " while running case %llu of seed %llu; replay it with:\n  %s --seed "
                    "%llu --case %llu --verbose\n",
                    static_cast<unsigned long long>(k), static_cast<unsigned long long>(seed),
                    replay_command.c_str(), static_cast<unsigned long long>(seed),
                    static_cast<unsigned long long>(k));
  g_crash_note_len =
      n < 0 ? 0 : std::min<std::size_t>(static_cast<std::size_t>(n), sizeof g_crash_note - 1);
}

void install_crash_handler() {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, on_fatal_signal);
}

// Loads a backend; prints why not and returns the exit code when it cannot.
// Loads a backend and picks its device, or says why not on stderr.
int load(const std::string& spec, const char* role, Backend*& out, Device& device) {
  return load_device_or_say(spec, "fuzz", role, out, device);
}

class FuzzCommand : public Command {
 public:
  const char* name() const override { return "fuzz"; }
  const char* summary() const override {
    return "Fuzz a backend with random views, ops, in-place ops and gradient checks";
  }
  const char* details() const override { return kDetails; }

  po::options_description options() override {
    po::options_description own("Options");
    own.add_options()("target", po::value<std::string>(&target_)->value_name("ops|checkpoint"),
                      "what to fuzz: a backend's views, ops and gradients (ops, the default) "
                      "or the checkpoint loader (checkpoint)")(
        "seconds",
        po::value<double>()->value_name("N")->notifier([this](double s) { seconds_ = s; }),
        "stop after N seconds (default 60 unless --cases is given)")(
        "cases",
        po::value<uint64_t>()->value_name("N")->notifier([this](uint64_t n) { cases_ = n; }),
        "stop after N cases (with --seconds, whichever comes first)")(
        "seed", po::value<uint64_t>()->value_name("S")->notifier([this](uint64_t s) { seed_ = s; }),
        "seed of the cases (default: a random one, printed at the start)")(
        "case", po::value<uint64_t>()->value_name("K")->notifier([this](uint64_t k) { case_ = k; }),
        "run case K of the seed alone (a replay), shrink it if it fails")(
        "compare-to", po::value<std::string>(&compare_to_)->value_name("BACKEND"),
        "backend that computes the expected op values (default: the reference backend, "
        "--reference)")(
        "skip", po::value<std::vector<std::string>>(&skip_)->composing()->value_name("NAME"),
        "leave a case kind, an op, a view or a feature out of the generated cases (repeatable)")(
        "shrink-seconds", po::value<double>(&shrink_seconds_)->value_name("N"),
        "time limit for shrinking one failure (default 20)")(
        "poison", po::bool_switch(&poison_),
        "run each op case twice more, the device's memory filled first with 0x00 bytes, then "
        "with 0xFF: a result element that differs was never written (unwritten-result)")(
        "asan", po::bool_switch(&asan_),
        "for a plugin built with AddressSanitizer: run again with its ASan runtime preloaded "
        "(LD_PRELOAD; the line is printed)")(
        "verbose,v", po::bool_switch(&verbose_),
        "print each case's number and kind before it runs; with --case, every statement");
    return own;
  }

  int run(const BackendFlags& flags) override {
    if (target_ != "ops" && target_ != "checkpoint")
      return usage("--target takes ops or checkpoint, not '" + target_ + "'");
    if (target_ == "checkpoint")
      for (const auto& [given, option] :
           {std::pair{!compare_to_.empty(), "--compare-to"}, std::pair{!skip_.empty(), "--skip"},
            std::pair{poison_, "--poison"}, std::pair{asan_, "--asan"}})
        if (given) return usage(std::string(option) + " applies to --target ops only");
    if (asan_)
      if (const auto code = restart_with_asan(
              "fuzz", {flags.backend, compare_to_.empty() ? reference_backend() : compare_to_},
              "abort_on_error=1"))
        return *code;
    if (cases_ && *cases_ == 0) return usage("--cases must be at least 1");
    if (seconds_ && !(*seconds_ > 0)) return usage("--seconds must be a positive number");
    if (!(shrink_seconds_ >= 0)) return usage("--shrink-seconds must not be negative");
    if (target_ == "checkpoint") return run_checkpoint(flags);
    try {
      conformance::fuzz::check_skip_names(skip_);
    } catch (const ValueError& e) {
      return usage(e.what());
    }
    if (flags.fallback != "deny")
      std::cerr << "[fuzz] --fallback " << flags.fallback << " ignored: fuzzing runs with deny\n";
    set_fallback_policy(FallbackPolicy::Deny);

    if (compare_to_.empty()) compare_to_ = reference_backend();
    Backend *dut = nullptr, *ref = nullptr;
    conformance::fuzz::Options o;
    if (int code = load(flags.backend, "backend", dut, o.device); code != kExitOk) return code;
    if (int code = load(compare_to_, "reference backend (--compare-to)", ref, o.reference);
        code != kExitOk)
      return code;

    set_common(o, flags, "");
    o.skip = skip_;
    o.shrink_seconds = shrink_seconds_;
    o.poison = poison_;
    if (compare_to_ != kDefaultBackend) o.replay_command += " --compare-to " + compare_to_;
    if (asan_) o.replay_command += " --asan";
    o.on_case_start = [&](uint64_t k) { note_case(k, o.seed, o.replay_command); };
    install_crash_handler();

    print_start("backend " + dut->name() + " against " + ref->name(), o.seed, o.seconds);
    const conformance::fuzz::Summary s = conformance::fuzz::run(o, std::cout, std::cerr);
    conformance::fuzz::print_summary(std::cout, s);
    return s.failed == 0 ? kExitOk : kExitFailed;
  }

 private:
  static int usage(const std::string& message) { return usage_error_of("fuzz", message); }

  // What both targets take alike from the options: the seed (drawn when not
  // given), the cases, the time limit, a replay, verbosity, and the replay
  // line with the backend's flags (`target`: "" or "--target NAME ").
  template <class Options>
  void set_common(Options& o, const BackendFlags& flags, const char* target) const {
    o.seed = seed_.value_or(std::random_device{}() * 0x100000000ull + std::random_device{}());
    o.cases = cases_;
    o.seconds = seconds_.value_or(cases_ || case_ ? 0 : 60);
    o.only_case = case_;
    o.verbose = verbose_;
    o.replay_command = std::string("backplane fuzz ") + target + "--backend " + flags.backend;
    for (const auto& p : flags.plugin_paths) o.replay_command += " --plugin-path " + p;
    for (const auto& opt : flags.options) o.replay_command += " --backend-option " + opt;
    std::snprintf(g_crash_note, sizeof g_crash_note, "%s", "");
  }

  // "fuzz: WHAT, seed S, N cases, at most T s (replay with --seed S)".
  void print_start(const std::string& what, uint64_t seed, double seconds) const {
    std::cout << "fuzz: " << what << ", seed " << seed;
    if (case_)
      std::cout << ", case " << *case_;
    else if (cases_)
      std::cout << ", " << *cases_ << " cases";
    if (seconds > 0) std::cout << ", at most " << seconds << " s";
    std::cout << " (replay with --seed " << seed << ")" << std::endl;
  }

  // --target checkpoint: the loader fuzzer, tensors loaded onto --backend's device.
  int run_checkpoint(const BackendFlags& flags) {
    Backend* dut = nullptr;
    conformance::fuzz::CheckpointOptions o;
    Device device;
    if (int code = load(flags.backend, "backend", dut, device); code != kExitOk) return code;
    o.device = device;
    set_common(o, flags, "--target checkpoint ");
    o.on_case_start = [&](uint64_t k) { note_case(k, o.seed, o.replay_command); };
    install_crash_handler();
    print_start("the checkpoint loader onto " + dut->name(), o.seed, o.seconds);
    const conformance::fuzz::CheckpointSummary s =
        conformance::fuzz::run_checkpoint(o, std::cout, std::cerr);
    conformance::fuzz::print_summary(std::cout, s);
    return s.failed == 0 ? kExitOk : kExitFailed;
  }

  std::string target_ = "ops";

  std::optional<double> seconds_;
  std::optional<uint64_t> cases_, seed_, case_;
  std::string compare_to_;  // empty: the reference backend
  std::vector<std::string> skip_;
  double shrink_seconds_ = 20;
  bool verbose_ = false, asan_ = false, poison_ = false;
};

}  // namespace

std::unique_ptr<Command> make_fuzz_command() { return std::make_unique<FuzzCommand>(); }

}  // namespace bp::cli
