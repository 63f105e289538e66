// The `backplane` program: finds the subcommand, parses its options together
// with the global ones, and maps errors to exit codes.
#include <backplane/backplane.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"

namespace bp::cli {

namespace {

const char* kExamples =
    "Examples:\n"
    "  backplane devices\n"
    "  backplane conformance --json report.json\n"
    "  backplane --backend cuda conformance\n"
    "  backplane conformance --backend ./build/lib/backplane/libbackplane_cpu_onednn.so\n"
    "  backplane --plugin-path ~/my-plugins --backend mine devices\n"
    "  backplane fuzz --backend sim --seconds 60 --seed 1\n"
    "  backplane train --backend opencl --model cnn --epochs 15\n"
    "  backplane ops\n"
    "  backplane new-plugin mydev && cd mydev   # a plugin project to start from\n"
    "  backplane help conformance\n";

const char* kExitCodes =
    "Exit codes: 0 success; 1 conformance or fuzz cases failed, or a launched rank failed;\n"
    "2 usage error or the backend could not be loaded; 3 the backend has no device;\n"
    "4 unexpected error; 128 + N launch stopped by signal N.\n";

class VersionCommand : public Command {
 public:
  const char* name() const override { return "version"; }
  const char* summary() const override {
    return "Print the core version and the plugin ABI version";
  }
  const char* details() const override {
    return "A plugin must have the core's ABI major version; any minor loads (an older one's\n"
           "missing fields count as absent, a newer one's extras are ignored).\n\n"
           "Example:\n  backplane version\n";
  }
  int run(const BackendFlags&) override {
    std::cout << "backplane " << bp::version() << "\n"
              << "plugin ABI " << BP_ABI_MAJOR << "." << BP_ABI_MINOR << "\n";
    return kExitOk;
  }
};

std::vector<std::unique_ptr<Command>> all_commands() {
  std::vector<std::unique_ptr<Command>> commands;
  commands.push_back(make_devices_command());
  commands.push_back(make_conformance_command());
  commands.push_back(make_fuzz_command());
  commands.push_back(make_perf_command());
  commands.push_back(make_train_command());
  commands.push_back(make_launch_command());
  commands.push_back(make_ops_command());
  commands.push_back(make_new_plugin_command());
  commands.push_back(make_version_command());
  return commands;
}

Command* find_command(const std::vector<std::unique_ptr<Command>>& commands,
                      const std::string& name) {
  for (const auto& c : commands)
    if (name == c->name()) return c.get();
  return nullptr;
}

po::options_description global_options(BackendFlags& flags) {
  po::options_description global("Global options (before or after the command)");
  global.add(bp::backend_options(flags));
  global.add_options()("help,h", "show help (for the command, when one is given)");
  return global;
}

void print_general_help(const std::vector<std::unique_ptr<Command>>& commands,
                        const po::options_description& global) {
  std::cout << "backplane: list, load and check Backplane backend plugins.\n\n"
            << "Usage: backplane [global options] <command> [options]\n\nCommands:\n";
  for (const auto& c : commands)
    std::cout << "  " << c->name() << std::string(14 - std::string(c->name()).size(), ' ')
              << c->summary() << "\n";
  std::cout << "  help [CMD]    Show this help, or the help of CMD\n\n"
            << global << "\n"
            << kExamples << "\n"
            << kExitCodes << "\nRun 'backplane <command> --help' for a command's options.\n";
}

void print_command_help(Command& cmd, const po::options_description& global) {
  std::cout << "Usage: backplane [global options] " << cmd.name() << " " << cmd.usage() << "\n\n"
            << cmd.summary() << ".\n\n";
  po::options_description own = cmd.options();
  if (!own.options().empty()) std::cout << own << "\n";
  std::cout << global << "\n" << cmd.details() << "\n" << kExitCodes;
}

// The index of the subcommand's name in `args`, or -1. Values of the global
// options ("--backend cuda") are skipped so that a backend name is not taken
// for a command.
int find_command_index(const std::vector<std::string>& args,
                       const po::options_description& global) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return -1;  // what follows belongs to another program (launch)
    if (a.rfind("--", 0) == 0) {
      if (a.find('=') != std::string::npos) continue;
      const po::option_description* d = global.find_nothrow(a.substr(2), false);
      if (d && d->semantic()->max_tokens() > 0) ++i;
      continue;
    }
    if (a.size() > 1 && a[0] == '-') continue;
    return static_cast<int>(i);
  }
  return -1;
}

