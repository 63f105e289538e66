// probe_plugin: the verdict cache (by the file's sha256, the core's version
// and ABI), the probe helper's location, and reading its report.
//
// The helper loads the plugin exactly as the host would (PluginLoader with
// probing off), checks device 0's memory with a round trip, unloads it, and
// writes to fd 3 the load phases as it enters them ("phase init") and then
// "passed" or "refused\n<reason>". A probe that ends any other way is
// judged by how it ended and the last phase it announced.
#include "plugin_probe.h"

#include <backplane/backend.h>
#include <backplane/child_process.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <atomic>
#include <boost/dll/runtime_symbol_info.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "../internal.h"

#ifndef BACKPLANE_PROBE_HELPER_REL
#define BACKPLANE_PROBE_HELPER_REL "../libexec/backplane/backplane-probe"
#endif

namespace fs = std::filesystem;

namespace bp {

const char* to_string(PluginVerdict v) {
  switch (v) {
    case PluginVerdict::Refused:
      return "refused";
    case PluginVerdict::Crashed:
      return "crashed";
    case PluginVerdict::Hung:
      return "hung";
    case PluginVerdict::Exited:
      return "exited";
  }
  return "refused";
}

std::string file_sha256(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return "";
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) return "";
  std::vector<unsigned char> buf(1 << 20);
  for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0;)
    if (EVP_DigestUpdate(ctx.get(), buf.data(), n) != 1) return "";
  if (std::ferror(f.get())) return "";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), md, &len) != 1) return "";
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

