"""Vectorized n-gram counting: every order 1..N from one padded token stream.

Each sentence is padded the KenLM way: one ``<s>`` as context, then its words, then a
predicted ``</s>``. An m-gram is any window of m tokens inside one padded sentence that does
not end on the leading ``<s>``. N-grams are stored as sorted integer keys, order by order, in
a *prefix-linked* layout:

    key(w_1 .. w_m) = index(w_1 .. w_{m-1}) * V + w_m,

where ``index`` is the row of the (m-1)-gram in the sorted table of order m-1 (for m = 1 the
table is the whole vocabulary and index(w) = w). Sorting these keys sorts the n-grams
lexicographically, the key fits in int64 whatever the order, and the context of an n-gram is
``key // V``. Counting is a few ``np.unique`` calls per chunk; chunks are merged by
translating each chunk's row indices into the merged table, order by order.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import numpy as np

from ..errors import InputError

__all__ = ["NGramCounts", "count_ngrams", "count_sequences", "padded_stream", "lookup_keys",
           "child_bounds", "KeyHash", "MAX_ORDER"]

log = logging.getLogger(__name__)

#: Highest n-gram order accepted anywhere in seqprob.
MAX_ORDER = 10


def check_order(order) -> int:
    """Validate an n-gram order: an integer in [1, MAX_ORDER]."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)):
        raise InputError(f"order must be an integer in [1, {MAX_ORDER}], got {order!r}", value=order)
    if not 1 <= int(order) <= MAX_ORDER:
        raise InputError(f"order must be in [1, {MAX_ORDER}], got {order}", value=int(order),
                         limit=MAX_ORDER)
    return int(order)


def padded_stream(flat_ids: np.ndarray, lengths: np.ndarray, bos_id: int, eos_id: int):
    """Concatenate sentences as ``<s> w_1 .. w_k </s>`` and mark where each one starts.

    Parameters
    ----------
    flat_ids : (W,) int array
        The words of all sentences, one after the other.
    lengths : (S,) int array
        Number of words of each sentence (0 for an empty sentence).

    Returns
    -------
    stream : (W + 2S,) int64
        The padded token stream.
    seg_start : (W + 2S,) int64
        For every position, the position of its sentence's ``<s>``.

    Examples
    --------
    >>> s, st = padded_stream(np.array([5, 6, 7]), np.array([2, 1]), 1, 2)
    >>> s.tolist(), st.tolist()
    ([1, 5, 6, 2, 1, 7, 2], [0, 0, 0, 0, 4, 4, 4])
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    sizes = lengths + 2
    starts = np.zeros(len(sizes), dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    total = int(sizes.sum())
    stream = np.empty(total, dtype=np.int64)  # (L,)
    is_word = np.ones(total, dtype=bool)
    is_word[starts] = False
    is_word[starts + lengths + 1] = False
    stream[starts] = bos_id
    stream[starts + lengths + 1] = eos_id
    stream[is_word] = flat_ids
    return stream, np.repeat(starts, sizes)


def lookup_keys(table: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Row of each key in the sorted ``table``, or -1 where it is absent (binary search).

    Examples
    --------
    >>> lookup_keys(np.array([2, 5, 9]), np.array([9, 3, 2])).tolist()
    [2, -1, 0]
    """
    pos = np.searchsorted(table, keys)  # (n,)
    pos_c = np.minimum(pos, max(len(table) - 1, 0))
    found = (pos < len(table)) & (table[pos_c] == keys) if len(table) else np.zeros(len(keys), bool)
    return np.where(found, pos_c, -1)


def child_bounds(keys: np.ndarray, n_contexts: int, vocab_size: int) -> np.ndarray:
    """(n_contexts + 1,) offsets: the rows with context c are ``bounds[c] .. bounds[c+1]-1``."""
    return np.searchsorted(keys, np.arange(n_contexts + 1, dtype=np.int64) * vocab_size)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