// Edit distance, for suggesting the flag a mistyped one was meant to be.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// "unrecognised option '--backed' (did you mean '--backend'?)": the closest
// long option of `options` within two edits, or a longer one it begins.
std::string unknown_option_message(const std::string& flag,
                                   const po::options_description& options) {
  const std::string name = flag.substr(flag.find_first_not_of('-'));
  std::string best;
  std::size_t best_distance = 3;
  for (const auto& o : options.options()) {
    const std::string& candidate = o->long_name();
    if (candidate.empty()) continue;
    std::size_t d = edit_distance(name, candidate);
    if (d >= best_distance && candidate.rfind(name, 0) == 0 && !name.empty()) d = 2;
    if (d < best_distance) best_distance = d, best = candidate;
  }
  return "unrecognised option '" + flag + "'" +
         (best.empty() ? std::string() : " (did you mean '--" + best + "'?)");
}

int usage_error(const std::string& message, const std::string& command = {}) {
  std::cerr << "[backplane] " << message << "\nRun 'backplane "
            << (command.empty() ? "" : command + " ") << "--help' for usage.\n";
  return kExitUsage;
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto commands = all_commands();
  BackendFlags flags;
  po::options_description global = global_options(flags);

  int at = find_command_index(args, global);
  // A --help after "--" is the launched program's, not ours.
  const auto own_end = std::find(args.begin(), args.end(), std::string("--"));
  bool wants_help = std::any_of(args.begin(), own_end,
                                [](const std::string& a) { return a == "--help" || a == "-h"; });
  if (at < 0) {
    if (wants_help) {
      print_general_help(commands, global);
      return kExitOk;
    }
    return usage_error("no command given");
  }
  std::string name = args[at];
  args.erase(args.begin() + at);

  if (name == "help") {
    int topic = find_command_index(args, global);
    if (topic < 0) {
      print_general_help(commands, global);
      return kExitOk;
    }
    Command* cmd = find_command(commands, args[topic]);
    if (!cmd) return usage_error("no command named '" + args[topic] + "'");
    print_command_help(*cmd, global);
    return kExitOk;
  }
  Command* cmd = find_command(commands, name);
  if (!cmd) {
    // "--backed sim devices": the mistyped flag, not its value, is the mistake.
    if (at > 0 && args[at - 1].rfind("--", 0) == 0 &&
        global.find_nothrow(args[at - 1].substr(2), false) == nullptr)
      return usage_error(unknown_option_message(args[at - 1], global));
    return usage_error("unknown command '" + name + "'");
  }

  po::options_description all;
  all.add(cmd->options()).add(cmd->hidden_options()).add(global);
  po::variables_map vm;
  try {
    // Only the command's own positionals; without any, a positional is an error.
    const po::positional_options_description positional = cmd->positional();
    // No abbreviations: "--verb" is not taken for "--verbose".
    const int style =
        po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(args).options(all).positional(positional).style(style).run(),
              vm);
    po::notify(vm);
  } catch (const po::too_many_positional_options_error&) {
    return usage_error(
        name + ": unexpected argument; the usage is 'backplane " + name + " " + cmd->usage() + "'",
        name);
  } catch (const po::unknown_option& e) {
    return usage_error(name + ": " + unknown_option_message(e.get_option_name(), all), name);
  } catch (const po::error& e) {
    return usage_error(name + ": " + e.what(), name);
  }
  if (vm.count("help")) {
    print_command_help(*cmd, global);
    return kExitOk;
  }
  try {
    bp::apply_backend_flags(flags);
  } catch (const bp::ValueError& e) {
    return usage_error(e.what(), name);
  }
  int code = cmd->run(flags);
  print_fallback_summary(std::cerr);  // ops run on the reference backend (--fallback)
  return code;
}

}  // namespace

std::unique_ptr<Command> make_version_command() { return std::make_unique<VersionCommand>(); }

}  // namespace bp::cli

int main(int argc, char** argv) {
  try {
    return bp::cli::run(argc, argv);
  } catch (const bp::PluginError& e) {
    std::cerr << e.what() << "\n";
    return bp::cli::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "[backplane] unexpected error: " << e.what() << "\n";
    return bp::cli::kExitInternal;
  }
}
