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

__all__ = ["softmax_inplace", "log_softmax_inplace", "logsumexp_update", "softmax_stats_update"]


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


def logsumexp_update(u, m, s):
    """Fold a block of logits ``u`` (N, Vb) into running log-sum-exps of N rows, overwriting
    ``u``: ``m`` (N,) the running maxima (start at -inf), ``s`` (N,) float64 the sums of
    exp(u - m) so far (start at 0); log Σ exp over every block seen is then ``m + log(s)``.

    Streaming the vocabulary this way, the logits of all V words never exist at once.

    Notes
    -----
    m' = max(m, max_j u_j),  s' = s exp(m - m') + Σ_j exp(u_j - m'),  so that at every step
    m' + log s' = log(exp(m) s + Σ_j exp(u_j)). m holds maxima of ``u``'s own values, so
    u - m' is rounded once, as in :func:`log_softmax_inplace`.

    Examples
    --------
    >>> u = np.array([[0.0, 1.0, 2.0, 3.0]])
    >>> m, s = np.full(1, -np.inf), np.zeros(1)
    >>> for block in (u[:, :3].copy(), u[:, 3:].copy()):
    ...     _ = logsumexp_update(block, m, s)
    >>> bool(np.isclose(m + np.log(s), np.log(np.exp(u).sum()))[0])
    True
    """
    new, _, c = _new_maximum(u, m)
    s *= c
    u -= new[:, None].astype(u.dtype, copy=False)
    np.exp(u, out=u)
    s += u.sum(axis=-1)
    m[...] = new
    return m, s


def softmax_stats_update(u, above, m, s, a, count, tmp=None):
    """Fold a block of logits ``u`` (N, Vb) into running softmax statistics of N rows,
    overwriting ``u``: ``m``, ``s`` as in :func:`logsumexp_update`; ``a`` (N,) float64 the sums
    of exp(u - m) (u - m) (start at 0); ``count`` (N,) int64 the logits above ``above`` (N,)
    seen so far. ``tmp`` is an optional scratch array of ``u``'s shape and dtype.

    Over the whole vocabulary: log Z = m + log s, entropy = log s - a / s, and
    ``count`` = #{v : u_v > above}.

    Notes
    -----
    With d_v = u_v - m and p_v = exp(d_v) / s: H = -Σ p_v log p_v = log s - Σ exp(d_v) d_v / s.
    A new maximum m' = m + δ rescales the sums already taken: s' = c s, a' = c (a - δ s),
    c = exp(-δ). Both terms of H are >= 0 (d <= 0, s >= 1), so it has no cancellation.

    Examples
    --------
    >>> u = np.log(np.array([[0.5, 0.25, 0.25]]))
    >>> m, s, a, n = np.full(1, -np.inf), np.zeros(1), np.zeros(1), np.zeros(1, np.int64)
    >>> for block in (u[:, :1].copy(), u[:, 1:].copy()):
    ...     _ = softmax_stats_update(block, u[:, 1], m, s, a, n)
    >>> round(float((np.log(s) - a / s)[0] / np.log(2)), 12), int(n[0])
    (1.5, 1)
    """
    count += np.count_nonzero(u > above[:, None], axis=-1)
    new, delta, c = _new_maximum(u, m)
    a[...] = c * (a - delta * s)
    s *= c
    u -= new[:, None].astype(u.dtype, copy=False)  # d (N, Vb)
    e = np.exp(u, out=tmp)
    s += e.sum(axis=-1)
    a += np.einsum("ij,ij->i", e, u)
    m[...] = new
    return m, s, a, count


def _new_maximum(u, m):
    """The rows' new running maxima m' = max(m, max_j u_j), the rise δ = m' - m and the factor
    c = exp(-δ) that rescales the sums taken so far (0 for a row with none yet: m = -inf)."""
    new = np.maximum(m, u.max(axis=-1))  # (N,)
    seen = np.isfinite(m)
    delta = np.where(seen, new - m, 0.0)
    return new, delta, np.where(seen, np.exp(-delta), 0.0)
