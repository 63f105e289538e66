"""Runs `backplane conformance --json FILE` and checks FILE has the documented keys.

Usage: check_report.py BACKPLANE_EXE JSON_FILE
"""
import hashlib
import json
import re
import subprocess
import sys

STATUSES = {"passed", "failed", "unsupported", "skipped"}


def fail(msg):
    print(f"[check_report] {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    exe, path = sys.argv[1], sys.argv[2]
    # A few categories are enough to check the format.
    run = subprocess.run([exe, "conformance", "--json", path, "--filter", "inplace.*",
                          "--filter", "op.s*"])
    # 0 and 1 both write a report; 2 and 3 mean no suite ran.
    if run.returncode not in (0, 1):
        fail(f"backplane conformance exited {run.returncode}")
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    for key in ("backend", "device", "device_name", "plugin", "core_version", "contract",
                "compare_to", "compare_device", "compare_plugin", "seed", "isolation", "timeout_s", "fallback",
                "filters", "tolerances", "missing_ops", "cases", "summary", "duration_ms",
                "date", "machine", "categories", "rules", "certification",
                "failures_by_kernel"):
        if key not in report:
            fail(f"missing key '{key}'")
    if report["contract"] != "docs/semantics.md":
        fail(f"contract {report['contract']!r}: the rule IDs are defined in docs/semantics.md")
    for key in ("name", "version", "abi", "path", "sha256"):
        if not isinstance(report["plugin"].get(key), str):
            fail(f"plugin.{key} must be a string")
    for key in ("name", "version", "path"):
        if not isinstance(report["compare_plugin"].get(key), str):
            fail(f"compare_plugin.{key} must be a string")
    with open(report["plugin"]["path"], "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    if report["plugin"]["sha256"] != sha:
        fail(f"plugin.sha256 {report['plugin']['sha256']} is not the file's {sha}")
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", report["date"]):
        fail(f"date {report['date']!r} is not ISO 8601 UTC")
    if not report["machine"]:
        fail("machine is empty")
    if not isinstance(report["seed"], int) or report["isolation"] not in ("process", "none"):
        fail(f"seed {report['seed']!r}, isolation {report['isolation']!r}")
    if report["fallback"] != "deny":
        fail(f"conformance must run with fallback deny, the report says {report['fallback']}")
    for t in report["tolerances"]:
        for key in ("backend", "op", "dtype", "rtol", "atol"):
            if key not in t:
                fail(f"a declared tolerance lacks '{key}'")
    for m in report["missing_ops"]:
        if not isinstance(m.get("op"), str) or not isinstance(m.get("dtypes"), list):
            fail(f"a missing op is malformed: {m}")
    if not isinstance(report["backend"], str) or not report["backend"]:
        fail("'backend' must be a non-empty string")
    if not report["cases"]:
        fail("'cases' is empty")
    counts = {s: 0 for s in STATUSES}
    for case in report["cases"]:
        for key in ("name", "spec", "category", "status", "message", "duration_ms", "missing",
                    "kernels", "empty"):
            if key not in case:
                fail(f"case {case.get('name')} lacks '{key}'")
        if case["status"] not in STATUSES:
            fail(f"case {case['name']} has status '{case['status']}'")
        if not isinstance(case["spec"], list) or not case["spec"]:
            fail(f"case {case['name']} names no rule ID")
        if case["empty"] != (case["name"].startswith("op.") and case["name"].endswith(".empty")):
            fail(f"case {case['name']} has empty {case['empty']}")
        if case["status"] == "passed" and not case["empty"] and case["name"].startswith("op.") \
                and not case["kernels"]:
            fail(f"op case {case['name']} passed without reaching a kernel")
        counts[case["status"]] += 1
    if report["summary"] != counts:
        fail(f"summary {report['summary']} does not match the cases {counts}")
    # Coverage per rule: a rule with an unsupported or skipped case is never "passed".
    for rule in report["rules"]:
        c = rule["counts"]
        want = ("failed" if c["failed"] else
                ("partial" if c["passed"] else "not checked") if c["unsupported"] or c["skipped"]
                else "passed" if c["passed"] else "not checked")
        if rule["status"] != want:
            fail(f"rule {rule['name']} is {rule['status']!r} with counts {c}, expected {want!r}")
    if sum(cat["counts"]["passed"] for cat in report["categories"]) != counts["passed"]:
        fail("the categories' counts do not add up to the summary")
    cert = report["certification"]
    # A filtered run certifies nothing.
    if not isinstance(cert.get("uncovered_kernels"), list):
        fail(f"certification.uncovered_kernels is not a list: {cert}")
    if cert["profile"] != "core" or cert["complete"] or cert["certified"]:
        fail(f"a --filter run must not certify: {cert}")
    print(f"[check_report] {path}: {len(report['cases'])} cases, summary {counts}")


if __name__ == "__main__":
    main()
