"""Shrinking back-off models: count thresholds (lmplz ``--prune``) and relative-entropy
pruning (Stolcke 1998, SRILM ``ngram -prune``). Both leave a normalized model.

Shared machinery: :func:`subset_tables` keeps some n-grams of :class:`BackoffTables` (re-linking
the prefix keys) and :func:`recompute_backoffs` gives every context the back-off weight that
makes its row sum to 1 again.
"""
from __future__ import annotations

import logging

import numpy as np

from .counts import lookup_keys
from ..errors import InputError
from .base import BackoffTablesModel
from .tables import BackoffTables

__all__ = ["check_prune_thresholds", "count_prune_discounts", "subset_tables", "recompute_backoffs",
           "prune_entropy", "entropy_deltas", "last_logprob", "suffix_rows",
           "lower_logprobs", "backoff_sums", "context_logprobs"]

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------- count thresholds
def check_prune_thresholds(prune, order: int) -> tuple:
    """Validate lmplz-style thresholds and pad them to ``order`` with the last value.

    Raises :class:`InputError` for a negative or non-integer threshold, more thresholds than
    orders, a non-zero unigram threshold (lmplz never prunes unigrams) or a decreasing sequence
    (lmplz: "substrings would be removed").

    Examples
    --------
    >>> check_prune_thresholds((0, 1), 4)
    (0, 1, 1, 1)
    """
    try:
        values = tuple(prune)
    except TypeError:
        raise InputError(f"prune must be a sequence of count thresholds per order, got {prune!r}",
                         value=prune) from None
    if not values or len(values) > order:
        raise InputError(f"prune needs 1 .. {order} thresholds (one per order), got {len(values)}",
                         value=values, limit=order)
    for t in values:
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
            raise InputError(f"prune thresholds must be integers >= 0, got {t!r}", value=t, limit=0)
    if values[0] != 0:
        raise InputError(f"unigram pruning is not supported (as in lmplz): the first prune "
                         f"threshold must be 0, got {values[0]}", value=values[0], limit=0)
    if any(b < a for a, b in zip(values, values[1:])):
        raise InputError(f"prune thresholds must be non-decreasing (else an n-gram could lose its "
                         f"context), got {values}", value=values)
    return tuple(int(t) for t in values) + (int(values[-1]),) * (order - len(values))


def count_prune_discounts(raw_counts: list, adjusted: list, disc: list, thresholds) -> tuple:
    """lmplz ``--prune``: which n-grams survive, and the discounts that move pruned mass into gamma.

    Parameters
    ----------
    raw_counts, adjusted, disc : list of (U_m,) arrays per order
        Raw counts (decide pruning), adjusted counts and per-n-gram discounts (from the
        unpruned statistics).
    thresholds : tuple of int
        One per order (see :func:`check_prune_thresholds`).

    Returns
    -------
    (disc, keep)
        ``disc`` with a pruned n-gram's whole adjusted count as its discount, and the boolean
        keep mask of every order.

    Notes
    -----
    An n-gram of order m >= 2 with raw count c <= t_m is removed. Its context keeps the
    denominator sum_w a(h w) over all children; gamma(h) = (sum_kept D(a) + sum_pruned a) / sum a
    (lmplz ``initial_probabilities.cc``). With non-decreasing thresholds the prefix and suffix
    of every kept n-gram are kept too (their raw counts are at least as large).
    """
    keep = [np.ones(len(raw_counts[0]), dtype=bool)]
    new_disc = [disc[0]]
    for m in range(2, len(raw_counts) + 1):
        k = raw_counts[m - 1] > thresholds[m - 1]  # (U_m,)
        keep.append(k)
        new_disc.append(np.where(k, disc[m - 1], adjusted[m - 1]))
    return new_disc, keep


