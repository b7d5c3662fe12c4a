"""Shared arithmetic of the estimators: interpolated discounting down to a uniform floor."""
from __future__ import annotations

import contextlib
import warnings

import numpy as np

from .counts import NGramCounts
from ..errors import InputError
from ..vocab import Vocab
from .tables import BackoffTables

__all__ = ["DiscountFallbackWarning", "interpolated_tables", "relative_frequency_tables",
           "count_of_counts", "safe_log", "context_sums", "smoothed_unigram_counts"]


class DiscountFallbackWarning(UserWarning):
    """Discounts could not be estimated from the count-of-counts (too little or artificial
    data); fixed fallback discounts were used instead (lmplz ``--discount_fallback``)."""


@contextlib.contextmanager
def expected_discount_fallback():
    """Silence :class:`DiscountFallbackWarning` where the fallback is expected, not news.

    A small artificial language (the toy grammar's 200 words, each seen many times) has no
    singleton unigram types, so modified Kneser-Ney's unigram discounts cannot be estimated
    and KenLM's fallback is the intended behaviour.

    Examples
    --------
    >>> with expected_discount_fallback():
    ...     pass
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountFallbackWarning)
        yield


def safe_log(p) -> np.ndarray:
    """Natural log with log(0) = -inf and no RuntimeWarning."""
    with np.errstate(divide="ignore"):
        return np.log(p)


def count_of_counts(a: np.ndarray, upto: int = 4) -> list:
    """[t_1, .., t_upto]: how many n-grams have (adjusted) count exactly k."""
    a = np.asarray(a)
    hist = np.bincount(np.minimum(a[a > 0], upto + 1).astype(np.int64), minlength=upto + 2)
    return [int(hist[k]) for k in range(1, upto + 1)]


def context_sums(counts: NGramCounts, m: int, values: np.ndarray) -> np.ndarray:
    """Sum of ``values`` over the order-m n-grams of each order-(m-1) context row."""
    return np.bincount(counts.prefix(m), weights=values, minlength=len(counts.keys[m - 2]))


def smoothed_unigram_counts(counts: NGramCounts, vocab: Vocab) -> np.ndarray:
    """Raw unigram counts with ``<s>`` and ``<unk>`` set to 0 (they get only the uniform floor)."""
    a = counts.counts[0].astype(np.float64).copy()
    _zero_specials(a, vocab)
    return a


def _zero_specials(a: np.ndarray, vocab: Vocab) -> None:
    vocab.mask_never_predicted(a, 0)
    if vocab.unk_id is not None:
        a[vocab.unk_id] = 0


def _n_predictable(vocab: Vocab) -> int:
    """V' = the size of every row's support: the vocabulary without ``<s>``."""
    return len(vocab) - (vocab.never_predicted_id is not None)


def _forbid_bos(p: np.ndarray, vocab: Vocab) -> None:
    vocab.mask_never_predicted(p, 0.0)


def interpolated_tables(counts: NGramCounts, vocab: Vocab, a: list, disc: list, extra: list) -> BackoffTables:
    """Interpolated estimate P(w|h) = u(w|h) + gamma(h) P(w|h'), down to uniform over V'.

    Parameters
    ----------
    a : list of (U_m,) float arrays
        Count of every order-m n-gram (raw or adjusted).
    disc : list of (U_m,) float arrays
        Mass removed from each n-gram (its discount; 0 for Witten-Bell).
    extra : list of (U_{m-1},) float arrays or scalars
        Extra mass per context added to numerator and denominator of gamma (Witten-Bell's
        N1+(h .); 0 for discounting).

    Notes
    -----
    With S(h) = sum_w a(hw) + extra(h): u(w|h) = (a(hw) - d(hw)) / S(h) and
    gamma(h) = (sum_w d(hw) + extra(h)) / S(h); at order 1, P(w) = u(w) + gamma / V'.
    Rows sum to 1 because sum_w u(w|h) + gamma(h) = 1. A context with no continuation has
    gamma = 1 (it backs off untouched).
    """
    V, N = counts.vocab_size, counts.order
    den = a[0].sum() + extra[0]
    gamma0 = (disc[0].sum() + extra[0]) / den
    p = (a[0] - disc[0]) / den + gamma0 / _n_predictable(vocab)  # (V,)
    _forbid_bos(p, vocab)
    logp, logbow = [safe_log(p)], []
    for m in range(2, N + 1):
        ctx = counts.prefix(m)
        S = context_sums(counts, m, a[m - 1]) + extra[m - 1]
        has = S > 0
        S_safe = np.where(has, S, 1.0)
        gamma = np.where(has, (context_sums(counts, m, disc[m - 1]) + extra[m - 1]) / S_safe, 1.0)
        p = (a[m - 1] - disc[m - 1]) / S_safe[ctx] + gamma[ctx] * p[counts.suffix[m - 1]]
        logbow.append(safe_log(gamma))
        logp.append(np.minimum(safe_log(p), 0.0))
    logp[0] = np.minimum(logp[0], 0.0)
    return BackoffTables(V, counts.keys, logp, logbow)


def relative_frequency_tables(counts: NGramCounts, vocab: Vocab, seen_logbow: float,
                              unlisted_logbow: float = 0.0) -> BackoffTables:
    """Tables of c(hw) / c(h.) at every order (MLE, stupid back-off).

    ``seen_logbow`` is the back-off weight of a context seen in training (-inf for MLE:
    an unseen event gets probability 0; log alpha for stupid back-off).
    """
    N = counts.order
    a1 = counts.counts[0].astype(np.float64).copy()
    _forbid_bos(a1, vocab)
    logp, logbow = [safe_log(a1 / a1.sum())], []
    for m in range(2, N + 1):
        a = counts.counts[m - 1].astype(np.float64)
        S = context_sums(counts, m, a)
        logp.append(safe_log(a / S[counts.prefix(m)]))
        logbow.append(np.where(S > 0, seen_logbow, unlisted_logbow))
    return BackoffTables(counts.vocab_size, counts.keys, logp, logbow, unlisted_logbow=unlisted_logbow)


def resolve_discount(name: str, m: int, estimate, valid: bool, override, fallback, stats) -> object:
    """Pick the discount of order m: the user's, the estimate, or the fallback (with a warning)."""
    if override is not None:
        return override
    if valid:
        return estimate
    msg = (f"could not estimate {name} discounts for {m}-grams from count-of-counts "
           f"t1..t4 = {stats} (is this small or artificial data?)")
    if fallback is None:
        raise InputError(msg + "; pass discount_fallback=... to use fixed discounts", order=m,
                         count_of_counts=stats)
    warnings.warn(f"{msg}: substituting fallback discounts {fallback} for {m}-grams, "
                  "as lmplz --discount_fallback does", DiscountFallbackWarning, stacklevel=4)
    return fallback
