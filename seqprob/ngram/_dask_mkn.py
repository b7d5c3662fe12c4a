"""Modified Kneser-Ney as Dask map/reduce: counts, adjusted counts, count-of-counts, context sums.

The single-machine estimator (:class:`~seqprob.ngram.ModifiedKneserNey`) works on one merged
count table. Here every step over all n-grams runs on the workers, over hash buckets of word
tuples, and the driver only receives a handful of numbers and, order by order, the finished
per-n-gram values it needs to assemble the model (the ARPA tables):

1. **count** (map, one task per partition): the partition's n-grams of every order m >= 2 as
   word-id rows with counts, split into B buckets by a hash of their *suffix* w_2..w_m;
2. **merge + adjust** (reduce, one task per order m and bucket): equal rows summed (the raw
   counts); since every left extension v g of a suffix g lands in g's bucket, the bucket also
   gives the continuation counts N1+(. g) of the (m-1)-grams g it owns, and the histograms
   t_1..t_4 of the adjusted counts it holds;
3. **discounts** (driver): histograms summed per order, D1, D2, D3+ per order (lmplz's
   closed form, :func:`~seqprob.ngram.kneser_ney.mkn_discounts`);
4. **context sums** (reduce, one task per order m and bucket, after a shuffle of the adjusted
   counts by a hash of their *context* w_1..w_{m-1}): S(h) = sum_w a(h w), gamma(h) and the
   discounted part u(w | h) = (a(h w) - D(a(h w))) / S(h) of every n-gram;
5. **assembly** (driver, order by order): prefix-linked keys sorted, P(w | h) = u(w | h) +
   gamma(h) P(w | h'), log10 for the ARPA file.

Every floating-point operation is the one of
:func:`seqprob.ngram._interpolate.interpolated_tables`, on the same values, in the same order
(the discounts of a context are summed in the order of its words), so the model and its ARPA
file are bit for bit those of :meth:`~seqprob.ngram.NGramModel.fit`.
"""
from __future__ import annotations

import logging

import numpy as np

from .counts import NGramCounts, lookup_keys
from ..errors import InputError
from ._dask import _count, guarded, dask_vocabulary, partitions, shared
from ._interpolate import count_of_counts, safe_log
from .tables import BackoffTables

__all__ = ["fit_mkn_dask", "bucket_of"]

log = logging.getLogger(__name__)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_SEED = np.uint64(0x243F6A8885A308D3)


def bucket_of(words: np.ndarray, n_buckets: int) -> np.ndarray:
    """Bucket in [0, n_buckets) of every row of an (n, k) word-id matrix (k >= 1).

    A multiplicative hash of the whole row, computed with numpy integers: the same on every
    machine and in every process (unlike Python's ``hash``), so equal rows meet in one bucket.

    Examples
    --------
    >>> b = bucket_of(np.array([[3, 4], [5, 6], [3, 4]]), 4)
    >>> int(b[0]) == int(b[2]), bool(((b >= 0) & (b < 4)).all())
    (True, True)
    """
    h = np.full(len(words), _SEED, dtype=np.uint64)  # (n,)
    for j in range(words.shape[1]):
        h = (h ^ words[:, j].astype(np.uint64)) * _GOLDEN  # wraps modulo 2^64
        h ^= h >> np.uint64(29)
    return (h % np.uint64(n_buckets)).astype(np.int64)


# --------------------------------------------------------------------------- row helpers


