"""Probe: what would worker processes (one GIL each) give the 2-thread forward of config "small"?

Run on a quiet machine (numpy only, ~2 minutes)::

    PYTHONPATH=. python benchmarks/probe_worker_processes.py [--repeats 3]

The sharded forward (``GPT.logprobs`` at 2 threads) runs each half of the batch in a thread of
one process: the two threads share one GIL, and many short numpy calls of the two shards wait
for each other (``probe_gil_handoff.py``). Worker processes would not. This probe measures
the best such a design could do, without building it: two fresh processes, one BLAS thread
each, each holding the same model (same seed) and half of the 8 x 256 batch, start each
forward together (a barrier) and the time of a forward is from the earlier start to the later
end. What a real design would add is not counted: sending the ids and gathering the (B, T)
log-probabilities, keeping the weights in shared memory, and the processes' start.

Printed, each row in its own fresh process(es), ``--repeats`` times (median [min-max]):

- ``peak``: numpy's float32 GEMM 4096 x 768 x 3072 at 2 threads, one process (the peak of
  the 2-thread target), and the same GEMM in two 1-thread processes at once (their summed rate);
- ``threads``: ``GPT.logprobs`` of 8 x 256 at 2 threads (the library as it is);
- ``one shard alone``: one 1-thread process, a forward of its 4 x 256 half, the other core idle
  (its percentage: as if both halves ran that fast at once without slowing each other);
- ``processes``: the two processes at once.

Each forward as a percentage of the 2-thread peak, with the FLOPs of
``bench_transformer.forward_flops`` (full T x T attention products, as torch computes).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402
from bench_transformer import B, forward_flops, inputs  # noqa: E402


def _limit(threads: int) -> None:
    for var in (*H.THREAD_VARS, "SEQPROB_NUM_THREADS"):
        os.environ[var] = str(threads)
    for var in H.OPENBLAS_TUNING_VARS:
        os.environ.pop(var, None)


def _worker(kind, part, parts, runs, warmups, barrier, queue):
    """One process: set up, then ``runs`` timed calls, each started at the barrier."""
    from threadpoolctl import threadpool_limits

    threads = 2 if kind in ("threads", "peak2") else 1
    keep = threadpool_limits(limits=threads)  # noqa: F841  (held for the process' lifetime)
    fn = _gemm() if kind.startswith("peak") else _forward(part, parts)
    for _ in range(warmups):
        fn()
    marks = []
    for _ in range(runs):
        barrier.wait()
        t0 = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes on Linux
        fn()
        marks.append((t0, time.perf_counter()))
    queue.put((part, marks))


def _gemm():
    import numpy as np

    M, K, N = H.MATMUL_SHAPE
    a = np.random.default_rng(1).standard_normal((M, K), dtype=np.float32)
    w = np.random.default_rng(2).standard_normal((K, N), dtype=np.float32)
    out = np.empty((M, N), np.float32)
    return lambda: np.matmul(a, w, out=out)


def _forward(part, parts):
    import numpy as np

    from seqprob.gpt import GPT, GPTConfig

    model = GPT(GPTConfig(**H.SMALL), seed=0)
    ids = np.array_split(inputs(), parts)[part]
    return lambda: model.logprobs(ids)


def run_group(kind: str, n_procs: int, parts: int, runs: int, warmups: int) -> list:
    """Per-run wall seconds of ``n_procs`` processes started together (each its own part)."""
    _limit(2 if kind in ("threads", "peak2") else 1)
    ctx = mp.get_context("spawn")  # fresh interpreters: numpy imported under these settings
    barrier, queue = ctx.Barrier(n_procs), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(kind, i, parts, runs, warmups, barrier, queue))
             for i in range(n_procs)]
    for p in procs:
        p.start()
    marks = [queue.get(timeout=600)[1] for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"worker of {kind} failed ({p.exitcode})")
    return [max(m[i][1] for m in marks) - min(m[i][0] for m in marks) for i in range(runs)]


def fig(values, fmt="{:.1f}") -> str:
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--warmups", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    M, K, N = H.MATMUL_SHAPE
    gemm, flops = 2 * M * K * N, forward_flops()
    rows = {"peak2": [], "peak 1+1": [], "threads": [], "one shard alone": [], "processes": []}
    pct = {name: [] for name in rows}
    for _ in range(args.repeats):
        peak2 = gemm / statistics.median(run_group("peak2", 1, 1, args.runs, args.warmups)) / 1e9
        both = gemm / statistics.median(run_group("peak11", 2, 2, args.runs, args.warmups)) / 1e9 * 2
        rows["peak2"].append(peak2)
        rows["peak 1+1"].append(both)
        pct["peak 1+1"].append(100 * both / peak2)
        for name, n_procs, parts in (("threads", 1, 1), ("one shard alone", 1, 2), ("processes", 2, 2)):
            ms = 1e3 * statistics.median(run_group(name, n_procs, parts, args.runs, args.warmups))
            rows[name].append(ms)
            # one shard alone: as if both halves ran that fast at once, without interfering
            pct[name].append(100 * flops / (ms / 1e3) / 1e9 / peak2)
    print(f"forward {B} x 256 of config small, {args.runs} runs after {args.warmups} warm-ups, "
          f"{args.repeats} repeats (median [min-max] over repeats)")
    print(f"numpy GEMM peak, 2 threads, one process: {fig(rows['peak2'])} GFLOP/s")
    print(f"the same GEMM in two 1-thread processes at once: {fig(rows['peak 1+1'])} GFLOP/s "
          f"= {fig(pct['peak 1+1'], '{:.0f}')}% of it")
    for name in ("threads", "one shard alone", "processes"):
        print(f"{name:>16}: {fig(rows[name])} ms = {fig(pct[name], '{:.0f}')}% of the 2-thread peak")


if __name__ == "__main__":
    main()
