"""Probe: how close to the float32 matmul peak can a numpy forward of config "small" get?

Run on a quiet machine (numpy only, ~1 minute)::

    PYTHONPATH=. /work/venv/bin/python benchmarks/probe_gemm_floor.py [--threads 1 2] [--repeats 3]

Each thread count runs in its own fresh processes (threads set by environment and API, as in
``bench_transformer.py``), ``--repeats`` times; figures are medians over the repeats with
[min-max]. Every child measures, for the forward 8 x 256 (log-probabilities) of config
"small" (4 layers, d 256, vocab 4096):

- ``peak``: the float32 GEMM 4096 x 768 x 3072 (``_harness.numpy_matmul_peak``), and
  ``forward``: ``GPT.logprobs``, as a percentage of that peak (FLOPs of
  ``bench_transformer.forward_flops``: full T x T attention products, as torch computes);
- ``GEMMs only``: the forward's own ``np.matmul`` calls, recorded from one real forward
  (shapes, strides, output views, which thread made each) and replayed on fresh arrays of
  the same layout, each thread's calls on its own thread with BLAS on one thread, as the
  sharded forward runs them: nothing but the matrix products;
- ``numpy floor``: the GEMMs plus what numpy cannot avoid beyond them, counted per shard
  (each thread's share) and priced at this process's measured per-element rates: one
  ``exp``, one row ``max`` and one row ``sum`` per attention score computed (the key blocks
  above the diagonal skipped) and per logit of the log-softmax over V, one ``tanh`` per
  GELU input, two row reductions (mean, sum of squares) per LayerNorm input and one add per
  residual-stream element and block half. LayerNorm's other passes, the mask, the bias adds,
  the divisions, the copies and Python overhead are left out, so the floor is below any
  numpy forward's time.

The 85% target of issue 9 leaves ``flops / (0.85 peak) - GEMMs only`` for every non-GEMM
pass; the probe prints that budget beside the floor's non-GEMM part.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402
from bench_transformer import B, T, forward_flops, inputs  # noqa: E402

TARGET = 0.85


# ----------------------------------------------------------------------------- child
def record_matmuls(fn) -> dict:
    """{thread id: [(a, b, out) layouts]} of the ``np.matmul`` calls ``fn()`` makes."""
    import numpy as np

    real, calls = np.matmul, {}

    def layout(x):
        return None if x is None else (x.shape, x.strides, x.dtype.str)

    def recording(a, b, out=None, **kw):
        calls.setdefault(threading.get_ident(), []).append((layout(a), layout(b), layout(out)))
        return real(a, b, out=out, **kw)

    np.matmul = recording
    try:
        fn()
    finally:
        np.matmul = real
    return calls


def matmul_flops(calls: dict) -> float:
    """2 M K N summed over the recorded products (batch dimensions multiplied in)."""
    import math

    return sum(2 * math.prod(a[0][:-1]) * a[0][-1] * b[0][-1]
               for group in calls.values() for a, b, _ in group)


def like(layout, rng):
    """A fresh array with the given (shape, strides, dtype), over a buffer of random values."""
    import numpy as np
    from numpy.lib.stride_tricks import as_strided

    shape, strides, dtype = layout
    itemsize = np.dtype(dtype).itemsize
    extent = sum((n - 1) * s for n, s in zip(shape, strides)) // itemsize + 1
    base = rng.standard_normal(extent, dtype=np.dtype(dtype))
    return as_strided(base, shape, strides)


def replay_gemms(calls: dict, runs: int, warmups: int) -> dict:
    """Time the recorded products alone: each thread's list on its own thread, BLAS on one."""
    import numpy as np

    from seqprob import _parallel

    rng = np.random.default_rng(3)
    groups = [[(like(a, rng), like(b, rng), None if o is None else like(o, rng)) for a, b, o in group]
              for group in calls.values()]

    def replay(group):
        for a, b, out in group:
            np.matmul(a, b, out=out)

    if len(groups) == 1:
        return H.timeit(lambda: replay(groups[0]), runs, warmups)
    with _parallel.single_threaded_blas():
        return H.timeit(lambda: _parallel.run_tasks([lambda g=g: replay(g) for g in groups]), runs, warmups)


def element_rates() -> dict:
    """Nanoseconds per float32 element of numpy's exp, tanh, row max and row sum (1 thread),
    on cache-resident blocks shaped like the forward's: 128 x 256 scores, 32 x 4096 logits."""
    import numpy as np

    rng = np.random.default_rng(4)
    rates = {}
    for name, shape in (("scores", (128, 256)), ("logits", (32, 4096))):
        x = rng.standard_normal(shape, dtype=np.float32)
        y, m = np.empty_like(x), np.empty((shape[0], 1), np.float32)
        for op, fn in (("exp", lambda: np.exp(x, out=y)), ("tanh", lambda: np.tanh(x, out=y)),
                       ("add", lambda: np.add(x, x, out=y)),
                       ("max", lambda: np.max(x, axis=-1, keepdims=True, out=m)),
                       ("sum", lambda: np.sum(x, axis=-1, keepdims=True, out=m))):
            t = H.timeit(lambda: [fn() for _ in range(100)], runs=7, warmups=2)["median"]
            rates[f"{op} {name}"] = t / 100 / x.size * 1e9
    return rates


