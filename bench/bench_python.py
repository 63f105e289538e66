#!/usr/bin/env python3
"""Per-op cost from Python, Backplane against PyTorch 1.13 in the same run.

    PYTHONPATH=build/python /usr/bin/python3 bench/bench_python.py [--quick]

Each case is timed with the standard library's timeit: the best of several
repeats, in nanoseconds per call, then the ratio backplane/torch (below 1:
Backplane is faster). One thread for both (torch.set_num_threads(1)), as the
C++ benchmark's tiny_add: a 4-float op is all overhead. --quick runs each
case a few times only (a smoke test: the numbers then mean nothing).
"""
import argparse
import timeit

import backplane as bp


def cases(m):
    x, y = m.ones(4), m.ones(4)
    w = m.ones(4, requires_grad=True)
    return {
        "x + y (4 floats)": lambda: x + y,
        "x.add_(y)": lambda: x.add_(y),
        "w + y, recorded (w requires grad)": lambda: w + y,
        "x[1:] (a view)": lambda: x[1:],
    }


def measure(fn, number, repeat):
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few calls per case (smoke test)")
    args = ap.parse_args()
    number, repeat = (10, 2) if args.quick else (200000, 5)
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        torch = None
    ours = cases(bp)
    theirs = cases(torch) if torch else {}
    print(f"{'case':36} {'backplane':>12} {'torch 1.13':>12} {'ratio':>7}")
    for name, fn in ours.items():
        a = measure(fn, number, repeat)
        if name in theirs:
            b = measure(theirs[name], number, repeat)
            print(f"{name:36} {a:9.0f} ns {b:9.0f} ns {a / b:7.3f}")
        else:
            print(f"{name:36} {a:9.0f} ns {'n/a':>12}")


if __name__ == "__main__":
    main()
