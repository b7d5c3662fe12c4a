"""Probe: how fast do the GEMVs of a decoding step stream their weights, and what does the
column-major unembedding gain over the row-major (V, C) layout it replaced?

Run on a quiet machine (numpy only, one process, ~1 minute)::

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/probe_decode_bandwidth.py

Prints, in microseconds and GB/s:

- ``cached``: one GEMV matrix timed again and again (it stays in cache), in the two forms a
  step can use: ``h @ W`` over a (C, N) matrix (BLAS gemv "N": a sum of scaled rows, the form
  of seqprob's block matrices and, since W_U is stored column-major, of the unembedding) and
  ``W @ h`` over an (N, C) matrix (gemv "T": dot products of rows, the form of the unembedding
  ``np.dot(W_U, h)`` while W_U was a row-major (V, C) array);
- ``stream``: 22 distinct 256 x 768 matrices in turn (17.3 MB, more than the cache holds),
  as a decoding step of config "small" reads its 16.8 MB, in both forms; then 5 distinct
  unembedding-shaped 4096 x 256 matrices, row-major (V, C) against column-major;
- ``working set``: GEMVs over 1 to 32 distinct 256 x 768 matrices in turn (0.8-25 MB): the
  rate falls where the matrices stop fitting the cache;
- ``decode``: +256 tokens of config "small" with the unembedding as the model stores it
  (column-major) and with a row-major (V, C) copy (the former layout), alternating, 7
  rounds, with the largest log-probability difference of the two.

Measured on the AMD EPYC VM (2026-12-02, quiet, before the layout change, the model then keeping
the row-major array): cached 35-53 GB/s in either form; stream 9.3 GB/s ("N") and 5.2 GB/s
("T") over the 22 block-shaped matrices, and 6.0 GB/s (row-major W_U, 697 us) against
19.0 GB/s (column-major, 221 us) over the unembedding-shaped ones; decode median 0.751 s
[0.623-0.856] row-major against 0.603 s [0.522-0.730] column-major, max log-prob difference
9.5e-7. That is why :func:`seqprob.gpt.params.column_major_names` stores W_U column-major
(a copy would not see in-place weight updates between steps, tests/test_gpt_decode.py).
"""
from __future__ import annotations

import statistics
import time

import numpy as np


def per_call_us(fn, calls: int) -> float:
    for _ in range(min(calls, 50)):
        fn()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def cached_and_streamed(rng) -> None:
    for C, N in [(256, 768), (256, 1024), (1024, 256), (256, 4096)]:
        w = rng.standard_normal((C, N), dtype=np.float32)
        wt, h, out = np.ascontiguousarray(w.T), rng.standard_normal(C, dtype=np.float32), np.empty(N, np.float32)
        n_form = per_call_us(lambda: np.dot(h, w, out=out), 2000)
        t_form = per_call_us(lambda: np.dot(wt, h, out=out), 2000)
        print(f"cached {C}x{N} ({w.nbytes / 1e6:.2f} MB): h @ W {n_form:.1f} us ({w.nbytes / n_form / 1e3:.1f} GB/s), "
              f"W @ h {t_form:.1f} us ({w.nbytes / t_form / 1e3:.1f} GB/s)")
    ws = [rng.standard_normal((256, 768), dtype=np.float32) for _ in range(22)]
    wts = [np.ascontiguousarray(w.T) for w in ws]
    h, out, size = rng.standard_normal(256, dtype=np.float32), np.empty(768, np.float32), sum(w.nbytes for w in ws)
    n_form = per_call_us(lambda: [np.dot(h, w, out=out) for w in ws], 200)
    t_form = per_call_us(lambda: [np.dot(w, h, out=out) for w in wts], 200)
    print(f"stream 22 x 256x768 ({size / 1e6:.1f} MB): h @ W {n_form:.0f} us ({size / n_form / 1e3:.1f} GB/s), "
          f"W @ h {t_form:.0f} us ({size / t_form / 1e3:.1f} GB/s)")
    w_us = [rng.standard_normal((4096, 256), dtype=np.float32) for _ in range(5)]  # (V, C) as W_U
    w_uts, out = [np.ascontiguousarray(w.T) for w in w_us], np.empty(4096, np.float32)
    t_form = per_call_us(lambda: [np.dot(w, h[:256], out=out) for w in w_us], 200) / 5
    n_form = per_call_us(lambda: [np.dot(h[:256], w, out=out) for w in w_uts], 200) / 5
    print(f"stream 5 unembeddings of 4096x256 (4.19 MB each): row-major W_U @ h {t_form:.0f} us ({4.194 / t_form * 1e3:.1f} GB/s), "
          f"column-major (h @ W_U^T) {n_form:.0f} us ({4.194 / n_form * 1e3:.1f} GB/s)")


def working_set_sweep(rng) -> None:
    """The rate of GEMVs over n distinct 256 x 768 matrices in turn, n = 1 .. 32: where the
    working set stops fitting the cache (a step of config "small" reads 16.8 MB)."""
    h, out = rng.standard_normal(256, dtype=np.float32), np.empty(768, np.float32)
    for n in (1, 4, 8, 12, 16, 22, 32):
        ws = [rng.standard_normal((256, 768), dtype=np.float32) for _ in range(n)]
        size = sum(w.nbytes for w in ws)
        calls = [per_call_us(lambda: [np.dot(h, w, out=out) for w in ws], 50) for _ in range(7)]
        median = statistics.median(calls)
        print(f"working set {n:2d} x 256x768 ({size / 1e6:4.1f} MB): {median:6.0f} us "
              f"({size / median / 1e3:.1f} GB/s; best {size / min(calls) / 1e3:.1f})")


def decode_layouts(rounds: int = 7) -> None:
    from seqprob import nn
    from seqprob.gpt import GPT, GPTConfig, decode

    model = GPT(GPTConfig(vocab_size=4096, block_size=256, n_layer=4, n_head=4, n_embd=256), seed=0)
    as_is, w_u_rows = decode.unembed_row, np.ascontiguousarray(model._w_u)  # (V, C) row-major
    assert model._w_u.T.flags.c_contiguous  # the model stores W_U column-major

    def row_major(plan, h, tmp=None):
        return nn.log_softmax_row(np.dot(w_u_rows, h), tmp)

    def generate():
        state = model.start(np.asarray([0]))
        for i in range(256):
            token = int(np.argmax(state.logprobs))
            if i < 255:
                state = model.step(state, token)
        return state.logprobs

    times = {"column-major (as stored)": [], "row-major (V, C) copy": []}
    rows = {}
    try:
        for _ in range(rounds):
            for name, fn in (("column-major (as stored)", as_is), ("row-major (V, C) copy", row_major)):
                decode.unembed_row = fn
                t0 = time.perf_counter()
                rows[name] = generate()
                times[name].append(time.perf_counter() - t0)
    finally:
        decode.unembed_row = as_is
    for name, ts in times.items():
        print(f"decode +256, unembedding {name}: median {statistics.median(ts):.3f} s [{min(ts):.3f}-{max(ts):.3f}]")
    print(f"max |log-prob diff| {np.abs(rows['column-major (as stored)'] - rows['row-major (V, C) copy']).max():.2e}")


if __name__ == "__main__":
    cached_and_streamed(np.random.default_rng(0))
    working_set_sweep(np.random.default_rng(1))
    decode_layouts()
