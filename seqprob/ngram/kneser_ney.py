"""Interpolated Kneser-Ney and modified Kneser-Ney, computed exactly as KenLM's ``lmplz``."""
from __future__ import annotations

import numpy as np

from ..checks import check_real
from ..errors import InputError
from ..vocab import Vocab
from ._interpolate import count_of_counts, interpolated_tables, resolve_discount
from .counts import NGramCounts
from .estimators import AbsoluteDiscount
from .base import NGramModel
from .prune import check_prune_thresholds, count_prune_discounts, subset_tables

__all__ = ["KneserNey", "ModifiedKneserNey", "adjusted_counts", "mkn_discounts", "kenlm_quirk_rows"]


def adjusted_counts(counts: NGramCounts, vocab: Vocab) -> list:
    """KenLM's adjusted counts a_m of every order (``lm/builder/adjust_counts.cc``).

    Notes
    -----
    The highest order keeps raw counts; a lower-order n-gram starting with ``<s>`` keeps its
    raw count; every other lower-order n-gram g gets its continuation count
    N1+(. g) = #{v : v g was seen} (``<s>`` counts as a left word). Unigram ``<s>`` and
    ``<unk>`` get 0: ``<unk>`` receives only interpolated mass.

    Examples
    --------
    >>> m = ModifiedKneserNey(order=2, discounts=[(0.5, 1, 1.5)] * 2).fit(["a b", "b a b"])
    >>> [a.tolist() for a in adjusted_counts(m.counts_, m.vocab)]  # ids <unk> <s> </s> a b
    [[0, 0, 1, 2, 2], [1, 1, 2, 2, 1]]
    """
    N = counts.order
    out = []
    for m in range(1, N + 1):
        raw = counts.counts[m - 1]
        if m == N:
            a = raw.copy()
        else:
            a = counts.continuation(m)
            if m >= 2:
                initial = counts.first(m) == vocab.bos_id
                a[initial] = raw[initial]
        if m == 1:
            vocab.mask_never_predicted(a, 0)
            if vocab.unk_id is not None:
                a[vocab.unk_id] = 0
        out.append(a)
    return out


def kenlm_quirk_rows(counts: NGramCounts, vocab: Vocab) -> list:
    """Rows (per order 1 .. N-1, or -1) whose raw count lmplz puts into the count-of-counts.

    lmplz walks the highest-order n-grams (padded on the left with ``<s>``) in suffix order
    and, when it reaches the end, enters the still-open lower-order n-grams -- the suffixes
    of the last one -- with their raw count instead of their adjusted count
    (kpu/kenlm issues 405 and 427). This reproduces that choice.
    """
    N, bos = counts.order, vocab.bos_id
    cands = [counts.words(N)]
    for m in range(2, N):
        w = counts.words(m)
        w = w[w[:, 0] == bos]
        cands.append(np.column_stack([np.full((len(w), N - m), bos), w]))
    full = np.concatenate(cands)  # (n, N) left-padded with <s>
    # suffix order: compare the last word first; lexsort uses its last key as the primary one
    last = full[np.lexsort(full.T)[-1]]  # keys: column 0 (least significant) .. N-1 (primary)
    rows = []
    for m in range(1, N):
        suffix = last[N - m:]
        if m > 1 and (suffix[1:] == bos).any():
            rows.append(-1)  # beyond the <s> that starts this n-gram: never opened
            continue
        rows.append(int(counts.index(m, suffix[None, :])[0]))
    return rows


def mkn_discounts(t: list):
    """Chen & Goodman's closed-form discounts from count-of-counts t1..t4, in float32 as lmplz.

    Returns ((D1, D2, D3+), valid); valid is False when some t_k (k <= 3) is 0 or a D_k falls
    outside (0, k].

    Notes
    -----
    Y = t1 / (t1 + 2 t2); D_k = k - (k + 1) Y t_{k+1} / t_k for k = 1, 2, 3.

    Examples
    --------
    >>> d, valid = mkn_discounts([10, 4, 2, 1])
    >>> [round(x, 4) for x in d], valid
    ([0.5556, 1.1667, 1.8889], True)
    """
    f = np.float32
    if min(t[:3]) == 0:
        return (0.0, 0.0, 0.0), False
    y = f(t[0]) / f(t[0] + 2.0 * t[1])
    d = []
    for k in (1, 2, 3):
        d.append(float(f(k) - f(k + 1) * y * f(t[k]) / f(t[k - 1])))
    valid = all(0.0 < d[k - 1] <= k for k in (1, 2, 3))
    return tuple(d), valid


