#!/usr/bin/env python3
"""Damaged checkpoints fed to `backplane train --resume`: check_checkpoint_damage.py BACKPLANE WORKDIR DIGITS

Writes a checkpoint of one MLP epoch, makes damaged copies of it (cuts, header
sizes, bit flips in the header and in every tensor, NaN and infinite weights
and moments, edited metadata, renamed, reshaped and retyped tensors, a header
of 200,000 entries, special files), some with their sums left as they were and
some with the sums made afresh (so the value checks, not the sums, must find
them), and resumes from each. Every one must be refused with exit 2 and no
"Resumed from", within 60 s; the undamaged file, and a NaN weight with
--accept-nonfinite, must resume. Prints the counts.
"""
import os
import json
import random
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint_files as cf  # noqa: E402


def main():
    exe, work, digits = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    good = os.path.join(work, "good.safetensors")
    common = ["train", "--data", digits, "--progress", "lines", "--model", "mlp", "--epochs", "2"]
    p = subprocess.run([exe, *common, "--stop-after", "1", "--checkpoint", good], capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        print(p.stdout + p.stderr)
        sys.exit("FAIL: the checkpoint was not written")
    raw = open(good, "rb").read()
    if cf.verify(raw):
        sys.exit("FAIL: the good checkpoint does not verify here: " + cf.verify(raw))
    header, data = cf.split(raw)
    rng = random.Random(50)
    cases = []  # (name, bytes or a callable making the path)

    def add(name, b):
        cases.append((name, b))

    def resigned(name, edit):
        h, d = cf.split(raw)
        h = {k: (dict(v) if isinstance(v, dict) else v) for k, v in h.items()}
        h["__metadata__"] = dict(h["__metadata__"])
        d = bytearray(d)
        edit(h, d)
        add(name + " (sums made afresh)", cf.write(h, bytes(d)))

    # Cuts, and header sizes.
    (n,) = struct.unpack("<Q", raw[:8])
    for cut in sorted(set([0, 4, 7, 8, 9, 8 + n // 2, 8 + n - 1, 8 + n, 8 + n + 1, len(raw) - 1] +
                          [rng.randrange(len(raw)) for _ in range(10)])):
        add("cut at %d" % cut, raw[:cut])
    for size in [0, 1, 2, n - 8, n - 1, n + 1, n + 8, len(raw), 1 << 40, (1 << 64) - 1]:
        add("header size %d" % size, struct.pack("<Q", size) + raw[8:])
    # Bit flips: in the header, and in each tensor's bytes.
    for _ in range(25):
        i = rng.randrange(8, 8 + n)
        b = bytearray(raw)
        b[i] ^= 1 << rng.randrange(8)
        add("header bit flip at %d" % i, bytes(b))
    for name, e in sorted(header.items()):
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        for _ in range(2):
            i = 8 + n + rng.randrange(lo, hi)
            b = bytearray(raw)
            b[i] ^= 1 << rng.randrange(8)
            add("bit flip in %s" % name, bytes(b))

    # Values: with the sums kept (found by the sums) and made afresh (found by the value checks).
    def set_float(name, index, value):
        def edit(h, d):
            lo = h[name]["data_offsets"][0] + 4 * index
            d[lo:lo + 4] = struct.pack("<f", value)
        return edit

    def set_all(name, value):
        def edit(h, d):
            lo, hi = h[name]["data_offsets"]
            d[lo:hi] = struct.pack("<f", value) * ((hi - lo) // 4)
        return edit

    def meta(key, value):
        def edit(h, d):
            h["__metadata__"][key] = value
        return edit

    value_edits = [
        ("NaN weight", set_float("model.1.weight", 3, float("nan"))),
        ("every weight +inf", set_all("model.3.weight", float("inf"))),
        ("-inf bias", set_float("model.3.bias", 0, float("-inf"))),
        ("NaN Adam moment", set_float("optimizer.state.0.exp_avg", 0, float("nan"))),
        ("inf Adam second moment", set_float("optimizer.state.2.exp_avg_sq", 1, float("inf"))),
        ("train.lr inf", meta("train.lr", "inf")),
        ("train.lr 1e300", meta("train.lr", "1e300")),
        ("train.lr -0.01", meta("train.lr", "-0.01")),
        ("train.lr nan", meta("train.lr", "nan")),
        ("group lr inf", meta("optimizer.param_groups.0.lr", "inf")),
        ("group lr -1", meta("optimizer.param_groups.0.lr", "-1")),
        ("step -1", meta("optimizer.state.0.step", "-1")),
        ("step 1.5", meta("optimizer.state.0.step", "1.5")),
        ("step 1e300", meta("optimizer.state.0.step", "1e300")),
        ("step 7", meta("optimizer.state.0.step", "7")),
        ("train.epoch -3", meta("train.epoch", "-3")),
        ("train.epoch 0", meta("train.epoch", "0")),
        ("train.epoch 3 of 2", meta("train.epoch", "3")),
        ("train.epoch x", meta("train.epoch", "x")),
        ("train.epoch 99999999999999999999", meta("train.epoch", "99999999999999999999")),
        ("train.batch_size 2^63-1", meta("train.batch_size", str(2 ** 63 - 1))),
        ("train.batch_size 0", meta("train.batch_size", "0")),
        ("train.batch_size 100000", meta("train.batch_size", "100000")),
        ("train.epochs 0", meta("train.epochs", "0")),
        ("train.test_fraction 1.5", meta("train.test_fraction", "1.5")),
        ("train.weight_decay inf", meta("train.weight_decay", "inf")),
        ("train.model resnet", meta("train.model", "resnet")),
        ("optimizer SGD", meta("optimizer", "SGD")),
        ("param_groups 2", meta("optimizer.param_groups", "2")),
        ("params 0,1,1,3", meta("optimizer.param_groups.0.params", "0,1,1,3")),
    ]
    for name, edit in value_edits:
        h, d = cf.split(raw)
        d = bytearray(d)
        h2 = {k: (dict(v) if isinstance(v, dict) else v) for k, v in h.items()}
        h2["__metadata__"] = dict(h2["__metadata__"])
        edit(h2, d)
        # The same edit with the old sums: the raw file with only this change.
        old = cf.write(h, bytes(cf.split(raw)[1]))
        assert old == raw, "the Python writer does not reproduce Backplane's file"
        meta_sums = {k: v for k, v in h["__metadata__"].items() if k.startswith("backplane.crc32c.")}
        h2_kept = dict(h2)
        h2_kept["__metadata__"] = {**{k: v for k, v in h2["__metadata__"].items()
                                      if not k.startswith("backplane.crc32c.")}, **meta_sums}
        t2 = json.dumps(h2_kept, separators=(",", ":"), sort_keys=True)
        t2 += " " * ((8 - len(t2) % 8) % 8)
        add(name + " (sums kept)", struct.pack("<Q", len(t2)) + t2.encode() + bytes(d))
        add(name + " (sums made afresh)", cf.write(h2, bytes(d)))

    # Renamed, reshaped and retyped tensors (sums made afresh).
    def rename(h, d):
        h["model.9.weight"] = h.pop("model.1.weight")

    def reshape(h, d):
        h["model.1.weight"] = dict(h["model.1.weight"], shape=[64, 128])

    def retype(h, d):
        e = h["model.3.bias"]
        h["model.3.bias"] = dict(e, dtype="I32")

    def drop(h, d):
        del h["optimizer.state.1.exp_avg"]  # its bytes stay: a hole, refused as such

    for name, edit in [("renamed tensor", rename), ("reshaped tensor", reshape), ("retyped tensor", retype),
                       ("a tensor left out", drop)]:
        resigned(name, edit)
    # Sums removed: a file without sums is refused by default.
    h, d = cf.split(raw)
    h["__metadata__"] = {k: v for k, v in h["__metadata__"].items() if not k.startswith("backplane.crc32c.")}
    t = json.dumps(h, separators=(",", ":"))
    add("all sums removed", struct.pack("<Q", len(t)) + t.encode() + d)
    # 200,000 empty tensors.
    many = {"t%d" % i: {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(200000)}
    many["__metadata__"] = dict(header["__metadata__"])
    add("200,000 empty tensors (sums kept)", (lambda t: struct.pack("<Q", len(t)) + t)(json.dumps(many).encode()))
    many2 = {k: v for k, v in many.items() if k != "__metadata__"}
    many2["__metadata__"] = {k: v for k, v in header["__metadata__"].items() if not k.startswith("backplane.")}
    add("200,000 empty tensors (sums made afresh)", cf.write(many2, b""))

    # Special files.
    specials = []
    fifo = os.path.join(work, "fifo.safetensors")
    if os.path.exists(fifo):
        os.remove(fifo)
    os.mkfifo(fifo)
    specials.append(("a FIFO", fifo))
    folder = os.path.join(work, "folder.safetensors")
    os.makedirs(folder, exist_ok=True)
    specials.append(("a folder", folder))
    specials.append(("/dev/null", "/dev/null"))
    specials.append(("/dev/zero", "/dev/zero"))
    specials.append(("a missing file", os.path.join(work, "missing.safetensors")))

    results = {"refused": 0, "silent": [], "hang": [], "other": []}
    out = os.path.join(work, "out.safetensors")

    def resume(name, path, extra=()):
        try:
            p = subprocess.run([exe, *common, "--resume", path, "--checkpoint", out, *extra], capture_output=True,
                               text=True, errors="replace", timeout=60)
        except subprocess.TimeoutExpired:
            results["hang"].append(name)
            print("HANG  %s" % name)
            return None
        return p

    total = 0
    for name, b in cases:
        path = os.path.join(work, "damaged.safetensors")
        with open(path, "wb") as f:
            f.write(b)
        total += 1
        p = resume(name, path)
        if p is None:
            continue
        first = (p.stderr.strip().splitlines() or [""])[0][:150]
        if p.returncode == 2 and "Resumed from" not in p.stdout:
            results["refused"] += 1
            print("exit 2  %-45s %s" % (name, first))
        elif p.returncode == 0 or "Resumed from" in p.stdout:
            results["silent"].append(name)
            print("SILENT  %s (exit %d)" % (name, p.returncode))
        else:
            results["other"].append("%s: exit %d" % (name, p.returncode))
            print("EXIT %d  %s: %s" % (p.returncode, name, first))
    for name, path in specials:
        total += 1
        p = resume(name, path)
        if p is None:
            continue
        if p.returncode == 2:
            results["refused"] += 1
            print("exit 2  %-45s %s" % (name, (p.stderr.strip().splitlines() or [""])[0][:150]))
        else:
            results["other"].append("%s: exit %d" % (name, p.returncode))
    os.remove(fifo)

    # Controls: the undamaged file resumes; a NaN weight resumes with --accept-nonfinite.
    p = resume("undamaged", good)
    if p is None or p.returncode != 0 or "Resumed from" not in p.stdout:
        sys.exit("FAIL: the undamaged checkpoint did not resume:\n" + (p.stdout + p.stderr if p else "hang"))
    h, d = cf.split(raw)
    d = bytearray(d)
    set_float("model.1.weight", 3, float("nan"))(h, d)
    nan_path = os.path.join(work, "nan.safetensors")
    with open(nan_path, "wb") as f:
        f.write(cf.write(h, bytes(d)))
    p = resume("NaN with --accept-nonfinite", nan_path, ["--accept-nonfinite"])
    if p is None or "Resumed from" not in p.stdout:
        sys.exit("FAIL: --accept-nonfinite did not resume:\n" + (p.stdout + p.stderr if p else "hang"))

    print("%d damaged files: %d refused with exit 2, %d silent resumes, %d hangs, %d other exits" % (
        total, results["refused"], len(results["silent"]), len(results["hang"]), len(results["other"])))
    if results["silent"] or results["hang"] or results["other"] or results["refused"] != total:
        sys.exit("FAIL: silent %r, hangs %r, other %r" % (results["silent"], results["hang"], results["other"]))
    print("PASS")


if __name__ == "__main__":
    main()
