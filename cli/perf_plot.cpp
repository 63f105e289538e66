// --plot of `backplane perf`: a roofline chart drawn by gnuplot (Debian's
// gnuplot-nox). Each measured case with arithmetic is a point at (its flops
// per byte, its GFLOP/s), under the two ceilings measured in the same run:
// the copy bandwidth times the intensity, and the best matmul.
#include <backplane/child_process.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "perf_report.h"

namespace bp::cli::perf {

std::string gnuplot_path() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/gnuplot";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

namespace {

// gnuplot's single-quoted string: a quote doubled.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("''") : std::string(1, ch);
  return out + "'";
}

}  // namespace

bool write_plot(const Report& report, const std::string& png, std::string& error) {
  if (!(report.ceilings.copy_gbs > 0)) {
    error = "no roofline chart: the device's copy bandwidth was not measured";
    return false;
  }
  const std::string gnuplot = gnuplot_path();
  if (gnuplot.empty()) {
    error = "--plot needs gnuplot, which is not on PATH (Debian: apt-get install gnuplot-nox)";
    return false;
  }
  char dir_template[] = "/tmp/backplane-perf-plot-XXXXXX";
  if (!mkdtemp(dir_template)) {
    error = "cannot make a temporary folder for the chart's data";
    return false;
  }
  const std::filesystem::path dir = dir_template;
  double lo = 1e30, hi = 0;
  for (const char* kind : {"memory", "compute"}) {
    std::ofstream f(dir / (std::string(kind) + ".dat"));
    for (const Row& r : report.rows) {
      const bool compute = r.c->bound == Bound::Compute;
      if (r.dut.status != "ok" || r.intensity <= 0 || compute != (kind[0] == 'c')) continue;
      f << r.c->name << "\t" << r.intensity << "\t" << r.dut.flops / r.dut.seconds / 1e9 << "\n";
      lo = std::min(lo, r.intensity);
      hi = std::max(hi, r.intensity);
    }
  }
  const double bw = report.ceilings.copy_gbs, peak = report.ceilings.matmul_gflops;
  if (hi == 0) lo = 0.01, hi = 100;
  if (bw > 0 && peak > 0) hi = std::max(hi, 4 * peak / bw);
  std::ostringstream s;
  s << "set terminal pngcairo size 1280,800 font ',10' noenhanced\n"
    << "set output " << quoted(png) << "\n"
    << "set title "
    << quoted("backplane perf: " + report.backend + ":" + std::to_string(report.device.index) +
              " (" + std::string(name(report.dtype)) +
              "), each case against the ceilings measured in the same run")
    << "\nset logscale xy\nset grid\nset key top left\n"
    << "set xlabel 'arithmetic intensity (flop per byte moved; nominal for elementwise ops)'\n"
    << "set ylabel 'GFLOP/s'\n"
    << "set xrange [" << lo / 2 << ":" << hi * 6 << "]\n"
    << "bw = " << bw << "\npeak = " << peak << "\n"
    << "roof(x) = (peak > 0 && bw * x > peak) ? peak : bw * x\n"
    << "plot roof(x) title sprintf('roofline: copy %.1f GB/s"
    << (peak > 0 ? ", matmul %.0f GFLOP/s'" : "'") << ", bw" << (peak > 0 ? ", peak" : "")
    << ") lw 2 lc rgb 'black'";
  for (const auto& [kind, color] :
       {std::pair{"memory", "#1f77b4"}, std::pair{"compute", "#d62728"}}) {
    const std::string file = quoted((dir / (std::string(kind) + ".dat")).string());
    s << ", \\\n  " << file << " using 2:3 with points pt 7 ps 1.3 lc rgb '" << color << "' title '"
      << kind << "-bound cases', \\\n  " << file
      << " using 2:3:1 with labels left offset 0.6,0.3 font ',7' tc rgb '" << color << "' notitle";
  }
  s << "\n";
  const std::filesystem::path script = dir / "roofline.gp";
  std::ofstream(script) << s.str();
  const ChildOutcome child = run_child({gnuplot, script.string()}, 60);
  std::error_code ec;
  const bool made =
      child.started && child.exit_status == 0 && std::filesystem::file_size(png, ec) > 0 && !ec;
  if (!made)
    error = "gnuplot could not draw " + png + ": " +
            (child.started ? output_tail(child.output, 500) : child.error);
  std::filesystem::remove_all(dir, ec);
  return made;
}

}  // namespace bp::cli::perf
