"""Runs `backplane conformance --json FILE` and checks FILE has the documented keys.

Usage: check_report.py BACKPLANE_EXE JSON_FILE
"""
import json
import subprocess
import sys

STATUSES = {"passed", "failed", "unsupported", "skipped"}


def fail(msg):
    print(f"[check_report] {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    exe, path = sys.argv[1], sys.argv[2]
    run = subprocess.run([exe, "conformance", "--json", path])
    # 0 and 1 both write a report; 2 and 3 mean no suite ran.
    if run.returncode not in (0, 1):
        fail(f"backplane conformance exited {run.returncode}")
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    for key in ("backend", "cases", "summary"):
        if key not in report:
            fail(f"missing key '{key}'")
    if not isinstance(report["backend"], str) or not report["backend"]:
        fail("'backend' must be a non-empty string")
    if not report["cases"]:
        fail("'cases' is empty")
    counts = {s: 0 for s in STATUSES}
    for case in report["cases"]:
        for key in ("name", "spec", "category", "status", "message"):
            if key not in case:
                fail(f"case {case.get('name')} lacks '{key}'")
        if case["status"] not in STATUSES:
            fail(f"case {case['name']} has status '{case['status']}'")
        if not isinstance(case["spec"], list) or not case["spec"]:
            fail(f"case {case['name']} names no SEMANTICS.md ID")
        counts[case["status"]] += 1
    if report["summary"] != counts:
        fail(f"summary {report['summary']} does not match the cases {counts}")
    print(f"[check_report] {path}: {len(report['cases'])} cases, summary {counts}")


if __name__ == "__main__":
    main()
