"""Softmax and log-softmax over the last axis, in place: the attention's probabilities and the
model's output log-probabilities. Large inputs run in row blocks over the thread pool (same
values).

Examples
--------
>>> import numpy as np
>>> softmax_inplace(np.array([[0.0, -np.inf]])).tolist()
[[1.0, 0.0]]
>>> np.exp(log_softmax_inplace(np.log(np.array([[1.0, 3.0]])))).round(12).tolist()
[[0.25, 0.75]]
"""
from __future__ import annotations

import numpy as np

from .. import _parallel

__all__ = ["softmax_inplace", "log_softmax_inplace"]


def softmax_inplace(s):
    """Softmax over the last axis, overwriting ``s`` (-inf entries become 0).

    Large inputs run in row blocks over the thread pool (split along the first axis, so
    ``s`` may be any strided view).

    Notes
    -----
    softmax(s)_j = exp(s_j - m) / Σ_k exp(s_k - m), m = max_k s_k.
    """
    if s.ndim < 2 or s.size < 2 * _parallel.MIN_WORK:
        return _softmax_rows(s)
    _parallel.for_row_blocks(lambda lo, hi: _softmax_rows(s[lo:hi]), len(s), s.size)
    return s


def _softmax_rows(s):
    m = s.max(axis=-1, keepdims=True)
    s -= m
    np.exp(s, out=s)
    m = s.sum(axis=-1, keepdims=True, out=m)
    s /= m
    return s


def log_softmax_inplace(u, tmp=None):
    """Log-softmax over the last axis, overwriting ``u``; ``tmp`` is an optional scratch buffer
    of ``u``'s shape. Large inputs run in row blocks over the thread pool (same values).

    Notes
    -----
    log_softmax(u)_v = u_v - m - log Σ_w exp(u_w - m), m = max_w u_w.
    """
    if u.ndim < 2 or u.size < 2 * _parallel.MIN_WORK:
        return _log_softmax_rows(u, tmp)
    _parallel.for_row_blocks(
        lambda lo, hi: _log_softmax_rows(u[lo:hi], None if tmp is None else tmp[lo:hi]), len(u), u.size)
    return u


def _log_softmax_rows(u, tmp=None):
    m = u.max(axis=-1, keepdims=True)
    u -= m
    e = np.exp(u, out=tmp)
    lse = np.log(e.sum(axis=-1, keepdims=True, out=m), out=m)
    u -= lse
    return u
