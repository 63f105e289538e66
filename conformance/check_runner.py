"""Runs `backplane conformance` in one of the runner's scenarios and checks the
exit code, the JSON report and the JUnit XML report.

Usage: check_runner.py SCENARIO BACKPLANE_EXE WORK_DIR [PLUGIN]

  segfault  PLUGIN's add dereferences NULL: its add cases fail with SIGSEGV,
            the run goes on, the exit code is 1.
  hang      PLUGIN's add never returns: its add cases fail with the time limit.
  wrong     PLUGIN's add is off by one: its add cases fail with the values, the
            inputs' first values and the output's strides; the report's
            "Failures by kernel" ranks add first.
  out_of_bounds  PLUGIN's add writes past its output: its add cases fail as
            out of bounds, and add leads "Failures by kernel".
  out_of_bounds_before  PLUGIN's add writes before its output's start: its
            add cases fail as out of bounds (the guard before the storage).
  filter    --filter 'IP-*' on cpu_onednn runs only cases with an IP-* ID.
  compare   --compare-to cpu_onednn on cpu_onednn: every op case of a family
            of each kind passes.
"""
import json
import math
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET


# The faulty plugins' scenarios run the cases that reach add (they fail),
# sub's (unsupported: the fakes lack it) and cases of other categories that
# these fakes can pass, not the whole suite: a process per case made a full
# run take 300 s under the sanitizers on two cores.
SPREAD = ["--filter", "op.add.*", "--filter", "op.sub.*", "--filter", "inplace.*",
          "--filter", "view.*"]


def fail(msg):
    print(f"[check_runner] {msg}", file=sys.stderr)
    sys.exit(1)


CONSOLE = {"text": ""}  # the last run's console output


def run(exe, work, args, expect_exit, limit_s):
    json_path = os.path.join(work, "r.json")
    xml_path = os.path.join(work, "r.xml")
    for p in (json_path, xml_path):
        if os.path.exists(p):
            os.remove(p)
    cmd = [exe, "conformance", "--json", json_path, "--junit", xml_path] + args
    print("[check_runner] " + " ".join(cmd), flush=True)
    start = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=limit_s)
    took = time.monotonic() - start
    print(proc.stdout)
    CONSOLE["text"] = proc.stdout
    if proc.returncode != expect_exit:
        fail(f"exit code {proc.returncode}, expected {expect_exit}")
    with open(json_path, encoding="utf-8") as f:
        report = json.load(f)
    junit = check_junit(xml_path, report)
    return report, junit, took


