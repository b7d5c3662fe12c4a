"""Elementwise activations of the MLP, each a ``*_forward`` / ``*_backward`` pair: GELU with
the tanh approximation (GPT-2), exact GELU (GPT-NeoX, BERT) and SwiGLU (Llama, Qwen2).

Large inputs run in cache-sized row chunks spread over the thread pool (same values at any
split). :func:`gelu_rows` is the one GELU pass, shared with the single-row decoding kernel
(:func:`seqprob.nn.rows.gelu_row_inplace`).

Examples
--------
>>> import numpy as np
>>> y, cache = gelu_forward(np.array([-1.0, 0.0, 1.0]))
>>> np.round(y, 4).tolist()
[-0.1588, 0.0, 0.8412]
>>> np.round(gelu_backward(np.ones(3), cache), 4).tolist()
[-0.083, 0.5, 1.083]
"""
from __future__ import annotations

import math

import numpy as np

from ._chunks import by_chunks, row_view

__all__ = ["gelu_forward", "gelu_backward", "gelu_rows", "gelu_erf_forward", "gelu_erf_backward",
           "swiglu_forward", "swiglu_backward", "geglu_forward", "geglu_backward", "softcap_forward",
           "softcap_backward"]

GELU_C = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715


def gelu_forward(x, out=None, tanh_out=None):
    """GELU, tanh approximation (GPT-2's ``gelu_new``). ``out`` may be ``x`` (in place) when
    no backward follows; the cache holds (x, tanh term). Large inputs run in cache-sized row
    chunks spread over the thread pool (same values). In place without ``tanh_out``, the tanh
    term lives in a scratch of one chunk at a time, not a second array of x's size.

    Notes
    -----
    gelu(x) = x/2 (1 + tanh(sqrt(2/π) (x + 0.044715 x³))).
    """
    inplace = out is x
    width = x.shape[-1] if x.ndim else 1
    x2 = row_view(x, width)
    if inplace and tanh_out is None and x2 is not None:  # no cache: a scratch per row chunk
        by_chunks(lambda lo, hi: gelu_rows(x2[lo:hi], x2[lo:hi], np.empty_like(x2[lo:hi]), True),
                  len(x2), width)
        return x, None
    y = np.empty_like(x) if out is None else out
    t = np.empty_like(x) if tanh_out is None else tanh_out
    y2, t2 = row_view(y, width), row_view(t, width)
    if x2 is None or y2 is None or t2 is None:
        gelu_rows(x, y, t, inplace)
    else:
        by_chunks(lambda lo, hi: gelu_rows(x2[lo:hi], y2[lo:hi], t2[lo:hi], inplace), len(x2), width)
    return (x, None) if inplace else (y, (x, t))


def gelu_rows(x, y, t, inplace):
    """GELU (tanh approximation) of x into y (y may be x), t receiving the tanh term
    (overwritten if ``inplace``, then y must be x): the pass of :func:`gelu_forward` on one
    block of rows, without chunking."""
    np.multiply(x, x, out=t)
    t *= GELU_A * GELU_C
    t += GELU_C
    t *= x
    np.tanh(t, out=t)
    if inplace:  # the tanh buffer becomes (1 + t)/2, then x *= it
        t *= 0.5
        t += 0.5
        x *= t
        return
    np.multiply(t, 0.5, out=y)
    y += 0.5
    y *= x


def gelu_backward(dy, cache, out=None):
    """Gradient of :func:`gelu_forward`; ``out`` may be ``dy`` (in place).

    Notes
    -----
    dgelu/dx = (1 + t)/2 + x/2 (1 - t²) sqrt(2/π) (1 + 3·0.044715 x²), t the cached tanh.
    """
    x, t = cache
    d = np.empty_like(dy) if out is None else out
    width = x.shape[-1] if x.ndim else 1
    arrays = [row_view(a, width) for a in (dy, x, t, d)]
    if any(a is None for a in arrays):
        _gelu_grad_rows(dy, x, t, d)
        return d
    dy2, x2, t2, d2 = arrays
    by_chunks(lambda lo, hi: _gelu_grad_rows(dy2[lo:hi], x2[lo:hi], t2[lo:hi], d2[lo:hi]), len(d2), width)
    return d


def _gelu_grad_rows(dy, x, t, d):
    inner = x * x
    inner *= 3 * GELU_A * 0.5 * GELU_C
    inner += 0.5 * GELU_C
    inner *= x
    g = np.multiply(t, t)
    np.subtract(1.0, g, out=g)
    g *= inner
    g += 0.5
    g += 0.5 * t
    np.multiply(g, dy, out=d)


def gelu_erf_forward(x, out=None):
    """Exact GELU (GPT-NeoX, BERT): x Φ(x) with the normal CDF Φ. ``out`` may be ``x``
    when no backward follows.

    Notes
    -----
    gelu(x) = x/2 (1 + erf(x / sqrt(2))); its derivative is Φ(x) + x φ(x).
    """
    from scipy.special import erf
    phi = erf(x * (1.0 / math.sqrt(2.0)))  # (...,)
    phi *= 0.5
    phi += 0.5
    cache = None if out is x else (x, phi)
    return np.multiply(x, phi, out=out), cache


def gelu_erf_backward(dy, cache):
    """Gradient of :func:`gelu_erf_forward`.

    Notes
    -----
    dgelu/dx = Φ(x) + x exp(-x²/2) / sqrt(2π), Φ the cached normal CDF.
    """
    x, phi = cache
    d = np.exp(-0.5 * x * x)
    d *= x * (1.0 / math.sqrt(2.0 * math.pi))
    d += phi
    d *= dy
    return d


