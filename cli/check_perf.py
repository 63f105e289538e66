#!/usr/bin/env python3
"""Checks `backplane perf` end to end: check_perf.py SCENARIO BACKPLANE WORKDIR [PLUGIN]

  report       sim against cpu_onednn: the JSON and CSV agree with each other and
               with their own definitions (throughput = bytes or flops / time,
               roofline = throughput / the measured ceiling, ratio = the other
               backend's time / this one's), worst ratio first; the console lists
               every case and the framework's share of a tiny op.
  crash        PLUGIN's add kills its process: that case is reported crashed, the
               others are measured, the exit status is 1.
  unsupported  int32 on cpu_onednn: floating-only cases are listed as not
               measured, with why.
  plot         --plot draws a PNG roofline chart with gnuplot (which the
               quickstart installs).
No timing is asserted: the figures are only checked against each other.
"""
import csv
import json
import math
import os
import subprocess
import sys


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    print("$ " + " ".join(cmd) + "\n" + p.stdout + p.stderr)
    return p


def close(a, b, rel=1e-5):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def report(exe, work):
    cases = ["add/contiguous/64", "add/transposed/256K", "copy/contiguous/256K", "matmul/square/64"]
    j, c = os.path.join(work, "perf.json"), os.path.join(work, "perf.csv")
    cmd = [exe, "perf", "--backend", "sim", "--min-time", "0.02", "--json", j, "--csv", c]
    for name in cases:
        cmd += ["--filter", name]
    p = run(cmd)
    if p.returncode != 0:
        fail("exit status %d" % p.returncode)
    r = json.load(open(j))
    if r["backend"] != "sim" or r["compare_to"] != "cpu_onednn" or r["dtype"] != "float32":
        fail("header: %r" % {k: r[k] for k in ("backend", "compare_to", "dtype")})
    ceil = r["ceilings"]
    if not (ceil["copy_gbs"] > 0 and ceil["matmul_gflops"] > 0 and ceil["matmul_shape"]):
        fail("ceilings not measured: %r" % ceil)
    if not (r["dispatch"]["core_seconds"] > 0 and r["dispatch"]["direct_seconds"] > 0):
        fail("dispatch overhead not measured: %r" % r["dispatch"])
    if sorted(x["name"] for x in r["cases"]) != sorted(cases):
        fail("cases: %r" % [x["name"] for x in r["cases"]])
    ratios = []
    for x in r["cases"]:
        b, o = x["backend"], x["compare_to"]
        if b["status"] != "ok" or o["status"] != "ok":
            fail("%s not measured: %r %r" % (x["name"], b, o))
        work_done = x["flops"] if x["bound"] == "compute" else x["bytes"]
        if not close(x["throughput"], work_done / b["seconds"] / 1e9):
            fail("%s: throughput %r is not its work / time" % (x["name"], x["throughput"]))
        ceiling = ceil["matmul_gflops"] if x["bound"] == "compute" else ceil["copy_gbs"]
        if not close(x["roofline_percent"], 100 * x["throughput"] / ceiling, 1e-4):
            fail("%s: roofline %r is not throughput / ceiling" % (x["name"], x["roofline_percent"]))
        if not close(x["ratio"], o["seconds"] / b["seconds"], 1e-4):
            fail("%s: ratio %r is not the other's time / this one's" % (x["name"], x["ratio"]))
        # sim has a clock of its own (ABI 2.4's event_elapsed); cpu_onednn runs each call at once.
        if b["clock"] != "device" or o["clock"] != "host":
            fail("%s: timed by %r and %r clocks" % (x["name"], b["clock"], o["clock"]))
        if x["bound"] != ("compute" if x["name"].startswith("matmul") else "memory"):
            fail("%s: bound %r" % (x["name"], x["bound"]))
        ratios.append(x["ratio"])
    if ratios != sorted(ratios):
        fail("not worst ratio first: %r" % ratios)
    rows = list(csv.DictReader(open(c)))
    if [row["case"] for row in rows] != [x["name"] for x in r["cases"]]:
        fail("the CSV's cases differ from the JSON's")
    for row, x in zip(rows, r["cases"]):
        if not close(float(row["seconds"]), x["backend"]["seconds"]) or not close(float(row["ratio"]), x["ratio"], 1e-4):
            fail("CSV row %r disagrees with the JSON" % row)
    for text in cases + ["framework's share", "ceilings: device-to-device copy", "4 of 4 cases measured",
                         "timed by the device's clock between two events"]:
        if text not in p.stdout:
            fail("the console report lacks %r" % text)


def crash(exe, work, plugin):
    p = run([exe, "perf", "--backend", plugin, "--compare-to", "none", "--min-time", "0.02",
             "--filter", "add/contiguous/64", "--filter", "copy/contiguous/64"])
    if p.returncode != 1:
        fail("exit status %d, expected 1" % p.returncode)
    for text in ["add/contiguous/64: crashed: killed by SIGSEGV", "1 of 2 cases measured"]:
        if text not in p.stdout:
            fail("the report lacks %r" % text)


def unsupported(exe, work):
    p = run([exe, "perf", "--dtype", "int32", "--min-time", "0.02", "--filter", "exp/*",
             "--filter", "add/contiguous/64", "--filter", "div/*"])
    if p.returncode != 0:
        fail("exit status %d" % p.returncode)
    for text in ["exp/contiguous/16M: unsupported: takes floating dtypes only",
                 "div/contiguous/16M: unsupported: takes floating dtypes only", "1 of 3 cases measured"]:
        if text not in p.stdout:
            fail("the report lacks %r" % text)


def plot(exe, work):
    png = os.path.join(work, "roofline.png")
    if os.path.exists(png):
        os.remove(png)
    p = run([exe, "perf", "--backend", "sim", "--min-time", "0.02", "--filter", "add/contiguous/64",
             "--filter", "matmul/square/64", "--plot", png])
    if p.returncode != 0 or "Roofline chart written to " + png not in p.stdout:
        fail("exit status %d, or no chart" % p.returncode)
    with open(png, "rb") as f:
        head = f.read(8)
    if head != b"\x89PNG\r\n\x1a\n" or os.path.getsize(png) < 10000:
        fail("%s is not a PNG chart (%d bytes)" % (png, os.path.getsize(png)))


def main():
    scenario, exe, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    if scenario == "report":
        report(exe, work)
    elif scenario == "crash":
        crash(exe, work, sys.argv[4])
    elif scenario == "unsupported":
        unsupported(exe, work)
    elif scenario == "plot":
        plot(exe, work)
    else:
        fail("unknown scenario " + scenario)
    print("ok")


if __name__ == "__main__":
    main()
