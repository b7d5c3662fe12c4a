"""Inverted dropout as a ``*_forward`` / ``*_backward`` pair (training only: ``rng`` None or
p = 0 is the identity).

Examples
--------
>>> import numpy as np
>>> y, keep = dropout_forward(np.ones(4), 0.5, np.random.default_rng(0))
>>> set(y.tolist()) <= {0.0, 2.0}, bool((dropout_backward(np.ones(4), keep) == y).all())
(True, True)
"""
from __future__ import annotations

__all__ = ["dropout_forward", "dropout_backward"]


def dropout_forward(x, p, rng):
    """Inverted dropout: zero each entry with probability p, scale the rest by 1/(1-p).

    ``rng`` None or p == 0 is the identity (evaluation); the cache is the scaled keep-mask.

    Notes
    -----
    y = x ∘ m / (1 - p), m_i ~ Bernoulli(1 - p), so E[y] = x.
    """
    if rng is None or p == 0.0:
        return x, None
    keep = (rng.random(x.shape) >= p).astype(x.dtype)
    keep *= 1.0 / (1.0 - p)
    return x * keep, keep


def dropout_backward(dy, cache):
    """Gradient of :func:`dropout_forward` (the identity when no dropout was applied).

    Notes
    -----
    dx = dy ∘ m / (1 - p), the cached scaled mask.
    """
    return dy if cache is None else dy * cache