namespace detail {

namespace {

std::atomic<PhaseHook> g_phase_hook{nullptr};

double probe_timeout_s() {
  const char* env = std::getenv("BACKPLANE_PROBE_TIMEOUT");
  const double t = env && *env ? std::atof(env) : 0;
  return t > 0 ? t : 30.0;
}

// BACKPLANE_CACHE_DIR, else $XDG_CACHE_HOME/backplane, else ~/.cache/backplane.
fs::path cache_dir() {
  if (const char* d = std::getenv("BACKPLANE_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "backplane";
  if (const char* d = std::getenv("HOME"); d && *d) return fs::path(d) / ".cache" / "backplane";
  return {};
}

// The helper: BACKPLANE_PROBE_HELPER, else beside libbackplane as installed
// (lib/ -> libexec/backplane/) or as built (the same layout).
std::string helper_path() {
  if (const char* env = std::getenv("BACKPLANE_PROBE_HELPER"); env && *env) return env;
  std::error_code ec;
  fs::path lib;
  try {
    lib = boost::dll::this_line_location().parent_path().string();
  } catch (const std::exception&) {
    return "";
  }
  for (const char* rel : {BACKPLANE_PROBE_HELPER_REL, "../libexec/backplane/backplane-probe"}) {
    const fs::path p = (lib / rel).lexically_normal();
    if (fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

// What each phase was, for "crashed ... in bp_plugin_init".
std::string phase_words(const std::string& phase) {
  if (phase.empty()) return "before loading began";
  if (phase == "open") return "while the file was opened (dlopen, its static initialisers)";
  if (phase == "init") return std::string("in ") + BP_PLUGIN_ENTRY_SYMBOL;
  if (phase == "memory")
    return "in the memory check (allocate, copy_from_host, copy_to_host, deallocate on device 0)";
  if (phase == "done") return "after it was unloaded (at process exit)";
  return "in " + phase;
}

// The cache entry for a file's content, valid for this core and ABI.
// The first 16 hex digits of the sha256 of the options, "" for none: a
// verdict holds for the file's content with those options.
std::string options_digest(const BackendOptions& options) {
  if (options.empty()) return "";
  std::string text;
  for (const auto& [key, value] : options) text += key + '=' + value + '\0';
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), md, &len, EVP_sha256(), nullptr) != 1) return "x";
  static const char* hex = "0123456789abcdef";
  std::string out = "-options-";
  for (unsigned i = 0; i < 8 && i < len; ++i) out += {hex[md[i] >> 4], hex[md[i] & 15]};
  return out;
}

fs::path cache_entry(const std::string& sha, const BackendOptions& options) {
  const fs::path dir = cache_dir();
  if (dir.empty() || sha.empty()) return {};
  return dir / "probes" /
         (sha + "-" + BACKPLANE_VERSION + "-abi" + std::to_string(BP_ABI_MAJOR) + "." +
          std::to_string(BP_ABI_MINOR) + options_digest(options));
}

bool read_cached(const fs::path& entry, ProbeResult& r) {
  std::ifstream in(entry);
  std::string verdict;
  if (!in || !std::getline(in, verdict)) return false;
  std::stringstream rest;
  rest << in.rdbuf();
  if (verdict == kProbePassed) {
    r.passed = true;
    return true;
  }
  for (PluginVerdict v :
       {PluginVerdict::Refused, PluginVerdict::Crashed, PluginVerdict::Hung, PluginVerdict::Exited})
    if (verdict == to_string(v)) {
      r.passed = false;
      r.verdict = v;
      r.reason = rest.str();
      return true;
    }
  return false;
}

// Written whole under a temporary name, then renamed: readers see an entry
// or none. A cache that cannot be written is skipped.
void write_cached(const fs::path& entry, const ProbeResult& r) {
  std::error_code ec;
  fs::create_directories(entry.parent_path(), ec);
  const fs::path tmp = entry.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    if (!out) return;
    out << (r.passed ? kProbePassed : to_string(r.verdict)) << "\n" << (r.passed ? "" : r.reason);
    if (!out) return;
  }
  fs::rename(tmp, entry, ec);
  if (ec) fs::remove(tmp, ec);
}

// The last lines of a probe's output, for a reason.
std::string output_note(const std::string& output) {
  std::string tail = output_tail(output, 400);
  if (tail.empty()) return "";
  std::string flat;
  for (char ch : tail) flat += ch == '\n' ? '|' : ch;
  return "; its output ends: " + flat;
}

ProbeResult judge(const ChildOutcome& child, double timeout_s) {
  ProbeResult r;
  std::istringstream in(child.report);
  std::string line, phase;
  bool answered = false;
  while (std::getline(in, line)) {
    if (line.rfind("phase ", 0) == 0) {
      phase = line.substr(6);
    } else if (line == kProbePassed) {
      answered = true;
      r.passed = true;
    } else if (line == kProbeRefused) {
      answered = true;
      r.passed = false;
      r.verdict = PluginVerdict::Refused;
      std::stringstream rest;
      rest << in.rdbuf();
      r.reason = rest.str();
      break;
    }
  }
  const std::string where = phase_words(phase);
  const char* not_here = " (in a probe process; the plugin was not loaded into this one)";
  if (child.timed_out) {
    r.passed = false;
    r.verdict = PluginVerdict::Hung;
    std::ostringstream os;
    os << "no answer within " << timeout_s << " s " << where
       << " (the probe process was killed; the plugin was not loaded into this one)";
    r.reason = os.str();
  } else if (child.signal != 0) {
    r.passed = false;
    r.verdict = PluginVerdict::Crashed;
    r.reason = signal_name(child.signal) + " " + where + not_here + output_note(child.output);
  } else if (!answered) {
    r.passed = false;
    r.verdict = PluginVerdict::Exited;
    r.reason = "with status " + std::to_string(child.exit_status) + " " + where + not_here +
               output_note(child.output);
  }
  return r;
}

}  // namespace

void set_load_phase_hook(PhaseHook hook) { g_phase_hook.store(hook); }

void load_phase(const char* phase) {
  if (PhaseHook h = g_phase_hook.load(std::memory_order_relaxed)) h(phase);
}

ProbeResult probe_plugin(const std::string& path, const BackendOptions& options, bool fresh) {
  const std::string sha = file_sha256(path);
  const fs::path entry = cache_entry(sha, options);
  ProbeResult r;
  if (!fresh && !entry.empty() && read_cached(entry, r)) {
    r.note = "probe verdict cached for this content (sha256 " + sha.substr(0, 12) +
             "...; --probe fresh probes again)";
    return r;
  }
  const std::string helper = helper_path();
  if (helper.empty()) {
    r.passed = true;
    r.note =
        "not probed: the helper backplane-probe was not found beside libbackplane "
        "(set BACKPLANE_PROBE_HELPER); loaded in this process directly";
    return r;
  }
  const double timeout_s = probe_timeout_s();
  std::vector<std::string> command = {helper, "--result-fd", "3"};
  for (const auto& [key, value] : options)
    command.insert(command.end(), {"--option", key + "=" + value});
  command.push_back(path);
  const ChildOutcome child = run_child(command, timeout_s, 3, {"BACKPLANE_PROBE=off"});
  if (!child.started) {
    r.passed = true;
    r.note = "not probed: " + child.error + "; loaded in this process directly";
    return r;
  }
  r = judge(child, timeout_s);
  std::ostringstream note;
  note.precision(2);
  note << "probed in a child process (" << std::fixed << child.seconds << " s)";
  r.note = note.str();
  if (!entry.empty()) write_cached(entry, r);
  return r;
}

}  // namespace detail
}  // namespace bp