def check_junit(path, report):
    """Well-formed JUnit: a testsuite per category, a testcase per case, a
    failure per failed case, a skipped per unsupported or skipped case, and
    a "certification" suite with the profile's verdict."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        fail(f"{path} is not well-formed XML: {e}")
    if root.tag != "testsuites":
        fail(f"{path}: root element is <{root.tag}>, expected <testsuites>")
    by_name = {}
    for suite in root.findall("testsuite"):
        for key in ("name", "tests", "failures", "skipped", "time"):
            if key not in suite.attrib:
                fail(f"{path}: a <testsuite> lacks '{key}'")
        cases = suite.findall("testcase")
        if int(suite.get("tests")) != len(cases):
            fail(f"{path}: testsuite {suite.get('name')} says {suite.get('tests')} tests, "
                 f"has {len(cases)}")
        failures = sum(1 for c in cases if c.find("failure") is not None)
        if int(suite.get("failures")) != failures:
            fail(f"{path}: testsuite {suite.get('name')} counts {suite.get('failures')} "
                 f"failures, has {failures}")
        for case in cases:
            for key in ("classname", "name", "time"):
                if key not in case.attrib:
                    fail(f"{path}: a <testcase> lacks '{key}'")
            if case.get("classname") != suite.get("name"):
                fail(f"{path}: {case.get('name')} has classname {case.get('classname')} "
                     f"in testsuite {suite.get('name')}")
            float(case.get("time"))
            # The certification verdict is a test case of its own suite.
            if suite.get("name") != "certification":
                by_name[case.get("name")] = case
    for c in report["cases"]:
        case = by_name.get(c["name"])
        if case is None:
            fail(f"{path} lacks the case {c['name']}")
        want = {"failed": "failure", "unsupported": "skipped", "skipped": "skipped"}.get(c["status"])
        if want and case.find(want) is None:
            fail(f"{path}: {c['name']} is {c['status']} but has no <{want}>")
        if want == "failure" and not case.find("failure").get("message"):
            fail(f"{path}: the failure of {c['name']} has no message")
    if len(by_name) != len(report["cases"]):
        fail(f"{path} has {len(by_name)} test cases, the JSON report {len(report['cases'])}")
    cert = [s for s in root.findall("testsuite") if s.get("name") == "certification"]
    if len(cert) != 1:
        fail(f"{path} has {len(cert)} certification suites, expected 1")
    certified = report["certification"]["certified"]
    if (cert[0].find("testcase/failure") is None) != certified:
        fail(f"{path}: the certification test case disagrees with certified={certified}")
    return root


def cases_with(report, status, prefix=""):
    return [c for c in report["cases"] if c["status"] == status and c["name"].startswith(prefix)]


def expect_add_failures(report, words):
    failed = cases_with(report, "failed")
    if not failed:
        fail("no case failed")
    adds = [c for c in failed if all(w in c["message"] for w in words)]
    if not any(c["name"].startswith("op.add.") for c in adds):
        fail(f"no op.add.* case failed with {words}; failed: "
             + ", ".join(c["name"] for c in failed[:10]))
    return adds


def expect_add_ranked_first(report):
    """The failed cases' kernels, ranked: add leads, in JSON and console."""
    ranked = report.get("failures_by_kernel")
    if not ranked:
        fail(f"no failures_by_kernel in the JSON report: {ranked!r}")
    first = ranked[0]
    if not first["kernel"].startswith("add (") or first["failed"] != len(first["cases"]):
        fail(f"failures_by_kernel does not rank add first: {ranked[:3]}")
    failed = {c["name"] for c in cases_with(report, "failed")}
    if not set(first["cases"]) <= failed:
        fail(f"failures_by_kernel names cases that did not fail: {first['cases']}")
    # Ochiai's score, recomputed from the counts: failed / sqrt(F * (failed + passed)).
    for k in ranked:
        want = k["failed"] / math.sqrt(len(failed) * (k["failed"] + k["passed"]))
        if abs(k["score"] - want) > 1e-3:
            fail(f"failures_by_kernel: {k['kernel']} scores {k['score']}, expected {want:.4f}")
    scores = [k["score"] for k in ranked]
    if scores != sorted(scores, reverse=True):
        fail(f"failures_by_kernel is not highest score first: {scores}")
    # A kernel every case reaches (fill, copy) is reached by more failures
    # than add, yet ranks after it.
    if any(k["failed"] > first["failed"] for k in ranked[1:]):
        print("[check_runner] a kernel more failures reach ranks after "
              f"{first['kernel']}: {[k['kernel'] for k in ranked if k['failed'] > first['failed']][:3]}")
    text = CONSOLE["text"]
    at = text.find("Failures by kernel")
    if at < 0:
        fail("the console report has no 'Failures by kernel'")
    lines = text[at:].splitlines()
    if len(lines) < 2 or not lines[1].strip().startswith(first["kernel"] + ": "):
        fail(f"the console's ranking does not start with {first['kernel']}: {lines[:3]}")
    print(f"[check_runner] failures by kernel: {lines[1].strip()}")


