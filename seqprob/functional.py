"""Numerically stable probability functions on arrays of logits / log-probabilities.

Every function works on float32 and float64 arrays of any leading shape and reduces over
``axis`` (the vocabulary axis, last by default). Natural logs throughout; conversions to
bits and log10 are explicit. :func:`plan_windows` is the one sliding-window plan for sequences
longer than a model's context: the GPT's own ``stride`` and :mod:`seqprob.scoring.windows` both use it.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .errors import InputError, TemperatureError

__all__ = [
    "logsumexp", "log_softmax", "softmax", "entropy", "nats_to_bits", "bits_to_nats",
    "nats_to_log10", "log10_to_nats", "surprisal_bits", "LN2", "LN10", "plan_windows", "check_stride",
    "TokenStats", "target_stats",
]

LN2 = math.log(2.0)
LN10 = math.log(10.0)


def _as_float_array(x, name: str = "logits", axis: int = -1) -> np.ndarray:
    """``x`` as a float array with a non-empty ``axis`` (integers become float64)."""
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as exc:  # ragged nested sequences
        raise InputError(f"{name} must be a rectangular numeric array: {exc}") from None
    if arr.dtype.kind not in "fiu":
        raise InputError(f"{name} must be a numeric array, got dtype {arr.dtype}", dtype=str(arr.dtype))
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    if arr.ndim == 0:
        raise InputError(f"{name} must be an array with at least one axis, got a scalar", shape=())
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)) or not -arr.ndim <= axis < arr.ndim:
        raise InputError(f"axis {axis!r} is out of range for {name} of shape {arr.shape}",
                         value=axis, shape=arr.shape)
    if arr.shape[axis] == 0:
        raise InputError(f"{name} must have a non-empty axis {axis}, got shape {arr.shape}", shape=arr.shape)
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

    Parameters
    ----------
    x : array_like
        Logits or log-probabilities (float32 or float64, any shape); -inf is allowed,
        NaN and +inf raise :class:`InputError`.
    axis : int
        The axis to reduce (the vocabulary axis, last by default).
    keepdims : bool
        Keep the reduced axis with length 1.

    Notes
    -----
    logsumexp(x) = m + log(sum(exp(x - m))) with m = max(x); a slice of all -inf gives -inf.

    Examples
    --------
    >>> round(float(logsumexp(np.log([0.25, 0.75]))), 12)
    0.0
    >>> float(logsumexp([1000.0, 1000.0])) == 1000 + math.log(2)
    True
    """
    arr = _as_float_array(x, axis=axis)
    _check_finite_logits(arr)
    m = np.max(arr, axis=axis, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m).astype(arr.dtype, copy=False)
    with np.errstate(divide="ignore", over="ignore"):  # x - m may overflow to -inf: exp gives 0
        out = np.log(np.sum(np.exp(arr - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def log_softmax(x, axis: int = -1) -> np.ndarray:
    """Normalized log-probabilities: x - logsumexp(x).

    Notes
    -----
    log P(v) = u_v - log sum_w exp(u_w). A slice of all -inf has no distribution and
    raises :class:`InputError`.

    Examples
    --------
    >>> np.exp(log_softmax([0.0, 0.0, math.log(2)])).round(6).tolist()
    [0.25, 0.25, 0.5]
    """
    arr = _as_float_array(x, axis=axis)
    lse = logsumexp(arr, axis=axis, keepdims=True)
    if np.isneginf(lse).any():
        raise InputError("logits are -inf everywhere in some row: no distribution to normalize")
    with np.errstate(over="ignore"):
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
        T <= 0 or NaN raises :class:`TemperatureError`.
    axis : int
        The vocabulary axis (last by default).

    Notes
    -----
    p_v = exp((u_v - max u) / T) / sum_w exp((u_w - max u) / T). Subtracting the maximum makes
    every exponent <= 0, so nothing overflows; for tiny T the non-maximal exponents underflow to
    exactly 0, which is the argmax limit.

    Examples
    --------
    >>> softmax([1.0, 2.0], temperature=1e-300).tolist()
    [0.0, 1.0]
    >>> softmax([1.0, 2.0], temperature=math.inf).tolist()
    [0.5, 0.5]
    """
    t = _check_temperature(temperature)
    arr = _as_float_array(u, axis=axis)
    _check_finite_logits(arr)
    if math.isinf(t):
        return _normalize(np.isfinite(arr).astype(arr.dtype), axis)
    m = np.max(arr, axis=axis, keepdims=True)
    if np.isneginf(m).any():
        raise InputError("logits are -inf everywhere in some row: no distribution to normalize")
    if t < np.finfo(arr.dtype).tiny:  # T would round to 0 in this dtype: the limit itself
        return _normalize((arr == m).astype(arr.dtype), axis)  # argmax, ties split
    with np.errstate(over="ignore", under="ignore"):
        e = np.exp((arr - m) / t)  # exponents <= 0; the maxima give exactly 1
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


def _check_normalized(arr: np.ndarray, axis: int) -> None:
    """InputError unless every distribution along ``axis`` has logsumexp 0 (sum p = 1)."""
    tol = max(1e-6, 1000 * float(np.finfo(arr.dtype).eps))
    with np.errstate(divide="ignore"):
        total = logsumexp(arr.astype(np.float64), axis=axis)
    off = np.abs(total) > tol
    if off.any():
        where = tuple(int(i) for i in np.argwhere(np.atleast_1d(off))[0])
        value = float(np.atleast_1d(total)[where])
        raise InputError(f"entropy needs normalized log-probabilities, but distribution {where} has "
                         f"logsumexp {value:.6g} (sum p = {math.exp(min(value, 700)):.6g}, tolerance "
                         f"{tol:g}): apply log_softmax to logits first", value=value, limit=tol)


def entropy(logp, axis: int = -1, base: float = math.e, check_normalized: bool = True) -> np.ndarray:
    """Entropy H = -sum p log p of distributions given as log-probabilities.

    Parameters
    ----------
    logp : array_like
        Normalized log-probabilities (natural log); -inf entries contribute 0.
    axis : int
        The vocabulary axis (last by default).
    base : float
        Logarithm base of the result: e (nats, default) or 2 (bits).
    check_normalized : bool
        Raise :class:`InputError` when a distribution's ``logsumexp`` is not 0 (within
        ``max(1e-6, 1000 * eps)`` of the dtype): logits are not log-probabilities, apply
        :func:`log_softmax` first. Turn off only for knowingly unnormalized scores.

    Notes
    -----
    H = -sum_v p_v log p_v, with 0 log 0 = 0; in bits H / ln 2.

    Examples
    --------
    >>> float(entropy(np.log([0.5, 0.5]), base=2))
    1.0
    """
    arr = _as_float_array(logp, "log-probabilities", axis=axis)
    _check_finite_logits(arr, "log-probabilities")
    if check_normalized:
        _check_normalized(arr, axis)
    p = np.exp(arr)
    terms = np.where(p > 0, -p * np.where(np.isfinite(arr), arr, 0.0), 0.0)
    h = terms.sum(axis=axis)
    return h / math.log(base) if base != math.e else h


class TokenStats(NamedTuple):
    """What scoring needs of each position's next-token distribution: log P of the token that
    is there (nats, float64), the distribution's entropy (nats, float64) and the token's rank
    (int64, 1 = the most probable)."""

    logprob: np.ndarray
    entropy: np.ndarray
    rank: np.ndarray


#: Floats of one float64 block of :func:`target_stats` (2 MiB): its two scratch blocks and
#: mask stay in cache, however many rows the caller hands over.
STATS_BLOCK_FLOATS = 1 << 18


def target_stats(logp, targets, check: bool = True) -> TokenStats:
    """log P, entropy and rank of ``targets`` under rows of log-probabilities, in float64.

    Parameters
    ----------
    logp : ndarray, shape (N, V)
        Normalized log-probabilities (any float dtype); -inf entries are probability 0.
    targets : ndarray of int, shape (N,)
        The token of each row.
    check : bool
        Raise :class:`InputError` for NaN or +inf in a row (else its entropy is NaN or inf,
        for a caller that names the cause itself).

    Returns
    -------
    TokenStats
        (N,) arrays ``logprob``, ``entropy`` (nats) and ``rank``.

    Notes
    -----
    logprob_i = logp[i, x_i]; entropy_i = -sum_v p_v log p_v with 0 log 0 = 0, summed in
    float64; rank_i = 1 + #{v : logp[i, v] > logp[i, x_i]} (a tie ranks with the token). Rows
    go through float64 ``STATS_BLOCK_FLOATS`` at a time, each row summed whole, so the
    numbers do not depend on how many rows a call gets.

    Examples
    --------
    >>> s = target_stats(np.log([[0.5, 0.25, 0.25]]), np.array([1]))
    >>> float(s.entropy[0] / LN2), int(s.rank[0])
    (1.5, 2)
    """
    N, V = logp.shape
    out = TokenStats(np.empty(N), np.empty(N), np.empty(N, dtype=np.int64))
    step = max(1, min(N, STATS_BLOCK_FLOATS // V))
    r, e, mask = np.empty((step, V)), np.empty((step, V)), np.empty((step, V), dtype=bool)
    for i in range(0, N, step):
        n = min(step, N - i)
        np.copyto(r[:n], logp[i:i + n])  # (n, V) float64
        _block_stats(r[:n], targets[i:i + n], e[:n], mask[:n], out, i)
        if check and not np.isfinite(out.entropy[i:i + n]).all():
            _check_finite_logits(logp[i:i + n], "log-probabilities")
    return out


def _block_stats(r, targets, e, mask, out: TokenStats, at: int) -> None:
    """Fill rows ``at .. at + len(r)`` of ``out`` from float64 rows ``r`` (n, V); ``e`` and
    ``mask`` are scratch of r's shape."""
    n = len(r)
    lp = out.logprob[at:at + n]
    lp[:] = r[np.arange(n), targets]
    np.greater(r, lp[:, None], out=mask)
    out.rank[at:at + n] = 1 + np.count_nonzero(mask, axis=1)
    with np.errstate(over="ignore", invalid="ignore"):  # a bad row: its entropy is not finite
        np.exp(r, out=e)
        np.greater(e, 0, out=mask)
        np.multiply(e, r, out=e, where=mask)  # p log p; p = 0 (log p = -inf) stays 0
        h = np.sum(e, axis=1)  # (n,) each row summed whole (pairwise), whatever n is
    np.negative(h, out=out.entropy[at:at + n])


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


# ----------------------------------------------------------------------------- sliding windows
def check_stride(stride, width: int, bos_per_window: bool = False) -> int:
    """``stride`` as an int in [1, W'] (W' = width, minus 1 with ``bos_per_window``), or
    :class:`InputError` naming the bad value and the limit."""
    limit = width - int(bos_per_window)
    if isinstance(stride, bool) or not isinstance(stride, (int, np.integer)) or not 1 <= stride <= limit:
        raise InputError(f"stride must be an integer in [1, {limit}] (the model's context {width}"
                         f"{' minus the <s> of each window' if bos_per_window else ''}), got {stride!r}",
                         value=stride, limit=limit)
    return int(stride)


def plan_windows(n: int, width: int, stride: int, bos_per_window: bool = False) -> list:
    """Windows [(start, end, first_new)] over n rows: inputs ``start:end`` give rows
    ``first_new:end``.

    Examples
    --------
    >>> plan_windows(10, 4, 2)
    [(0, 4, 0), (2, 6, 4), (4, 8, 6), (6, 10, 8)]
    >>> plan_windows(9, 4, 3)  # the last window is right-aligned
    [(0, 4, 0), (3, 7, 4), (5, 9, 7)]
    """
    inner = width - int(bos_per_window)
    windows = [(0, min(n, width), 0)]
    done = min(n, width)
    while done < n:
        end = min(done + stride, n)
        start = max(end - inner, 0)
        windows.append((start, end, done))
        done = end
    return windows
