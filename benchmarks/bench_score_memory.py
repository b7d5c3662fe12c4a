"""Peak memory of scoring with a large vocabulary: the streamed path against the (T, V) rows.

Run (numpy only: the target is absolute)::

    PYTHONPATH=. python benchmarks/bench_score_memory.py [--vocab 262144] [--tokens 1024]
    PYTHONPATH=. python benchmarks/bench_score_memory.py --speed --runs 7   # + GPT-2-small time
    PYTHONPATH=. python benchmarks/bench_score_memory.py --quick             # a smoke run

Each case runs in a fresh process: ``import seqprob``, build a random-weight Llama-architecture
GPT (RMSNorm, rotary, SwiGLU, tied embeddings, float32) of Gemma 3 270M's shape (vocabulary
262,144, d 640, 18 layers, 4 heads, 1 kv head, MLP 2,048; 1.07 GB; ``--tiny``: d 256, 2 layers,
276 MB, almost all of it the embedding), score ``--tokens``
token ids with :func:`seqprob.score` (``distribution=True``: logprob, entropy and rank of every
token), and read the process's peak RSS (VmHWM). The peak is reset (``/proc/self/clear_refs``)
after the model is built, because building it draws float64 random numbers that scoring never
needs, and after one scoring of 8 tokens (which imports pandas and builds the model's lazy
caches, paid once per process); so the figure is the peak *while scoring*, and the RSS just
before scoring (interpreter, numpy, pandas, seqprob, the weights) is its baseline.

Two sides: ``streamed`` (the GPT as it is: :meth:`seqprob.GPT.token_stats`, unembedding in
chunks of ``score_budget_bytes``) and ``rows`` (the same model behind a wrapper without
``token_stats``, so scoring takes the (T, V) log-probabilities, as it did before streaming).

Printed per side: W (float32 weight bytes), RSS before scoring, peak RSS while scoring, and
(peak - RSS before) / W, the scoring's own memory in units of the weights. Target: the streamed
peak <= 1.15 x W above the pre-scoring baseline minus the weights, i.e. (peak - before) <= 0.15 W.

``--speed`` also times scoring 1,024 tokens with a GPT-2-small-shaped model (vocabulary 50,257)
on both sides, each in its own fresh process, median [min-max] of ``--runs`` calls after two
warm-ups, so that streaming is seen not to cost time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Gemma 3 270M's shape (its head width 256 is here d / heads = 160): the smallest model with a
# 262k vocabulary, 1.07 GB as float32, two thirds of it the embedding.
BIG = dict(vocab_size=262144, block_size=1024, n_layer=18, n_head=4, n_embd=640, n_kv_head=1, mlp_hidden=2048)
TINY = dict(BIG, n_layer=2, n_embd=256, n_kv_head=2, mlp_hidden=None)
SMALL_GPT2 = dict(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768)
LLAMA = dict(norm="rmsnorm", mlp="swiglu", positions="rotary", bias=False, tie_weights=True)
TARGET_OVER_W = 0.15


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(side: str, shape: dict, llama: bool, tokens: int, runs: int) -> dict:
    import numpy as np
    import seqprob as sp
    from seqprob.gpt import GPT, GPTConfig
    from seqprob.scoring.core import RowsOnly

    model = GPT(GPTConfig(**shape, **(LLAMA if llama else {}), dtype="float32"))
    weights = sum(a.nbytes for a in model.params.values())
    scored = model if side == "streamed" else RowsOnly(model)  # the (T, V) rows path
    ids = np.random.default_rng(0).integers(0, shape["vocab_size"], size=tokens + 1).tolist()
    sp.score(scored, [ids[:9]], bos=False, eos=False)  # imports pandas; lazy caches are built
    Path("/proc/self/clear_refs").write_text("5")  # the peak from here on: scoring's
    before = _status_kb("VmRSS") * 1024
    times = []
    for _ in range(max(1, runs) + (2 if runs else 0)):
        t0 = time.perf_counter()
        df = sp.score(scored, [ids], bos=False, eos=False)
        times.append(time.perf_counter() - t0)
    assert {"entropy_bits", "rank"} <= set(df.columns) and len(df) == tokens
    return dict(side=side, weights=weights, before=before, peak=_status_kb("VmHWM") * 1024,
                times=times[2:] if runs else times, total_logprob=float(df["logprob"].sum()))


def run_side(side: str, shape: dict, llama: bool, tokens: int, runs: int, threads: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(threads),
           "OPENBLAS_NUM_THREADS": str(threads), "SEQPROB_NUM_THREADS": str(threads)}
    spec = json.dumps(dict(side=side, shape=shape, llama=llama, tokens=tokens, runs=runs))
    proc = subprocess.run([sys.executable, __file__, "--child", spec], env=env, capture_output=True,
                          text=True, cwd=ROOT)
    if proc.returncode:
        raise SystemExit(f"child {side} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def memory_table(shape: dict, tokens: int, threads: int) -> None:
    print(f"\nscoring {tokens} tokens, Llama architecture {shape}, float32, {threads} threads")
    print(f"{'side':<9} {'W MB':>8} {'before MB':>10} {'peak MB':>9} {'(peak-before)/W':>16}  target")
    for side in ("streamed", "rows"):
        r = run_side(side, shape, True, tokens, 0, threads)
        over = (r["peak"] - r["before"]) / r["weights"]
        verdict = ("met" if over <= TARGET_OVER_W else "MISSED") if side == "streamed" else "(before streaming)"
        print(f"{side:<9} {r['weights'] / 1e6:>8.1f} {r['before'] / 1e6:>10.1f} {r['peak'] / 1e6:>9.1f} "
              f"{over:>16.3f}  <= {TARGET_OVER_W}: {verdict}")


def speed_table(shape: dict, tokens: int, runs: int, threads: int, repeats: int) -> None:
    print(f"\nscoring {tokens} tokens, GPT-2-small shape, float32, {threads} threads, "
          f"median [min-max] of {runs} calls, {repeats} repeats")
    ratios = []
    for rep in range(repeats):
        med = {}
        for side in ("rows", "streamed"):
            t = run_side(side, shape, False, tokens, runs, threads)["times"]
            med[side] = statistics.median(t)
            print(f"  repeat {rep + 1} {side:<9} {med[side]:.3f} s [{min(t):.3f}-{max(t):.3f}]")
        ratios.append(med["rows"] / med["streamed"])
    print(f"rows time / streamed time: median {statistics.median(ratios):.3f} "
          f"[{min(ratios):.3f}-{max(ratios):.3f}] (> 1: streaming faster)")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--vocab", type=int, default=BIG["vocab_size"])
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--tiny", action="store_true", help="d 256, 2 layers (276 MB of weights)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--speed", action="store_true", help="also time GPT-2-small-shape scoring")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small shapes, one repeat: a smoke run")
    args = ap.parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(child(spec["side"], spec["shape"], spec["llama"], spec["tokens"], spec["runs"])))
        return
    big, small, tokens = dict(TINY if args.tiny else BIG, vocab_size=args.vocab), SMALL_GPT2, args.tokens
    if args.quick:
        big, tokens = dict(TINY, vocab_size=8192, n_embd=64), min(tokens, 128)
        small = dict(small, vocab_size=2048, n_layer=2, n_embd=64, n_head=4)
        args.runs, args.repeats = 2, 1
    memory_table(big, tokens, args.threads)
    if args.speed:
        speed_table(small, tokens, args.runs, args.threads, args.repeats)


if __name__ == "__main__":
    main()
