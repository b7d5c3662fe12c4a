"""Inference forward of one long sequence over several threads, split by stages.

A batch of several sequences is split by sequence (:meth:`GPT._sharded`); one sequence
(B = 1, e.g. GPT-2 on 1 x 1024 ids) is split inside each block instead. Every thread runs
the whole forward on its share, with BLAS on one thread, and waits at a barrier only where
rows need other rows:

- row stages (each thread its contiguous range of positions): norm, QKV GEMM and rotary;
  after attention: output projection, residual, norm, MLP, residual; after the last block
  ln_f and the caller's unembedding of those rows;
- attention (after a barrier, since a query reads the keys of earlier rows): split over
  key/value head groups when there are at least as many as threads, else over query rows
  (ranges of equal causal cost, aligned to the attention's query blocks), then a barrier.

Two barriers per block, one fork/join per forward. Every row and head is computed by the
same operations as in the unsplit forward, so the results are the same.

Notes
-----
With n threads and T rows, thread i owns rows [T i / n, T (i + 1) / n); for the query-row
split of attention, whose cost up to row r grows as r², the bounds are T sqrt(i / n)
rounded to the query block (``Q_BLOCK``, 128).
"""
from __future__ import annotations

import math
import threading

from .. import _parallel, nn
from .block import Q_BLOCK, _mlp_forward, norm_forward, split_qkv

__all__ = ["hidden_by_stages"]


def hidden_by_stages(model, ids, n: int, head) -> None:
    """The forward of ``ids`` (1, T) on ``n`` threads; ``head(h2, lo, hi)`` receives the
    final-norm rows h2 (hi - lo, C) of each thread's positions [lo, hi) (in that thread).

    Errors in any thread are raised here, after every thread has stopped (BLAS restored).
    """
    T = ids.shape[1]
    ws = model._workspace(1, T)
    x = model._embed(ids, out=ws["x"])  # (1, T, C)
    rows = _parallel.shard_bounds(T, n)
    parts = _attention_parts(model.config, T, n)
    barrier = threading.Barrier(n)

    def task(i):
        try:
            _thread_forward(model, x, ws, rows[i], parts[i], barrier, head)
        except BaseException as exc:  # wake the others, then report
            barrier.abort()
            return exc
        return None

    with _parallel.one_blas_thread:
        errors = _parallel.run_tasks([lambda i=i: task(i) for i in range(n)])
    errors = [e for e in errors if e is not None]
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real or errors:
        raise (real or errors)[0]


def _thread_forward(model, x, ws, rows, part, barrier, head) -> None:
    """One thread's share of the forward: its rows of every row stage, its part of attention."""
    lo, hi = rows
    cfg, blocks = model.config, model._block_params
    if lo < hi:
        _rows_before_attention(model, x, ws, blocks[0], lo, hi)
    for layer, p in enumerate(blocks):
        barrier.wait()
        _attention_part(model, ws, part)
        barrier.wait()
        if lo < hi:
            _rows_after_attention(model, x, ws, p, lo, hi)
            if layer + 1 < len(blocks):
                _rows_before_attention(model, x, ws, blocks[layer + 1], lo, hi)
    if lo < hi:
        h = norm_forward(x[:, lo:hi], model.params, "ln_f", cfg, out=ws["h"][:, lo:hi])[0]
        head(h.reshape(hi - lo, -1), lo, hi)


def _rows_before_attention(model, x, ws, p, lo, hi) -> None:
    """norm_1, the QKV GEMM and rotary of rows [lo, hi) (as block._attention_forward)."""
    cfg = model.config
    h = norm_forward(x[:, lo:hi], p, "ln_1", cfg, ws["h"][:, lo:hi])[0]  # (1, t, C)
    qkv = nn.linear_forward(h, p["attn.c_attn.w"], p.get("attn.c_attn.b"), out=ws["qkv"][:, lo:hi])[0]
    if model._rope is not None:
        q, k, _ = split_qkv(qkv, cfg.n_head, cfg.kv_heads)  # (1, H|Hkv, t, hd) views
        cos, sin = model._rope[0][lo:hi], model._rope[1][lo:hi]  # (t, r)
        nn.rotary_forward(q, cos, sin, out=ws["q"][:, :, lo:hi])
        nn.rotary_forward(k, cos, sin, out=ws["k"][:, :, lo:hi])


def _rows_after_attention(model, x, ws, p, lo, hi) -> None:
    """Output projection, residuals, norm_2 and MLP of rows [lo, hi) (as block_forward)."""
    cfg = model.config
    xr = x[:, lo:hi]  # (1, t, C)
    a = nn.linear_forward(ws["y"][:, lo:hi], p["attn.c_proj.w"], p.get("attn.c_proj.b"),
                          out=ws["a"][:, lo:hi])[0]
    if not cfg.parallel_residual:
        xr += a
    h = norm_forward(xr, p, "ln_2", cfg, ws["h"][:, lo:hi])[0]
    m = _mlp_forward(h, p, cfg, {name: ws[name][:, lo:hi] for name in ("u", "t", "h")})[0]
    if cfg.parallel_residual:
        xr += a
    xr += m


def _attention_part(model, ws, part) -> None:
    """Attention of this thread's key/value head groups [g0, g1), or query rows [r0, r1)."""
    kind, a0, a1 = part
    if a0 >= a1:
        return
    cfg = model.config
    q, k, v = split_qkv(ws["qkv"], cfg.n_head, cfg.kv_heads)  # (1, H|Hkv, T, hd)
    if model._rope is not None:
        q, k = ws["q"], ws["k"]
    if kind == "heads":
        G, hd = cfg.n_head // cfg.kv_heads, cfg.head_dim
        h0, h1 = a0 * G, a1 * G
        nn.causal_attention_inference(q[:, h0:h1], k[:, a0:a1], v[:, a0:a1],
                                      out=ws["y"][:, :, h0 * hd:h1 * hd], q_block=Q_BLOCK)
    else:
        nn.causal_attention_inference(q[:, :, a0:a1], k[:, :, :a1], v[:, :, :a1], out=ws["y"][:, a0:a1],
                                      q_block=Q_BLOCK)


def _attention_parts(config, T: int, n: int) -> list[tuple[str, int, int]]:
    """Each thread's share of attention: ``("heads", g0, g1)`` or ``("rows", r0, r1)``."""
    if config.kv_heads >= n:
        return [("heads", lo, hi) for lo, hi in _parallel.shard_bounds(config.kv_heads, n)]
    cuts = [0] + [min(T, Q_BLOCK * round(T * math.sqrt(i / n) / Q_BLOCK)) for i in range(1, n)] + [T]
    cuts = [max(c, prev) for prev, c in zip([0] + cuts, cuts)]  # non-decreasing
    return [("rows", lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:])]