def subset_tables(tables: BackoffTables, keep: list) -> BackoffTables:
    """The tables restricted to the n-grams of ``keep`` (prefix keys re-linked).

    Every kept n-gram's prefix must be kept; back-off weights of orders 1 .. N-1 follow their
    n-grams. Trailing orders left empty are dropped.
    """
    V = tables.vocab_size
    keys, logp, logbow = [tables.keys[0]], [tables.logp[0]], []
    row_map = np.arange(V, dtype=np.int64)  # old row -> new row of the previous order
    for m in range(2, tables.order + 1):
        k = keep[m - 1]
        old = tables.keys[m - 1][k]
        prefix = row_map[old // V]
        if (prefix < 0).any():
            raise InputError(f"cannot drop a {m - 1}-gram that is the context of a kept {m}-gram")
        if not len(old):
            break
        keys.append(prefix * V + old % V)
        logp.append(tables.logp[m - 1][k])
        logbow.append(tables.logbow[m - 2][keep[m - 2]])
        row_map = np.full(len(k), -1, dtype=np.int64)
        row_map[k] = np.arange(int(k.sum()))
    return BackoffTables(V, keys, logp, logbow, tables.unlisted_logbow)


# ---------------------------------------------------------------------------- back-off weights
def _segments(words: np.ndarray):
    """(n, m) word matrix -> one stream with a segment per row."""
    n, m = words.shape
    return words.reshape(-1), np.repeat(np.arange(n, dtype=np.int64) * m, m)


def last_logprob(tables: BackoffTables, words: np.ndarray) -> np.ndarray:
    """log P(w_m | w_1 .. w_{m-1}) of each row of an (n, m) word matrix, m >= 2."""
    n, m = words.shape
    if n == 0:
        return np.zeros(0)
    stream, seg = _segments(words)
    return tables.score_stream(stream, seg).reshape(n, m)[:, -1]  # (n,)


def suffix_rows(tables: BackoffTables, m: int) -> np.ndarray:
    """Row at order m-1 of the suffix (w_2 .. w_m) of each order-m n-gram, -1 if not listed."""
    V = tables.vocab_size
    suf = tables.keys[1] % V  # order 2: the suffix is the unigram w_2
    for j in range(3, m + 1):
        keys = tables.keys[j - 1]
        ctx_suffix = suf[keys // V]  # (U_j,) row of h' (order j-2) for each context h
        query = np.where(ctx_suffix >= 0, ctx_suffix * V + keys % V, -1)
        suf = np.where(ctx_suffix >= 0, lookup_keys(tables.keys[j - 2], query), -1)
    return suf


def lower_logprobs(tables: BackoffTables, m: int) -> np.ndarray:
    """log P(w | h') of every order-m n-gram (h, w): its listed suffix, else scored by back-off."""
    if m == 2:
        return tables.logp[0][tables.keys[1] % tables.vocab_size]
    suf = suffix_rows(tables, m)
    out = np.empty(len(suf))
    listed = suf >= 0
    out[listed] = tables.logp[m - 2][suf[listed]]
    if not listed.all():
        out[~listed] = last_logprob(tables, tables.words(m)[~listed, 1:])
    return out


def backoff_sums(tables: BackoffTables, m: int):
    """Per order-(m-1) context: (1 - sum_listed P(w|h), 1 - sum_listed P(w|h')) over its children."""
    n_ctx = len(tables.keys[m - 2])
    ctx = tables.keys[m - 1] // tables.vocab_size  # (U_m,)
    p = np.exp(tables.logp[m - 1])
    lower = np.exp(lower_logprobs(tables, m))
    num = 1.0 - np.bincount(ctx, weights=p, minlength=n_ctx)  # (U_{m-1},)
    den = 1.0 - np.bincount(ctx, weights=lower, minlength=n_ctx)
    return num, den


def _log_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num, den = np.maximum(num, 0.0), np.maximum(den, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(num) - np.log(den)
    out[num <= 0] = -np.inf  # every continuation listed: backing off is never used
    out[(num > 0) & (den <= 0)] = 0.0  # cannot happen for a normalized model; keep it finite
    return out


def recompute_backoffs(tables: BackoffTables) -> BackoffTables:
    """Set every context's back-off weight so that its row sums to 1 (in place; returned).

    Notes
    -----
    gamma(h) = (1 - sum_{w listed after h} P(w | h)) / (1 - sum_{w listed after h} P(w | h')),
    computed order by order from the bottom, since P(w | h') may itself back off.
    A context without listed continuations gets gamma = 1.
    """
    for m in range(2, tables.order + 1):
        num, den = backoff_sums(tables, m)
        tables.logbow[m - 2] = _log_ratio(num, den)
    return tables


# ---------------------------------------------------------------------------- entropy pruning
def context_logprobs(tables: BackoffTables, k: int, bos_id=None, eos_id=None) -> np.ndarray:
    """log P(h) of every listed order-k n-gram h: the chain of its own listed conditionals.

    A leading ``<s>`` counts with P(``</s>``) (a sentence starts where one ends), as SRILM's
    ``LM::contextProb`` does.
    """
    first = np.arange(tables.vocab_size)
    if bos_id is not None and eos_id is not None:
        first[bos_id] = eos_id
    out = tables.logp[0][first]  # (V,)
    for j in range(2, k + 1):
        out = out[tables.keys[j - 1] // tables.vocab_size] + tables.logp[j - 1]  # (U_j,)
    return out


def entropy_deltas(tables: BackoffTables, m: int, bos_id=None, eos_id=None):
    """Stolcke's entropy increase dH (nats) of removing each order-m n-gram alone.

    Returns (delta, is_context): ``delta`` (U_m,) per n-gram, and whether the n-gram is the
    context of a listed (m+1)-gram (such n-grams are never pruned).
    """
    V = tables.vocab_size
    keys = tables.keys[m - 1]
    is_context = np.zeros(len(keys), dtype=bool)
    if m < tables.order:
        is_context[np.unique(tables.keys[m] // V)] = True
    ctx = keys // V  # (U_m,)
    logp = tables.logp[m - 1]
    lower = lower_logprobs(tables, m)
    num, den = backoff_sums(tables, m)  # (U_{m-1},)
    p, q = np.exp(logp), np.exp(lower)
    with np.errstate(divide="ignore", invalid="ignore"):
        new_logbow = np.log(num[ctx] + p) - np.log(den[ctx] + q)  # (U_m,) after removing it
        old_logbow = _log_ratio(num, den)[ctx]
        log_ph = context_logprobs(tables, m - 1, bos_id, eos_id)[ctx]
        change = np.where(p > 0, p * (lower + new_logbow - logp), 0.0)
        unlisted = np.where(num[ctx] > 0, num[ctx] * (new_logbow - old_logbow), 0.0)
        delta = -np.exp(log_ph) * (change + unlisted)  # (U_m,)
    return np.where(np.isnan(delta), np.inf, delta), is_context


def prune_entropy(model, threshold: float):
    """Relative-entropy pruning (Stolcke 1998; SRILM ``ngram -prune threshold``).

    Parameters
    ----------
    model : a fitted back-off n-gram model (any seqprob estimator, one read from a file, a static mixture)
        Must be normalized.
    threshold : float
        theta > 0: an n-gram is removed when removing it alone raises the model's perplexity
        by a relative amount below theta (typical: 1e-8 .. 1e-5).

    Returns
    -------
    BackoffTablesModel
        A new normalized back-off model (same vocabulary and tokenizer); the input is unchanged.

    Notes
    -----
    For an n-gram (h, w) that is not the context of a longer one, with P the model,
    num(h) = 1 - sum_listed P(.|h), den(h) = 1 - sum_listed P(.|h'), and gamma'(h) =
    (num + P(w|h)) / (den + P(w|h')) the back-off weight after removing it,

        dH = -P(h) [ P(w|h) (log P(w|h') + log gamma'(h) - log P(w|h))
                     + num(h) (log gamma'(h) - log gamma(h)) ],

    with P(h) the chain product of the context's own conditionals (a leading ``<s>`` counts
    with P(``</s>``), as in SRILM's ``contextProb``). The n-gram is pruned when
    exp(dH) - 1 < theta. Orders are pruned from the highest down (an n-gram loses its
    protection once all its extensions are gone), each n-gram judged against the model before
    its order was pruned, as SRILM does (no back-off weight it reads has changed by then);
    finally every back-off weight is recomputed so that each row sums to 1. Unigrams are
    never pruned.

    Examples
    --------
    >>> from seqprob.ngram import ModifiedKneserNey
    >>> lm = ModifiedKneserNey(order=3, discounts=[(0.5, 1, 1.5)] * 3).fit(["a b c a b", "b c a"] * 3)
    >>> small = prune_entropy(lm, 1e-2)
    >>> sum(small.tables_.sizes()) <= sum(lm.tables_.sizes())
    True
    """
    th = _check_threshold(threshold)
    if not getattr(model, "normalized", True) or not hasattr(model, "_tables"):
        raise InputError(f"prune_entropy needs a normalized back-off n-gram model, got "
                         f"{type(model).__name__}")
    src = model._tables()
    if src.unlisted_logbow:
        raise InputError("prune_entropy needs a normalized back-off model (unlisted_logbow = 0)")
    tables = BackoffTables(src.vocab_size, list(src.keys), list(src.logp), [b.copy() for b in src.logbow])
    bos, eos = model.vocab.bos_id, model.vocab.eos_id
    for m in range(tables.order, 1, -1):
        keep = [np.ones(n, dtype=bool) for n in tables.sizes()]
        delta, is_context = entropy_deltas(tables, m, bos, eos)
        keep[m - 1] = is_context | ~(np.expm1(delta) < th)
        tables = subset_tables(tables, keep)  # back-offs are stale until the end; never read before
    recompute_backoffs(tables)
    log.info("prune_entropy(%g): n-grams %s -> %s", th, src.sizes(), tables.sizes())
    return BackoffTablesModel(tables, model.vocab, getattr(model, "tokenizer", None))


def _check_threshold(threshold) -> float:
    try:
        th = float(threshold)
    except (TypeError, ValueError):
        raise InputError(f"threshold must be a number > 0, got {threshold!r}", value=threshold) from None
    if not np.isfinite(th) or th <= 0:
        raise InputError(f"threshold must be a finite number > 0, got {threshold!r}", value=threshold, limit=0)
    return th