def swiglu_forward(gu, out=None, sig_out=None):
    """SwiGLU of a fused ``[gate | up]`` array (..., 2F) -> (..., F): silu(gate) * up.
    ``out`` and ``sig_out`` (..., F) optionally receive the result and the cached σ(gate).

    Notes
    -----
    silu(a) = a σ(a), σ(a) = 1 / (1 + exp(-a)); Llama's MLP is down(silu(gate(x)) * up(x)).

    Examples
    --------
    >>> y, _ = swiglu_forward(np.array([[0.0, 2.0]]))
    >>> y.tolist()
    [[0.0]]
    """
    F = gu.shape[-1] // 2
    y = np.empty(gu.shape[:-1] + (F,), gu.dtype) if out is None else out
    sig = np.empty_like(y) if sig_out is None else sig_out
    arrays = [row_view(a, w) for a, w in ((gu, 2 * F), (y, F), (sig, F))]
    if gu.ndim < 2 or any(a is None for a in arrays):
        _swiglu_rows(gu, y, sig)
    else:  # large inputs in cache-sized row chunks (same values)
        gu2, y2, sig2 = arrays
        by_chunks(lambda lo, hi: _swiglu_rows(gu2[lo:hi], y2[lo:hi], sig2[lo:hi]), len(gu2), F)
    return y, (gu, sig)


def _swiglu_rows(gu, y, sig):
    """y = silu(gate) * up and sig = σ(gate) for rows gu = [gate | up] (..., 2F)."""
    F = gu.shape[-1] // 2
    gate, up = gu[..., :F], gu[..., F:]
    np.negative(gate, out=sig)
    with np.errstate(over="ignore"):  # exp(-gate) = inf gives σ = 0, as it should
        np.exp(sig, out=sig)
    sig += 1.0
    np.reciprocal(sig, out=sig)  # σ(gate)
    np.multiply(gate, sig, out=y)
    y *= up


def swiglu_backward(dy, cache, out=None):
    """Gradient with respect to ``[gate | up]``: (..., 2F), written into ``out`` if given.

    Notes
    -----
    d up = dy silu(a); d gate = dy up σ(a) (1 + a (1 - σ(a))).
    """
    gu, sig = cache
    F = gu.shape[-1] // 2
    dgu = np.empty_like(gu) if out is None else out
    arrays = [row_view(a, w) for a, w in ((dy, F), (gu, 2 * F), (sig, F), (dgu, 2 * F))]
    if gu.ndim < 2 or any(a is None for a in arrays):
        _swiglu_grad_rows(dy, gu, sig, dgu)
    else:  # large inputs in cache-sized row chunks (same values)
        dy2, gu2, sig2, dgu2 = arrays
        by_chunks(lambda lo, hi: _swiglu_grad_rows(dy2[lo:hi], gu2[lo:hi], sig2[lo:hi], dgu2[lo:hi]),
                  len(gu2), F)
    return dgu


def _swiglu_grad_rows(dy, gu, sig, dgu):
    F = gu.shape[-1] // 2
    gate, up = gu[..., :F], gu[..., F:]
    silu = np.multiply(gate, sig, out=dgu[..., :F])  # the gate half is scratch until the end
    np.multiply(dy, silu, out=dgu[..., F:])
    d = np.subtract(1.0, sig)
    d *= gate
    d += 1.0
    d *= sig
    d *= up
    np.multiply(d, dy, out=dgu[..., :F])


def geglu_forward(gu, out=None):
    """GeGLU of a fused ``[gate | up]`` array (..., 2F) -> (..., F): gelu_tanh(gate) * up
    (Gemma's MLP); ``out`` (..., F) optionally receives the result.

    Notes
    -----
    gelu_tanh as in :func:`gelu_forward`; the cache holds the gate's GELU cache and up.

    Examples
    --------
    >>> y, _ = geglu_forward(np.array([[1.0, 2.0]]))
    >>> np.round(y, 4).tolist()
    [[1.6824]]
    """
    F = gu.shape[-1] // 2
    gate, up = gu[..., :F], gu[..., F:]
    act, c_gate = gelu_forward(gate, out=np.empty(gate.shape, gu.dtype))
    y = np.multiply(act, up, out=out)
    return y, (c_gate, act, up)


def geglu_backward(dy, cache, out=None):
    """Gradient of :func:`geglu_forward` with respect to ``[gate | up]`` (..., 2F).

    Notes
    -----
    d up = dy gelu(gate); d gate = dy up gelu'(gate).
    """
    c_gate, act, up = cache
    F = act.shape[-1]
    dgu = np.empty(act.shape[:-1] + (2 * F,), act.dtype) if out is None else out
    np.multiply(dy, act, out=dgu[..., F:])
    dgu[..., :F] = gelu_backward(dy * up, c_gate)
    return dgu


def softcap_forward(x, cap, out=None):
    """Soft-capping cap tanh(x / cap) (Gemma 2's attention scores and final logits), into
    ``out`` (which may be ``x``). The backward needs only the output.

    Examples
    --------
    >>> softcap_forward(np.array([0.0, 100.0]), 5.0).tolist()
    [0.0, 5.0]
    """
    y = np.divide(x, cap, out=out)
    np.tanh(y, out=y)
    y *= cap
    return y


def softcap_backward(dy, y, cap, out=None):
    """Gradient of :func:`softcap_forward` from its output y: dy (1 - (y / cap)²)."""
    t = np.divide(y, cap)
    np.multiply(t, t, out=t)
    np.subtract(1.0, t, out=t)
    return np.multiply(dy, t, out=out)
