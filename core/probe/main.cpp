// backplane-probe: loads one plugin file the way a host process does and
// says, on a file descriptor, how far it got and whether it passed. The
// loader runs it in a child process before opening a plugin itself
// (core/src/host/plugin_probe.cpp), so that a plugin that crashes, hangs or
// exits while loading takes this process down rather than the host.
//
//   backplane-probe --result-fd 3 [--option KEY=VALUE]... /path/to/libbackplane_x.so
//
// Report, one item per line: "phase <name>" as each stage of loading
// begins, then "passed", or "refused" and the reason on the lines after.
#include <backplane/backend.h>
#include <backplane/child_process.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../src/host/plugin_probe.h"

namespace {

int g_fd = -1;

void report_phase(const char* phase) { bp::write_all(g_fd, std::string("phase ") + phase + "\n"); }

// Device 0's memory, written and read back through the plugin.
std::string memory_check(bp::Backend& b) {
  if (b.device_count() == 0) return "";
  bp::detail::load_phase("memory");
  constexpr std::size_t kBytes = 256;
  std::vector<unsigned char> in(kBytes), out(kBytes, 0);
  for (std::size_t i = 0; i < kBytes; ++i) in[i] = static_cast<unsigned char>(i * 7 + 3);
  void* mem = b.allocate(0, kBytes);
  b.copy_from_host(0, nullptr, mem, 0, in.data(), kBytes);
  b.read_to_host(0, nullptr, out.data(), mem, 0, kBytes);
  b.deallocate(0, mem, kBytes, nullptr);
  b.synchronize(0);
  if (in != out)
    return "the memory check read back other bytes than it wrote (allocate, copy_from_host, "
           "copy_to_host on device 0)";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  bp::BackendOptions options;
  bool usage = argc < 4 || std::strcmp(argv[1], "--result-fd") != 0 || argc % 2 != 0;
  for (int i = 3; !usage && i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--option") != 0) {
      usage = true;
      break;
    }
    try {
      options.push_back(bp::parse_backend_option(argv[i + 1]));
    } catch (const bp::Error&) {
      usage = true;
    }
  }
  if (usage) {
    std::fprintf(stderr,
                 "usage: backplane-probe --result-fd FD [--option KEY=VALUE]... PLUGIN.so\n"
                 "Loads PLUGIN.so as a Backplane host would, with the options given to its\n"
                 "entry point, and reports on FD how far it got and whether it passed; the\n"
                 "loader runs it before opening a plugin itself.\n");
    return 2;
  }
  g_fd = std::atoi(argv[2]);
  const std::string path = argv[argc - 1];
  bp::PluginLoader& loader = bp::PluginLoader::instance();
  loader.set_backend_options(path, options);
  loader.set_probe_mode(bp::ProbeMode::Off);
  bp::detail::set_load_phase_hook(&report_phase);
  std::string refused;
  try {
    bp::Backend& b = loader.load(path);
    refused = memory_check(b);
    loader.unload(b.name());  // destroy() runs here
  } catch (const bp::PluginError& e) {
    refused = e.reason().empty() ? e.what() : e.reason();
  } catch (const std::exception& e) {
    refused = e.what();
  }
  report_phase("done");
  bp::write_all(g_fd, refused.empty() ? std::string(bp::detail::kProbePassed) + "\n"
                                      : std::string(bp::detail::kProbeRefused) + "\n" + refused);
  return 0;
}
