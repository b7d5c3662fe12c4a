"""Count-based estimators: MLE, add-k, absolute discounting, Witten-Bell, stupid back-off."""
from __future__ import annotations

import math

import numpy as np

from ..checks import check_real
from .counts import NGramCounts
from ..errors import InputError
from ..vocab import Vocab
from ._interpolate import (_n_predictable, count_of_counts, interpolated_tables,
                           relative_frequency_tables, resolve_discount, safe_log,
                           smoothed_unigram_counts)
from .base import NGramModel
from .tables import BackoffTables, expand_children, ngram_rows, segments_of_batch

__all__ = ["MLE", "AddK", "Laplace", "AbsoluteDiscount", "WittenBell", "StupidBackoff"]


class MLE(NGramModel):
    """Maximum-likelihood n-gram model: relative frequencies, zeros shown honestly.

    Notes
    -----
    P(w | h) = c(h w) / c(h .) for a context h seen in training: an event never seen after
    h gets probability 0 (log P = -inf, perplexity inf). For a context never seen in
    training the row is that of the longest seen suffix of h (down to the unigram
    c(w) / N), so every row is still a distribution that sums to 1. ``<s>`` gets 0.

    Examples
    --------
    >>> m = MLE(order=2).fit(["a b", "a a"])
    >>> float(np.exp(m.token_logprobs([1, 3, 4])[1]))  # P(b | a) = c(a b) / c(a .) = 1/3
    0.3333333333333333
    """

    def _estimate(self, counts: NGramCounts, vocab: Vocab) -> None:
        self.tables_ = relative_frequency_tables(counts, vocab, seen_logbow=-math.inf)


class StupidBackoff(NGramModel):
    """Stupid back-off (Brants et al. 2007): relative frequencies, alpha per back-off step.

    Scores only: the rows are *not* probability distributions (``normalized = False``), so
    there is no perplexity in the strict sense and no ARPA export.

    Parameters
    ----------
    alpha : float
        Back-off factor in (0, 1] (0.4 in the paper).

    Notes
    -----
    S(w | h) = c(h w) / c(h .) if c(h w) > 0, else alpha * S(w | h'); S(w) = c(w) / N.

    Examples
    --------
    >>> m = StupidBackoff(order=2, alpha=0.4).fit(["a b", "a a"])
    >>> v = m.vocab
    >>> np.exp(m.token_logprobs([v.bos_id, v.id("b")])).round(4)  # 0.4 * c(b) / N = 0.4 / 6
    array([0.0667])
    """

    normalized = False

    def __init__(self, order: int = 3, alpha: float = 0.4, min_count: int = 1,
                 chunk_chars: int = 1 << 23, progress: bool | None = None):
        super().__init__(order, min_count, chunk_chars, progress)
        self.alpha = alpha

    def _check_params(self) -> None:
        super()._check_params()
        check_real("alpha", self.alpha, low=0, high=1.0, low_open=True)

    def _estimate(self, counts: NGramCounts, vocab: Vocab) -> None:
        la = math.log(float(self.alpha))
        self.tables_ = relative_frequency_tables(counts, vocab, seen_logbow=la, unlisted_logbow=la)


class WittenBell(NGramModel):
    """Interpolated Witten-Bell smoothing.

    Notes
    -----
    P(w | h) = (c(h w) + N1+(h .) P(w | h')) / (c(h .) + N1+(h .)), with N1+(h .) the number
    of distinct words seen after h; the unigram level interpolates with the uniform
    distribution over V' (the vocabulary without ``<s>``). ``<unk>`` gets only that floor.

    Examples
    --------
    >>> m = WittenBell(order=2).fit(["a b", "a a"])
    >>> v = m.vocab
    >>> np.exp(m.token_logprobs([v.bos_id, v.id("a"), v.id("b"), v.eos_id])).round(4)
    array([0.8056, 0.2639, 0.6528])
    """

    def _estimate(self, counts: NGramCounts, vocab: Vocab) -> None:
        a = [smoothed_unigram_counts(counts, vocab)]
        a += [counts.counts[m - 1].astype(np.float64) for m in range(2, counts.order + 1)]
        disc = [np.zeros_like(x) for x in a]
        extra = [float((a[0] > 0).sum())]
        extra += [np.bincount(counts.prefix(m), minlength=len(counts.keys[m - 2])).astype(np.float64)
                  for m in range(2, counts.order + 1)]
        self.tables_ = interpolated_tables(counts, vocab, a, disc, extra)


