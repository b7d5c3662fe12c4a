"""Probe: can a second core speed up the GEMVs of one decoding step of config "small"?

Run on a quiet machine (numpy only, one process, ~30 s)::

    PYTHONPATH=. python benchmarks/probe_gemv_split.py [--tokens 2000]

A decoding step of config "small" (4 layers, d 256, vocab 4096, float32) streams 16.8 MB of
weights through 17 GEMVs; at one core that is ~0.7-0.95 ms of its ~1.1 ms. The 2-thread
target (>= 1.5x torch) needs those GEMVs split over both cores. This times the
same 17 GEMVs per "token" (distinct weight arrays, so they come from L3 as in a real step)
three ways and prints min / 10th percentile / median microseconds per token:

- ``blas1``: OpenBLAS on one thread (what ``seqprob.gpt.decode`` does for small models);
- ``blas2``: OpenBLAS on two threads (its ``gemv`` splits every matrix over 9216 elements);
- ``worker``: one persistent Python thread computing the other half of each GEMV (column
  halves; the MLP down projection split by rows and summed), 9 lock hand-offs per token,
  BLAS on one thread: the tensor-parallel layout a 2-thread ``step`` would use.

Measured under load (2 cores shared, nice -15): at load average 4-6 neither split won (blas1
min 724-816 us, blas2 min 738-847 us with medians of ~16 ms, worker min 1528-1698 us); at
load ~3 blas2 won here (min 686 / median 779 against 784 / 894 us) while the real decode
with BLAS left on two threads was 3-4x slower than on one (1.66-2.10 s against 0.52-0.57 s
for +256 tokens: between the GEMVs the step runs Python, and the spinning OpenBLAS worker
competes for the core). A split is worth building into ``step`` only if a quiet run of
``bench_transformer.py --decode-only`` confirms what this probe suggests.
"""
from __future__ import annotations

import argparse
import threading
import time

import numpy as np
from threadpoolctl import threadpool_limits

C, F, V, LAYERS = 256, 1024, 4096, 4


def weights(seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    layers = [{name: rng.standard_normal(shape).astype(np.float32) / 16
               for name, shape in (("qkv", (C, 3 * C)), ("o", (C, C)), ("up", (C, F)), ("down", (F, C)))}
              for _ in range(LAYERS)]
    return layers, rng.standard_normal((V, C)).astype(np.float32) / 16


class Buffers:
    def __init__(self):
        self.h, self.act = np.full(C, 0.1, np.float32), np.full(F, 0.1, np.float32)
        self.qkv, self.a = np.empty(3 * C, np.float32), np.empty(C, np.float32)
        self.u, self.m, self.m2 = np.empty(F, np.float32), np.empty(C, np.float32), np.empty(C, np.float32)
        self.logits = np.empty(V, np.float32)


def full_token(layers, w_u, b: Buffers) -> None:
    for p in layers:
        np.dot(b.h, p["qkv"], out=b.qkv)
        np.dot(b.h, p["o"], out=b.a)
        np.dot(b.h, p["up"], out=b.u)
        np.dot(b.act, p["down"], out=b.m)
    np.dot(w_u, b.h, out=b.logits)


def split_rounds(layers, w_u, b: Buffers) -> list:
    """Per hand-off: (this thread's GEMVs, the worker's), each a list of (x, W, out)."""
    qh, fh, vh = 3 * C // 2, F // 2, V // 2
    rounds = []
    for p in layers:
        rounds.append(([(b.h, p["qkv"][:, :qh], b.qkv[:qh])], [(b.h, p["qkv"][:, qh:], b.qkv[qh:])]))
        rounds.append(([(b.h, p["up"][:, :fh], b.u[:fh]), (b.act[:fh], p["down"][:fh], b.m)],
                       [(b.h, p["up"][:, fh:], b.u[fh:]), (b.act[fh:], p["down"][fh:], b.m2)]))
    rounds.append(([(b.h, w_u[:vh].T, b.logits[:vh])], [(b.h, w_u[vh:].T, b.logits[vh:])]))
    return rounds


class Worker:
    """One persistent thread; ``run(mine, theirs)`` computes both halves, one hand-off."""

    def __init__(self):
        self.go, self.done, self.job = threading.Lock(), threading.Lock(), None
        self.go.acquire()
        self.done.acquire()
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            self.go.acquire()
            for x, w, out in self.job:
                np.dot(x, w, out=out)
            self.done.release()

    def run(self, mine, theirs) -> None:
        self.job = theirs
        self.go.release()
        for x, w, out in mine:
            np.dot(x, w, out=out)
        self.done.acquire()


def per_token(fn, tokens: int) -> str:
    fn()
    times = np.empty(tokens)
    for i in range(tokens):
        t0 = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - t0
    us = times * 1e6
    return f"min {us.min():7.0f}  p10 {np.percentile(us, 10):7.0f}  median {np.median(us):7.0f} us/token"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=2000)
    args = ap.parse_args(argv)
    layers, w_u = weights()
    b = Buffers()
    rounds, worker = split_rounds(layers, w_u, b), Worker()

    def split_token():
        for mine, theirs in rounds:
            worker.run(mine, theirs)
        for p in layers:  # the small output projection stays on this thread
            np.dot(b.h, p["o"], out=b.a)

    for name, threads, fn in (("blas1", 1, lambda: full_token(layers, w_u, b)),
                              ("blas2", 2, lambda: full_token(layers, w_u, b)),
                              ("worker", 1, split_token)):
        with threadpool_limits(limits=threads, user_api="blas"):
            print(f"{name:<7} {per_token(fn, args.tokens)}", flush=True)


if __name__ == "__main__":
    main()
