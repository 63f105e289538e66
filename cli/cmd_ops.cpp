// `backplane ops`: the op set as a plugin author meets it. The primitive ops
// (bp_op, what a plugin registers kernels for) with the dtypes each loaded
// backend registers, and the composite ops the core builds from them, with
// whether each backend has every primitive they need.
#include <backplane/backplane.h>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "commands.h"
#include "composite_ops.h"

namespace bp::cli {

namespace {

const auto& kDTypes = kAllDTypes;
constexpr const char* kShort[] = {"bool", "i32",  "i64", "f32", "f64",
                                  "f16",  "bf16", "i8",  "u8",  "i16"};
static_assert(std::size(kShort) == std::size(kAllDTypes));

bool has(const Backend& b, Op op, DType d) {
  return KernelRegistry::instance().lookup(op, b.id(), d).fn != nullptr;
}

// A dtype mask (BP_DTYPE_BIT()s) as "all", "numeric" (no bool), "float",
// "-" (none), or the list.
std::string mask_summary(unsigned mask) {
  constexpr unsigned kFloat = BP_DTYPE_BIT(BP_DTYPE_FLOAT32) | BP_DTYPE_BIT(BP_DTYPE_FLOAT64) |
                              BP_DTYPE_BIT(BP_DTYPE_FLOAT16) | BP_DTYPE_BIT(BP_DTYPE_BFLOAT16);
  if (mask == BP_DTYPE_MASK_ALL) return "all";
  if (mask == (BP_DTYPE_MASK_ALL & ~1u)) return "numeric";
  if (mask == kFloat) return "float";
  if (mask == 0) return "-";
  std::string s;
  for (int d = 0; d < kNumDTypes; ++d)
    if (mask & (1u << d)) s.append(s.empty() ? "" : " ").append(kShort[d]);
  return s;
}

// The dtypes `b` registers for `op`, as mask_summary says them, and those
// it computes in a wider dtype ("(f16 bf16 emulated)").
std::string dtype_summary(const Backend& b, Op op) {
  unsigned mask = 0, wide = 0;
  for (int d = 0; d < kNumDTypes; ++d) {
    const KernelEntry& k = KernelRegistry::instance().lookup(op, b.id(), kDTypes[d]);
    if (k.fn) mask |= 1u << d;
    if (k.fn && (k.flags & BP_KERNEL_EMULATED)) wide |= 1u << d;
  }
  std::string s = mask_summary(mask);
  if (wide != 0) {
    s += " (";
    for (int d = 0, n = 0; d < kNumDTypes; ++d)
      if (wide & (1u << d)) s.append(n++ ? " " : "").append(kShort[d]);
    s += " emulated)";
  }
  return s;
}

// "yes" when `b` registers every op in `uses` for some dtype, else what it lacks.
std::string composite_status(const Backend& b, const CompositeOp& c) {
  std::string missing;
  for (Op op : c.uses) {
    bool any = false;
    for (DType d : kDTypes) any = any || has(b, op, d);
    if (!any) missing.append(missing.empty() ? "" : ", ").append(op_name(op));
  }
  return missing.empty() ? "yes" : "lacks " + missing;
}

std::string uses_text(const CompositeOp& c) {
  if (c.uses.empty()) return "(no kernel)";
  std::string s;
  for (Op op : c.uses) s.append(s.empty() ? "" : ", ").append(op_name(op));
  return s;
}

class OpsCommand : public Command {
 public:
  const char* name() const override { return "ops"; }
  const char* summary() const override {
    return "List the primitive ops a plugin implements and the composite ops built on them";
  }
  const char* details() const override {
    return "Primitive ops are the bp_op values of backplane/plugin.h: the only ops a plugin\n"
           "registers kernels for, each with the contract written beside it in the header.\n"
           "For every loaded backend the table shows the dtypes it registers: all, numeric\n"
           "(every dtype but bool), float (float32 and float64), a list, or - for none.\n"
           "Named ops are a plugin's own ops (\"vendor::name\"), each with a schema\n"
           "of its operands; programs call them with bp::call_op.\n"
           "Composite ops are core functions built from primitives (mean, softmax's\n"
           "backward, clone, factories, views, ...): a plugin never implements them, and\n"
           "one runs on a backend when the backend has the primitives it uses.\n\n"
           "The backends are every plugin in the plugin folders (see 'backplane devices')\n"
           "and the one --backend names; --only-backend keeps just that one.\n\n"
           "Examples:\n"
           "  backplane ops\n"
           "  backplane ops --primitive --only-backend --backend ./build/libbackplane_mine.so\n"
           "  backplane ops --composite\n";
  }

