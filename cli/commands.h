// The subcommands of the `backplane` program. Each one declares its own
// options; main.cpp adds the global ones (--backend, --plugin-path) so they
// are accepted before or after the subcommand's name.
#pragma once

#include <backplane/options.h>

#include <boost/program_options.hpp>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace bp::cli {

namespace po = boost::program_options;

// Exit codes shared by every subcommand (docs/cli.md lists them).
enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,    // the command ran and found failures (conformance, fuzz)
  kExitUsage = 2,     // bad command line, or the backend could not be loaded
  kExitNoDevice = 3,  // the backend loaded but has no device
  kExitInternal = 4,  // an unexpected error
};

class Command {
 public:
  virtual ~Command() = default;
  virtual const char* name() const = 0;
  // One line for the command list.
  virtual const char* summary() const = 0;
  // What `backplane <cmd> --help` prints after the options: details and examples.
  virtual const char* details() const = 0;
  // The command's own options, bound to its members.
  virtual po::options_description options() { return po::options_description("Options"); }
  // Options parsed like the others but left out of --help (internal protocols).
  virtual po::options_description hidden_options() { return po::options_description(); }
  // Positional arguments, each mapped to an option of options() or
  // hidden_options(). None by default: any positional is then an error.
  virtual po::positional_options_description positional() {
    return po::positional_options_description();
  }
  // What follows the command's name in its usage line, e.g. "NAME [options]".
  virtual const char* usage() const { return "[options]"; }
  // Runs with the global flags already applied (plugin folders registered).
  virtual int run(const BackendFlags& flags) = 0;
};

// A subcommand's usage error: "[CMD] message" (unless it starts so) and
// where the usage is, on stderr; returns kExitUsage.
inline int usage_error_of(const std::string& command, const std::string& message) {
  const std::string tag = "[" + command + "]";
  std::cerr << (message.rfind(tag, 0) == 0 ? "" : tag + " ") << message << "\nRun 'backplane "
            << command << " --help' for usage.\n";
  return kExitUsage;
}

std::unique_ptr<Command> make_devices_command();
std::unique_ptr<Command> make_train_command();
std::unique_ptr<Command> make_launch_command();
std::unique_ptr<Command> make_conformance_command();
std::unique_ptr<Command> make_version_command();
std::unique_ptr<Command> make_ops_command();
std::unique_ptr<Command> make_new_plugin_command();
std::unique_ptr<Command> make_fuzz_command();
std::unique_ptr<Command> make_perf_command();

}  // namespace bp::cli
