"""A plugin that lacks most kernels is not certified: the whole suite runs,
nothing fails, and yet the run exits 1, and every report says why.

Usage: check_certification.py BACKPLANE_EXE PLUGIN_SO WORK_DIR

The plugin is tests/plugins/minimal.cpp: fill and copy for float32 and add
for float32 only, so the core profile's int64 kernels and the rest of the
float32 ones are missing.
"""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET


def fail(msg):
    print(f"[check_certification] {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    exe, plugin, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    json_path, junit_path = os.path.join(work, "minimal.json"), os.path.join(work, "minimal.xml")
    # In this process (--no-isolate): the verdict is under test, not the
    # isolation, and the fake neither crashes nor hangs. A process per case
    # took 100 s here and passed its 300 s limit under ASan on two cores.
    run = subprocess.run([exe, "conformance", "--backend", plugin, "--no-isolate", "--json",
                          json_path, "--junit", junit_path], capture_output=True, text=True)
    out = run.stdout
    if run.returncode != 1:
        fail(f"exit {run.returncode}, expected 1 (not certified)\n{out[-2000:]}")
    for text in ("minimal is NOT certified for profile core", "required kernels missing",
                 "add (int64)", "could not run for a required kernel", " 0 failed"):
        if text not in out:
            fail(f"the console report lacks {text!r}\n{out[-2000:]}")
    with open(json_path, encoding="utf-8") as f:
        cert = json.load(f)["certification"]
    if cert["certified"] or not cert["complete"] or "add (int64)" not in cert["missing_kernels"]:
        fail(f"JSON certification {cert}")
    # Every unsupported case is counted once: for a required kernel (blocked)
    # or for one outside the profile.
    with open(json_path, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    unsupported = sum(1 for c in cases if c["status"] == "unsupported")
    if cert["unsupported_outside_profile"] + len(cert["blocked_cases"]) != unsupported:
        fail(f"{unsupported} unsupported cases, yet {cert['unsupported_outside_profile']} outside "
             f"the profile and {len(cert['blocked_cases'])} blocked")
    if not 0 < cert["unsupported_outside_profile"] < unsupported:
        fail(f"minimal lacks kernels inside and outside core: {cert['unsupported_outside_profile']}"
             f" of {unsupported} unsupported cases counted outside the profile")
    if "add (float32)" in cert["missing_kernels"]:
        fail("add (float32) is registered by the plugin, yet listed as missing")
    suites = {s.get("name"): s for s in ET.parse(junit_path).getroot()}
    c = suites.get("certification")
    if c is None or c.get("failures") != "1" or c.find("testcase/failure") is None:
        fail("the JUnit report has no failed certification test case")
    # For `full`, the verdict names the narrow dtypes among the missing
    # kernels (minimal registers none) and how a plugin gets them.
    full = subprocess.run([exe, "conformance", "--backend", plugin, "--no-isolate", "--profile",
                           "full", "--filter", "op.fill_.float32.*"], capture_output=True, text=True)
    want = "in the narrow dtypes float16, bfloat16, int8, uint8, int16"
    # (With --filter the exit code says only whether a case failed.)
    if full.returncode != 0 or want not in full.stdout:
        fail(f"--profile full: exit {full.returncode}, no {want!r}\n{full.stdout[-2000:]}")
    print("[check_certification] minimal: not certified, exit 1, in console, JSON and JUnit")


if __name__ == "__main__":
    main()