  po::options_description options() override {
    po::options_description own("Options");
    own.add_options()("primitive", po::bool_switch(&primitive_only_),
                      "print only the primitive ops")(
        "composite", po::bool_switch(&composite_only_), "print only the composite ops")(
        "named", po::bool_switch(&named_only_), "print only the named ops")(
        "only-backend", po::bool_switch(&only_backend_),
        "show only the --backend backend, not every plugin found");
    return own;
  }

  int run(const BackendFlags& flags) override {
    PluginLoader& loader = PluginLoader::instance();
    std::vector<const Backend*> backends;
    try {
      backends.push_back(&loader.load(flags.backend));
    } catch (const PluginError& e) {
      std::cerr << e.what() << "\n";
      return kExitUsage;
    }
    if (!only_backend_) {
      for (const PluginCandidate& c : loader.discover())
        if (c.loaded && c.backend &&
            std::find(backends.begin(), backends.end(), c.backend.get()) == backends.end())
          backends.push_back(c.backend.get());
    }
    const bool all = !primitive_only_ && !composite_only_ && !named_only_;
    const char* gap = "";
    if (all || primitive_only_) {
      print_primitives(backends);
      gap = "\n";
    }
    if (all || named_only_) {
      std::cout << gap;
      print_named(backends);
      gap = "\n";
    }
    if (all || composite_only_) {
      std::cout << gap;
      print_composites(backends);
    }
    return kExitOk;
  }

 private:
  static void print_primitives(const std::vector<const Backend*>& backends) {
    std::cout << "Primitive ops (bp_op in backplane/plugin.h; a plugin registers kernels for "
                 "these), "
              << kNumOps << " in ABI " << BP_ABI_MAJOR << "." << BP_ABI_MINOR << ":\n";
    std::vector<std::size_t> width;
    for (const Backend* b : backends) {
      std::size_t w = b->name().size();
      for (int op = 0; op < kNumOps; ++op) w = std::max(w, dtype_summary(*b, Op(op)).size());
      width.push_back(w + 2);
    }
    std::cout << std::left << "  " << std::setw(4) << "#" << std::setw(14) << "op";
    for (std::size_t i = 0; i < backends.size(); ++i)
      std::cout << std::setw(static_cast<int>(width[i])) << backends[i]->name();
    std::cout << "\n";
    for (int op = 0; op < kNumOps; ++op) {
      std::cout << "  " << std::setw(4) << op << std::setw(14) << op_name(Op(op));
      for (std::size_t i = 0; i < backends.size(); ++i)
        std::cout << std::setw(static_cast<int>(width[i])) << dtype_summary(*backends[i], Op(op));
      std::cout << "\n";
    }
    std::cout << "  (an op or dtype a backend lacks makes the conformance cases that need it\n"
                 "   'unsupported', not failed; 'backplane devices --verbose' shows the matrix)\n";
  }

  static void print_named(const std::vector<const Backend*>& backends) {
    std::vector<NamedOpInfo> shown;
    for (const NamedOpInfo& op : named_ops())
      for (const Backend* b : backends)
        if (b->label() == op.backend) shown.push_back(op);
    std::cout << "Named ops (a plugin's own, called with bp::call_op), " << shown.size() << ":\n";
    if (shown.empty()) std::cout << "  (none registered by these backends)\n";
    std::string last;
    for (const NamedOpInfo& op : shown) {  // sorted by name
      if (op.name != last) std::cout << "  " << op.name << "  " << op.schema << "\n";
      last = op.name;
      std::cout << "      " << op.backend << ": " << mask_summary(op.dtype_mask) << "  ("
                << op.origin << ")\n";
    }
  }

  static void print_composites(const std::vector<const Backend*>& backends) {
    const auto& table = composite_ops();
    std::cout << "Composite ops (built by the core from primitives; no plugin implements them), "
              << table.size() << " groups:\n";
    for (const CompositeOp& c : table) {
      std::cout << "  " << c.name << "\n      uses: " << uses_text(c) << " -- " << c.how << "\n";
      if (c.uses.empty()) continue;
      std::cout << "      runs on:";
      for (const Backend* b : backends)
        std::cout << " " << b->name() << " (" << composite_status(*b, c) << ")";
      std::cout << "\n";
    }
  }

  bool primitive_only_ = false, composite_only_ = false, named_only_ = false, only_backend_ = false;
};

}  // namespace

std::unique_ptr<Command> make_ops_command() { return std::make_unique<OpsCommand>(); }

}  // namespace bp::cli
