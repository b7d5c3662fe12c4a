"""The training loss: cross-entropy of the next token, its value and its gradient in one pass
that overwrites the logits.

Examples
--------
>>> import numpy as np
>>> loss, grad = cross_entropy_fused(np.zeros((2, 4)), np.array([0, 3]))
>>> round(loss, 6), grad[0].tolist()
(1.386294, [-0.375, 0.125, 0.125, 0.125])
"""
from __future__ import annotations

import numpy as np

from .. import _parallel

__all__ = ["cross_entropy_fused"]


def cross_entropy_fused(logits, targets, mask=None, chunk=128, count=None):
    """Mean negative log-likelihood of ``targets`` under softmax(logits) and its gradient, in
    one pass over row chunks.

    Overwrites ``logits`` (no second (N, V) buffer, each chunk stays in cache; the chunks are
    spread over the thread pool); the loss is summed over the chunks in order.

    Parameters
    ----------
    logits : (N, V) float
        Overwritten with dloss/dlogits.
    targets : (N,) int
    mask : (N,) bool, optional
        Only rows where mask is True count (padding).
    chunk : int
        Rows per chunk.
    count : float, optional
        The divisor instead of the number of counted rows (a shard of a larger batch passes
        the whole batch's count, so that the shards' losses and gradients add up).

    Returns
    -------
    loss : float
    grad : (N, V)
        ``logits``, now holding the gradient.

    Notes
    -----
    With w_i = mask_i / n (n = number of counted rows, or ``count``):
    loss = -Σ_i w_i log softmax(u_i)[y_i], dloss/du_i = w_i (softmax(u_i) - onehot(y_i)).
    """
    N = len(targets)
    w = np.ones(N, dtype=logits.dtype) if mask is None else mask.astype(logits.dtype)
    w /= max(float(w.sum()), 1.0) if count is None else count
    starts = list(range(0, N, chunk))

    def chunks(lo, hi):
        return [_cross_entropy_chunk(logits[i:i + chunk], targets[i:i + chunk], w[i:i + chunk])
                for i in starts[lo:hi]]

    parts = _parallel.for_row_blocks(chunks, len(starts), logits.size)
    total = 0.0
    for part in parts:
        for value in part:
            total -= value
    return total, logits


def _cross_entropy_chunk(u, t, wc) -> float:
    """Overwrite logits rows u (n, V) with w (softmax - onehot); returns Σ w log p(target)."""
    rows = np.arange(len(t))
    u -= u.max(axis=-1, keepdims=True)
    picked = u[rows, t]  # u_t - max
    np.exp(u, out=u)
    s = u.sum(axis=-1)
    value = float(np.sum((picked - np.log(s)).astype(np.float64) * wc))  # no BLAS in pool workers
    u *= (wc / s)[:, None]
    u[rows, t] -= wc
    return value
