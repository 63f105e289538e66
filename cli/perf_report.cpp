// The report of `backplane perf` (perf_report.h).
#include "perf_report.h"

#include <backplane/conformance/report.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

namespace bp::cli::perf {

namespace {

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : line) {
    if (ch == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

double num(const std::vector<std::string>& f, std::size_t i) {
  return i < f.size() ? std::strtod(f[i].c_str(), nullptr) : 0;
}

void parse_side(const std::vector<std::string>& f, Side& s) {
  s.status = f.size() > 1 ? f[1] : "error";
  if (s.status != "ok") {
    s.message = f.size() > 2 ? f[2] : "";
    return;
  }
  s.seconds = num(f, 2);
  s.spread = num(f, 3);
  s.repetitions = static_cast<int>(num(f, 4));
  s.calls = static_cast<long long>(num(f, 5));
  s.bytes = num(f, 6);
  s.flops = num(f, 7);
  s.path = f.size() > 8 ? f[8] : "";
  s.device_clock = f.size() > 9 && f[9] == "device";
}

// "812 ns", "3.41 us", "12.5 ms", "1.20 s": three significant digits.
std::string format_time(double s) {
  const char* unit = "s";
  if (s < 1e-6) {
    s *= 1e9;
    unit = "ns";
  } else if (s < 1e-3) {
    s *= 1e6;
    unit = "us";
  } else if (s < 1) {
    s *= 1e3;
    unit = "ms";
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, s >= 100 ? "%.0f %s" : s >= 10 ? "%.1f %s" : "%.2f %s", s, unit);
  return buf;
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

// Three significant digits: 0.00412, 4.12, 412.
std::string sig3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  std::string s = buf;
  if (s.find('e') != std::string::npos) return fixed(v, v < 1 ? 6 : 0);
  return s;
}

std::string throughput_text(const Row& r) {
  if (r.dut.status != "ok") return "";
  return sig3(r.throughput) + (r.c->bound == Bound::Compute ? " GFLOP/s" : " GB/s");
}

// Rows by worst ratio first; rows without a ratio after, by roofline share.
std::vector<const Row*> ordered(const Report& report) {
  std::vector<const Row*> rows;
  for (const Row& r : report.rows) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(), [](const Row* a, const Row* b) {
    const bool ao = a->dut.status == "ok", bo = b->dut.status == "ok";
    if (ao != bo) return ao;
    if ((a->ratio > 0) != (b->ratio > 0)) return a->ratio > 0;
    if (a->ratio > 0) return a->ratio < b->ratio;
    return a->roofline < b->roofline;
  });
  return rows;
}

std::string why_not(const Side& s) {
  return s.status + (s.message.empty() ? "" : ": " + s.message);
}

}  // namespace

void parse_setup(const std::string& lines, Report& report) {
  for (const std::string& line : split(lines, '\n')) {
    const auto f = split(line, '\t');
    if (f[0] == "sync") {
      report.sync_seconds = num(f, 1);
    } else if (f[0] == "ceilings") {
      report.ceilings.copy_gbs = num(f, 1);
      report.ceilings.matmul_gflops = num(f, 2);
      report.ceilings.matmul_shape = f.size() > 3 ? f[3] : "";
    } else if (f[0] == "overhead") {
      report.overhead.core_seconds = num(f, 1);
      report.overhead.direct_seconds = num(f, 2);
    } else if (f[0] == "dut") {
      report.setup_error = f.size() > 2 ? f[1] + ": " + f[2] : f[1];
    } else if (f[0] == "overhead_error") {
      report.overhead_error = f.size() > 1 ? f[1] : "";
    }
  }
}

Row parse_row(const Case& c, const std::string& lines) {
  Row r;
  r.c = &c;
  for (const std::string& line : split(lines, '\n')) {
    const auto f = split(line, '\t');
    if (f[0] == "dut") parse_side(f, r.dut);
    if (f[0] == "ref") parse_side(f, r.ref);
  }
  if (r.dut.status.empty()) {
    r.dut.status = "error";
    r.dut.message = "the case's process reported nothing";
  }
  return r;
}

void derive(Report& report) {
  for (Row& r : report.rows) {
    if (r.dut.status != "ok" || !(r.dut.seconds > 0)) continue;
    const bool compute = r.c->bound == Bound::Compute;
    r.throughput = (compute ? r.dut.flops : r.dut.bytes) / r.dut.seconds / 1e9;
    const double ceiling = compute ? report.ceilings.matmul_gflops : report.ceilings.copy_gbs;
    r.roofline = ceiling > 0 ? 100 * r.throughput / ceiling : 0;
    r.intensity = r.dut.bytes > 0 ? r.dut.flops / r.dut.bytes : 0;
    if (r.ref.status == "ok" && r.ref.seconds > 0) r.ratio = r.ref.seconds / r.dut.seconds;
  }
}

void print_console(std::ostream& os, const Report& report) {
  const bool cmp = !report.compare_to.empty();
  os << "perf of " << report.backend << ":" << report.device.index << " (" << name(report.dtype)
     << ")" << (cmp ? ", against " + report.compare_to : std::string()) << "\n";
  if (!report.setup_error.empty())
    os << "  the device's limits could not be measured: " << report.setup_error << "\n";
  os << "  ceilings: device-to-device copy " << fixed(report.ceilings.copy_gbs, 1) << " GB/s";
  if (report.ceilings.matmul_gflops > 0)
    os << ", matmul " << fixed(report.ceilings.matmul_gflops, 1) << " GFLOP/s ("
       << report.ceilings.matmul_shape << ")";
  bool device_clock = false;
  for (const Row& r : report.rows) device_clock = device_clock || r.dut.device_clock;
  os << "\n  timed by "
     << (device_clock ? "the device's clock between two events (ABI 2.4)" : "the host's clock")
     << "; synchronising the idle device takes " << format_time(report.sync_seconds)
     << (device_clock ? "" : " (taken off every figure below)") << "\n";
  const Overhead& o = report.overhead;
  if (!report.overhead_error.empty())
    os << "  the framework's share was not measured: " << report.overhead_error << "\n";
  if (o.core_seconds > 0)
    os << "  a 4-element mul: " << format_time(o.core_seconds) << " through the core, "
       << format_time(o.direct_seconds)
       << " calling the kernel through the ABI alone: the framework's share is "
       << fixed(100 * std::max(0.0, o.core_seconds - o.direct_seconds) / o.core_seconds, 0)
       << "%\n";
  os << "\n";
  std::size_t w = 4;
  for (const Row& r : report.rows) w = std::max(w, r.c->name.size());
  os << std::left << std::setw(static_cast<int>(w + 2)) << "case" << std::setw(11) << "path"
     << std::right << std::setw(10) << "time" << std::setw(7) << "+-" << std::setw(18)
     << "throughput" << std::setw(10) << "roofline";
  if (cmp) os << std::setw(12) << "speed" << std::setw(12) << report.compare_to.substr(0, 11);
  os << "\n";
  std::vector<std::string> skipped;
  for (const Row* r : ordered(report)) {
    if (r->dut.status != "ok") {
      skipped.push_back(r->c->name + ": " + why_not(r->dut));
      continue;
    }
    os << std::left << std::setw(static_cast<int>(w + 2)) << r->c->name << std::setw(11)
       << r->dut.path << std::right << std::setw(10) << format_time(r->dut.seconds) << std::setw(6)
       << fixed(100 * r->dut.spread, 0) << "%" << std::setw(18) << throughput_text(*r)
       << std::setw(9) << (r->roofline >= 1 ? fixed(r->roofline, 0) : sig3(r->roofline)) << "%";
    if (cmp)
      os << std::setw(12) << (r->ratio > 0 ? sig3(r->ratio) + "x" : why_not(r->ref).substr(0, 11))
         << std::setw(12) << (r->ref.status == "ok" ? format_time(r->ref.seconds) : "");
    os << "\n";
  }
  if (cmp)
    os << "(speed: " << report.compare_to << "'s time / " << report.backend
       << "'s; below 1, slower)\n";
  if (!skipped.empty()) {
    os << "\nNot measured\n";
    for (const std::string& s : skipped) os << "  " << s << "\n";
  }
  int ok = 0;
  for (const Row& r : report.rows) ok += r.dut.status == "ok";
  os << "\n" << report.backend << ": " << ok << " of " << report.rows.size() << " cases measured\n";
}

std::string to_json(const Report& report) {
  using conformance::json_quote;
  std::ostringstream os;
  os.precision(9);
  const auto side = [&](const Side& s) {
    std::ostringstream o;
    o.precision(9);
    o << "{\"status\": " << json_quote(s.status);
    if (s.status == "ok")
      o << ", \"seconds\": " << s.seconds << ", \"spread\": " << s.spread
        << ", \"repetitions\": " << s.repetitions << ", \"calls_per_repetition\": " << s.calls
        << ", \"path\": " << json_quote(s.path)
        << ", \"clock\": " << (s.device_clock ? "\"device\"" : "\"host\"");
    else
      o << ", \"message\": " << json_quote(s.message);
    return o.str() + "}";
  };
  os << "{\n  \"backend\": " << json_quote(report.backend)
     << ",\n  \"device\": " << report.device.index
     << ",\n  \"dtype\": " << json_quote(std::string(name(report.dtype))) << ",\n  \"compare_to\": "
     << (report.compare_to.empty() ? "null" : json_quote(report.compare_to))
     << ",\n  \"sync_seconds\": " << report.sync_seconds
     << ",\n  \"ceilings\": {\"copy_gbs\": " << report.ceilings.copy_gbs
     << ", \"matmul_gflops\": " << report.ceilings.matmul_gflops
     << ", \"matmul_shape\": " << json_quote(report.ceilings.matmul_shape)
     << "},\n  \"dispatch\": {\"core_seconds\": " << report.overhead.core_seconds
     << ", \"direct_seconds\": " << report.overhead.direct_seconds << "},\n  \"cases\": [";
  bool first = true;
  for (const Row* r : ordered(report)) {
    os << (first ? "\n" : ",\n") << "    {\"name\": " << json_quote(r->c->name)
       << ", \"op\": " << json_quote(r->c->op)
       << ", \"bound\": " << (r->c->bound == Bound::Compute ? "\"compute\"" : "\"memory\"")
       << ", \"bytes\": " << r->dut.bytes << ", \"flops\": " << r->dut.flops
       << ", \"throughput\": " << r->throughput
       << ", \"throughput_unit\": " << (r->c->bound == Bound::Compute ? "\"GFLOP/s\"" : "\"GB/s\"")
       << ", \"roofline_percent\": " << r->roofline << ", \"intensity\": " << r->intensity
       << ", \"ratio\": ";
    if (r->ratio > 0)
      os << r->ratio;
    else
      os << "null";
    os << ",\n     \"backend\": " << side(r->dut)
       << ", \"compare_to\": " << (report.compare_to.empty() ? std::string("null") : side(r->ref))
       << "}";
    first = false;
  }
  os << "\n  ]\n}\n";
  return os.str();
}

std::string to_csv(const Report& report) {
  std::ostringstream os;
  os.precision(9);
  os << "case,op,bound,status,seconds,spread,throughput,unit,roofline_percent,intensity,path,"
        "compare_status,"
        "compare_seconds,ratio\n";
  for (const Row* r : ordered(report)) {
    os << r->c->name << "," << r->c->op << ","
       << (r->c->bound == Bound::Compute ? "compute" : "memory") << "," << r->dut.status << ","
       << r->dut.seconds << "," << r->dut.spread << "," << r->throughput << ","
       << (r->c->bound == Bound::Compute ? "GFLOP/s" : "GB/s") << "," << r->roofline << ","
       << r->intensity << "," << r->dut.path << "," << r->ref.status << "," << r->ref.seconds
       << ",";
    if (r->ratio > 0) os << r->ratio;
    os << "\n";
  }
  return os.str();
}

}  // namespace bp::cli::perf
