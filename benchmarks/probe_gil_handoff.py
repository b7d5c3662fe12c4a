"""Probe: what two threads calling short numpy operations at once cost each other.

Run on a quiet machine (numpy only, ~10 seconds)::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/probe_gil_handoff.py [--elements 32768]

The sharded forward runs one shard per thread, each thread making ~2,000 numpy calls per
forward of config "small", most on cache-sized pieces of 2^15 to 2^17 elements. numpy
releases the GIL inside a ufunc's loop, but every call takes it again to return, and then
to parse, type-resolve and dispatch the next: with two threads doing this at once, a thread
waiting for the GIL is woken only when the other lets it go. For each operation (on a
(elements / 256, 256) float32 block, like the forward's pieces), the probe times ``--calls``
calls on one thread, then the same calls on each of two threads at once, and prints the
slowdown (two threads' wall time / one thread's; 1.0 means the two ran fully in parallel,
2.0 as if one after the other).
"""
from __future__ import annotations

import argparse
import threading
import time

import numpy as np


def operations(x):
    """The short passes of the forward's kernels, each writing into per-thread buffers."""
    ones = np.ones((x.shape[1], 1), np.float32)
    return {
        "multiply by a scalar": lambda y, m: np.multiply(x, 0.5, out=y),
        "add two arrays": lambda y, m: np.add(x, x, out=y),
        "subtract a row vector": lambda y, m: np.subtract(x, m, out=y),
        "exp": lambda y, m: np.exp(x, out=y),
        "tanh": lambda y, m: np.tanh(x, out=y),
        "row max": lambda y, m: np.max(x, axis=-1, keepdims=True, out=m),
        "row sum": lambda y, m: np.sum(x, axis=-1, keepdims=True, out=m),
        "row sum as x @ ones": lambda y, m: np.matmul(x, ones, out=m),
    }


def run(op, x, calls: int) -> None:
    y, m = np.empty_like(x), np.zeros((x.shape[0], 1), np.float32)
    for _ in range(calls):
        op(y, m)


def slowdown(op, x, calls: int) -> tuple:
    """(microseconds per call on one thread, two threads' wall time / one thread's)."""
    run(op, x, calls // 10)  # warm-up
    t0 = time.perf_counter()
    run(op, x, calls)
    one = time.perf_counter() - t0
    threads = [threading.Thread(target=run, args=(op, x, calls)) for _ in range(2)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return one / calls * 1e6, (time.perf_counter() - t0) / one


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", type=int, nargs="+", default=[1 << 15, 1 << 18])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    for n in args.elements:
        x = np.random.default_rng(0).standard_normal((max(1, n // 256), 256), dtype=np.float32)
        calls = max(100, args.calls * (1 << 15) // n)
        print(f"{x.size:,} elements per call, {calls} calls per thread, median [min-max] of {args.repeats}:")
        for name, op in operations(x).items():
            results = [slowdown(op, x, calls) for _ in range(args.repeats)]
            us = sorted(r[0] for r in results)
            ratio = sorted(r[1] for r in results)
            print(f"  {name:<24} {us[len(us) // 2]:7.2f} us a call; two threads at once: "
                  f"x{ratio[len(ratio) // 2]:.2f} [{ratio[0]:.2f}-{ratio[-1]:.2f}]")


if __name__ == "__main__":
    main()
