#!/usr/bin/env python3
"""Checks `backplane train` end to end: check_train.py SCENARIO BACKPLANE WORKDIR DIGITS [BACKEND]

  accuracy   the CNN on cpu_onednn for 15 epochs reaches 97% held out; the CSV has
             a row per epoch whose last accuracy is the one printed; the checkpoint
             is a safetensors file holding the model, Adam's state and the settings.
  resume     4 epochs in one run, and 2 + 2 with --stop-after and --resume (the
             settings taken from the checkpoint), give the same checkpoint byte for
             byte and the same metrics rows; a setting that differs is refused; a
             larger --epochs extends the resumed run, a smaller one is refused.
  backend    2 epochs of the CNN on BACKEND and on cpu_onednn: the same held-out
             accuracy (within two samples) and losses (within 2%).
  distributed  `backplane launch --nproc 2 -- backplane train --distributed` with
             batches of 16 per rank deals each batch of 32 of a single process out to
             the two ranks: 3 epochs of the MLP give the single process's metrics
             (losses within 1e-4 relative, accuracies within a sample), written and
             printed once, by rank 0.
No timing is asserted.
"""
import csv
import json
import math
import os
import struct
import subprocess
import sys


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    print("$ " + " ".join(cmd) + "\n" + p.stdout + p.stderr)
    return p


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def train(exe, digits, *args):
    return run([exe, "train", "--data", digits, "--progress", "lines", *args])


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def accuracy(exe, work, digits):
    m, c = os.path.join(work, "m.csv"), os.path.join(work, "c.safetensors")
    p = train(exe, digits, "--backend", "cpu_onednn", "--model", "cnn", "--epochs", "15", "--metrics", m,
              "--checkpoint", c, "--min-accuracy", "0.97")
    if p.returncode != 0:
        fail("exit status %d" % p.returncode)
    r = rows(m)
    if [int(x["epoch"]) for x in r] != list(range(1, 16)):
        fail("epochs in the CSV: %r" % [x["epoch"] for x in r])
    final = float(r[-1]["test_accuracy"])
    if final < 0.97:
        fail("held-out accuracy %.4f" % final)
    if "Held-out accuracy %.2f%%" % (100 * final) not in p.stdout:
        fail("the printed accuracy is not the CSV's %.4f" % final)
    if not float(r[-1]["train_loss"]) < float(r[0]["train_loss"]) / 10:
        fail("the training loss did not fall tenfold")
    if not all(float(x["samples_per_second"]) > 0 and float(x["seconds"]) > 0 for x in r):
        fail("throughput not measured")
    h = header(c)
    meta = h.pop("__metadata__")
    want = {"train.model": "cnn", "train.epoch": "15", "optimizer": "Adam", "train.optimizer": "adam"}
    for k, v in want.items():
        if meta.get(k) != v:
            fail("checkpoint metadata %s = %r, not %r" % (k, meta.get(k), v))
    if abs(float(meta["train.test_accuracy"]) - final) > 1e-12:
        fail("checkpoint accuracy %s against the CSV's %r" % (meta["train.test_accuracy"], final))
    model = [k for k in h if k.startswith("model.")]
    state = [k for k in h if k.startswith("optimizer.state.")]
    # 10 parameters and 3 buffers per BatchNorm2d; Adam keeps exp_avg and exp_avg_sq per parameter.
    if len(model) != 16 or "model.1.running_mean" not in model or "model.9.weight" not in model:
        fail("model entries: %r" % sorted(model))
    if len(state) != 20 or meta.get("optimizer.state.0.step") != "675":
        fail("optimiser entries: %r, step %r" % (sorted(state), meta.get("optimizer.state.0.step")))
    if h["model.0.weight"]["shape"] != [32, 1, 3, 3] or h["model.0.weight"]["dtype"] != "F32":
        fail("model.0.weight: %r" % h["model.0.weight"])