def _limbs(words: np.ndarray) -> list:
    """The rows of an (n, k) id matrix packed into as few int64 columns as their ids allow,
    most significant first: comparing the columns in turn compares the rows lexicographically."""
    n, k = words.shape
    bits = max(int(words.max()).bit_length(), 1) if n and k else 1
    per = max(63 // bits, 1)  # ids per int64
    limbs = []
    for start in range(0, k, per):
        limb = words[:, start].astype(np.int64)  # (n,)
        for j in range(start + 1, min(start + per, k)):
            limb = (limb << bits) | words[:, j]
        limbs.append(limb)
    return limbs


def _lex_order(words: np.ndarray) -> np.ndarray:
    """Permutation sorting the rows of ``words`` lexicographically (the order of the tables)."""
    limbs = _limbs(words)
    if len(limbs) == 1:
        return np.argsort(limbs[0], kind="stable")
    return np.lexsort(limbs[::-1])  # lexsort's last key is the primary one


def _row_starts(words: np.ndarray) -> np.ndarray:
    """(n,) bool: True where a row of the sorted ``words`` differs from the row before it."""
    new = np.ones(len(words), dtype=bool)
    if len(words) > 1 and words.shape[1]:
        new[1:] = False
        for limb in _limbs(words):
            new[1:] |= limb[1:] != limb[:-1]
    return new


def _sum_equal_rows(words: np.ndarray, counts: np.ndarray):
    """(sorted distinct rows, summed counts): the merge of count tables given as rows."""
    order = _lex_order(words)
    words, counts = words[order], counts[order]
    if not len(words):
        return words, counts
    starts = np.flatnonzero(_row_starts(words))
    return words[starts], np.add.reduceat(counts, starts)


def _split(bucket: np.ndarray, n_buckets: int, *arrays) -> list:
    """``arrays`` cut into ``n_buckets`` pieces by ``bucket`` (row order kept within a piece)."""
    order = np.argsort(bucket, kind="stable")
    bounds = np.searchsorted(bucket[order], np.arange(n_buckets + 1))
    return [tuple(a[order[lo:hi]] for a in arrays) for lo, hi in zip(bounds[:-1], bounds[1:])]


def _concat(pieces: list, width: int, n_arrays: int) -> list:
    """Concatenate same-layout pieces (tuples of arrays, the first an (n, width) id matrix)."""
    pieces = [p for p in pieces if p is not None]
    if not pieces:
        return [np.zeros((0, width), np.int64)] + [np.zeros(0, np.int64)] * (n_arrays - 1)
    return [np.concatenate([p[i] for p in pieces]) for i in range(n_arrays)]


# --------------------------------------------------------------------------- 1. count (map)


def _count_split(part, tokenizer, order: int, chunk_chars: int, n_buckets: int):
    """A partition's counts: unigram counts, and per order m >= 2, B pieces of (rows, counts)
    bucketed by the hash of each row's suffix w_2..w_m (None for an empty partition)."""
    counts = _count(part, tokenizer, order, chunk_chars)
    if counts is None:
        return None
    pieces, words = {}, counts.keys[0][:, None]  # (V, 1)
    for m in range(2, order + 1):
        words = np.column_stack([words[counts.prefix(m)], counts.last(m)])  # (U_m, m)
        pieces[m] = _split(bucket_of(words[:, 1:], n_buckets), n_buckets, words, counts.counts[m - 1])
    return {"meta": (counts.counts[0], counts.n_sentences, counts.n_tokens), "pieces": pieces}


def _piece(counted, m: int, b: int):
    return None if counted is None else counted["pieces"][m][b]


def _meta(counted):
    return None if counted is None else counted["meta"]


def _sum_meta(metas: list):
    """(unigram raw counts, sentences, tokens) of the whole corpus."""
    metas = [x for x in metas if x is not None]
    if not metas:
        return None
    unigram = np.sum([x[0] for x in metas], axis=0)  # (V,)
    return unigram, sum(x[1] for x in metas), sum(x[2] for x in metas)


# --------------------------------------------------------------------------- 2. merge + adjust


def _merge_bucket(pieces: list, m: int, order: int, bos_id: int, n_buckets: int):
    """Reduce of one bucket of order m: raw counts, continuation counts of the suffixes.

    Returns
    -------
    rows : list of B (words (n, m), raw counts)
        This bucket's order-m n-grams, cut by the hash of their context w_1..w_{m-1}.
    conts : list of B (words (k, m-1), N1+(. g)), or (ids, N1+(. w)) when m = 2
        The (m-1)-grams g owned by this bucket with their continuation counts.
    hist_m : list of 4 int
        t_1..t_4 of the adjusted counts of order m held here as raw counts (n-grams starting
        with ``<s>``; all of them at the highest order).
    hist_lower : list of 4 int or None
        t_1..t_4 of the continuation counts (order m-1 >= 2).
    """
    words, raw = _sum_equal_rows(*_concat(pieces, m, 2))
    kept_raw = raw if m == order else raw[words[:, 0] == bos_id]
    rows = _split(bucket_of(words[:, :-1], n_buckets), n_buckets, words, raw)
    # every left extension of a suffix g is in this bucket: N1+(. g) = distinct rows ending in g
    g, cont = _sum_equal_rows(words[:, 1:], np.ones(len(words), dtype=np.int64))
    if m == 2:
        return rows, (g[:, 0], cont), count_of_counts(kept_raw), None
    conts = _split(bucket_of(g[:, :-1], n_buckets), n_buckets, g, cont)
    return rows, conts, count_of_counts(kept_raw), count_of_counts(cont)


# --------------------------------------------------------------------------- 4. context sums


def _context_bucket(row_pieces: list, cont_pieces: list, m: int, order: int, bos_id: int,
                    discount: tuple):
    """Reduce of one context bucket of order m: adjusted counts, gamma(h) and u(w | h).

    Returns (words, raw, adjusted, u, contexts, gamma, ctx): rows sorted as in the tables, the
    contexts (distinct w_1..w_{m-1}) with their interpolation weight gamma, and the context
    (index into ``contexts``) of every row.
    """
    words, raw = _concat(row_pieces, m, 2)
    order_rows = _lex_order(words)
    words, raw = words[order_rows], raw[order_rows]
    adjusted = raw.copy()
    if m < order:  # continuation counts, except for n-grams that start with <s>
        g, cont = _concat(cont_pieces, m, 2)
        g_order = _lex_order(g)
        inner = words[:, 0] != bos_id
        if not np.array_equal(words[inner], g[g_order]):
            raise RuntimeError(f"internal: the continuation counts of this bucket are not "
                               f"those of its {m}-grams (misrouted by the shuffle)")
        adjusted[inner] = cont[g_order]
    a = adjusted.astype(np.float64)
    disc = np.select([a == 1, a == 2, a >= 3], list(discount), 0.0)  # as ModifiedKneserNey
    new_ctx = _row_starts(words[:, :-1])
    ctx = np.cumsum(new_ctx) - 1  # (n,) context of each row, in this bucket
    n_ctx = int(new_ctx.sum())
    # interpolated_tables' arithmetic (extra = 0), the discounts summed in row order
    S = np.bincount(ctx, weights=a, minlength=n_ctx) + 0.0
    has = S > 0
    S_safe = np.where(has, S, 1.0)
    gamma = np.where(has, (np.bincount(ctx, weights=disc, minlength=n_ctx) + 0.0) / S_safe, 1.0)
    u = (a - disc) / S_safe[ctx]
    return words, raw, adjusted, u, words[new_ctx, :-1], gamma, ctx


# --------------------------------------------------------------------------- driver


def _rows_of(keys: list, vocab_size: int, words: np.ndarray) -> np.ndarray:
    """Row of each (n, k) word tuple in the prefix-linked table of order k (all present)."""
    rows = words[:, 0].copy()
    for j in range(1, words.shape[1]):
        rows = lookup_keys(keys[j], rows * vocab_size + words[:, j])
    if len(rows) and rows.min() < 0:
        raise RuntimeError("internal: an n-gram's context or suffix is missing from the tables")
    return rows


def _count_graph(parts, tokenizer, order: int, chunk_chars: int, n_buckets: int):
    """Delayed objects of steps 1-2: corpus meta, and per order the merged buckets' outputs."""
    import dask

    bos, tok = tokenizer.vocab.bos_id, shared(tokenizer)
    counted = [dask.delayed(guarded)(i, _count_split, p, tok, order, chunk_chars, n_buckets)
               for i, p in enumerate(parts)]
    meta = dask.delayed(_sum_meta)([dask.delayed(_meta)(c) for c in counted])
    merged = {m: [dask.delayed(_merge_bucket, nout=4)(
        [dask.delayed(_piece)(c, m, b) for c in counted], m, order, bos, n_buckets)
        for b in range(n_buckets)] for m in range(2, order + 1)}
    return meta, merged


def _statistics(meta, merged: dict, vocab, order: int):
    """Corpus meta, unigram adjusted counts, and count-of-counts of every order (driver)."""
    import dask

    unigram_conts = [out[1] for out in merged[2]]
    hists = {m: [out[2] for out in merged[m]] + ([out[3] for out in merged[m + 1]] if m < order else [])
             for m in range(2, order + 1)}
    meta, unigram_conts, hists = dask.compute(meta, unigram_conts, hists)
    if meta is None:
        raise InputError("cannot count n-grams of an empty corpus: every partition is empty")
    a1 = np.zeros(len(vocab), dtype=np.int64)
    for ids, cont in unigram_conts:
        a1[ids] = cont
    vocab.mask_never_predicted(a1, 0)
    if vocab.unk_id is not None:
        a1[vocab.unk_id] = 0
    coc = [count_of_counts(a1)] + [np.sum(hists[m], axis=0).astype(int).tolist()
                                   for m in range(2, order + 1)]
    return meta, a1, coc


def _unigram_probs(a1: np.ndarray, discount: tuple, vocab) -> np.ndarray:
    """P(w) = (a(w) - D(a(w))) / sum a + gamma / V' (interpolated_tables' order-1 step)."""
    a = a1.astype(np.float64)
    disc = np.select([a == 1, a == 2, a >= 3], list(discount), 0.0)
    den = a.sum() + 0.0
    gamma0 = (disc.sum() + 0.0) / den
    p = (a - disc) / den + gamma0 / (len(vocab) - (vocab.never_predicted_id is not None))  # (V,)
    vocab.mask_never_predicted(p, 0.0)
    return p


def _assemble_order(parts: list, keys: list, suffixes: list, V: int, p_lower: np.ndarray):
    """Keys, raw, adjusted, suffix rows, P and the lower order's gamma of one order (driver).

    The suffix w_2..w_m of h w is the child w of the suffix of h: one look-up per n-gram.
    """
    offsets = np.cumsum([0] + [len(part[4]) for part in parts[:-1]])
    ctx = np.concatenate([part[6] + off for part, off in zip(parts, offsets)])  # (U_m,)
    words, raw, adjusted, u, ctx_words, gamma_vals = (np.concatenate(x) for x in list(zip(*parts))[:6])
    ctx_rows = _rows_of(keys, V, ctx_words)  # one look-up per context, not per n-gram
    prefix = ctx_rows[ctx]
    key = prefix * V + words[:, -1]  # (U_m,) prefix-linked
    order = np.argsort(key)
    last = words[order, -1]
    if len(keys) == 1:  # bigrams: the suffix is the word itself
        suffix = last
    else:
        suffix = lookup_keys(keys[-1], suffixes[-1][prefix[order]] * V + last)
        if len(suffix) and suffix.min() < 0:
            raise RuntimeError("internal: an n-gram's suffix is missing from the tables")
    gamma = np.ones(len(keys[-1]))  # contexts without continuation back off untouched
    gamma[ctx_rows] = gamma_vals
    p = u[order] + gamma[prefix[order]] * p_lower[suffix]
    return key[order], raw[order], adjusted[order], suffix, p, gamma


def fit_mkn_dask(model, source, tokenizer, n_buckets=None) -> None:
    """Fit ``model`` (a ModifiedKneserNey without pruning or quirk) by Dask map/reduce.

    Sets the attributes of :meth:`~seqprob.ngram.NGramModel.fit` (``counts_``,
    ``adjusted_counts_``, ``count_of_counts_``, ``discounts_``, ``tables_``, ``tokenizer_``,
    ``vocab_``), with the same values bit for bit. ``n_buckets`` (default: the number of
    partitions) is the number of reduce tasks per order and step.

    Notes
    -----
    Adjusted counts: a(g) = c(g) at the highest order and for g starting with ``<s>``, else
    N1+(. g) = #{v : c(v g) > 0}, computed where the bucket hash(w_2..w_m) of the (m)-grams
    gathers every left extension of g. Discounts from t_k = #{g : a(g) = k} summed over
    buckets; then per context h: S(h) = sum_w a(h w), gamma(h) = sum_w D(a(h w)) / S(h),
    u(w | h) = (a(h w) - D(a(h w))) / S(h), and on the driver
    P(w | h) = u(w | h) + gamma(h) P(w | h').

    Examples
    --------
    >>> import dask, dask.bag as db
    >>> from seqprob.ngram import ModifiedKneserNey
    >>> lm = ModifiedKneserNey(order=2, discounts=[(0.5, 1, 1.5)] * 2)
    >>> with dask.config.set(scheduler="synchronous"):
    ...     fit_mkn_dask(lm, db.from_sequence(["a b", "b a b"], npartitions=2), None, n_buckets=2)
    >>> [a.tolist() for a in lm.adjusted_counts_]  # ids <unk> <s> </s> a b
    [[0, 0, 1, 2, 2], [1, 1, 2, 2, 1]]
    """
    import dask

    parts = partitions(source)
    if tokenizer is None:
        tokenizer = dask_vocabulary(parts, int(model.min_count), int(model.chunk_chars))
    vocab, N, V = tokenizer.vocab, int(model.order), len(tokenizer.vocab)
    B = len(parts) if n_buckets is None else int(n_buckets)
    meta, merged = _count_graph(parts, tokenizer, N, int(model.chunk_chars), B)
    meta, merged = dask.persist(meta, merged)  # kept on the workers for the context step
    (unigram, n_sentences, n_tokens), a1, coc = _statistics(meta, merged, vocab, N)
    model._check_has_words(n_sentences, n_tokens)
    discounts = model._choose_discounts(coc)
    p_lower = _unigram_probs(a1, discounts[0], vocab)  # (V,) probabilities
    keys, logp, logbow = [np.arange(V, dtype=np.int64)], [safe_log(p_lower)], []
    raw_counts, adjusted, suffixes = [unigram], [a1], [None]
    for m in range(2, N + 1):
        tasks = [dask.delayed(_context_bucket)(
            [out[0][b] for out in merged[m]], [out[1][b] for out in merged[m + 1]] if m < N else [],
            m, N, vocab.bos_id, discounts[m - 1]) for b in range(B)]
        done = dask.compute(*tasks)
        key, raw, adj, suffix, p_lower, gamma = _assemble_order(done, keys, suffixes, V, p_lower)
        keys.append(key), raw_counts.append(raw), adjusted.append(adj), suffixes.append(suffix)
        logbow.append(safe_log(gamma))
        logp.append(np.minimum(safe_log(p_lower), 0.0))
    logp[0] = np.minimum(logp[0], 0.0)
    model.counts_ = NGramCounts(N, V, keys, raw_counts, suffixes, n_sentences, n_tokens)
    model.adjusted_counts_, model.count_of_counts_, model.discounts_ = adjusted, coc, discounts
    model.tables_, model.tokenizer_, model.vocab_ = BackoffTables(V, keys, logp, logbow), tokenizer, vocab
    log.info("ModifiedKneserNey (Dask, %d partitions, %d buckets): %s n-grams per order",
             len(parts), B, model.counts_.sizes())
