"""Training of the GPT: mean next-token NLL and its gradient, backpropagated by hand.

Forward through :func:`seqprob.gpt.block.block_forward` keeping each block's cache, then
:func:`seqprob.gpt.block.block_backward` in reverse; gradients land in the model's flat
gradient buffer (``model.flat_grads_``).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import _parallel, nn
from ..errors import InputError
from ..vocab import check_ids
from .block import (TrainBuffers, block_backward, blocks_forward, embed_forward, norm_backward, norm_forward,
                    unembed_forward)
from .params import FlatParams, block_shapes, column_major_names, param_shapes

__all__ = ["loss_and_grads", "check_train_batch", "release_buffers"]


MIN_SHARD_WORK = 1 << 16  # elements of the (rows, n_embd) stream per shard below which one
# thread does the whole step (a hand-off and the gradient reduction cost more than they save)


def loss_and_grads(model, batch, mask=None, rng=None):
    """Loss and gradients of :meth:`GPT.loss_and_grads` (see there).

    With several threads (:func:`seqprob._parallel.num_threads`), no dropout and OpenBLAS
    under threadpoolctl, the batch rows are split into one shard per thread: each shard runs
    forward and backward into its own gradient buffer (BLAS on one thread), then the buffers
    are summed into ``model.flat_grads_``. Every shard weights its targets by 1 / (number of
    counted targets in the *whole* batch), so the sum is the gradient of the batch mean.

    Notes
    -----
    Sharded and unsharded steps agree to rounding: the sums over the batch (weight
    gradients, the loss) are grouped by shard, so float32 results depend on the shard count
    in the last bits (float64: ~1e-15 relative).
    """
    batch, mask = check_train_batch(model, batch, mask)
    B, T = batch.shape[0], batch.shape[1] - 1
    drop = rng if model.config.dropout > 0 else None
    total = float(B * T) if mask is None else max(float(np.count_nonzero(mask)), 1.0)
    g = model._gflat.arrays
    n = 1 if drop is not None else _parallel.shard_threads(B, B * T * model.config.n_embd,
                                                           MIN_SHARD_WORK)
    if n == 1:
        return _forward_backward(model, batch, mask, total, g, model._block_grads, drop,
                                 _step_buffers(model, 0)), g
    buffers = [(model._gflat, model._block_grads)] + _extra_grad_buffers(model, n - 1)
    masks = None if mask is None else mask.reshape(B, T)
    tasks = [functools.partial(_forward_backward, model, batch[lo:hi],
                               None if masks is None else masks[lo:hi].reshape(-1), total,
                               flat.arrays, block_grads, None, _step_buffers(model, shard))
             for shard, ((lo, hi), (flat, block_grads))
             in enumerate(zip(_parallel.shard_bounds(B, n), buffers))]
    with _parallel.one_blas_thread:
        losses = _parallel.run_tasks(tasks)
    _sum_into(model._gflat.flat, [flat.flat for flat, _ in buffers[1:]])
    return float(sum(losses)), g


def _extra_grad_buffers(model, count: int) -> list:
    """``count`` gradient buffers laid out like ``model.flat_grads_`` (kept for reuse), each
    with its per-block dicts: ``[(FlatParams, [block dict, ...]), ...]``."""
    cfg = model.config
    buffers = model.__dict__.setdefault("_shard_grads", [])
    while len(buffers) < count:
        flat = FlatParams(param_shapes(cfg), model.dtype, column_major_names(cfg))
        keys = list(block_shapes(cfg))
        blocks = [{k: flat.arrays[f"h.{i}.{k}"] for k in keys} for i in range(cfg.n_layer)]
        buffers.append((flat, blocks))
    return buffers[:count]


def _step_buffers(model, shard: int) -> list:
    """The reused arrays of shard ``shard``'s steps (kept on the model): one
    :class:`~seqprob.gpt.block.TrainBuffers` per layer (forward caches), then one for the
    rest (embedding, final norm, logits, the backward's scratch)."""
    store = model.__dict__.setdefault("_train_buffers", [])
    while len(store) <= shard:
        store.append([TrainBuffers(model.dtype) for _ in range(model.config.n_layer + 1)])
    return store[shard]


def release_buffers(model) -> None:
    """Free the arrays that training steps keep on ``model`` for the next step (activations,
    caches and gradient scratch of the last batch shape, plus the extra gradient buffers of
    sharded steps); the next step allocates them again."""
    model.__dict__.pop("_train_buffers", None)
    model.__dict__.pop("_shard_grads", None)


def _sum_into(out, others) -> None:
    """out += each of ``others`` (1-D, same size), in blocks over the thread pool."""
    def add(lo, hi):
        for other in others:
            np.add(out[lo:hi], other[lo:hi], out=out[lo:hi])

    _parallel.for_row_blocks(add, out.size, out.size * len(others))


def _forward_backward(model, batch, mask, total, g, block_grads, drop, buffers):
    """Forward and backward of the (b, T+1) ``batch`` (targets weighted 1 / ``total``): the
    gradients are written into ``g`` / ``block_grads``; returns this batch's share of the loss.
    ``buffers``: the reused arrays of :func:`_step_buffers`."""
    inputs, targets = batch[:, :-1], batch[:, 1:]
    B, T = inputs.shape
    cfg, p = model.config, model.params
    top, C = buffers[-1], cfg.n_embd
    x, emb_cache = embed_forward(inputs, p, out=top("x", (B, T, C)), scale=cfg.embed_scale)  # (B, T, C)
    x, d0 = nn.dropout_forward(x, cfg.dropout, drop)
    x, caches = blocks_forward(x, model._block_params, cfg, model._ropes,
                               lambda i: dict(drop=drop, buffers=buffers[i]))
    hf, ln_cache = norm_forward(x, p, "ln_f", cfg, buffers=top)
    h2 = hf.reshape(B * T, -1)  # (N, C)
    w_u = model._w_u
    logits = unembed_forward(h2, w_u, cfg, out=top("logits", (B * T, w_u.shape[0])))  # (N, V)
    capped = None
    if cfg.final_softcap is not None:  # the cap's backward needs its output, which the loss overwrites
        capped = top("capped", logits.shape)
        np.copyto(capped, logits)
    loss, dlogits = nn.cross_entropy_fused(logits, targets.reshape(-1), mask, count=total)  # in place
    if capped is not None:
        nn.softcap_backward(dlogits, capped, cfg.final_softcap, out=dlogits)
    g_u = g["wte"] if cfg.tie_weights else g["lm_head.w"]  # column-major (V, C)
    np.matmul(h2.T, dlogits, out=g_u.T)  # (C, V): the C-contiguous side, for BLAS
    dx = np.matmul(dlogits, w_u, out=top("d.x", (B * T, C))).reshape(B, T, C)
    dx = norm_backward(dx, ln_cache, g, "ln_f", cfg, out=dx)
    for layer in reversed(range(cfg.n_layer)):
        dx = block_backward(dx, caches.pop(), block_grads[layer], cfg, model._ropes[layer], scratch=top)
    dx = nn.dropout_backward(dx, d0)
    if "wpe" in g:
        np.sum(dx, axis=0, out=g["wpe"][:T])
        g["wpe"][T:] = 0.0
    if cfg.embed_scale != 1.0:  # x = s W_E[ids] (+ W_pos)
        dx *= dx.dtype.type(cfg.embed_scale)
    if not cfg.tie_weights:
        g["wte"][...] = 0.0
    nn.embedding_backward(dx, emb_cache, out=g["wte"])
    return loss


def check_train_batch(model, batch, mask):
    """Validated (B, T+1) int batch and (B*T,) bool mask (or None)."""
    arr = check_ids(batch, model.config.vocab_size, name="batch")
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise InputError(f"batch must be (B, T+1) with T >= 1, got shape {arr.shape}", shape=arr.shape)
    model._check_T(arr.shape[1] - 1, "loss_and_grads")
    if mask is None:
        return arr, None
    mask = np.asarray(mask)
    if mask.shape != (arr.shape[0], arr.shape[1] - 1) or mask.dtype.kind not in "bui":
        raise InputError(f"mask must be a boolean (B, T) = {(arr.shape[0], arr.shape[1] - 1)} "
                         f"array, got shape {mask.shape} dtype {mask.dtype}", shape=mask.shape)
    return arr, mask.astype(bool).reshape(-1)
