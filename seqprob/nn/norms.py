"""Normalization layers over the last axis: LayerNorm (GPT-2, GPT-NeoX) and RMSNorm (Llama,
Qwen2), each a ``*_forward`` / ``*_backward`` pair.

Examples
--------
>>> import numpy as np
>>> y, cache = layer_norm_forward(np.array([[1.0, 3.0]]), np.ones(2), np.zeros(2), eps=0.0)
>>> y.tolist()
[[-1.0, 1.0]]
>>> dx, dg, db = layer_norm_backward(np.ones((1, 2)), cache)
>>> dg.tolist(), db.tolist()
([-1.0, 1.0], [1.0, 1.0])
"""
from __future__ import annotations

import numpy as np

from ._chunks import CHEAP_MIN_WORK, by_chunks, row_view

__all__ = ["layer_norm_forward", "layer_norm_backward", "rms_norm_forward", "rms_norm_backward"]


def layer_norm_forward(x, g, b, eps=1e-5, out=None, xhat_out=None):
    """LayerNorm over the last axis: biased variance, eps inside the square root.

    ``b`` may be None (no bias). Passing ``xhat_out=out`` saves a buffer when no backward
    will follow (the cached x̂ is then overwritten by y). Large inputs are normalized in
    cache-sized row chunks spread over the thread pool (same values).

    Parameters
    ----------
    x : (..., C)
    g : (C,)
        Gain.
    b : (C,) or None
        Bias.
    eps : float
    out, xhat_out : (..., C), optional
        Receive y and x̂.

    Returns
    -------
    y : (..., C)
    cache : tuple
        (x̂, rstd, g) for :func:`layer_norm_backward`.

    Notes
    -----
    y = (x - mean) / sqrt(var + eps) * g + b.
    """
    C = x.shape[-1]
    xhat = np.empty_like(x) if xhat_out is None else xhat_out  # (..., C)
    y = np.empty(x.shape, np.result_type(x, g, *([] if b is None else [b]))) if out is None else out
    rstd = np.empty(x.shape[:-1] + (1,), dtype=x.dtype)  # (..., 1)
    x2, xh2, y2, r2 = row_view(x, C), row_view(xhat, C), row_view(y, C), rstd.reshape(-1, 1)
    if x2 is None or xh2 is None or y2 is None:
        _layer_norm_rows(x, g, b, eps, xhat, rstd, y)
        return y, (xhat, rstd, g)

    def chunk(lo, hi):
        _layer_norm_rows(x2[lo:hi], g, b, eps, xh2[lo:hi], r2[lo:hi], y2[lo:hi])

    by_chunks(chunk, len(x2), C, CHEAP_MIN_WORK)
    return y, (xhat, rstd, g)


def _layer_norm_rows(x, g, b, eps, xhat, rstd, y):
    """LayerNorm of rows x (n, C) into xhat, rstd (n, 1) and y (xhat may be y)."""
    mean = x.mean(axis=-1, keepdims=True)
    np.subtract(x, mean, out=xhat)  # (n, C)
    var = np.einsum("...i,...i->...", xhat, xhat, out=rstd[..., 0])[..., None]
    var *= 1.0 / x.shape[-1]
    var += eps
    np.sqrt(var, out=var)
    np.divide(1.0, var, out=var)
    xhat *= var
    np.multiply(xhat, g, out=y)
    if b is not None:
        y += b


def layer_norm_backward(dy, cache, out=None):
    """Gradients of LayerNorm: returns (dx, dg, db). ``out`` receives dx and may be ``dy``.

    Notes
    -----
    With ĝ = dy * g: dx = rstd * (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)), dg = Σ dy x̂, db = Σ dy.
    """
    xhat, rstd, g = cache
    C = xhat.shape[-1]
    rows_dy, rows_xhat = dy.reshape(-1, C), xhat.reshape(-1, C)
    dg = np.einsum("ni,ni->i", rows_dy, rows_xhat)
    db = rows_dy.sum(axis=0)
    dx = np.empty_like(dy) if out is None else out
    dx2, dy2, xh2, r2 = row_view(dx, C), row_view(dy, C), row_view(xhat, C), rstd.reshape(-1, 1)
    if dx2 is None or dy2 is None or xh2 is None:
        _layer_norm_dx_rows(dy, g, xhat, rstd, dx)
        return dx, dg, db

    def chunk(lo, hi):
        _layer_norm_dx_rows(dy2[lo:hi], g, xh2[lo:hi], r2[lo:hi], dx2[lo:hi])

    by_chunks(chunk, len(dx2), C, CHEAP_MIN_WORK)
    return dx, dg, db


def _layer_norm_dx_rows(dy, g, xhat, rstd, dx):
    """dx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)), ĝ = dy g, for rows (n, C) (dx may be dy)."""
    C = xhat.shape[-1]
    np.multiply(dy, g, out=dx)
    m1 = dx.mean(axis=-1, keepdims=True)
    m2 = np.einsum("...i,...i->...", dx, xhat)[..., None]
    m2 *= 1.0 / C
    dx -= m1
    dx -= xhat * m2
    dx *= rstd


def rms_norm_forward(x, g, eps=1e-6, out=None, xhat_out=None):
    """RMSNorm over the last axis (Llama): no mean subtraction, no bias. With ``out`` alone the
    result is written there and no cache is returned (no backward can follow); with ``out``
    and ``xhat_out`` (training buffers reused between steps) both are written and cached.

    Notes
    -----
    y = x / sqrt(mean(x²) + eps) * g.

    Examples
    --------
    >>> y, _ = rms_norm_forward(np.array([[3.0, 4.0]]), np.ones(2), eps=0.0)
    >>> np.round(y, 4).tolist()
    [[0.8485, 1.1314]]
    """
    ms = np.einsum("...i,...i->...", x, x)[..., None]  # (..., 1)
    ms *= 1.0 / x.shape[-1]
    ms += eps
    rstd = np.sqrt(ms, out=ms)
    np.divide(1.0, rstd, out=rstd)
    if out is not None and xhat_out is None:  # inference: x̂ is not kept
        y = np.multiply(x, rstd, out=out)
        y *= g
        return y, None
    xhat = np.multiply(x, rstd, out=xhat_out)  # (..., C)
    y = np.multiply(xhat, g, out=out)
    return y, (xhat, rstd, g)


def rms_norm_backward(dy, cache, out=None):
    """Gradients of RMSNorm: returns (dx, dg). ``out`` receives dx and may be ``dy``.

    Notes
    -----
    With ĝ = dy * g: dx = rstd * (ĝ - x̂ mean(ĝ x̂)), dg = Σ dy x̂.
    """
    xhat, rstd, g = cache
    C = xhat.shape[-1]
    dg = np.einsum("ni,ni->i", dy.reshape(-1, C), xhat.reshape(-1, C))
    dxhat = np.multiply(dy, g, out=out)
    m = np.einsum("...i,...i->...", dxhat, xhat)[..., None]
    m *= 1.0 / C
    dxhat -= xhat * m
    dxhat *= rstd
    return dxhat, dg