class KeyHash:
    """Open-addressing hash table (linear probing) from int64 keys to their rows, built and
    queried with whole-array operations: about 1.5 random memory reads per look-up instead of
    the ~20 of a binary search over a large sorted array.

    Examples
    --------
    >>> h = KeyHash(np.array([3, 10, 42]))
    >>> h.lookup(np.array([42, 5, 3])).tolist()
    [2, -1, 0]
    """

    def __init__(self, keys: np.ndarray):
        keys = np.asarray(keys, dtype=np.int64)
        self.bits = max(int(2 * len(keys) - 1).bit_length(), 4)  # load factor <= 0.5
        self.mask = (1 << self.bits) - 1
        self.table = np.full((self.mask + 1, 2), -1, dtype=np.int64)  # (S, 2): key, row
        pending = np.arange(len(keys), dtype=np.int64)
        home = self._hash(keys)
        probe = 0
        while len(pending):
            slot = (home[pending] + probe) & self.mask
            free = np.flatnonzero(self.table[slot, 0] == -1)
            cand, fslot = pending[free], slot[free]
            self.table[fslot, 1] = cand  # several keys may race for a slot: the last one wins
            won = self.table[fslot, 1] == cand
            self.table[fslot[won], 0] = keys[cand[won]]
            keep = np.ones(len(pending), dtype=bool)
            keep[free[won]] = False
            pending = pending[keep]
            probe += 1

    def _hash(self, keys: np.ndarray) -> np.ndarray:
        h = (keys.astype(np.uint64) * _GOLDEN) >> np.uint64(64 - self.bits)
        return h.astype(np.int64)

    def lookup(self, queries: np.ndarray) -> np.ndarray:
        """Row of each query key, or -1."""
        queries = np.asarray(queries, dtype=np.int64)
        out = np.full(len(queries), -1, dtype=np.int64)
        pending = np.arange(len(queries), dtype=np.int64)
        slot = self._hash(queries)
        while len(pending):
            entry = self.table[slot]  # (n, 2)
            hit = entry[:, 0] == queries[pending]
            out[pending[hit]] = entry[hit, 1]
            go_on = ~hit & (entry[:, 0] != -1)
            pending = pending[go_on]
            slot = (slot[go_on] + 1) & self.mask
        return out


@dataclass
class NGramCounts:
    """Raw counts of every n-gram of orders 1..N, as prefix-linked sorted keys.

    Attributes
    ----------
    order : int
        N, the highest order.
    vocab_size : int
        V; order-1 rows are the vocabulary ids 0 .. V-1.
    keys : list of ndarray
        ``keys[m-1]`` (sorted int64) for order m: ``prefix_row * V + last_word``.
        ``keys[0]`` is ``arange(V)``.
    counts : list of ndarray
        ``counts[m-1][j]``: how often n-gram j of order m occurs (int64). ``<s>`` has
        unigram count 0: it is context, never predicted.
    suffix : list of ndarray
        ``suffix[m-1][j]`` (m >= 2): row in order m-1 of the n-gram without its first word.
    n_sentences, n_tokens : int
        Sentences counted; predicted tokens (words + one ``</s>`` each).

    Examples
    --------
    >>> c = count_sequences([[3, 4], [3]], order=2, vocab_size=5)
    >>> c.words(2).tolist(), c.counts[1].tolist()  # <s> a, <s> b... as ids, sorted
    ([[1, 3], [3, 2], [3, 4], [4, 2]], [2, 1, 1, 1])
    >>> c.continuation(1).tolist()  # N1+(. w): distinct left neighbours of each word
    [0, 0, 2, 1, 1]
    """

    order: int
    vocab_size: int
    keys: list
    counts: list
    suffix: list
    n_sentences: int = 0
    n_tokens: int = 0
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def sizes(self) -> list:
        """Number of distinct n-grams of each order (order 1: the vocabulary size)."""
        return [len(k) for k in self.keys]

    def prefix(self, m: int) -> np.ndarray:
        """Row in order m-1 of each order-m n-gram's context (its first m-1 words)."""
        return self.keys[m - 1] // self.vocab_size

    def last(self, m: int) -> np.ndarray:
        """Last word id of each order-m n-gram."""
        return self.keys[m - 1] % self.vocab_size

    def first(self, m: int) -> np.ndarray:
        """First word id of each order-m n-gram."""
        ck = ("first", m)
        if ck not in self._cache:
            self._cache[ck] = (self.keys[0] if m == 1 else self.first(m - 1)[self.prefix(m)])
        return self._cache[ck]

    def words(self, m: int) -> np.ndarray:
        """(U_m, m) matrix of the word ids of every order-m n-gram, in table order."""
        if m == 1:
            return self.keys[0][:, None].copy()
        return np.column_stack([self.words(m - 1)[self.prefix(m)], self.last(m)])

    def continuation(self, m: int) -> np.ndarray:
        """N1+(. g): number of distinct words seen before each order-m n-gram g (m < N)."""
        if m >= self.order:
            raise InputError(f"continuation counts need an order above m={m} (N={self.order})")
        return np.bincount(self.suffix[m], minlength=len(self.keys[m - 1])).astype(np.int64)

    def index(self, m: int, ids) -> np.ndarray:
        """Row of each order-m n-gram given as an (n, m) id matrix, or -1 if never seen."""
        ids = np.atleast_2d(np.asarray(ids, dtype=np.int64))
        if ids.shape[1] != m:
            raise InputError(f"expected n-grams of {m} ids, got shape {ids.shape}", shape=ids.shape)
        rows = np.where((ids[:, 0] >= 0) & (ids[:, 0] < self.vocab_size), ids[:, 0], -1)
        for j in range(1, m):
            keys = rows * self.vocab_size + ids[:, j]
            rows = np.where(rows >= 0, lookup_keys(self.keys[j], keys), -1)
        return rows

    def count(self, ngram) -> int:
        """Raw count of one n-gram given as a sequence of ids (0 if never seen)."""
        ngram = list(ngram)
        if not 1 <= len(ngram) <= self.order:
            return 0
        row = int(self.index(len(ngram), [ngram])[0])
        return int(self.counts[len(ngram) - 1][row]) if row >= 0 else 0


