"""Probe: how close to the float32 matmul peak can a numpy forward of config "small" get?

Run on a quiet machine (numpy only, ~1 minute)::

    PYTHONPATH=. python benchmarks/probe_gemm_floor.py [--threads 1 2] [--repeats 3]

Each thread count runs in its own fresh processes (threads set by environment and API, as in
``bench_transformer.py``), ``--repeats`` times; figures are medians over the repeats with
[min-max]. Every child measures, for the forward 8 x 256 (log-probabilities) of config
"small" (4 layers, d 256, vocab 4096):

- ``peak``: the float32 GEMM 4096 x 768 x 3072 (``_harness.numpy_matmul_peak``), and
  ``forward``: ``GPT.logprobs``, as a percentage of that peak (FLOPs of
  ``bench_transformer.forward_flops``: full T x T attention products, as torch computes);
- ``GEMMs only``: the forward's own ``np.matmul`` calls, recorded from one real forward
  (shapes, strides, output views, the buffer each operand lives in, which thread made each)
  and replayed on fresh buffers of the same sizes, one per buffer the forward used (so
  reused workspaces and the shared weights stay reused and shared), each thread's calls on
  its own thread with BLAS on one thread, as the sharded forward runs them: nothing but the
  matrix products;
- ``numpy floor``: the GEMMs plus the passes a numpy forward needs at the least beyond them
  (:data:`PASSES`), counted for the largest shard (each thread's share) and priced at this
  process's per-element rate of the cheapest numpy route measured for each (a row sum as a
  reduction or as a product with ones, a row max along the rows or across the transposed
  block, a sum of squares by ``vecdot``, any subtract / multiply / add at the rate of an
  add): the attention scores a query can see (T (T + 1) / 2 per head and sequence, masked
  ones not counted: x - max, exp, row max, row sum), the logits of the log-softmax over V
  (the same and a final subtract), GELU's tanh and six cheap passes, LayerNorm's two
  reductions and two cheap passes, the residual adds and the embedding. What can be folded
  elsewhere is not counted (LayerNorm's gain and bias and GELU's 1/2 into the next weights,
  bias adds into the products, the softmax's division onto its (T, hd) output), nor copies
  or Python overhead. Each pass is priced from a cache-resident block, so in the forward it
  is if anything slower. This is a model of the least numpy work, not a proof: it says how
  much room the GEMMs leave, and how much of it numpy's passes need.

Percentages are medians of the per-repeat percentages (each repeat against its own peak),
so they need not equal the ratio of the medians printed beside them.

The 85% target leaves ``flops / (0.85 peak) - GEMMs only`` for every non-GEMM
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
def _base(x):
    """The array that owns ``x``'s memory (following views)."""
    import numpy as np

    while isinstance(x.base, np.ndarray):
        x = x.base
    return x


def _layout(x) -> tuple:
    """(shape, strides, dtype, owning buffer's (start, nbytes), offset into it) of an operand;
    only what the replay can rebuild faithfully is accepted."""
    import numpy as np

    if not isinstance(x, np.ndarray) or x.ndim < 2 or x.dtype != np.float32 or min(x.strides) < 0:
        raise SystemExit(f"probe_gemm_floor: cannot replay a matmul operand {type(x).__name__} "
                         f"{getattr(x, 'shape', '')} {getattr(x, 'dtype', '')}")
    base = _base(x)
    start = base.__array_interface__["data"][0]  # the owner is contiguous: its first byte
    return x.shape, x.strides, x.dtype.str, (start, base.nbytes), x.__array_interface__["data"][0] - start


def record_matmuls(fn) -> dict:
    """{thread id: [(a, b, out) layouts]} of the ``np.matmul`` calls ``fn()`` makes (every
    product of the forward: none goes through ``@`` or ``np.dot``)."""
    import numpy as np

    real, calls = np.matmul, {}

    def recording(a, b, out=None, **kw):
        if out is None or kw:
            raise SystemExit("probe_gemm_floor: a matmul without a plain out= array cannot be replayed")
        calls.setdefault(threading.get_ident(), []).append((_layout(a), _layout(b), _layout(out)))
        return real(a, b, out=out, **kw)

    np.matmul = recording
    try:
        fn()
    finally:
        np.matmul = real
    return calls


def matmul_flops(calls: dict) -> float:
    """2 M K N summed over the recorded products (the first operand carries the batch)."""
    import math

    return sum(2 * math.prod(a[0][:-1]) * a[0][-1] * b[0][-1]
               for group in calls.values() for a, b, _ in group)