class AbsoluteDiscount(NGramModel):
    """Interpolated absolute discounting with one discount per order (Ney et al. 1994).

    Parameters
    ----------
    discount : float, list of float, or None
        Fixed discount(s) in (0, 1] (one for all orders, or one per order). Default: estimated
        per order as D = t1 / (t1 + 2 t2) from the count-of-counts of raw counts.
    discount_fallback : float or None
        Used (with a :class:`DiscountFallbackWarning`) for an order whose D cannot be estimated
        (t1 = 0); None raises :class:`~seqprob.errors.InputError` instead.

    Notes
    -----
    P(w | h) = max(c(h w) - D, 0) / c(h .) + D N1+(h .) / c(h .) P(w | h'); at the bottom,
    P(w) = max(c(w) - D, 0) / N + D N1+(.) / N / V' (``<s>`` and ``<unk>`` count 0).

    Examples
    --------
    >>> m = AbsoluteDiscount(order=2, discount=0.75).fit(["a b c", "a c b", "b a"])
    >>> m.discounts_
    [0.75, 0.75]
    """

    def __init__(self, order: int = 3, discount=None, discount_fallback: float | None = 0.5,
                 min_count: int = 1, chunk_chars: int = 1 << 23, progress: bool | None = None):
        super().__init__(order, min_count, chunk_chars, progress)
        self.discount = discount
        self.discount_fallback = discount_fallback

    _counts_name = "absolute-discounting"

    def _check_params(self) -> None:
        super()._check_params()
        _per_order(self.discount, int(self.order), "discount", upper=1.0)
        if self.discount_fallback is not None:
            check_real("discount_fallback", self.discount_fallback, low=0, high=1.0, low_open=True)

    def _discount_counts(self, counts: NGramCounts, vocab: Vocab) -> list:
        return [smoothed_unigram_counts(counts, vocab)] + \
            [counts.counts[m - 1].astype(np.float64) for m in range(2, counts.order + 1)]

    def _stats(self, counts: NGramCounts, a: list) -> list:
        return [count_of_counts(x) for x in a]

    def _estimate(self, counts: NGramCounts, vocab: Vocab) -> None:
        a = self._discount_counts(counts, vocab)
        stats = self._stats(counts, a)
        fixed = _per_order(self.discount, counts.order, "discount", upper=1.0)
        self.discounts_ = []
        for m, t in enumerate(stats, start=1):
            t1, t2 = t[0], t[1]
            est = t1 / (t1 + 2 * t2) if t1 > 0 else 0.0
            d = resolve_discount(self._counts_name, m, est, t1 > 0, fixed[m - 1] if fixed else None,
                                 self.discount_fallback, t)
            self.discounts_.append(float(d))
        disc = [np.where(x > 0, np.minimum(d, x), 0.0) for x, d in zip(a, self.discounts_)]
        extra = [0.0] * counts.order
        self.tables_ = interpolated_tables(counts, vocab, a, disc, extra)


def _per_order(value, order: int, name: str, upper: float):
    """None, one number for all orders, or one per order -> list per order (validated)."""
    if value is None:
        return None
    if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
        return [check_real(name, value, low=0, high=upper, low_open=True)] * order
    values = list(value)
    if len(values) != order:
        raise InputError(f"{name} needs one value per order ({order}), got {len(values)}",
                         value=values, limit=order)
    return [check_real(name, v, low=0, high=upper, low_open=True) for v in values]


