// `backplane perf`: how fast a backend's ops are, each figure set against
// the same op on another backend and against the device's own limits, all
// measured in the same run. Each case runs in a child process of its own
// (this program again, --run-case), so that a plugin that crashes or hangs
// in one case costs that case only; the child writes its measurements as
// lines on a result pipe. The cases and the timing are in perf_cases.cpp
// and perf_measure.cpp; the report in perf_report.cpp.
#include <backplane/backplane.h>
#include <backplane/child_process.h>
#include <fnmatch.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>

#include "commands.h"
#include "device_loading.h"
#include "perf.h"
#include "perf_report.h"

namespace bp::cli {

namespace {

using namespace perf;

const char* kDetails =
    "For every op family the backend has kernels for, a few representative shapes: tiny\n"
    "(64 elements, where the framework's own cost shows), cache-sized (256K elements) and\n"
    "memory-sized (16M elements), contiguous and strided; matmul at square, transformer\n"
    "and attention shapes; conv2d, pooling and batch_norm at ResNet shapes. Each is timed\n"
    "after a warm-up call in repetitions of n calls, until --min-time has passed; the\n"
    "median and the interquartile spread are shown. A repetition is timed by the device's\n"
    "own clock between two events around the calls when the backend has one (ABI 2.4's\n"
    "event_elapsed: cuda, opencl, sim), else by the host's clock around the calls and one\n"
    "synchronisation, whose own cost (measured on the idle device) is taken off and\n"
    "reported apart. Every figure is set against:\n"
    "  - the same case on --compare-to (default: the reference backend), as a speed ratio\n"
    "    (above 1: the backend under test is faster);\n"
    "  - the device's own limits, measured in the same run: the bandwidth of a 64 MiB\n"
    "    device-to-device copy for memory-bound ops (GB/s), the best of the backend's\n"
    "    matmul at 256 to 2048 for compute-bound ones (GFLOP/s), as a percentage\n"
    "    of that roofline.\n"
    "The framework's share of a tiny op is measured apart: a 4-element mul through the\n"
    "whole core path against the same kernel called through the ABI alone.\n\n"
    "The table lists the worst ratios first. A case the backend has no kernel for is\n"
    "listed as unsupported; a case whose process crashes or passes --timeout is listed\n"
    "with the reason, and the run goes on.\n\n"
    "Examples:\n"
    "  backplane perf --backend sim\n"
    "  backplane perf --backend cuda --filter 'matmul/*' --filter 'conv2d/*'\n"
    "  backplane perf --backend ./libbackplane_mine.so --json perf.json --csv perf.csv\n"
    "  backplane perf --backend cpu_onednn --compare-to none --dtype float64\n";

constexpr int kResultFd = 3;

std::optional<DType> parse_dtype(const std::string& s) {
  for (DType d : kAllDTypes)
    if (s == name(d)) return d;
  return std::nullopt;
}

std::string format_number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// A message on one line of the report protocol: tabs and newlines as spaces.
std::string one_line(std::string m) {
  for (char& ch : m)
    if (ch == '\n' || ch == '\t') ch = ' ';
  return m;
}

// One backend's side of a case, as a line: status, then the figures or why not.
std::string measure_line(const char* role, const Case& c, const Backend& b, Device d, DType dtype,
                         const TimingOptions& o, double sync_s) {
  std::ostringstream os;
  os.precision(9);
  if (const std::string why = cannot_run(c, b, dtype); !why.empty()) {
    os << role << "\tunsupported\t" << why << "\n";
    return os.str();
  }
  try {
    const Workload w = c.prepare(d, dtype);
    const Timing t = measure(d, w.run, o, sync_s);
    os << role << "\tok\t" << t.seconds << "\t" << t.spread << "\t" << t.repetitions << "\t"
       << t.calls << "\t" << w.bytes << "\t" << w.flops << "\t" << path_of(c, b, dtype) << "\t"
       << (t.device_clock ? "device" : "host") << "\n";
  } catch (const std::exception& e) {
    os << role << "\terror\t" << one_line(e.what()) << "\n";
  }
  return os.str();
}

class PerfCommand : public Command {
 public:
  const char* name() const override { return "perf"; }
  const char* summary() const override {
    return "Time a backend's ops against another backend and the device's own limits";
  }
  const char* details() const override { return kDetails; }
  po::options_description options() override {
    po::options_description own("Options");
    own.add_options()("compare-to", po::value<std::string>(&compare_to_)->value_name("BACKEND"),
                      "backend each case is also timed on, for the ratio (default: the reference "
                      "backend; 'none' for no comparison)")(
        "filter", po::value<std::vector<std::string>>(&filters_)->composing()->value_name("GLOB"),
        "run only the cases whose name matches GLOB ('add/*', '*/16M', 'matmul/square/*'); "
        "repeatable: a case matching any runs")(
        "dtype", po::value<std::string>(&dtype_name_)->value_name("D"),
        "dtype of every case (default float32; under another dtype, the cases for floating "
        "dtypes only are listed as unsupported)")(
        "min-time", po::value<double>(&timing_.min_seconds)->value_name("S"),
        "time each case at least S seconds per backend after its warm-up (default 0.2)")(
        "timeout", po::value<double>(&timeout_s_)->value_name("S"),
        "time limit of one case's process (default 120): past it the case is killed and "
        "reported")("json", po::value<std::string>(&json_)->value_name("FILE"),
                    "also write the report to FILE as JSON")(
        "csv", po::value<std::string>(&csv_)->value_name("FILE"),
        "also write one row per case to FILE as CSV")(
        "plot", po::value<std::string>(&plot_)->value_name("FILE.png"),
        "also draw a roofline chart to FILE.png with gnuplot: each case's GFLOP/s against its "
        "flops "
        "per byte, under the measured ceilings")(
        "list", po::bool_switch(&list_),
        "list the cases and whether the backend can run each; run nothing")(
        "no-isolate", po::bool_switch(&no_isolate_),
        "run every case in this process (a crash ends the run)");
    return own;
  }
  po::options_description hidden_options() override {
    po::options_description h;
    h.add_options()("run-case", po::value<std::string>(&run_case_))("result-fd",
                                                                    po::value<int>(&result_fd_));
    return h;
  }

