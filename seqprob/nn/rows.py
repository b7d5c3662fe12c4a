"""Single-row kernels of the decoding path: one vector (C,) in, no cache, no row chunking.

Batch-1 decoding is bound by the overhead of numpy calls, not by arithmetic, so each kernel
here does the work of its batched counterpart with as few calls as it can (scalars instead
of (1,)-shaped broadcasts, optional preallocated buffers). The values are those of the
batched kernels (tests compare them).

Examples
--------
>>> import numpy as np
>>> layer_norm_row(np.array([1.0, 3.0]), np.ones(2), None, eps=0.0).tolist()
[-1.0, 1.0]
"""
from __future__ import annotations

import math

import numpy as np

from .activations import gelu_rows

__all__ = ["layer_norm_row", "rms_norm_row", "log_softmax_row", "gelu_row_inplace"]


def layer_norm_row(x, g, b, eps=1e-5, out=None, tmp=None, ones=None):
    """:func:`~seqprob.nn.norms.layer_norm_forward` of one vector x (C,) without a cache.

    ``out`` and ``tmp`` (each (C,), ``out`` not ``x``) are optional buffers: six numpy calls.
    With ``ones`` (C,) of ones the mean is the dot product x · 1 / C (one BLAS call, about
    half the cost of numpy's reduction on a short row).

    Notes
    -----
    y = (x - mean(x)) g / sqrt(mean((x - mean(x))²) + eps) + b.
    """
    total = np.add.reduce(x) if ones is None else np.dot(x, ones)
    xc = np.subtract(x, total / len(x), out=out)  # (C,)
    scale = np.multiply(g, 1.0 / math.sqrt(float(np.dot(xc, xc)) / len(x) + eps), out=tmp)
    y = np.multiply(xc, scale, out=xc)
    if b is not None:
        y += b
    return y


def rms_norm_row(x, g, eps=1e-6, out=None, tmp=None):
    """:func:`~seqprob.nn.norms.rms_norm_forward` of one vector x (C,) without a cache.

    Notes
    -----
    y = x g / sqrt(mean(x²) + eps).
    """
    scale = np.multiply(g, 1.0 / math.sqrt(float(np.dot(x, x)) / len(x) + eps), out=tmp)
    return np.multiply(x, scale, out=out)


def log_softmax_row(u, tmp=None):
    """:func:`~seqprob.nn.softmax.log_softmax_inplace` of one vector u (V,), overwriting it:
    the max and the log-sum-exp are scalars, so no (1,)-shaped broadcasts; ``tmp`` (V,) is an
    optional buffer for the exponentials. Same values as the batched kernel.

    Notes
    -----
    log_softmax(u)_v = u_v - m - log Σ_w exp(u_w - m), m = max_w u_w.

    Examples
    --------
    >>> np.exp(log_softmax_row(np.log(np.array([1.0, 3.0])))).round(12).tolist()
    [0.25, 0.75]
    """
    u -= np.maximum.reduce(u)  # NaN propagates to every entry
    u -= np.log(np.add.reduce(np.exp(u, out=tmp)))
    return u


def gelu_row_inplace(u, t):
    """:func:`~seqprob.nn.activations.gelu_forward` of one vector u (F,) in place, ``t`` (F,) a
    scratch buffer: the same operations as the batched kernel, without its row blocking.

    Notes
    -----
    gelu(u) = u/2 (1 + tanh(sqrt(2/π) (u + 0.044715 u³))).
    """
    gelu_rows(u, u, t, True)
    return u
