// What the backends say about themselves, for the report and for
// `backplane devices --verbose`: plugin and device descriptions, declared
// tolerances, and the kernel registry's op x dtype matrix.
#include <backplane/conformance/report.h>
#include <sys/utsname.h>

#include <ctime>
#include <iomanip>
#include <iterator>
#include <ostream>
#include <thread>

namespace bp::conformance {

namespace {

const auto& kDTypes = kAllDTypes;
constexpr const char* kShortNames[] = {"bool", "i32",  "i64", "f32", "f64",
                                       "f16",  "bf16", "i8",  "u8",  "i16"};
static_assert(std::size(kShortNames) == std::size(kAllDTypes));

bool has(const Backend& b, Op op, DType d) {
  return KernelRegistry::instance().lookup(op, b.id(), d).fn != nullptr;
}
bool emulated(const Backend& b, Op op, DType d) {
  return KernelRegistry::instance().lookup(op, b.id(), d).flags & BP_KERNEL_EMULATED;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// "host (Linux 6.1.0 x86_64, 2 CPUs)".
std::string machine_description() {
  utsname u{};
  if (uname(&u) != 0) return "unknown";
  return std::string(u.nodename) + " (" + u.sysname + " " + u.release + " " + u.machine + ", " +
         std::to_string(std::thread::hardware_concurrency()) + " CPUs)";
}

void add_tolerances(Report& report, const Backend& b) {
  for (const bp_tolerance& t : b.tolerances()) {
    DeclaredTolerance d;
    d.backend = b.name();
    d.op = t.op >= 0 && t.op < kNumOps ? std::string(op_name(static_cast<Op>(t.op)))
                                       : "op " + std::to_string(t.op);
    d.dtype = t.dtype >= 0 && t.dtype < kNumDTypes ? std::string(name(static_cast<DType>(t.dtype)))
                                                   : "dtype " + std::to_string(t.dtype);
    d.rtol = t.rtol;
    d.atol = t.atol;
    report.tolerances.push_back(std::move(d));
  }
}

}  // namespace

void describe_backends(Report& report, const Context& ctx) {
  const Backend& b = ctx.backend();
  report.backend = b.name();
  report.device = to_string(ctx.device());
  report.plugin_version = b.version();
  report.plugin_path = b.path();
  report.plugin_sha256 = file_sha256(b.path());
  report.date = utc_now();
  report.machine = machine_description();
  report.abi_major = b.abi_major();
  report.abi_minor = b.abi_minor();
  report.device_name = b.device_props(ctx.device().index).name;
  report.core_version = bp::version();
  const Backend& ref = ctx.reference();
  report.compare_to = ref.name();
  report.compare_device = to_string(ctx.reference_device());
  report.compare_version = ref.version();
  report.compare_path = ref.path();

  report.tolerances.clear();
  add_tolerances(report, b);
  if (&ref != &b) add_tolerances(report, ref);

  // Ops are "missing" relative to the reference: an op no backend has is
  // not a gap of this one.
  report.missing_ops.clear();
  for (int op = 0; op < kNumOps; ++op) {
    MissingOp m;
    m.op = std::string(op_name(static_cast<Op>(op)));
    for (DType d : kDTypes)
      if (has(ref, static_cast<Op>(op), d) && !has(b, static_cast<Op>(op), d))
        m.dtypes.push_back(std::string(name(d)));
    if (!m.dtypes.empty()) report.missing_ops.push_back(std::move(m));
  }
}

void print_capability_matrix(std::ostream& os, const Backend& backend) {
  std::size_t width = 4;
  for (int op = 0; op < kNumOps; ++op) width = std::max(width, op_name(static_cast<Op>(op)).size());
  os << "    " << std::left << std::setw(static_cast<int>(width) + 2) << "op";
  for (int d = 0; d < kNumDTypes; ++d)
    os << std::setw(d + 1 < kNumDTypes ? 5 : 0) << kShortNames[d];
  os << "\n";
  int kernels = 0, emulations = 0;
  for (int op = 0; op < kNumOps; ++op) {
    os << "    " << std::setw(static_cast<int>(width) + 2) << op_name(static_cast<Op>(op));
    for (int d = 0; d < kNumDTypes; ++d) {
      const bool present = has(backend, static_cast<Op>(op), kDTypes[d]);
      const bool wide = present && emulated(backend, static_cast<Op>(op), kDTypes[d]);
      kernels += present;
      emulations += wide;
      os << std::setw(d + 1 < kNumDTypes ? 5 : 0) << (wide ? "e" : present ? "x" : ".");
    }
    os << "\n";
  }
  os << "    " << kernels << " kernels (op x dtype) of " << kNumOps * kNumDTypes;
  if (emulations > 0) os << "; " << emulations << " of them (e) compute in a wider dtype and round";
  os << "\n";
}

}  // namespace bp::conformance