def replay_arrays(calls: dict) -> list:
    """Each thread's calls on fresh arrays: one new buffer (random values) per buffer the
    forward used, each operand at its offset in it, so that reused workspaces and shared
    weights are reused and shared in the replay too."""
    import numpy as np

    rng, buffers = np.random.default_rng(3), {}

    def fresh(layout):
        shape, strides, dtype, key, offset = layout
        if key not in buffers:
            buffers[key] = rng.standard_normal(key[1] // 4, dtype=np.float32)
        return np.ndarray(shape, dtype, buffer=buffers[key], offset=offset, strides=strides)

    return [[tuple(map(fresh, call)) for call in group] for group in calls.values()]


def replay_gemms(calls: dict, runs: int, warmups: int) -> dict:
    """Time the recorded products alone: each thread's list on its own thread, BLAS on one."""
    import numpy as np

    from seqprob import _parallel

    groups = replay_arrays(calls)

    def replay(group):
        for a, b, out in group:
            np.matmul(a, b, out=out)

    if len(groups) == 1:
        return H.timeit(lambda: replay(groups[0]), runs, warmups)
    with _parallel.one_blas_thread:
        return H.timeit(lambda: _parallel.run_tasks([lambda g=g: replay(g) for g in groups]), runs, warmups)


def element_rates() -> dict:
    """Nanoseconds per float32 element (1 thread) of the cheapest numpy route found for each
    pass, on cache-resident blocks shaped like the forward's (128 x 256 scores, 32 x 4096
    logits): exp, tanh, add; row max (reduction along the rows or across the transposed
    block); row sum (reduction, or the product with a vector of ones); sum of squares
    (``vecdot``)."""
    import numpy as np

    rng = np.random.default_rng(4)
    rates = {}
    for name, shape in (("scores", (128, 256)), ("logits", (32, 4096))):
        x = rng.standard_normal(shape, dtype=np.float32)
        y, m = np.empty_like(x), np.empty((shape[0], 1), np.float32)
        ones = np.ones((shape[1], 1), np.float32)
        routes = {"exp": [lambda: np.exp(x, out=y)], "tanh": [lambda: np.tanh(x, out=y)],
                  "add": [lambda: np.add(x, x, out=y)],
                  "max": [lambda: np.max(x, axis=-1, keepdims=True, out=m),
                          lambda: np.max(x.T, axis=0, out=m[:, 0])],
                  "sum": [lambda: np.sum(x, axis=-1, keepdims=True, out=m),
                          lambda: np.matmul(x, ones, out=m)],
                  "squares": [lambda: np.vecdot(x, x, out=m[:, 0])]}
        for op, fns in routes.items():
            best = min(H.timeit(lambda f=f: [f() for _ in range(100)], runs=7, warmups=2)["median"]
                       for f in fns)
            rates[f"{op} {name}"] = best / 100 / x.size * 1e9
    return rates


# The passes each kind of element needs at the least, beyond the products: the transcendental
# and reduction ones priced at their own rates, the others ("cheap": a subtract, a multiply, an
# add) at the rate of an add. Folded away and not counted: LayerNorm's gain and bias and GELU's
# 1/2 (into the next weights), the bias adds (into the products), the softmax's division (onto
# the (T, hd) output instead of the scores), the causal mask (masked scores are not counted).
PASSES = {
    "scores": ("exp", "max", "sum", "cheap"),  # a visible score: x - max, exp, row max, row sum
    "logits": ("exp", "max", "sum", "cheap", "cheap"),  # u - m, exp, max, sum, u - (m + lse)
    "gelu": ("tanh",) + ("cheap",) * 6,  # x x, * a c, + c, * x, tanh, * x, + x
    "norm": ("sum", "squares", "cheap", "cheap"),  # row sum, sum of squares, - mean, * rstd
    "residual": ("cheap",),  # x += the block's output
    "embedding": ("cheap",),  # the gathered rows + positions
}


def floor_counts(cfg: dict, seqs: int) -> dict:
    """Elements per shard of ``seqs`` sequences of each kind in :data:`PASSES`: the attention
    scores a query can see (T (T + 1) / 2 per head, sequence and layer), the logits, the GELU
    inputs, the LayerNorm inputs (two per block and the final one), the residual stream
    (twice per block) and the embedded rows."""
    L, Hh, V, C = cfg["n_layer"], cfg["n_head"], cfg["vocab_size"], cfg["n_embd"]
    return {"scores": L * seqs * Hh * T * (T + 1) // 2, "logits": seqs * T * V,
            "gelu": L * seqs * T * 4 * C, "norm": (2 * L + 1) * seqs * T * C,
            "residual": 2 * L * seqs * T * C, "embedding": seqs * T * C}


def numpy_floor_ms(counts: dict, rates: dict) -> float:
    """The passes of :data:`PASSES` over ``counts`` at ``rates`` (logits at the rates of the
    4,096-wide block, everything else at the 256-wide one's)."""
    ns = 0.0
    for kind, n in counts.items():
        block = "logits" if kind == "logits" else "scores"
        ns += n * sum(rates[f"{'add' if op == 'cheap' else op} {block}"] for op in PASSES[kind])
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
    if len(calls) != args.threads[0]:
        raise SystemExit(f"probe_gemm_floor: the forward ran on {len(calls)} thread(s), not "
                         f"{args.threads[0]}: the floor below assumes one shard per thread")
    rates = element_rates()
    counts = floor_counts(H.SMALL, -(-B // len(calls)))  # the largest shard
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