def main():
    scenario, exe, work = sys.argv[1], sys.argv[2], sys.argv[3]
    plugin = sys.argv[4] if len(sys.argv) > 4 else None
    os.makedirs(work, exist_ok=True)

    if scenario == "segfault":
        report, _, _ = run(exe, work, ["--backend", plugin, "--timeout", "5"] + SPREAD, 1, 300)
        crashed = expect_add_failures(report, ["killed by signal 11", "SIGSEGV"])
        if not cases_with(report, "passed"):
            fail("no case passed after the crashes: the run did not go on")
        if not cases_with(report, "unsupported"):
            fail("no case is unsupported, yet the plugin lacks most ops")
        if report["isolation"] != "process":
            fail(f"isolation is {report['isolation']}")
        print(f"[check_runner] {len(crashed)} cases crashed with SIGSEGV")
    elif scenario == "hang":
        args = ["--backend", plugin, "--timeout", "2", "--filter", "op.add.float32.*",
                "--filter", "inplace.fill_.writes_self"]
        report, _, took = run(exe, work, args, 1, 120)
        hung = expect_add_failures(report, ["timed out after 2 s"])
        for c in report["cases"]:
            if c["name"].startswith("op.add.") and c not in hung and c["status"] != "passed":
                fail(f"{c['name']} is {c['status']}: {c['message']}")
        if [c["status"] for c in report["cases"] if c["name"] == "inplace.fill_.writes_self"] != ["passed"]:
            fail("inplace.fill_.writes_self did not pass after the hangs")
        if took > 60:
            fail(f"the run took {took:.0f} s: the time limit was not enforced")
    elif scenario == "wrong":
        report, _, _ = run(exe, work, ["--backend", plugin, "--timeout", "5"] + SPREAD, 1, 300)
        wrong = expect_add_failures(report, ["elements differ", "got", "expected", "--seed",
                                             "input values: input 0 [", "strides ["])
        expect_add_ranked_first(report)
        # The fake registers add for float32 only: add is missing for the
        # other dtypes the reference has, never for float32; sub for all.
        missing = {m["op"]: m["dtypes"] for m in report["missing_ops"]}
        if "float32" not in missing.get("sub", []) or "float32" in missing.get("add", []):
            fail(f"missing_ops should list sub for float32 and not add: {missing}")
        if not any(c["missing"] for c in cases_with(report, "unsupported")):
            fail("no unsupported case names the op it lacks")
        print(f"[check_runner] {len(wrong)} add cases failed with wrong values")
    elif scenario == "out_of_bounds":
        # Every value is right; the write past the output's end is what fails.
        # Copies pass on it: "Failures by kernel" must rank add above the
        # copies the failed cases also reach.
        report, _, _ = run(exe, work, ["--backend", plugin, "--filter", "op.add.*",
                                       "--filter", "op.contiguous.*"], 1, 300)
        bad = [c for c in cases_with(report, "failed", "op.add.")
               if "out of bounds: an allocation of" in c["message"]
               and "after its end overwritten" in c["message"]]
        if not bad:
            fail("no add case failed as out of bounds")
        if any("elements differ" in c["message"] for c in cases_with(report, "failed")):
            fail("an out-of-bounds case was reported as wrong values")
        expect_add_ranked_first(report)
        print(f"[check_runner] {len(bad)} add cases failed as out of bounds")
    elif scenario == "out_of_bounds_before":
        report, _, _ = run(exe, work, ["--backend", plugin, "--filter", "op.add.*"], 1, 300)
        bad = [c for c in cases_with(report, "failed", "op.add.")
               if "out of bounds: an allocation of" in c["message"]
               and "before its start overwritten (the nearest at -" in c["message"]]
        if not bad:
            fail("no add case failed as out of bounds before its output")
        print(f"[check_runner] {len(bad)} add cases failed as out of bounds before the output")
    elif scenario == "filter":
        report, _, _ = run(exe, work, ["--backend", "cpu_onednn", "--filter", "IP-*"], 0, 300)
        if not report["cases"]:
            fail("--filter 'IP-*' selected no case")
        for c in report["cases"]:
            if not any(i.startswith("IP-") for i in c["spec"]):
                fail(f"{c['name']} ({c['spec']}) ran, yet has no IP-* ID")
        if report["filters"] != ["IP-*"]:
            fail(f"filters in the report: {report['filters']}")
    elif scenario == "compare":
        # A family of each kind (elementwise, matmul, reduction, softmax,
        # indexing, selection): the flag is what is under test, not the ops.
        args = ["--backend", "cpu_onednn", "--compare-to", "cpu_onednn", "--seed", "7"]
        for family in ["add", "matmul", "sum", "softmax", "gather", "where"]:
            args += ["--filter", f"op.{family}.*"]
        report, _, _ = run(exe, work, args, 0, 300)
        if report["compare_to"] != "cpu_onednn" or report["seed"] != 7:
            fail(f"compare_to {report['compare_to']}, seed {report['seed']}")
        if cases_with(report, "failed") or not cases_with(report, "passed", "op."):
            fail("cpu_onednn does not match itself")
    else:
        fail(f"unknown scenario {scenario}")
    print(f"[check_runner] {scenario}: {report['summary']}")


if __name__ == "__main__":
    main()
