"""A race between streams is not certified: sim built with stream_wait_event
dropped (tests/plugins: sim_no_wait) fails the streams cases that read on one
stream what another wrote after a long job, and is not certified; sim itself
passes the same cases.

Usage: check_stream_races.py BACKPLANE_EXE SIM_NO_WAIT_SO WORK_DIR
"""
import json
import os
import subprocess
import sys

# The cases whose second stream waits for the first with Event::block: each
# must fail when the wait is dropped.
WAIT_CASES = ("streams.wait_after_long_job", "streams.wait_after_chain",
              "streams.query_after_chained_waits")


def fail(msg):
    print(f"[check_stream_races] {msg}", file=sys.stderr)
    sys.exit(1)


def run(exe, backend, json_path, *extra):
    return subprocess.run([exe, "conformance", "--backend", backend, "--json", json_path,
                           *extra], capture_output=True, text=True)


def statuses(json_path):
    with open(json_path, encoding="utf-8") as f:
        report = json.load(f)
    return report, {c["name"]: c["status"] for c in report["cases"]}


def main():
    exe, no_wait, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    # The whole certification run, as a plugin author would start it.
    path = os.path.join(work, "sim_no_wait.json")
    r = run(exe, no_wait, path)
    if r.returncode != 1:
        fail(f"sim_no_wait: exit {r.returncode}, expected 1\n{r.stdout[-3000:]}{r.stderr[-2000:]}")
    if "sim_no_wait is NOT certified for profile core" not in r.stdout:
        fail(f"sim_no_wait: no 'NOT certified' line\n{r.stdout[-3000:]}")
    report, status = statuses(path)
    if report["certification"]["certified"]:
        fail(f"sim_no_wait: JSON says certified: {report['certification']}")
    for name in WAIT_CASES:
        if status.get(name) != "failed":
            fail(f"sim_no_wait: {name} is {status.get(name)!r}, expected 'failed'")
    failed = sorted(n for n, s in status.items() if s == "failed")
    print(f"[check_stream_races] sim_no_wait not certified; failed: {', '.join(failed)}")
    # sim, with its waits, passes every streams case.
    path = os.path.join(work, "sim_streams.json")
    r = run(exe, "sim", path, "--filter", "streams.*")
    _, status = statuses(path)
    if r.returncode != 0 or not status or any(s != "passed" for s in status.values()):
        fail(f"sim: exit {r.returncode}, statuses {status}\n{r.stdout[-3000:]}")
    for name in WAIT_CASES:
        if name not in status:
            fail(f"sim: {name} did not run")
    print(f"[check_stream_races] sim passes the {len(status)} streams cases")


if __name__ == "__main__":
    main()
