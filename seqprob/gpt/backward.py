"""Training of the GPT: mean next-token NLL and its gradient, backpropagated by hand.

Forward through :func:`seqprob.gpt.block.block_forward` keeping each block's cache, then
:func:`seqprob.gpt.block.block_backward` in reverse; gradients land in the model's flat
gradient buffer (``model.flat_grads_``).
"""
from __future__ import annotations

import numpy as np

from .. import nn
from ..errors import InputError
from ..vocab import check_ids
from .block import block_backward, block_forward, norm_backward, norm_forward

__all__ = ["loss_and_grads", "check_train_batch"]


def loss_and_grads(model, batch, mask=None, rng=None):
    """Loss and gradients of :meth:`GPT.loss_and_grads` (see there)."""
    batch, mask = check_train_batch(model, batch, mask)
    inputs, targets = batch[:, :-1], batch[:, 1:]
    B, T = inputs.shape
    cfg, p, g = model.config, model.params, model._gflat.arrays
    drop = rng if cfg.dropout > 0 else None
    x, emb_cache = nn.embedding_forward(inputs, p["wte"])  # (B, T, C)
    if "wpe" in p:
        x += p["wpe"][:T]
    x, d0 = nn.dropout_forward(x, cfg.dropout, drop)
    caches = []
    for block in model._block_params:
        x, cache = block_forward(x, block, cfg, model._rope, drop=drop)
        caches.append(cache)
    hf, ln_cache = norm_forward(x, p, "ln_f", cfg)
    h2 = hf.reshape(B * T, -1)  # (N, C)
    w_u = model._w_u
    logits = np.matmul(h2, w_u.T)  # (N, V)
    loss, dlogits = nn.cross_entropy_fused(logits, targets.reshape(-1), mask)  # (N, V) in place
    np.matmul(dlogits.T, h2, out=g["wte"] if cfg.tie_weights else g["lm_head.w"])
    dx = norm_backward((dlogits @ w_u).reshape(B, T, -1), ln_cache, g, "ln_f", cfg)
    for layer in reversed(range(cfg.n_layer)):
        dx = block_backward(dx, caches.pop(), model._block_grads[layer], cfg, model._rope)
    dx = nn.dropout_backward(dx, d0)
    if "wpe" in g:
        np.sum(dx, axis=0, out=g["wpe"][:T])
        g["wpe"][T:] = 0.0
    if not cfg.tie_weights:
        g["wte"][...] = 0.0
    nn.embedding_backward(dx, emb_cache, out=g["wte"])
    return loss, g


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
