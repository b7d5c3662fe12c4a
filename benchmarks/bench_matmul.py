"""The float32 GEMM peak: numpy's BLAS against torch's, each alone in a fresh process.

Run (with a Python that has torch; the suite runs it as ``python -m benchmarks --only matmul``)::

    PYTHONPATH=. python benchmarks/bench_matmul.py [--threads 1 2] [--runs 7] [--repeats 3]

A (4096, 768) @ (768, 3072) float32 product (``_harness.MATMUL_SHAPE``), ``np.matmul`` into a
preallocated output against ``torch.mm``; GFLOP/s from the median of ``--runs`` timed calls
after ``--warmups``. Most of every GPT row is this product, so its ratio says how much of a
GPT ratio is the BLAS itself; the GPT rows print their own % of this peak. No target.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

SUITE = {"order": 10, "group": "matmul", "about": "float32 GEMM 4096x768x3072, numpy's BLAS vs torch.mm"}


def seqprob_child(args) -> dict:
    return {**H.limit_threads(args.threads[0], torch_side=False),
            "matmul": H.numpy_matmul_peak(args.runs, args.warmups)}


def torch_child(args) -> dict:
    return {**H.limit_threads(args.threads[0], torch_side=True),
            "matmul": H.torch_matmul_peak(args.runs, args.warmups)}


def child_args(runs: int, warmups: int, side: str, threads: int) -> list:
    return ["--side", side, "--threads", threads, "--runs", runs, "--warmups", warmups]


def suite_rows(opts: H.SuiteOptions) -> list:
    """The suite's rows: one per thread count."""
    results = H.suite_pairs(__file__, opts, lambda side, thr: child_args(opts.runs, opts.warmups, side, thr))
    rows = H.ratio_rows(opts, results, "float32 GEMM 4096x768x3072 (numpy)", "torch.mm", "matmul", "matmul")
    for row, pairs in zip(rows, results.values()):
        gflops = sorted(s["matmul"]["gflops"] for s, _ in pairs)
        row["work"] += f", {gflops[0]:.0f}-{gflops[-1]:.0f} GFLOP/s"
    return rows


def main(argv=None) -> None:
    args = H.paired_args(__doc__.splitlines()[0], argv, {"seqprob": seqprob_child, "torch": torch_child})
    if args is None:
        return
    results = H.run_pairs(__file__, args, lambda side, thr: child_args(args.runs, args.warmups, side, thr),
                          lambda rep, thr, pair: None)
    H.ratio_table([("float32 matmul 4096x768x3072", "matmul", "matmul", None)], results, args.threads,
                  peak_key=None)
    for thr in args.threads:
        ours = ", ".join(f"{s['matmul']['gflops']:.0f}" for s, _ in results[thr])
        theirs = ", ".join(f"{t['matmul']['gflops']:.0f}" for _, t in results[thr])
        print(f"{thr} thr: numpy {ours} GFLOP/s; torch {theirs} GFLOP/s")
    H.save_json(args.json, results)


if __name__ == "__main__":
    main()