def floor_counts(cfg: dict, seqs: int, q_block: int = 128) -> dict:
    """Elements per shard of ``seqs`` sequences that need an exp / max / sum (scores, logits),
    a tanh (GELU inputs), a row mean and a row sum of squares (LayerNorm inputs: two per
    block and the final one) or an add (the residual stream, twice per block)."""
    L, Hh, V, C = cfg["n_layer"], cfg["n_head"], cfg["vocab_size"], cfg["n_embd"]
    scores = sum(min(q_block, T - q0) * min(q0 + q_block, T) for q0 in range(0, T, q_block))
    return {"scores": L * seqs * Hh * scores, "logits": seqs * T * V, "gelu": L * seqs * T * 4 * C,
            "norm": (2 * L + 1) * seqs * T * C, "residual": 2 * L * seqs * T * C}


def numpy_floor_ms(counts: dict, rates: dict) -> float:
    per_score = rates["exp scores"] + rates["max scores"] + rates["sum scores"]
    per_logit = rates["exp logits"] + rates["max logits"] + rates["sum logits"]
    ns = (counts["scores"] * per_score + counts["logits"] * per_logit + counts["gelu"] * rates["tanh scores"]
          + counts["norm"] * 2 * rates["sum scores"] + counts["residual"] * rates["add scores"])
    return ns / 1e6


def child(args) -> dict:
    from seqprob.gpt import GPT, GPTConfig

    info = H.limit_threads(args.threads[0], torch_side=False)
    model, ids = GPT(GPTConfig(**H.SMALL), seed=0), inputs()
    r, w = args.runs, args.warmups
    peak = H.numpy_matmul_peak(r, w)
    forward = H.timeit(lambda: model.logprobs(ids), r, w)
    calls = record_matmuls(lambda: model.logprobs(ids))
    gemms = replay_gemms(calls, r, w)
    rates = element_rates()
    counts = floor_counts(H.SMALL, B // len(calls))
    return {**info, "peak": peak, "forward": forward, "gemms": gemms, "shards": len(calls),
            "calls": sum(map(len, calls.values())), "gemm_flops": matmul_flops(calls),
            "rates": rates, "counts": counts, "non_gemm_floor_ms": numpy_floor_ms(counts, rates),
            "blas": H.describe_blas()}


# ----------------------------------------------------------------------------- parent
def fig(values, fmt="{:.1f}") -> str:
    """'median [min-max]' of per-repeat values."""
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def summarize(thr: int, results: list) -> None:
    flops, first = forward_flops(), results[0]
    peak = [x["peak"]["gflops"] for x in results]
    nonf = [x["non_gemm_floor_ms"] for x in results]
    rows = {"forward": [x["forward"]["median"] * 1e3 for x in results],
            "GEMMs only": [x["gemms"]["median"] * 1e3 for x in results]}
    rows["numpy floor"] = [g + n for g, n in zip(rows["GEMMs only"], nonf)]
    allowed = [flops / (TARGET * p * 1e9) * 1e3 for p in peak]
    print(f"{thr} thread(s): {first['blas']}; {first['shards']} shard(s), {first['calls']} matmul "
          f"calls per forward, {first['gemm_flops'] / 1e9:.1f} GFLOP (the % count "
          f"{flops / 1e9:.1f}: full T x T attention, as torch computes)")
    print(f"  numpy peak GFLOP/s        {fig(peak)}")
    for label, ms in rows.items():
        pct = [100 * flops / (m / 1e3) / (p * 1e9) for m, p in zip(ms, peak)]
        print(f"  {label + ' ms':<26}{fig(ms)} = {fig(pct, '{:.0f}')}% of peak")
    print(f"  (the floor's passes beyond the GEMMs: {fig(nonf, '{:.2f}')} ms per shard)")
    left = [a - g for a, g in zip(allowed, rows["GEMMs only"])]
    print(f"  {TARGET:.0%} of peak allows ms     {fig(allowed)}: {fig(left, '{:.2f}')} ms beyond the GEMMs")
    rates = {k: statistics.median(x["rates"][k] for x in results) for k in first["rates"]}
    print("  ns per element: " + ", ".join(f"{k} {v:.3f}" for k, v in rates.items()))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    H.add_common_args(ap)
    args = ap.parse_args(argv)
    if args.child:
        H.emit(child(args))
        return
    H.warn_if_short(args)
    results = {thr: [] for thr in args.threads}
    for _ in range(args.repeats):
        for thr in args.threads:
            results[thr].append(H.run_child(__file__, ["--threads", thr, "--runs", args.runs,
                                                       "--warmups", args.warmups], thr,
                                            args.keep_openblas_env, args.cpus))
    for thr in args.threads:
        summarize(thr, results[thr])
    if args.json:
        Path(args.json).write_text(json.dumps({str(k): v for k, v in results.items()}, indent=1))


if __name__ == "__main__":
    main()
