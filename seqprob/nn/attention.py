"""Causal self-attention: the training pair (grouped-query attention forward and backward),
the inference forward (:func:`causal_attention_inference`, no probabilities kept), and the
rotary position embedding of queries and keys.

Grouped-query attention covers multi-head attention (G = 1 query head per key/value head,
GPT-2) and multi-query attention (one key/value head); every kernel works one sequence and
one block of queries at a time, so key blocks entirely above the causal diagonal are never
computed.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> q, k, v = rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((1, 1, 3, 4)), np.ones((1, 1, 3, 4))
>>> y, cache = grouped_attention_forward(q, k, v)  # 2 query heads share 1 key/value head
>>> y.shape, np.allclose(y, 1.0)  # every row averages values of ones
((1, 3, 8), True)
"""
from __future__ import annotations

import math
import threading

import numpy as np

from .activations import softcap_backward, softcap_forward
from .softmax import softmax_inplace

__all__ = ["causal_mask", "rotary_forward", "rotary_backward", "grouped_attention_forward",
           "grouped_attention_backward", "causal_attention_inference"]

SCORE_BLOCK = 1 << 18  # elements of one query block's scores (1 MiB float32: stays in L2)
_MASKS: dict = {}  # causal_mask's read-only masks by (T, offset, dtype)


def causal_mask(T, dtype, offset=0, window=None):
    """(T, T + offset) additive mask: 0 where key j <= query i + offset, -inf above; with a
    sliding ``window`` W also -inf where j <= i + offset - W (the query sees W keys)."""
    key = (T, offset, np.dtype(dtype).str, window)
    if key not in _MASKS:
        if len(_MASKS) > 32:
            _MASKS.clear()
        m = np.triu(np.full((T, T + offset), -np.inf, dtype=dtype), k=1 + offset)
        if window is not None:
            m += np.tril(np.full((T, T + offset), -np.inf, dtype=dtype), k=offset - window)
        m.flags.writeable = False
        _MASKS[key] = m
    return _MASKS[key]


def _scores(s, scale, softcap):
    """Scale the raw scores q kᵀ in place, then soft-cap them (Gemma 2) when asked."""
    if scale is not None:
        s *= scale
    if softcap is not None:
        softcap_forward(s, softcap, out=s)
    return s


def rotary_forward(x, cos, sin, out=None):
    """Rotary position embedding (HF "rotate_half" convention) of the first ``2 r`` dims.

    Parameters
    ----------
    x : (..., T, hd)
    cos, sin : (T, r)
        cos(p θ_i), sin(p θ_i) of each position p and frequency θ_i; dims ``2 r .. hd`` pass
        through unchanged (GPT-NeoX partial rotary).

    Notes
    -----
    With x₁ = x[..., :r], x₂ = x[..., r:2r]: y₁ = x₁ cos - x₂ sin, y₂ = x₂ cos + x₁ sin
    (= x cos + rotate_half(x) sin). The backward is the rotation by -θ.
    """
    r = cos.shape[-1]
    y = np.empty(x.shape, dtype=x.dtype) if out is None else out
    x1, x2 = x[..., :r], x[..., r:2 * r]
    np.multiply(x1, cos, out=y[..., :r])
    y[..., :r] -= x2 * sin
    np.multiply(x2, cos, out=y[..., r:2 * r])
    y[..., r:2 * r] += x1 * sin
    if 2 * r < x.shape[-1]:
        y[..., 2 * r:] = x[..., 2 * r:]
    return y


def rotary_backward(dy, cos, sin, out=None):
    """Gradient of :func:`rotary_forward` (the inverse rotation applied to ``dy``).

    Notes
    -----
    The rotation is orthogonal, so its gradient is its transpose, the rotation by -θ:
    dx₁ = dy₁ cos + dy₂ sin, dx₂ = dy₂ cos - dy₁ sin.
    """
    return rotary_forward(dy, cos, -sin, out=out)