  int run(const BackendFlags& flags) override {
    const auto dtype = parse_dtype(dtype_name_);
    if (!dtype)
      return usage("--dtype '" + dtype_name_ + "' is not a dtype (float32, float64, int32, ...)");
    if (!(timing_.min_seconds > 0) || !std::isfinite(timing_.min_seconds))
      return usage("--min-time must be a positive number of seconds");
    if (!(timeout_s_ > 0) || !std::isfinite(timeout_s_))
      return usage("--timeout must be a positive number of seconds");
    // A case times both backends for at least --min-time each, after warm-ups.
    if (timeout_s_ < 4 * timing_.min_seconds)
      return usage("--timeout " + format_number(timeout_s_) + " leaves no room for --min-time " +
                   format_number(timing_.min_seconds) +
                   " on two backends: give a --timeout of at least " +
                   format_number(4 * timing_.min_seconds));
    // Output files are checked before the run, not after it.
    for (const std::string* f : {&json_, &csv_, &plot_})
      if (!f->empty() && !std::ofstream(*f, std::ios::app))
        return usage("cannot write the report to '" + *f + "'");
    if (!plot_.empty() && gnuplot_path().empty())
      return usage(
          "--plot needs gnuplot, which is not on PATH (Debian: apt-get install gnuplot-nox)");
    timing_.max_seconds = std::max(3.0, timing_.min_seconds * 5);
    if (compare_to_.empty()) compare_to_ = reference_backend();
    dtype_ = *dtype;
    Backend *&dut = dut_, *&ref = ref_;
    if (int code = load(flags.backend, "backend", dut, dut_device_); code != kExitOk) return code;
    // The backend under test compared with itself says nothing.
    if (compare_to_ == "none" || compare_to_ == dut->name() || compare_to_ == flags.backend)
      compare_to_ = "none";
    else if (int code =
                 load(compare_to_, "backend to compare with (--compare-to)", ref, ref_device_);
             code != kExitOk)
      return code;
    if (!run_case_.empty()) return run_case();

    std::vector<const Case*> selected;
    for (const Case& c : cases())
      if (matches(c.name)) selected.push_back(&c);
    if (selected.empty()) return usage("no case matches the --filter patterns (see --list)");
    if (list_) {
      for (const Case* c : selected) {
        const std::string why = cannot_run(*c, *dut, *dtype), path = path_of(*c, *dut, *dtype);
        std::cout << c->name << (why.empty() ? "" : "  (unsupported: " + why + ")")
                  << (path.empty() ? "" : "  [" + path + "]") << "\n";
      }
      const std::vector<Op> missing = ops_without_a_case();
      if (missing.empty()) {
        std::cout << "(the cases reach every primitive op of ABI " << BP_ABI_MAJOR << "."
                  << BP_ABI_MINOR << ")\n";
      } else {
        std::cout << "(no case reaches:";
        for (Op op : missing) std::cout << " " << op_name(op);
        std::cout << ")\n";
      }
      return kExitOk;
    }
    Report report;
    report.backend = dut->name();
    report.device = dut_device_;
    report.compare_to = ref ? ref->name() : "";
    report.dtype = *dtype;
    std::cerr << "[perf] " << report.backend
              << (ref ? " against " + report.compare_to : std::string()) << ", " << bp::name(*dtype)
              << ", " << selected.size() << " cases, at least " << timing_.min_seconds << " s each"
              << (no_isolate_ ? "" : ", each in a process of its own") << "\n";
    parse_setup(lines_of("@setup", flags), report);
    const bool tty = isatty(STDERR_FILENO);
    for (std::size_t i = 0; i < selected.size(); ++i) {
      const std::string progress = "[perf] " + std::to_string(i + 1) + "/" +
                                   std::to_string(selected.size()) + " " + selected[i]->name;
      if (tty)
        std::cerr << "\r\033[K" << progress << std::flush;
      else
        std::cerr << progress << "\n";
      report.rows.push_back(run_one(*selected[i], flags));
    }
    if (tty) std::cerr << "\r\033[K";
    derive(report);
    print_console(std::cout, report);
    if (!json_.empty() && !write_file(json_, to_json(report))) return kExitInternal;
    if (!csv_.empty() && !write_file(csv_, to_csv(report))) return kExitInternal;
    if (!plot_.empty()) {
      std::string error;
      if (!write_plot(report, plot_, error)) {
        std::cerr << "[perf] " << error << "\n";
        return kExitInternal;
      }
      std::cout << "Roofline chart written to " << plot_ << "\n";
    }
    for (const Row& r : report.rows)
      for (const Side* side : {&r.dut, &r.ref})
        if (side->status == "error" || side->status == "crashed") return kExitFailed;
    return kExitOk;
  }

