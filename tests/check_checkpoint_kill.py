#!/usr/bin/env python3
"""SIGKILL during `backplane train --checkpoint`: check_checkpoint_kill.py BACKPLANE WORKDIR DIGITS [KILLS]

Trains the MLP with a checkpoint and metrics after every epoch and kills the
run with SIGKILL at KILLS (default 20) random moments (a fixed seed), each run
resuming from the last. After each kill the checkpoint must be whole and
verified (its CRC32C sums checked here, by an implementation of their own,
and by `backplane train --resume`) and be the previous or the new
checkpoint: the epoch of the last "epoch k/N" line printed, or the one before
it. The metrics file must hold whole rows only. Temporary files left by a
kill inside a write are counted (they show the kills that hit a write).
"""
import glob
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint_files as cf  # noqa: E402


def main():
    exe, work, digits = sys.argv[1:4]
    kills = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    os.makedirs(work, exist_ok=True)
    ckpt, metrics = os.path.join(work, "kill.safetensors"), os.path.join(work, "kill.csv")
    for f in [ckpt, metrics] + glob.glob(ckpt + ".*") + glob.glob(metrics + ".*"):
        if os.path.exists(f):
            os.remove(f)
    rng = random.Random(20261202)
    epochs = 100000
    common = ["train", "--data", digits, "--progress", "lines", "--model", "mlp", "--epochs", str(epochs),
              "--checkpoint", ckpt, "--metrics", metrics]
    in_write = 0
    last_epoch = 0
    for k in range(kills):
        cmd = [exe, *common] + (["--resume", ckpt] if os.path.exists(ckpt) else [])
        out_path = os.path.join(work, "stdout.txt")
        with open(out_path, "w") as out:
            p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
            # Wait until it trains, then kill at a random moment of the next 1.5 s.
            t0 = time.time()
            while time.time() - t0 < 120:
                if "epoch " in open(out_path).read() or p.poll() is not None:
                    break
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 1.5))
            p.send_signal(signal.SIGKILL)
            p.wait()
        text = open(out_path).read()
        done = [int(line.split()[1].split("/")[0]) for line in text.splitlines()
                if line.startswith("epoch ") and "/" in line.split()[1]]
        printed = done[-1] if done else last_epoch
        if not os.path.exists(ckpt):
            sys.exit("FAIL: kill %d: no checkpoint after %d epochs:\n%s" % (k + 1, printed, text))
        raw = open(ckpt, "rb").read()
        why = cf.verify(raw)
        if why:
            sys.exit("FAIL: kill %d: the checkpoint is torn: %s" % (k + 1, why))
        epoch = int(cf.split(raw)[0]["__metadata__"]["train.epoch"])
        if epoch not in (printed, printed - 1) or epoch < last_epoch:
            sys.exit("FAIL: kill %d: the checkpoint is at epoch %d; the run printed epoch %d, the last kill left %d"
                     % (k + 1, epoch, printed, last_epoch))
        rows = open(metrics).read()
        if rows and not rows.endswith("\n"):
            sys.exit("FAIL: kill %d: the metrics end in a partial row: %r" % (k + 1, rows[-80:]))
        if any(len(r.split(",")) != 8 for r in rows.splitlines()):
            sys.exit("FAIL: kill %d: a metrics row is not whole" % (k + 1))
        left = glob.glob(ckpt + ".*")
        in_write += bool(left)
        for f in left + glob.glob(metrics + ".*"):
            os.remove(f)
        # Backplane verifies it too (and resumes from it for one epoch).
        v = subprocess.run([exe, *common[:-4], "--resume", ckpt, "--stop-after", str(epoch + 1),
                            "--checkpoint", os.path.join(work, "check.safetensors")],
                           capture_output=True, text=True, timeout=300)
        if v.returncode != 0 or "Resumed from" not in v.stdout:
            sys.exit("FAIL: kill %d: backplane does not resume from it:\n%s" % (k + 1, v.stdout + v.stderr))
        print("kill %2d: checkpoint at epoch %d (the run had printed %d), verified%s" % (
            k + 1, epoch, printed, "; a temporary file was left: killed inside a write" if left else ""))
        last_epoch = epoch
    print("%d of %d kills left a whole, verified checkpoint (%d inside a write)" % (kills, kills, in_write))
    print("PASS")


if __name__ == "__main__":
    main()