def _adjusted_with_stats(model, counts: NGramCounts, vocab: Vocab) -> list:
    """Set ``adjusted_counts_`` and ``count_of_counts_`` on ``model``; return float counts."""
    a = adjusted_counts(counts, vocab)
    stats_counts = [x.copy() for x in a]
    if model.kenlm_quirk and counts.order > 1:
        for m, row in enumerate(kenlm_quirk_rows(counts, vocab), start=1):
            if row >= 0:
                stats_counts[m - 1][row] = counts.counts[m - 1][row]
    model.adjusted_counts_ = a
    model.count_of_counts_ = [count_of_counts(x) for x in stats_counts]
    return [x.astype(np.float64) for x in a]


class KneserNey(AbsoluteDiscount):
    """Interpolated Kneser-Ney with one discount per order, on KenLM's adjusted counts.

    Parameters
    ----------
    discount : float, list of float, or None
        Fixed discount(s) in (0, 1]; default D_m = t1 / (t1 + 2 t2) from the count-of-counts
        of the adjusted counts of order m.
    discount_fallback : float or None
        Used with a :class:`DiscountFallbackWarning` when t1 = 0; None raises instead.
    kenlm_quirk : bool
        Reproduce lmplz's count-of-counts quirk (kpu/kenlm issues 405, 427).

    Notes
    -----
    P(w | h) = max(a(h w) - D, 0) / sum_w a(h w) + gamma(h) P(w | h'),
    gamma(h) = D N1+(h .) / sum_w a(h w), down to the uniform floor over V'
    (a = adjusted counts, see :func:`adjusted_counts`).

    Examples
    --------
    >>> m = KneserNey(order=2, discount=0.5).fit(["a b a", "b a b"])
    >>> m.discounts_
    [0.5, 0.5]
    """

    _counts_name = "Kneser-Ney"

    def __init__(self, order: int = 3, discount=None, discount_fallback: float | None = 0.5,
                 kenlm_quirk: bool = False, min_count: int = 1, chunk_chars: int = 1 << 23,
                 progress: bool | None = None):
        super().__init__(order, discount, discount_fallback, min_count, chunk_chars, progress)
        self.kenlm_quirk = kenlm_quirk

    def _discount_counts(self, counts: NGramCounts, vocab: Vocab) -> list:
        return _adjusted_with_stats(self, counts, vocab)

    def _stats(self, counts: NGramCounts, a: list) -> list:
        return self.count_of_counts_