 private:
  static int usage(const std::string& message) { return usage_error_of("perf", message); }
  static int load(const std::string& spec, const char* role, Backend*& out, Device& device) {
    return load_device_or_say(spec, "perf", role, out, device);
  }
  bool matches(const std::string& name) const {
    if (filters_.empty()) return true;
    for (const std::string& f : filters_)
      if (fnmatch(f.c_str(), name.c_str(), 0) == 0) return true;
    return false;
  }
  static bool write_file(const std::string& path, const std::string& text) {
    std::ofstream f(path);
    f << text;
    f.close();
    if (!f) {
      std::cerr << "[perf] cannot write the report to '" << path << "'\n";
      return false;
    }
    std::cout << "Report written to " << path << "\n";
    return true;
  }

  // In the child (or in this process with --no-isolate): the lines of one
  // case, or of "@setup" (the sync cost, the ceilings and the dispatch
  // overhead).
  // Each side's line is given to `emit` as soon as it is measured, so that a
  // crash of the other side is blamed on the right backend.
  std::string case_lines(const std::string& name,
                         const std::function<void(const std::string&)>& emit = {}) {
    std::ostringstream os;
    os.precision(9);
    const double dut_sync = sync_seconds(dut_device_);
    if (name == "@setup") {
      os << "sync\t" << dut_sync << "\n";
      try {
        const Ceilings c = measure_ceilings(dut_device_, dtype_, timing_, dut_sync);
        os << "ceilings\t" << c.copy_gbs << "\t" << c.matmul_gflops << "\t" << c.matmul_shape
           << "\n";
      } catch (const std::exception& e) {
        os << "dut\terror\t" << one_line(e.what()) << "\n";
      }
      try {
        const Overhead o = dispatch_overhead(dut_device_, timing_, dut_sync);
        os << "overhead\t" << o.core_seconds << "\t" << o.direct_seconds << "\n";
      } catch (const std::exception& e) {
        os << "overhead_error\t" << one_line(e.what()) << "\n";
      }
      return os.str();
    }
    for (const Case& c : cases())
      if (c.name == name) {
        std::string lines = measure_line("dut", c, *dut_, dut_device_, dtype_, timing_, dut_sync);
        if (emit) emit(lines);
        if (ref_) {  // after the backend under test's line: a crash from here on is the other's
          const double ref_sync = sync_seconds(ref_device_);
          const std::string ref_line =
              measure_line("ref", c, *ref_, ref_device_, dtype_, timing_, ref_sync);
          if (emit) emit(ref_line);
          lines += ref_line;
        }
        return lines;
      }
    throw ValueError("no perf case named '" + name + "'");
  }

