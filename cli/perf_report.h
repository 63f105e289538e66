// The report of `backplane perf`: what the cases' processes wrote, read
// back; the console table, JSON and CSV.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "perf.h"

namespace bp::cli::perf {

// One backend's result of a case.
struct Side {
  std::string status;   // ok, unsupported, error, crashed, or "" (not run)
  std::string message;  // why, when not ok
  double seconds = 0, spread = 0, bytes = 0, flops = 0;
  int repetitions = 0;
  long long calls = 0;
  std::string path;           // "kernel", "composite" or "" (see perf::path_of)
  bool device_clock = false;  // timed between two events by the device's clock
};

struct Row {
  const Case* c = nullptr;
  Side dut, ref;
  // Derived: GB/s or GFLOP/s by the case's bound, its share of the ceiling,
  // flops per byte, and the speed ratio ref.seconds / dut.seconds (0: none).
  double throughput = 0, roofline = 0, intensity = 0, ratio = 0;
};

struct Report {
  std::string backend, compare_to;  // compare_to empty: no comparison
  Device device;
  DType dtype = DType::Float32;
  double sync_seconds = 0;
  Ceilings ceilings;
  Overhead overhead;
  std::string setup_error;     // why the ceilings could not be measured, if so
  std::string overhead_error;  // why the framework's share could not be, if so
  std::vector<Row> rows;
};

void parse_setup(const std::string& lines, Report& report);
Row parse_row(const Case& c, const std::string& lines);

// Derives throughput, roofline, ratio for each row (after the setup is
// known); the outputs below show a report derived once.
void derive(Report& report);

void print_console(std::ostream& os, const Report& report);
std::string to_json(const Report& report);
std::string to_csv(const Report& report);

// perf_plot.cpp: gnuplot's path on PATH ("" when missing), and the roofline
// chart as a PNG at `png` (false, with `error` saying why, when it fails).
std::string gnuplot_path();
bool write_plot(const Report& report, const std::string& png, std::string& error);

}  // namespace bp::cli::perf