def resume(exe, work, digits):
    common = ["--backend", "cpu_onednn", "--model", "cnn", "--epochs", "4"]
    a, am = os.path.join(work, "a.safetensors"), os.path.join(work, "a.csv")
    b, bm = os.path.join(work, "b.safetensors"), os.path.join(work, "b.csv")
    for f in (a, am, b, bm):
        if os.path.exists(f):
            os.remove(f)
    if train(exe, digits, *common, "--checkpoint", a, "--metrics", am).returncode != 0:
        fail("the uninterrupted run failed")
    p = train(exe, digits, *common, "--checkpoint", b, "--metrics", bm, "--stop-after", "2")
    if p.returncode != 0 or "Stopped after epoch 2 of 4" not in p.stdout or len(rows(bm)) != 2:
        fail("--stop-after 2")
    # Another model is refused, naming the setting, and the checkpoint is kept.
    before = open(b, "rb").read()
    p = train(exe, digits, *common[:2], "--model", "mlp", "--epochs", "4", "--resume", b, "--checkpoint", b)
    if p.returncode != 2 or "trained with --model cnn, not mlp" not in p.stderr or open(b, "rb").read() != before:
        fail("resuming with --model mlp was not refused cleanly")
    # The settings come from the checkpoint; those given must agree with it.
    p = train(exe, digits, "--backend", "cpu_onednn", "--lr", "1e-3", "--checkpoint", b, "--metrics", bm,
              "--resume", b)
    if p.returncode != 0 or "Resumed from %s after epoch 2 of 4" % b not in p.stdout:
        fail("--resume")
    if open(a, "rb").read() != open(b, "rb").read():
        fail("the resumed run's checkpoint differs from the uninterrupted run's")
    strip = lambda rs: [{k: v for k, v in x.items() if k not in ("seconds", "samples_per_second")} for x in rs]
    if strip(rows(am)) != strip(rows(bm)):
        fail("metrics differ:\n%r\n%r" % (strip(rows(am)), strip(rows(bm))))
    # A larger --epochs extends the run; a smaller one than the checkpoint's epoch is refused.
    p = train(exe, digits, "--backend", "cpu_onednn", "--epochs", "3", "--resume", b, "--checkpoint", b)
    if p.returncode != 2 or "--epochs 3 is below the epoch" not in p.stderr:
        fail("--epochs 3 after epoch 4 was not refused")
    p = train(exe, digits, "--backend", "cpu_onednn", "--epochs", "5", "--resume", b, "--checkpoint", b,
              "--metrics", bm)
    if p.returncode != 0 or "Resumed from %s after epoch 4 of 5" % b not in p.stdout or "epoch 5/5" not in p.stdout:
        fail("--resume with --epochs 5 did not go on to epoch 5")
    meta = header(b)["__metadata__"]
    if meta["train.epoch"] != "5" or meta["train.epochs"] != "5" or [x["epoch"] for x in rows(bm)] != list("12345"):
        fail("the extended run's checkpoint or metrics: %r %r" % (meta["train.epoch"], [x["epoch"] for x in rows(bm)]))


def backend(exe, work, digits, name):
    results = {}
    for b in ("cpu_onednn", name):
        m = os.path.join(work, b + ".csv")
        p = train(exe, digits, "--backend", b, "--model", "cnn", "--epochs", "2", "--metrics", m)
        if p.returncode != 0:
            fail("%s: exit status %d" % (b, p.returncode))
        results[b] = rows(m)
    if len(results["cpu_onednn"]) != 2 or len(results[name]) != 2:
        fail("a CSV does not have a row per epoch")
    n = {"train_accuracy": 1438, "test_accuracy": 359}
    for x, y in zip(results["cpu_onednn"], results[name]):
        # Float32 rounding differs between backends and grows over training:
        # the accuracies may differ by two samples, the losses by 2%.
        if any(abs(float(x[k]) - float(y[k])) > 2.5 / n[k] for k in n):
            fail("epoch %s: accuracy %s/%s on cpu_onednn, %s/%s on %s" % (
                x["epoch"], x["train_accuracy"], x["test_accuracy"], y["train_accuracy"], y["test_accuracy"], name))
        for k in ("train_loss", "test_loss"):
            if not math.isclose(float(x[k]), float(y[k]), rel_tol=2e-2):
                fail("epoch %s: %s %s on cpu_onednn, %s on %s" % (x["epoch"], k, x[k], y[k], name))


def distributed(exe, work, digits):
    common = ["--model", "mlp", "--epochs", "3", "--data", digits, "--progress", "lines"]
    one, two = os.path.join(work, "one.csv"), os.path.join(work, "two.csv")
    ckpt = os.path.join(work, "two.safetensors")
    for f in (one, two, ckpt):
        if os.path.exists(f):
            os.remove(f)
    if run([exe, "train", *common, "--batch-size", "32", "--metrics", one]).returncode != 0:
        fail("the single process failed")
    p = run([exe, "launch", "--nproc", "2", "--", exe, "train", "--distributed", *common, "--batch-size", "16",
             "--metrics", two, "--checkpoint", ckpt])
    if p.returncode != 0:
        fail("exit status %d" % p.returncode)
    if "on 2 ranks (batches of 16 per rank)" not in p.stdout or p.stdout.count("Held-out accuracy") != 1:
        fail("rank 0 alone should print, naming the ranks")
    a, b = rows(one), rows(two)
    if len(b) != 3 or not os.path.exists(ckpt):
        fail("rank 0 should write 3 rows and the checkpoint; rows: %d" % len(b))
    n = {"train_accuracy": 1438, "test_accuracy": 359}
    for x, y in zip(a, b):
        for k in ("train_loss", "test_loss"):
            if not math.isclose(float(x[k]), float(y[k]), rel_tol=1e-4):
                fail("epoch %s: %s %s in one process, %s on two ranks" % (x["epoch"], k, x[k], y[k]))
        if any(abs(float(x[k]) - float(y[k])) > 1.5 / n[k] for k in n):
            fail("epoch %s: accuracies %s/%s in one process, %s/%s on two ranks" % (
                x["epoch"], x["train_accuracy"], x["test_accuracy"], y["train_accuracy"], y["test_accuracy"]))


def main():
    scenario, exe, work, digits = sys.argv[1:5]
    os.makedirs(work, exist_ok=True)
    if scenario == "accuracy":
        accuracy(exe, work, digits)
    elif scenario == "resume":
        resume(exe, work, digits)
    elif scenario == "distributed":
        distributed(exe, work, digits)
    elif scenario == "backend":
        backend(exe, work, digits, sys.argv[5])
    else:
        fail("unknown scenario " + scenario)
    print("PASS")


if __name__ == "__main__":
    main()
