"""Numerically stable probability functions on arrays of logits / log-probabilities.

Every function works on float32 and float64 arrays of any leading shape and reduces over
``axis`` (the vocabulary axis, last by default). Natural logs throughout; conversions to
bits and log10 are explicit.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import InputError, TemperatureError

__all__ = [
    "logsumexp", "log_softmax", "softmax", "entropy", "nats_to_bits", "bits_to_nats",
    "nats_to_log10", "log10_to_nats", "surprisal_bits", "LN2", "LN10",
]

LN2 = math.log(2.0)
LN10 = math.log(10.0)


def _as_float_array(x, name: str = "logits") -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise InputError(f"{name} must be a numeric array, got dtype {arr.dtype}", dtype=str(arr.dtype))
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    if arr.ndim == 0 or arr.shape[-1] == 0:
        raise InputError(f"{name} must have a non-empty last axis, got shape {arr.shape}", shape=arr.shape)
    return arr


def _check_finite_logits(arr: np.ndarray, name: str = "logits") -> None:
    """-inf is a legal logit (probability 0); NaN and +inf are not."""
    bad = np.isnan(arr) | np.isposinf(arr)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(f"{name} contain NaN or +inf (first at index {index}: {arr[index]})",
                         index=index, value=float(arr[index]))


def logsumexp(x, axis: int = -1, keepdims: bool = False) -> np.ndarray:
    """log(sum(exp(x))) along ``axis`` without overflow.

    Notes
    -----
    logsumexp(x) = m + log(sum(exp(x - m))) with m = max(x); a slice of all -inf gives -inf.

    Examples
    --------
    >>> round(float(logsumexp(np.log([0.25, 0.75]))), 12)
    0.0
    """
    arr = _as_float_array(x)
    _check_finite_logits(arr)
    m = np.max(arr, axis=axis, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m).astype(arr.dtype, copy=False)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(arr - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def log_softmax(x, axis: int = -1) -> np.ndarray:
    """Normalized log-probabilities: x - logsumexp(x).

    Notes
    -----
    log P(v) = u_v - log sum_w exp(u_w). A slice of all -inf has no distribution and
    raises :class:`InputError`.
    """
    arr = _as_float_array(x)
    lse = logsumexp(arr, axis=axis, keepdims=True)
    if np.isneginf(lse).any():
        raise InputError("logits are -inf everywhere in some row: no distribution to normalize")
    return arr - lse


def softmax(u, temperature: float = 1.0, axis: int = -1) -> np.ndarray:
    """Probabilities softmax(u / T).

    Parameters
    ----------
    u : array_like
        Logits (or log-probabilities), any leading shape.
    temperature : float
        T > 0. T -> 0 gives the exact argmax (ties share the mass equally, no division by
        zero); T = inf gives the uniform distribution over the entries that are not -inf.

    Notes
    -----
    p_v = exp(u_v / T) / sum_w exp(u_w / T).

    Examples
    --------
    >>> softmax([1.0, 2.0], temperature=1e-300).tolist()
    [0.0, 1.0]
    """
    t = _check_temperature(temperature)
    arr = _as_float_array(u)
    _check_finite_logits(arr)
    if math.isinf(t):
        return _normalize(np.isfinite(arr).astype(arr.dtype), axis)
    m = np.max(arr, axis=axis, keepdims=True)
    if np.isneginf(m).any():
        raise InputError("logits are -inf everywhere in some row: no distribution to normalize")
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        scaled = (arr - m) / t
    if not np.isfinite(scaled[np.isfinite(arr)]).all() or t < np.finfo(arr.dtype).tiny:
        return _normalize((arr == m).astype(arr.dtype), axis)  # T -> 0: argmax, ties split
    e = np.exp(scaled)
    return e / e.sum(axis=axis, keepdims=True)


def _normalize(mass: np.ndarray, axis: int) -> np.ndarray:
    return mass / mass.sum(axis=axis, keepdims=True)


def _check_temperature(temperature) -> float:
    try:
        t = float(temperature)
    except (TypeError, ValueError):
        raise TemperatureError(f"temperature must be a number > 0, got {temperature!r}",
                               value=temperature) from None
    if math.isnan(t) or t <= 0:
        raise TemperatureError(f"temperature must be > 0 (use a small value for argmax), got {temperature!r}",
                               value=temperature, limit=0.0)
    return t


def entropy(logp, axis: int = -1, base: float = math.e) -> np.ndarray:
    """Entropy H = -sum p log p of distributions given as log-probabilities.

    Parameters
    ----------
    logp : array_like
        Normalized log-probabilities (natural log); -inf entries contribute 0.
    base : float
        Logarithm base of the result: e (nats, default) or 2 (bits).
    """
    arr = _as_float_array(logp, "log-probabilities")
    p = np.exp(arr)
    terms = np.where(p > 0, -p * np.where(np.isfinite(arr), arr, 0.0), 0.0)
    h = terms.sum(axis=axis)
    return h / math.log(base) if base != math.e else h


def nats_to_bits(x):
    """Convert nats to bits (divide by ln 2)."""
    return np.asarray(x) / LN2


def bits_to_nats(x):
    """Convert bits to nats (multiply by ln 2)."""
    return np.asarray(x) * LN2


def nats_to_log10(x):
    """Convert natural-log values to log10 (divide by ln 10)."""
    return np.asarray(x) / LN10


def log10_to_nats(x):
    """Convert log10 values (ARPA files) to natural log (multiply by ln 10)."""
    return np.asarray(x) * LN10


def surprisal_bits(logprob):
    """Surprisal in bits, -log2 P, from a natural-log probability."""
    return -np.asarray(logprob) / LN2
