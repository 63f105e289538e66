"""The seed changes values, never what a case is: for three seeds the same
cases run, each ends with the same status and lacks the same kernels; with
--same-kernels each also reaches the same kernels on the backend under test
(on a backend with every kernel, the core may copy one strided view where
another seed's view needs no copy).

Usage: check_seeds.py BACKPLANE_EXE BACKEND WORK_DIR [--expect-unsupported] [--same-kernels]
                      [--no-isolate]

BACKEND is best one that lacks kernels (tests/plugins' partial or minimal):
there a case that needs another kernel for one seed than for another is
unsupported for one and passes for the other. --expect-unsupported fails
the check unless some cases are unsupported and some pass (so that it can
tell them apart).
"""
import json
import os
import subprocess
import sys

SEEDS = (1, 2, 3)


def fail(msg):
    print(f"[check_seeds] {msg}", file=sys.stderr)
    sys.exit(1)


def run(exe, backend, work, seed, extra):
    path = os.path.join(work, f"seed{seed}.json")
    if os.path.exists(path):
        os.remove(path)
    cmd = [exe, "conformance", "--backend", backend, "--seed", str(seed), "--json", path] + extra
    print("[check_seeds] " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600)
    if proc.returncode not in (0, 1) or not os.path.exists(path):
        fail(f"exit {proc.returncode}\n{proc.stdout[-3000:]}")
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    if report["seed"] != seed:
        fail(f"the report's seed is {report['seed']}, expected {seed}")
    return {c["name"]: (c["status"], sorted(c["missing"]), sorted(c["kernels"]))
            for c in report["cases"]}


def main():
    exe, backend, work = sys.argv[1:4]
    flags = ("--expect-unsupported", "--same-kernels")
    extra = [a for a in sys.argv[4:] if a not in flags]
    expect_unsupported = "--expect-unsupported" in sys.argv[4:]
    same_kernels = "--same-kernels" in sys.argv[4:]
    os.makedirs(work, exist_ok=True)
    runs = {seed: run(exe, backend, work, seed, extra) for seed in SEEDS}
    if not same_kernels:
        runs = {seed: {n: (s, m, []) for n, (s, m, k) in r.items()} for seed, r in runs.items()}
    first = runs[SEEDS[0]]
    statuses = {s for s, _, _ in first.values()}
    if "passed" not in statuses or (expect_unsupported and "unsupported" not in statuses):
        fail(f"on {backend} some cases should pass and some be unsupported: {statuses}")
    if same_kernels and not any(k for _, _, k in first.values()):
        fail("no case reports the kernels it reached")
    for seed in SEEDS[1:]:
        other = runs[seed]
        if sorted(other) != sorted(first):
            only = sorted(set(first) ^ set(other))
            fail(f"seeds {SEEDS[0]} and {seed} run different cases: {only[:10]}")
        differ = [n for n in first if first[n] != other[n]]
        if differ:
            lines = [f"{n}: seed {SEEDS[0]} {first[n]}, seed {seed} {other[n]}" for n in differ[:10]]
            fail(f"{len(differ)} case(s) differ between seeds:\n  " + "\n  ".join(lines))
    what = "status, missing and reached kernels" if same_kernels else "status and missing kernels"
    print(f"[check_seeds] {backend}: {len(first)} cases, same {what} for seeds "
          f"{', '.join(map(str, SEEDS))}")


if __name__ == "__main__":
    main()
