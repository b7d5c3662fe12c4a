"""Inference forward of one long sequence over several threads, split by stages.

A batch of several sequences is split by sequence (:meth:`GPT._sharded`); one sequence
(B = 1, e.g. GPT-2 on 1 x 1024 ids) is split inside each block instead. Every thread runs
the whole forward on its share, with BLAS on one thread, and waits at a barrier only where
rows need other rows:

- row stages (each thread its contiguous range of positions): the block's own
  :func:`~seqprob.gpt.block.pre_attention` (norm, QKV GEMM, rotary) and, after attention,
  :func:`~seqprob.gpt.block.post_attention` (output projection, residual, norm, MLP,
  residual) on views of those rows; after the last block ln_f and the caller's unembedding;
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
from .block import Q_BLOCK, norm_forward, post_attention, pre_attention, split_qkv

__all__ = ["hidden_by_stages"]


def hidden_by_stages(model, ids, n: int, head) -> None:
    """The forward of ``ids`` (1, T) on ``n`` threads; ``head(h2, lo, hi, free)`` receives the
    final-norm rows h2 (hi - lo, C) of each thread's positions [lo, hi) (in that thread)
    and, as ``free``, those rows of the workspace's arena (see :meth:`GPT._forward_rows`).

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
        _rows_before_attention(model, x, ws, 0, lo, hi)
    for layer, p in enumerate(blocks):
        barrier.wait()
        _attention_part(model, ws, part, layer)
        barrier.wait()
        if lo < hi:
            _rows_after_attention(model, x, ws, p, lo, hi)
            if layer + 1 < len(blocks):
                _rows_before_attention(model, x, ws, layer + 1, lo, hi)
    if lo < hi:
        h = norm_forward(x[:, lo:hi], model.params, "ln_f", cfg, out=ws["h"][:, lo:hi])[0]
        head(h.reshape(hi - lo, -1), lo, hi, ws["arena"][:, lo:hi].reshape(-1))


def _row_views(ws, lo, hi) -> dict:
    """The workspace's buffers restricted to rows [lo, hi): (1, t, ...) views, and the
    (1, H, t, hd) views of the rotated q and k (rotary configs). The buffers that share
    memory share it by columns (:func:`~seqprob.gpt.block.make_workspace`), so these rows
    are this thread's alone."""
    rows = {name: ws[name][:, lo:hi] for name in ("h", "qkv", "y", "a", "u", "t") if name in ws}
    rows.update({name: ws[name][:, :, lo:hi] for name in ("q", "k") if name in ws})
    return rows


def _rows_before_attention(model, x, ws, layer, lo, hi) -> None:
    """:func:`~seqprob.gpt.block.pre_attention` of rows [lo, hi): norm_1, QKV and rotary."""
    pre_attention(x[:, lo:hi], model._block_params[layer], model.config, model._ropes[layer],
                  _row_views(ws, lo, hi), pos=lo)


def _rows_after_attention(model, x, ws, p, lo, hi) -> None:
    """:func:`~seqprob.gpt.block.post_attention` of rows [lo, hi): output projection,
    residuals, norm_2 and MLP."""
    rows = _row_views(ws, lo, hi)
    post_attention(x[:, lo:hi], rows["y"], p, model.config, rows)


def _attention_part(model, ws, part, layer) -> None:
    """Attention of this thread's key/value head groups [g0, g1), or query rows [r0, r1)."""
    kind, a0, a1 = part
    if a0 >= a1:
        return
    cfg = model.config
    q, k, v = split_qkv(ws["qkv"], cfg.n_head, cfg.kv_heads)  # (1, H|Hkv, T, hd)
    if model._ropes[layer] is not None:
        q, k = ws["q"], ws["k"]
    options = dict(q_block=Q_BLOCK, scale=cfg.scale, window=cfg.layer_window(layer), softcap=cfg.attn_softcap)
    if kind == "heads":
        G, hd = cfg.n_head // cfg.kv_heads, cfg.head_dim
        h0, h1 = a0 * G, a1 * G
        nn.causal_attention_inference(q[:, h0:h1], k[:, a0:a1], v[:, a0:a1],
                                      out=ws["y"][:, :, h0 * hd:h1 * hd], **options)
    else:
        nn.causal_attention_inference(q[:, :, a0:a1], k[:, :, :a1], v[:, :, :a1], out=ws["y"][:, a0:a1],
                                      **options)


def _attention_parts(config, T: int, n: int) -> list[tuple[str, int, int]]:
    """Each thread's share of attention: ``("heads", g0, g1)`` or ``("rows", r0, r1)``."""
    if config.kv_heads >= n:
        return [("heads", lo, hi) for lo, hi in _parallel.shard_bounds(config.kv_heads, n)]
    cuts = [0] + [min(T, Q_BLOCK * round(T * math.sqrt(i / n) / Q_BLOCK)) for i in range(1, n)] + [T]
    cuts = [max(c, prev) for prev, c in zip([0] + cuts, cuts)]  # non-decreasing
    return [("rows", lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:])]
