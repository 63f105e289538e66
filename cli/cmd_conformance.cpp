// `backplane conformance`: runs the conformance suite on device 0 of the
// selected backend, prints a table per category and optionally writes JSON.
#include <backplane/backplane.h>
#include <backplane/conformance.h>

#include <iostream>
#include <string>

#include "commands.h"

namespace bp::cli {

namespace {

class ConformanceCommand : public Command {
 public:
  const char* name() const override { return "conformance"; }
  const char* summary() const override {
    return "Run the conformance suite on a backend and report which cases pass";
  }
  const char* details() const override {
    return "Each case checks rules of SEMANTICS.md (its IDs are listed beside it) on device 0\n"
           "of the backend. A case is passed, failed (with expected and actual values),\n"
           "unsupported (the backend lacks an op it needs) or skipped. Unsupported cases do\n"
           "not make the run fail.\n\n"
           "Examples:\n"
           "  backplane conformance\n"
           "  backplane conformance --backend cuda --json cuda.json\n"
           "  backplane --backend ./libbackplane_mine.so conformance --filter IP-2\n"
           "  backplane conformance --list\n";
  }
  po::options_description options() override {
    po::options_description own("Options");
    own.add_options()("json", po::value<std::string>(&json_path_)->value_name("FILE"),
                      "also write the report to FILE as JSON")(
        "filter", po::value<std::string>(&filter_)->value_name("TEXT"),
        "run only the cases whose name, category or SEMANTICS.md ID contains TEXT; "
        "the others are reported as skipped")("list", po::bool_switch(&list_),
                                              "list the cases and their IDs without running them");
    return own;
  }

  int run(const BackendFlags& flags) override {
    conformance::Suite suite = conformance::default_suite();
    if (list_) {
      for (const auto& c : suite.cases()) {
        std::cout << c.name << "  [" << c.category << "]";
        for (const auto& id : c.spec) std::cout << " " << id;
        std::cout << "\n";
      }
      return kExitOk;
    }

    Backend* backend = nullptr;
    try {
      backend = &PluginLoader::instance().load(flags.backend);
    } catch (const PluginError& e) {
      std::cerr << e.what() << "\n";
      return kExitUsage;
    }
    if (backend->device_count() == 0) {
      std::cerr << "[conformance] no device: "
                << (backend->no_device_reason().empty() ? "the plugin gave no reason"
                                                        : backend->no_device_reason())
                << " (backend " << backend->name() << ", " << backend->path() << ")\n";
      return kExitNoDevice;
    }

    Device device{static_cast<int16_t>(backend->id()), 0};
    conformance::Context ctx(*backend, device);
    conformance::RunOptions options;
    options.filter = filter_;
    conformance::Report report = conformance::run_suite(suite, ctx, options);
    conformance::print_report(std::cout, report);

    if (!json_path_.empty()) {
      try {
        conformance::write_json(json_path_, report);
      } catch (const Error& e) {
        std::cerr << e.what() << "\n";
        return kExitUsage;
      }
      std::cout << "report written to " << json_path_ << "\n";
    }
    return report.summary().failed == 0 ? kExitOk : kExitFailed;
  }

 private:
  std::string json_path_;
  std::string filter_;
  bool list_ = false;
};

}  // namespace

std::unique_ptr<Command> make_conformance_command() {
  return std::make_unique<ConformanceCommand>();
}

}  // namespace bp::cli