class ModifiedKneserNey(NGramModel):
    """Interpolated modified Kneser-Ney: KenLM ``lmplz``'s estimator, reproduced exactly.

    Parameters
    ----------
    order : int
        N in 1 .. 10.
    discounts : list of (D1, D2, D3+) or None
        Fixed discounts per order (like ``lmplz --discount_fallback`` forcing them); default:
        estimated per order from count-of-counts.
    discount_fallback : (float, float, float) or None
        Discounts used, with a :class:`DiscountFallbackWarning`, for an order whose
        count-of-counts cannot give valid ones (lmplz's ``--discount_fallback`` defaults,
        0.5 1 1.5). None raises :class:`~seqprob.errors.InputError` instead (lmplz's default).
    kenlm_quirk : bool
        Reproduce lmplz's count-of-counts quirk (kpu/kenlm issues 405 and 427): the last
        lower-order n-gram of each order enters the statistics with its raw count. Changes
        the discounts of tiny corpora only.
    min_count : int
        Words seen fewer times become ``<unk>``.
    prune : sequence of int or None
        lmplz ``--prune``: count thresholds per order (padded with the last; the unigram one
        must be 0, non-decreasing). An n-gram of order m >= 2 whose raw count is <= t_m is
        removed; discounts come from the unpruned statistics and the removed mass goes into
        the back-off weight gamma of its context, so rows still sum to 1
        (see :func:`seqprob.ngram.prune.count_prune_discounts`).

    Notes
    -----
    Adjusted counts a (see :func:`adjusted_counts`); per order, from count-of-counts t1..t4,
    Y = t1 / (t1 + 2 t2), D_k = k - (k+1) Y t_{k+1} / t_k. Then
    u(w | h) = (a(h w) - D(a(h w))) / sum_w a(h w),
    gamma(h) = (D1 N1(h .) + D2 N2(h .) + D3 N3+(h .)) / sum_w a(h w),
    P(w | h) = u(w | h) + gamma(h) P(w | h'), and P(w) = u(w) + gamma / V' at the bottom
    (V' = vocabulary without ``<s>``). ARPA back-off weights are log10 gamma.
    lmplz accepts a discount of exactly 0; seqprob treats it as not estimable (it would give
    zero probabilities) and falls back.

    Examples
    --------
    >>> m = ModifiedKneserNey(order=2, discounts=[(0.5, 1, 1.5)] * 2).fit(["a b c", "a c b"])
    >>> m.vocab.tokens[:4]
    ('<unk>', '<s>', '</s>', 'a')
    """

    def __init__(self, order: int = 3, discounts=None, discount_fallback=(0.5, 1.0, 1.5),
                 kenlm_quirk: bool = False, min_count: int = 1, chunk_chars: int = 1 << 23,
                 progress: bool | None = None, prune=None):
        super().__init__(order, min_count, chunk_chars, progress)
        self.discounts = discounts
        self.discount_fallback = discount_fallback
        self.kenlm_quirk = kenlm_quirk
        self.prune = prune

    def _check_params(self) -> None:
        super()._check_params()
        if self.discount_fallback is not None:
            _check_triple(self.discount_fallback, "discount_fallback")
        if self.discounts is not None:
            if isinstance(self.discounts, (str, bytes)) or not hasattr(self.discounts, "__iter__"):
                raise InputError(f"discounts must be one (D1, D2, D3+) triple per order ({self.order}), "
                                 f"got {self.discounts!r:.60}", value=self.discounts)
            ds = list(self.discounts)
            if len(ds) != int(self.order):
                raise InputError(f"discounts needs one (D1, D2, D3+) per order ({self.order}), "
                                 f"got {len(ds)}", value=ds, limit=int(self.order))
            for d in ds:
                _check_triple(d, "discounts")
        if self.prune is not None:
            check_prune_thresholds(self.prune, int(self.order))

    def _choose_discounts(self, count_of_counts: list) -> list:
        """(D1, D2, D3+) of every order: the given ones, estimated, or the fallback."""
        chosen = []
        for m, t in enumerate(count_of_counts, start=1):
            est, valid = mkn_discounts(t)
            fixed = tuple(self.discounts[m - 1]) if self.discounts is not None else None
            fb = tuple(self.discount_fallback) if self.discount_fallback is not None else None
            d = resolve_discount("modified Kneser-Ney", m, est, valid, fixed, fb, t)
            chosen.append(tuple(float(x) for x in d))
        return chosen

    def _fit_partitions(self, source, tokenizer, split_every: int, buckets) -> None:
        if self.prune is not None or self.kenlm_quirk or int(self.order) == 1:
            return super()._fit_partitions(source, tokenizer, split_every, buckets)
        from ._dask_mkn import fit_mkn_dask

        fit_mkn_dask(self, source, tokenizer, buckets)

    def _estimate(self, counts: NGramCounts, vocab: Vocab) -> None:
        a = _adjusted_with_stats(self, counts, vocab)
        self.discounts_ = self._choose_discounts(self.count_of_counts_)
        disc = []
        for x, (d1, d2, d3) in zip(a, self.discounts_):
            disc.append(np.select([x == 1, x == 2, x >= 3], [d1, d2, d3], 0.0))
        keep = None
        if self.prune is not None:  # lmplz --prune: pruned mass moves into gamma
            disc, keep = count_prune_discounts(counts.counts, a, disc,
                                               check_prune_thresholds(self.prune, counts.order))
        tables = interpolated_tables(counts, vocab, a, disc, [0.0] * counts.order)
        self.tables_ = tables if keep is None else subset_tables(tables, keep)


def _check_triple(value, name: str) -> tuple:
    try:
        d = tuple(value)
    except TypeError:
        raise InputError(f"{name} must be (D1, D2, D3+), got {value!r}", value=value) from None
    if len(d) != 3:
        raise InputError(f"{name} must be (D1, D2, D3+), got {value!r}", value=value)
    return tuple(check_real(f"{name} D{k}", x, low=0, high=float(k), low_open=True) for k, x in enumerate(d, start=1))