# --------------------------------------------------------------------------- counting


def unique_inverse(keys: np.ndarray):
    """``np.unique(keys, return_inverse=True, return_counts=True)`` for non-negative int64 keys.

    When key and position fit together in 62 bits, one plain ``np.sort`` of
    ``key << b | position`` replaces the (slower) argsort that ``np.unique`` does.
    """
    n = len(keys)
    bits = max(int(n - 1).bit_length(), 1)
    if n == 0 or int(keys.max()) >= (1 << (62 - bits)) or int(keys.min()) < 0:
        return np.unique(keys, return_inverse=True, return_counts=True)
    packed = np.sort((keys << bits) | np.arange(n, dtype=np.int64))  # (n,)
    sorted_keys = packed >> bits
    flag = np.empty(n, dtype=bool)
    flag[0] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=flag[1:])
    starts = np.flatnonzero(flag)
    inv = np.empty(n, dtype=np.int64)
    inv[packed & ((1 << bits) - 1)] = np.cumsum(flag) - 1
    return sorted_keys[starts], inv, np.diff(np.append(starts, n))



def count_stream(stream: np.ndarray, seg_start: np.ndarray, order: int, vocab_size: int) -> NGramCounts:
    """Count all n-grams of orders 1..N of one padded stream (one chunk).

    Notes
    -----
    The m-gram ending at position i exists when i - seg_start[i] >= m - 1 and i is not a
    sentence start. Its key is row_{m-1}(i-1) * V + stream[i], where row_{m-1}(i-1) is the
    row of the (m-1)-gram ending at i-1; ``np.unique`` turns keys into rows for the next order.
    """
    V = int(vocab_size)
    offset = np.arange(len(stream), dtype=np.int64) - seg_start  # (L,) position in sentence
    predicted = offset >= 1
    unigram = np.bincount(stream[predicted], minlength=V).astype(np.int64)
    keys, counts, suffix = [np.arange(V, dtype=np.int64)], [unigram], [None]
    rows = stream  # row of the (m-1)-gram ending at each position; order 1: the id itself
    for m in range(2, order + 1):
        pos = np.flatnonzero(offset >= m - 1)  # (n,) end positions of m-grams
        mkeys = rows[pos - 1] * V + stream[pos]
        uniq, inv, cnt = unique_inverse(mkeys)
        suf = np.empty(len(uniq), dtype=np.int64)
        suf[inv] = rows[pos]
        keys.append(uniq)
        counts.append(cnt.astype(np.int64))
        suffix.append(suf)
        if m < order:
            new_rows = np.full(len(stream), -1, dtype=np.int64)
            new_rows[pos] = inv
            rows = new_rows
    return NGramCounts(order, V, keys, counts, suffix, n_sentences=int((offset == 0).sum()),
                       n_tokens=int(predicted.sum()))