  int run_case() {
    if (result_fd_ < 0) {
      std::cout << case_lines(run_case_);
      return kExitOk;
    }
    if (run_case_ == "@setup")
      (void)write_all(result_fd_, case_lines(run_case_));
    else
      (void)case_lines(run_case_,
                       [this](const std::string& line) { (void)write_all(result_fd_, line); });
    std::cout.flush();
    _exit(0);  // unloading the plugins cannot change the outcome
  }

  // The lines of `name`, from a child process unless --no-isolate; on a
  // crash or a timeout, one "dut\tcrashed\t<why>" line.
  std::string lines_of(const std::string& name, const BackendFlags& flags) {
    if (no_isolate_) {
      try {
        return case_lines(name);
      } catch (const std::exception& e) {
        return "dut\terror\t" + one_line(e.what()) + "\n";
      }
    }
    std::vector<std::string> cmd = {"/proc/self/exe", "perf",      "--backend", flags.backend,
                                    "--compare-to",   compare_to_, "--dtype",   dtype_name_,
                                    "--probe",        "off"};
    std::ostringstream t;
    t.precision(9);
    t << timing_.min_seconds;
    cmd.insert(cmd.end(), {"--min-time", t.str()});
    for (const auto& p : flags.plugin_paths) cmd.insert(cmd.end(), {"--plugin-path", p});
    for (const auto& o : flags.options) cmd.insert(cmd.end(), {"--backend-option", o});
    cmd.insert(cmd.end(), {"--fallback", flags.fallback, "--reference", reference_backend(),
                           "--result-fd", std::to_string(kResultFd), "--run-case", name});
    const ChildOutcome child = run_child(cmd, timeout_s_, kResultFd);
    std::string why;
    if (!child.started)
      why = child.error;
    else if (child.timed_out)
      why = "timed out after " + format_number(timeout_s_) + " s (--timeout)";
    else if (child.signal != 0)
      why = "killed by " + signal_name(child.signal);
    else if (child.exit_status != 0 || child.report.empty())
      why = "exited with status " + std::to_string(child.exit_status) + ": " +
            output_tail(child.output, 300);
    if (why.empty()) return child.report;
    // The backend under test reports first: with its line there, the other one died.
    const bool dut_done = child.report.rfind("dut\t", 0) == 0;
    const bool ref_done = child.report.find("\nref\t") != std::string::npos;
    if (dut_done && (ref_done || compare_to_ == "none"))
      return child.report;  // died after its report
    return child.report + (dut_done ? "ref" : "dut") + "\tcrashed\t" + one_line(why) + "\n";
  }

  Row run_one(const Case& c, const BackendFlags& flags) {
    return parse_row(c, lines_of(c.name, flags));
  }

  std::string compare_to_, dtype_name_ = "float32", json_, csv_, plot_, run_case_;
  Backend *dut_ = nullptr, *ref_ = nullptr;
  Device dut_device_, ref_device_;
  DType dtype_ = DType::Float32;
  std::vector<std::string> filters_;
  TimingOptions timing_;
  double timeout_s_ = 120;
  int result_fd_ = -1;
  bool list_ = false, no_isolate_ = false;
};

}  // namespace

std::unique_ptr<Command> make_perf_command() { return std::make_unique<PerfCommand>(); }

}  // namespace bp::cli
