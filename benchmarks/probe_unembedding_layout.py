"""Probe: what the column-major unembedding costs and saves outside decoding.

Run on a quiet machine (numpy only, one process, ~1 minute)::

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/probe_unembedding_layout.py

For the W_U of config "small" (4096 x 256, a batch of 2,048 ids) and of GPT-2-124M
(50,257 x 768, 1,024 ids), row-major against column-major (the layout seqprob stores, see
:func:`seqprob.gpt.params.column_major_names`), median of 15 calls in milliseconds:

- ``gather``: the tied embedding's rows of the batch (``nn.embedding_forward``);
- ``scatter``: the embedding gradient added into the tied W_U's gradient
  (``nn.embedding_backward``);
- ``logits``: the scoring GEMM h (N, C) @ W_Uᵀ;
- ``dW``: the unembedding's weight gradient dlogitsᵀ h, written in the gradient's layout;
- ``dh``: the input gradient dlogits @ W_U.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from seqprob import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402


def median_ms(fn, calls: int = 15) -> float:
    return H.timeit(fn, runs=calls, warmups=1)["median"] * 1e3


def one_shape(V: int, C: int, N: int, rng) -> None:
    rows = rng.standard_normal((V, C), dtype=np.float32)
    cols = np.asfortranarray(rows)
    ids = rng.integers(0, V, (1, N))
    h, dx = (rng.standard_normal((N, C), dtype=np.float32) for _ in range(2))
    dlogits, logits = rng.standard_normal((N, V), dtype=np.float32), np.empty((N, V), np.float32)
    out, dh = np.empty((1, N, C), np.float32), np.empty((N, C), np.float32)
    print(f"W_U {V} x {C}, {N} ids        row-major  column-major")
    for name, fn in (
        ("gather", lambda w, g: nn.embedding_forward(ids, w, out=out)),
        ("scatter", lambda w, g: nn.embedding_backward(dx[None], (ids, V), out=g)),
        ("logits", lambda w, g: np.matmul(h, w.T, out=logits)),
        ("dW", lambda w, g: np.matmul(h.T, dlogits, out=g.T) if g.T.flags.c_contiguous
         else np.matmul(dlogits.T, h, out=g)),
        ("dh", lambda w, g: np.matmul(dlogits, w, out=dh)),
    ):
        g_rows, g_cols = np.zeros_like(rows), np.zeros_like(cols)
        a = median_ms(lambda: fn(rows, g_rows))
        b = median_ms(lambda: fn(cols, g_cols))
        print(f"  {name:8s} {a:10.2f} ms {b:10.2f} ms")


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    one_shape(4096, 256, 2048, rng)
    one_shape(50257, 768, 1024, rng)