def grouped_attention_forward(q, k, v, out=None, probs_out=None, q_block=128, scale=None, window=None,
                             softcap=None):
    """Causal grouped-query attention: query head h reads key/value head h // G.

    Parameters
    ----------
    q : (B, H, Tq, hd)
        Queries of the last ``Tq`` positions (``Tq <= Tk``; decoding passes Tq = 1).
    k, v : (B, Hkv, Tk, hd)
        H = G Hkv (G = 1: multi-head attention, Hkv = 1: multi-query attention).
    out : (B, Tq, H hd), optional
    probs_out : (B, H, Tq, Tk), optional
        Receives the attention probabilities (zero above the diagonal).
    scale : float, optional
        Score scale; None = 1/sqrt(hd).
    window : int, optional
        Sliding window W: query i sees keys i - W < j <= i (positions counted from the first
        key); None = every earlier key.
    softcap : float, optional
        Scores become softcap tanh(s / softcap) after scaling, before the mask (Gemma 2).

    Returns
    -------
    y : (B, Tq, H hd)
        Heads concatenated.
    cache : tuple
        For :func:`grouped_attention_backward` (None in the decoding case B = Tq = 1 with
        ``out`` given and no ``probs_out``).

    Notes
    -----
    P = softmax(q kᵀ / sqrt(hd) + causal mask), y = P v, per query head with its group's k, v
    (with the options: P = softmax(cap(scale q kᵀ) + band mask)). Works one sequence and ``q_block`` queries at a time, so key blocks entirely above the
    diagonal are never computed.
    """
    B, H, Tq, hd = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    G, off = H // Hkv, Tk - Tq
    scale = 1.0 / math.sqrt(hd) if scale is None else scale
    if B == 1 and Tq == 1 and out is not None and probs_out is None:  # decoding: no cache
        return _attention_one_query(q, k, v, out, scale, window, softcap), None
    probs = np.empty((B, H, Tq, Tk), dtype=q.dtype) if probs_out is None else probs_out
    y = np.empty((B, Tq, H * hd), dtype=q.dtype) if out is None else out
    # views (copy=False raises rather than silently writing into a copy)
    yg = np.reshape(y, (B, Tq, Hkv, G, hd), copy=False).transpose(0, 2, 3, 1, 4)  # (B, Hkv, G, Tq, hd)
    qg = q.reshape(B, Hkv, G, Tq, hd)
    pg = np.reshape(probs, (B, Hkv, G, Tq, Tk), copy=False)
    kt = k.transpose(0, 1, 3, 2)[:, :, None]  # (B, Hkv, 1, hd, Tk)
    vg = v[:, :, None]  # (B, Hkv, 1, Tk, hd)
    mask = causal_mask(Tq, q.dtype, offset=off, window=window) if Tq > 1 or window is not None else None
    for b in range(B):
        for q0 in range(0, Tq, q_block):
            q1 = min(q0 + q_block, Tq)
            s = np.matmul(qg[b, :, :, q0:q1], kt[b, ..., :off + q1], out=pg[b, :, :, q0:q1, :off + q1])
            _scores(s, scale, softcap)
            if mask is not None:
                s += mask[q0:q1, :off + q1]
            softmax_inplace(s)  # (Hkv, G, tq, off + q1)
            np.matmul(s, vg[b, ..., :off + q1, :], out=yg[b, :, :, q0:q1])
            pg[b, :, :, q0:q1, off + q1:] = 0.0
    return y, (q, k, v, probs, scale, softcap)