class AddK(NGramModel):
    """Add-k (Lidstone) smoothing of the order-N relative frequencies; k = 1 is Laplace.

    Parameters
    ----------
    k : float
        Pseudo-count added to every event, > 0.

    Notes
    -----
    P(w | h) = (c(h w) + k) / (c(h .) + k V') for every w except ``<s>``, with h the last N-1
    tokens (fewer at the start of a sentence: the whole history since ``<s>``) and V' the
    vocabulary size without ``<s>``. A context never seen gives the uniform 1 / V'. Not a
    back-off model: for N > 1 it cannot be written as an ARPA file exactly.

    Examples
    --------
    >>> m = AddK(order=2, k=0.5).fit(["a b", "a"])
    >>> v = m.vocab  # V' = 4: <unk> </s> a b
    >>> round(float(np.exp(m.token_logprobs([v.bos_id, v.id("b")])[0])), 6)  # 0.5 / (2 + 0.5 * 4)
    0.125
    """

    #: Order > 1 scores from its counts, not from back-off tables.
    scores_from_tables = False

    def __init__(self, order: int = 3, k: float = 1.0, min_count: int = 1,
                 chunk_chars: int = 1 << 23, progress: bool | None = None):
        super().__init__(order, min_count, chunk_chars, progress)
        self.k = k

    def _check_params(self) -> None:
        super()._check_params()
        check_real("k", self.k, low=0, low_open=True)

    def _estimate(self, counts: NGramCounts, vocab: Vocab) -> None:
        self.k_ = float(self.k)
        self.n_predictable_ = _n_predictable(vocab)
        self.context_totals_ = [None] + [
            np.bincount(counts.prefix(m), weights=counts.counts[m - 1], minlength=len(counts.keys[m - 2]))
            for m in range(2, counts.order + 1)]
        self._bos = vocab.never_predicted_id
        self.tables_ = self._unigram_tables(counts) if counts.order == 1 else None

    def _unigram_tables(self, counts: NGramCounts) -> BackoffTables:
        c = counts.counts[0].astype(np.float64)
        p = (c + self.k_) / (c.sum() + self.k_ * self.n_predictable_)
        if self._bos is not None:
            p[self._bos] = 0.0
        return BackoffTables(counts.vocab_size, counts.keys[:1], [safe_log(p)], [])

    def _tables(self):
        self._check_fitted()
        if self.tables_ is None:
            raise InputError(f"AddK(order={self.order}) is not a back-off model: its probability of "
                             "an unseen event, k / (c(h) + k V'), is not a multiple of a lower-order "
                             "distribution, so it has no ARPA form (only order 1 has one)",
                             order=self.order)
        return self.tables_

    def _lookup(self, stream, seg):
        """Per position: (order used, context total c(h .), event count c(h w))."""
        counts, N = self.counts_, self.counts_.order
        offset = np.arange(len(stream), dtype=np.int64) - seg  # (L,)
        m_used = np.minimum(offset + 1, N)
        rows = ngram_rows(counts.keys, counts.vocab_size, stream, seg, N)
        total = np.zeros(len(stream))
        event = np.zeros(len(stream))
        for m in range(1, N + 1):
            sel = np.flatnonzero((m_used == m) & (offset >= 1))
            child = rows[m - 1][sel]
            event[sel] = np.where(child >= 0, counts.counts[m - 1][np.maximum(child, 0)], 0)
            if m == 1:
                total[sel] = counts.counts[0].sum()
            else:
                ctx = rows[m - 2][sel - 1]
                total[sel] = np.where(ctx >= 0, self.context_totals_[m - 1][np.maximum(ctx, 0)], 0)
        return total, event

    def _score_stream(self, stream, seg):
        if self.tables_ is not None:
            return self.tables_.score_stream(stream, seg)
        total, event = self._lookup(stream, seg)
        out = safe_log((event + self.k_) / (total + self.k_ * self.n_predictable_))
        if self._bos is not None:
            out[stream == self._bos] = -np.inf
        return out

    def _logprobs(self, batch):
        if self.tables_ is not None:
            return self.tables_.logprob_rows(batch)
        B, T = batch.shape
        counts, N, V = self.counts_, self.counts_.order, self.counts_.vocab_size
        stream, seg = segments_of_batch(batch)
        offset = np.arange(len(stream), dtype=np.int64) - seg  # (B*T,)
        rows = ngram_rows(counts.keys, V, stream, seg, N - 1)
        kv = self.k_ * self.n_predictable_
        m_next = np.minimum(offset + 2, N)  # order used to predict the next token
        ctx = np.full(len(stream), -1, dtype=np.int64)
        for m in range(2, N + 1):
            sel = m_next == m
            ctx[sel] = rows[m - 2][sel]
        total = np.zeros(len(stream))
        for m in range(2, N + 1):
            sel = np.flatnonzero((m_next == m) & (ctx >= 0))
            total[sel] = self.context_totals_[m - 1][ctx[sel]]
        out = np.repeat(safe_log(self.k_ / (total + kv))[:, None], V, axis=1)  # (B*T, V)
        for m in range(2, N + 1):
            pos = np.flatnonzero((m_next == m) & (ctx >= 0))
            if not len(pos):
                continue
            lo = np.searchsorted(counts.keys[m - 1], ctx[pos] * V)
            hi = np.searchsorted(counts.keys[m - 1], (ctx[pos] + 1) * V)
            r, child = expand_children(pos, lo, hi)
            out[r, counts.keys[m - 1][child] % V] = safe_log(
                (counts.counts[m - 1][child] + self.k_) / (total[r] + kv))
        self.vocab_.mask_never_predicted(out, -np.inf)
        return out.reshape(B, T, V)

    def _context_size(self) -> int:
        return max(self.counts_.order - 1, 1)


class Laplace(AddK):
    """Add-one smoothing: :class:`AddK` with k = 1.

    Notes
    -----
    P(w | h) = (c(h w) + 1) / (c(h .) + V').

    Examples
    --------
    >>> Laplace(order=2).fit(["a b"]).k
    1.0
    """

    def __init__(self, order: int = 3, min_count: int = 1, chunk_chars: int = 1 << 23,
                 progress: bool | None = None):
        super().__init__(order, 1.0, min_count, chunk_chars, progress)