def merge_counts(parts: list, vocab_size: int) -> NGramCounts:
    """Merge chunk counts (each with its own vocabulary size <= ``vocab_size``) into one table."""
    V = int(vocab_size)
    order = parts[0].order
    unigram = np.zeros(V, dtype=np.int64)
    for p in parts:
        unigram[: p.vocab_size] += p.counts[0]
    keys, counts, suffix = [np.arange(V, dtype=np.int64)], [unigram], [None]
    maps = [np.arange(p.vocab_size, dtype=np.int64) for p in parts]  # chunk row -> merged row
    for m in range(2, order + 1):
        translated = [maps[i][p.keys[m - 1] // p.vocab_size] * V + p.keys[m - 1] % p.vocab_size
                      for i, p in enumerate(parts)]
        uniq, inv = np.unique(np.concatenate(translated), return_inverse=True)
        cnt = np.bincount(inv, weights=np.concatenate([p.counts[m - 1] for p in parts]),
                          minlength=len(uniq))
        suf = np.empty(len(uniq), dtype=np.int64)
        suf[inv] = np.concatenate([maps[i][p.suffix[m - 1]] for i, p in enumerate(parts)])
        keys.append(uniq)
        counts.append(np.rint(cnt).astype(np.int64))
        suffix.append(suf)
        splits = np.cumsum([len(t) for t in translated])[:-1]
        maps = np.split(inv, splits)
    return NGramCounts(order, V, keys, counts, suffix,
                       n_sentences=sum(p.n_sentences for p in parts),
                       n_tokens=sum(p.n_tokens for p in parts))


def count_ngrams(chunks: Iterable, order: int, vocab_size=None, bos_id: int = 1, eos_id: int = 2,
                 merge_every: int = 8) -> NGramCounts:
    """Count n-grams chunk by chunk and merge.

    Parameters
    ----------
    chunks : iterable of (flat_ids, lengths)
        Each chunk: the word ids of its sentences concatenated, and each sentence's length.
    order : int
        N (1 .. 10).
    vocab_size : int or callable, optional
        V, or a function returning the final V once every chunk was read (a vocabulary that
        grows while reading). Default: 1 + the largest id seen.
    merge_every : int
        Pending chunk tables are merged whenever this many accumulate (bounded memory).

    Returns
    -------
    NGramCounts
        The same counts whatever the chunking (a property test checks it).

    Notes
    -----
    Each chunk is padded (:func:`padded_stream`) and counted on its own; tables are merged
    by translating each chunk's prefix rows into the merged table, order by order, and
    summing the counts of equal keys. Memory holds at most ``merge_every`` chunk tables plus
    the merged one: it grows with the distinct n-grams, not with the corpus.

    Examples
    --------
    >>> chunks = [(np.array([3, 4]), np.array([2])), (np.array([3]), np.array([1]))]
    >>> c = count_ngrams(chunks, order=2, vocab_size=5)
    >>> c.count([3]), c.count([1, 3]), c.sizes(), c.n_sentences, c.n_tokens
    (2, 2, [5, 4], 2, 5)
    """
    order = check_order(order)
    pending: list = []
    for flat, lengths in chunks:
        flat = np.asarray(flat, dtype=np.int64)
        lengths = np.asarray(lengths, dtype=np.int64)
        if len(lengths) == 0:
            continue
        stream, seg = padded_stream(flat, lengths, bos_id, eos_id)
        V_chunk = int(max(stream.max(), bos_id, eos_id)) + 1
        pending.append(count_stream(stream, seg, order, V_chunk))
        if len(pending) >= merge_every:
            pending = [merge_counts(pending, max(p.vocab_size for p in pending))]
    if not pending:
        raise InputError("cannot count n-grams of an empty corpus: there are no lines (sentences)")
    V = vocab_size() if callable(vocab_size) else vocab_size
    V = int(V) if V is not None else max(p.vocab_size for p in pending)
    if V < max(p.vocab_size for p in pending):
        raise InputError(f"vocab_size {V} is smaller than the largest id seen + 1", value=V)
    if len(pending) == 1 and pending[0].vocab_size == V:
        return pending[0]
    return merge_counts(pending, V)


def count_sequences(sequences: Iterable, order: int, vocab_size: int, bos_id: int = 1,
                    eos_id: int = 2, chunk_tokens: int = 1 << 20) -> NGramCounts:
    """Count n-grams of sentences given as id sequences (words only, no ``<s>``/``</s>``).

    Examples
    --------
    >>> c = count_sequences([[3, 4], [3]], order=2, vocab_size=5)
    >>> c.count([3]), c.count([1, 3]), c.count([3, 2])
    (2, 2, 1)
    """
    return count_ngrams(_chunked(sequences, chunk_tokens), order, vocab_size, bos_id, eos_id)


def _chunked(sequences: Iterable, chunk_tokens: int) -> Iterator:
    buf: list = []
    n = 0
    for seq in sequences:
        buf.append(seq)
        n += len(seq) + 2
        if n >= chunk_tokens:
            yield _flatten(buf)
            buf, n = [], 0
    if buf:
        yield _flatten(buf)


def _flatten(seqs: list):
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    flat = np.concatenate([np.asarray(s, dtype=np.int64) for s in seqs]) if lengths.sum() else \
        np.zeros(0, dtype=np.int64)
    return flat, lengths