def _attention_one_query(q, k, v, out, scale, window=None, softcap=None):
    """The decoding case of :func:`grouped_attention_forward` (B = Tq = 1: only the window
    masks), with as few numpy calls as possible (batch-1 decoding is overhead-bound)."""
    _, H, _, hd = q.shape
    Hkv = k.shape[1]
    if window is not None:
        k, v = k[:, :, -window:], v[:, :, -window:]  # the keys the last position sees
    s = np.matmul(q.reshape(Hkv, H // Hkv, hd), k[0].transpose(0, 2, 1))  # (Hkv, G, Tk)
    _scores(s, scale, softcap)
    softmax_inplace(s)
    y = np.matmul(s, v[0])  # (Hkv, G, hd)
    out[...] = y.reshape(out.shape)
    return out


def causal_attention_inference(q, k, v, out, q_block=128, scale=None, window=None, softcap=None):
    """The values of :func:`grouped_attention_forward` without its probabilities or cache
    (the inference forward): every array it touches stays in cache.

    Parameters
    ----------
    q : (B, H, Tq, hd)
        Queries of the last ``Tq`` positions (``Tq <= Tk``), any strides.
    k, v : (B, Hkv, Tk, hd)
        Keys and values (``H = G Hkv``), any strides.
    out : (B, Tq, H hd)
        Receives the heads concatenated; must be reshapeable to (B, Tq, H, hd) as a view.
    q_block : int
        Queries per block; rows are grouped by blocks starting at multiples of ``q_block``
        (the sums over a row's keys are the same in any split that keeps the blocks).
    scale, window, softcap
        As in :func:`grouped_attention_forward`.

    Returns
    -------
    out : (B, Tq, H hd)

    Notes
    -----
    Per query head h (key/value head h // G) and block of queries [q0, q1):
    S = q kᵀ[:, :off + q1] / sqrt(hd) (off = Tk - Tq), the causal mask added only to the
    diagonal columns [off + q0, off + q1) (the columns left of them are all visible), then
    P = softmax(S) and y = P v[:off + q1]. One sequence, one query block and as many
    key/value heads (with their G query heads) as keep the block's scores under
    ``SCORE_BLOCK`` elements at a time: the scores stay in L2 instead of a (B, H, Tq, Tk)
    array in memory, the key blocks above the diagonal are never computed, and q, k, v are
    copied into contiguous per-thread buffers (q already scaled when 1/sqrt(hd) is a power
    of two, where (q c) kᵀ = c (q kᵀ) exactly). The operations on each row are those of
    :func:`grouped_attention_forward` (scale, mask, max, subtract, exp, sum, divide, P v).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = (rng.standard_normal((1, 2, 5, 4)) for _ in range(3))
    >>> y = causal_attention_inference(q, k, v, out=np.empty((1, 5, 8)), q_block=2)
    >>> bool(np.allclose(y, grouped_attention_forward(q, k, v)[0], atol=1e-12))
    True
    """
    B, H, Tq, hd = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    if out.size == 0:  # no heads or no queries
        return out
    G, qb = H // Hkv, min(q_block, Tq)
    y = np.reshape(out, (B, Tq, Hkv, G, hd), copy=False).transpose(0, 2, 3, 1, 4)  # (B, Hkv, G, Tq, hd) view
    qg = q.reshape(B, Hkv, G, Tq, hd)
    scale = 1.0 / math.sqrt(hd) if scale is None else scale
    exact = math.frexp(scale)[0] == 0.5  # a power of two: fold the scale into q exactly
    step = max(1, SCORE_BLOCK // (G * qb * Tk))  # key/value heads per pass: scores fit in L2
    for b in range(B):
        for g0 in range(0, Hkv, step):
            g1 = min(g0 + step, Hkv)
            bufs = _AttentionBuffers(qg[b, g0:g1], k[b, g0:g1], v[b, g0:g1], scale if exact else None, q_block)
            _attention_blocks(bufs, y[b, g0:g1], q_block, None if exact else scale, window, softcap)
    return out


class _AttentionBuffers:
    """Contiguous copies of the queries q (n, G, Tq, hd) (times ``scale`` unless None), keys
    and values (n, 1, Tk, hd) of n key/value heads, and scratch for one block's scores; all
    per-thread buffers reused across calls (the pool's threads live on, each keeps its set)."""

    __slots__ = ("q", "k", "v", "s", "m", "mask")

    def __init__(self, q, k, v, scale, q_block):
        n, G, Tq, hd = q.shape
        Tk, qb = k.shape[1], min(q_block, Tq)
        self.q = _scratch("q", q.shape, q.dtype)
        if scale is None:
            np.copyto(self.q, q)
        else:
            np.multiply(q, scale, out=self.q)
        self.k, self.v = (_scratch(name, (n, 1, Tk, hd), q.dtype) for name in "kv")
        np.copyto(self.k[:, 0], k)
        np.copyto(self.v[:, 0], v)
        self.s = _scratch("s", (n * G * qb * Tk,), q.dtype)  # reshaped per block
        self.m = _scratch("m", (n * G * qb,), q.dtype)  # row max, then row sum
        self.mask = causal_mask(qb, q.dtype)


_THREAD_LOCAL = threading.local()


def _scratch(name, shape, dtype):
    """A reused buffer of this thread (contents undefined), viewed as ``shape``."""
    bufs = getattr(_THREAD_LOCAL, "bufs", None)
    if bufs is None:
        bufs = _THREAD_LOCAL.bufs = {}
    size, key = math.prod(shape), (name, np.dtype(dtype).str)
    if key not in bufs or bufs[key].size < size:
        bufs[key] = np.empty(max(size, 1), dtype)
    return bufs[key][:size].reshape(shape)


def _attention_blocks(bufs, y, q_block, scale, window=None, softcap=None):
    """The query blocks of n key/value heads' groups: ``bufs`` -> y (n, G, Tq, hd); ``scale``
    None when already folded into the queries. With a ``window`` each block reads only the
    keys its queries can see, [off + q0 - W + 1, off + q1), and masks the band's edges."""
    n, G, Tq, _ = bufs.q.shape
    Tk = bufs.k.shape[2]
    off, kt = Tk - Tq, bufs.k.transpose(0, 1, 3, 2)  # (n, 1, hd, Tk)
    for q0 in range(0, Tq, q_block):
        q1 = min(q0 + q_block, Tq)
        lo = 0 if window is None else max(0, off + q0 - window + 1)
        tq, w = q1 - q0, off + q1 - lo
        s = np.matmul(bufs.q[:, :, q0:q1], kt[..., lo:lo + w], out=bufs.s[:n * G * tq * w].reshape(n, G, tq, w))
        _scores(s, scale, softcap)
        if window is not None:
            s += causal_mask(tq, s.dtype, offset=w - tq, window=window)  # rows off + q0 .., columns lo ..
        elif tq > 1:
            s[..., off + q0:] += bufs.mask[:tq, :tq]
        m = np.max(s, axis=-1, keepdims=True, out=bufs.m[:n * G * tq].reshape(n, G, tq, 1))
        s -= m
        np.exp(s, out=s)
        s /= np.sum(s, axis=-1, keepdims=True, out=m)
        np.matmul(s, bufs.v[:, :, lo:lo + w], out=y[:, :, q0:q1])  # (n, G, tq, hd)


def grouped_attention_backward(dy, cache, out=None, q_block=64):
    """Gradients of :func:`grouped_attention_forward`: returns (dq, dk, dv).

    Parameters
    ----------
    dy : (B, Tq, H hd)
        Gradient of the output.
    cache : tuple
        From :func:`grouped_attention_forward`.
    out : (dq, dk, dv), optional
        Arrays (B, H, Tq, hd), (B, Hkv, Tk, hd), (B, Hkv, Tk, hd) receiving the gradients
        (any strides with unit last stride, e.g. views into a fused ``[q | k | v]``
        gradient); an entry None is allocated.
    q_block : int
        Queries (and keys) per block.

    Notes
    -----
    dP = dy vᵀ, dv = Σ_group Pᵀ dy, dS = P ∘ (dP - Σ_j dP∘P) / sqrt(hd) (soft-capped: times
    1 - (cap(s)/cap)², the raw scores s recomputed block by block), dq = dS k,
    dk = Σ_group dSᵀ q. P is zero above the causal diagonal, so one sequence at a time,
    each query block reads only the keys it sees (dP, dS, dq) and each key block only the
    queries that see it (dv, dk): ~5/8 of the full-square work at T = 4 q_block, and dS
    lives in one (H, Tq, Tk) buffer instead of a (B, H, Tq, Tk) temporary per step.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, kv = rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((1, 1, 3, 4))
    >>> _, cache = grouped_attention_forward(q, kv, kv)  # 2 query heads share 1 key/value head
    >>> [g.shape for g in grouped_attention_backward(np.ones((1, 3, 8)), cache)]
    [(1, 2, 3, 4), (1, 1, 3, 4), (1, 1, 3, 4)]
    """
    q, k, v, probs, scale, softcap = cache
    B, H, Tq, hd = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    G, off = H // Hkv, Tk - Tq
    dq, dk, dv = (None, None, None) if out is None else out
    dq, dk, dv = (np.empty(a.shape, a.dtype) if o is None else o for o, a in ((dq, q), (dk, k), (dv, v)))
    dyg = dy.reshape(B, Tq, Hkv, G, hd).transpose(0, 2, 3, 1, 4)  # (B, Hkv, G, Tq, hd)
    qg, pg = q.reshape(B, Hkv, G, Tq, hd), probs.reshape(B, Hkv, G, Tq, Tk)
    dqg = np.reshape(dq, (B, Hkv, G, Tq, hd), copy=False)  # a view (copy=False raises otherwise)
    dS = np.zeros((Hkv, G, Tq, Tk), dtype=dy.dtype)  # one sequence's dP / dS; the cells no
    # block writes (above the diagonal) stay 0 for every sequence, as P is there
    for b in range(B):
        for q0 in range(0, Tq, q_block):  # queries q0..q1 see keys 0..off + q1
            q1 = min(q0 + q_block, Tq)
            s = np.matmul(dyg[b, :, :, q0:q1], v[b, :, None, :off + q1].transpose(0, 1, 3, 2),
                          out=dS[:, :, q0:q1, :off + q1])  # dP (Hkv, G, tq, n)
            _softmax_grad_block(s, pg[b, :, :, q0:q1, :off + q1])
            if softcap is not None:
                capped = _scores(np.matmul(qg[b, :, :, q0:q1], k[b, :, None, :off + q1].transpose(0, 1, 3, 2)),
                                 scale, softcap)
                softcap_backward(s, capped, softcap, out=s)
            np.matmul(s, k[b, :, None, :off + q1], out=dqg[b, :, :, q0:q1])
        for k0 in range(0, Tk, q_block):  # keys k0..k1 are seen by queries i0..Tq
            k1, i0 = min(k0 + q_block, Tk), max(k0 - off, 0)
            _grouped_key_grad(pg[b, :, :, i0:, k0:k1], dyg[b, :, :, i0:], dv[b, :, k0:k1])
            _grouped_key_grad(dS[:, :, i0:, k0:k1], qg[b, :, :, i0:], dk[b, :, k0:k1])
    dq *= scale
    dk *= scale
    return dq, dk, dv


def _softmax_grad_block(dP, P):
    """dP <- P ∘ (dP - Σ_j dP∘P) in place, over the last axis (rows of one block)."""
    dot = np.einsum("...ij,...ij->...i", dP, P)[..., None]
    dP -= dot
    dP *= P


def _grouped_key_grad(S, X, out):
    """out (Hkv, kb, hd) = Σ_group Sᵀ X for S (Hkv, G, n, kb), X (Hkv, G, n, hd)."""
    St = S.transpose(0, 1, 3, 2)  # (Hkv, G, kb, n)
    if S.shape[1] == 1:
        np.matmul(St[:, 0], X[:, 0], out=out)
    else:
        np.sum(np.matmul(St, X), axis=1, out=out)
