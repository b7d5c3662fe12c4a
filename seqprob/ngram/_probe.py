"""The query engine of back-off tables: one record per n-gram in hash order, probed order by order
only where the shorter n-gram matched.

:class:`ProbeIndex` holds, for one order m >= 2, a record per listed n-gram ``(key, row,
log p, log gamma)`` (int64 words; the two floats as their bits; the highest order keeps only
``(key, log p)``), sorted by a multiplicative hash of the key (the most probable n-gram first
inside a bucket), plus one int32 entry per hash bucket: its first record and whether it holds
several (a CSR layout, 0.25 to 0.5 records per bucket on average, no empty record slots). A
look-up reads one bucket entry and one 32-byte record: what a query needs from that order comes
in one random memory access. Only the ~5% of queries that miss the first record of a shared
bucket read on (the rest of the bucket in one gather).

:func:`score_chain` scores a token stream the ARPA back-off way. Keys are prefix-linked
(``key = row of the (m-1)-gram prefix * V + word``), so the m-gram ending at i can only be
listed where the (m-1)-gram ending at i-1 was found: each order is probed only at those
positions (on held-out text the hits shrink fast: ~64%, 22%, 4%, 0.4% of the positions for
orders 2-5 of the benchmark model), never over every position.
"""
from __future__ import annotations

import numpy as np

from ..errors import FileFormatError

__all__ = ["ProbeIndex", "score_chain"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
KEY, ROW, LOGP, LOGBOW = range(4)  # columns of a 4-column record
TOP_LOGP = 1  # the log p column of a 2-column record (highest order)


class ProbeIndex:
    """Records of one order in hash order, found by key (see the module docstring).

    Parameters
    ----------
    bits : int
        2**bits hash buckets.
    buckets : ndarray
        (2**bits,) int32 (int64 from 2**30 records): ``first << 1 | several``, the first record
        of each bucket and whether the bucket holds more than one record. An empty bucket
        points at the next bucket's records (whose keys hash elsewhere: never a match).
    records : ndarray
        (n + 1, 4) int64 ``key, row, log p bits, log gamma bits``, or (n + 1, 2) ``key, log p
        bits`` for the highest order; the last row is a sentinel with key -1 (never a query:
        keys are >= 0).
    keys : ndarray, optional
        The sorted keys, for :meth:`lookup` of a 2-column index (rows by binary search).
    longest : int, optional
        The most records in one bucket (else computed at the first look-up that needs it).
    source : str, optional
        Where ``buckets`` and ``records`` were read from (a ``.sqlm`` path), for the error of a
        damaged file.

    Notes
    -----
    bucket(key) = (key * 0x9E3779B97F4A7C15 mod 2**64) >> (64 - bits) (Fibonacci hashing);
    bits = ceil(log2 n) + 1, so a bucket holds n / 2**bits in (0.25, 0.5] records on average
    (4-8 bytes of bucket array per n-gram); inside a bucket the likeliest n-gram (highest
    joint log-probability, when the tables give it) comes first. A look-up reads one bucket entry and one record; only a query that
    misses the first record of a bucket holding several reads on, until the key or a record
    of another bucket.

    Examples
    --------
    >>> idx = ProbeIndex.build(np.array([3, 10, 42]), np.log([0.5, 0.25, 0.25]), np.zeros(3))
    >>> idx.lookup(np.array([42, 5, 3])).tolist()
    [2, -1, 0]
    >>> hit, rec = idx.probe(np.array([10, 11]))
    >>> hit.tolist(), np.exp(rec[hit, LOGP].view(np.float64)).tolist()
    ([True, False], [0.25])
    """

    def __init__(self, bits: int, buckets: np.ndarray, records: np.ndarray, keys=None, longest=None,
                 source=None):
        self.bits, self.buckets, self.records, self.keys = int(bits), buckets, records, keys
        self.shift = np.uint64(64 - self.bits)
        self._longest = longest
        self.source = source

    @classmethod
    def build(cls, keys: np.ndarray, logp: np.ndarray, logbow=None, rows=None, spread: int = 1,
              rank=None) -> "ProbeIndex":
        """Index of the unique ``keys`` (row = position in ``keys`` unless ``rows`` is given);
        without ``logbow`` the records are ``(key, log p)`` (the highest order). ``spread``:
        bits = ceil(log2 n) + spread (more buckets, fewer shared ones). ``rank`` (default
        ``logp``): inside a bucket, the record with the highest rank comes first (the joint
        log-probability of the n-gram puts the most often queried first)."""
        keys = np.asarray(keys, dtype=np.int64)
        n = len(keys)
        rows = np.arange(n, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        bits = max(int(n - 1).bit_length(), 0) + spread
        home = _bucket(keys, np.uint64(64 - bits))  # (n,)
        rank = np.nan_to_num(np.asarray(logp if rank is None else rank, dtype=np.float64), nan=-np.inf)
        likeliest = np.argsort(-rank, kind="stable")  # (n,)
        order = likeliest[np.argsort(home[likeliest], kind="stable")]  # (n,) by bucket, likeliest first
        size = np.bincount(home, minlength=1 << bits)  # (2**bits,)
        first = np.cumsum(size) - size
        buckets = ((first << 1) | (size > 1)).astype(np.int64 if n >= 2**30 else np.int32)
        logp = np.asarray(logp, dtype=np.float64).view(np.int64)
        if logbow is None:
            cols = [keys, logp]
        else:
            cols = [keys, rows, logp, np.asarray(logbow, dtype=np.float64).view(np.int64)]
        records = np.empty((n + 1, len(cols)), dtype=np.int64)  # (n+1, C)
        for j, col in enumerate(cols):
            records[:n, j] = col[order]
        records[n] = -1
        return cls(bits, buckets, records, keys, longest=int(size.max(initial=0)))

    @property
    def has_rows(self) -> bool:
        return self.records.shape[1] == 4

    def probe(self, queries: np.ndarray):
        """(hit, records): ``hit`` (n,) bool; ``records`` (n, C), the record of each hit
        (rows where ``hit`` is False hold another key's record)."""
        queries = np.ascontiguousarray(queries, dtype=np.int64)
        home = _bucket(queries, self.shift)  # (n,)
        entry = np.take(self.buckets, home)  # (n,) first record << 1 | several
        lo = (entry >> 1).astype(np.intp)  # (n,)
        self._check_range(lo, len(self.records), "a bucket's first record")
        rec = np.take(self.records, lo, axis=0)  # (n, C): one random access per query
        hit = rec[:, KEY] == queries  # a record of another bucket never holds the key
        pending = np.flatnonzero((entry & 1) > hit)  # (p,) in a bucket of several, not the first
        if len(pending):
            self._walk(queries, home, lo, rec, hit, pending)
        return hit, rec

    @property
    def longest(self) -> int:
        """The most records in one bucket (one pass over the bucket entries, on first use)."""
        if self._longest is None:
            first = np.append(self.buckets >> 1, len(self.records) - 1)  # (2**bits + 1,)
            self._longest = int(np.diff(first).max(initial=0))
        return self._longest

    def _walk(self, queries, home, lo, rec, hit, pending) -> None:
        """Read on in the buckets that hold several records (updates ``rec`` and ``hit``): the
        keys of the rest of each bucket (up to the next bucket's first record) in one ragged
        gather (a key can only match in its own bucket), or step by step if a bucket is
        unusually long."""
        if self.longest > 33:
            return self._walk_steps(queries, home, lo, rec, hit, pending)
        after = home[pending] + 1  # (p,) the next bucket, whose first record ends this one
        end = np.take(self.buckets, np.minimum(after, len(self.buckets) - 1)) >> 1  # (p,)
        end = np.where(after < len(self.buckets), end, len(self.records) - 1)
        first = lo[pending] + 1  # (p,) the records after the one already read
        left = (end - first).astype(np.intp)  # (p,) >= 1: the bucket holds several
        # Bounds before the ragged gather: damaged entries must not size np.repeat (GiBs) or
        # index past the records.
        self._check_range(end, len(self.records), "a bucket's end")
        self._check_range(left, self.longest, "a bucket's length")
        owner = np.repeat(pending, left)  # (t,) the query of each record to read
        at = np.arange(len(owner)) + np.repeat(first - (np.cumsum(left) - left), left)  # (t,)
        match = np.flatnonzero(self.records[:, KEY][at] == queries[owner])
        now = owner[match]  # each key is once in its bucket: one match per query at most
        rec[now] = np.take(self.records, at[match], axis=0)
        hit[now] = True

    def _walk_steps(self, queries, home, lo, rec, hit, pending) -> None:
        step = 1
        while len(pending):
            at = lo[pending] + step  # (p,)
            self._check_range(at, len(self.records), "a bucket's record")  # a damaged sentinel
            nxt = np.take(self.records, at, axis=0)  # (p, C)
            key = nxt[:, KEY]
            found = key == queries[pending]
            now = pending[found]
            rec[now] = np.compress(found, nxt, axis=0)
            hit[now] = True
            same = (key != -1) & (_bucket(np.ascontiguousarray(key), self.shift) == home[pending])
            pending = pending[~found & same]
            step += 1

    def lookup(self, queries: np.ndarray) -> np.ndarray:
        """Row of each query key, or -1."""
        if not self.has_rows:
            from .counts import lookup_keys

            return lookup_keys(self.keys, np.asarray(queries, dtype=np.int64))
        hit, rec = self.probe(queries)
        rows = np.where(hit, rec[:, ROW], -1)
        self._check_range(rows + 1, len(self.records), "a record's row")  # -1 (a miss) included
        return rows

    def _check_range(self, values: np.ndarray, limit: int, what: str) -> None:
        """FileFormatError unless every value is in ``[0, limit)``: buckets and records read
        from a file are trusted only after this (the default load skips the checksums). An
        index built in memory (``source`` None) is consistent by construction: not checked."""
        if self.source is None or not len(values):
            return
        # One reduction: a negative value read as unsigned is larger than any limit.
        top = int(values.astype(np.int64, copy=False).view(np.uint64).max())
        if top >= limit:
            self.corrupted(f"{what} is {np.int64(np.uint64(top))}, outside 0..{limit - 1}",
                           value=int(np.int64(np.uint64(top))), limit=limit - 1)

    def corrupted(self, detail: str, **data) -> None:
        """Raise the :class:`FileFormatError` of damaged query records."""
        raise damaged(self.source, f"corrupted n-gram query records ({detail})", **data)


def damaged(path, detail: str, **data) -> FileFormatError:
    """The error of a damaged ``.sqlm`` file (``path`` None when unknown): the default load
    skips the checksums, so the message points to ``verify=True``."""
    where = f"{path!r}: " if path else ""
    return FileFormatError(f"{where}{detail}: the file is damaged; run load_ngram(path, "
                           "verify=True) to check its checksums", path=path, **data)


def _bucket(keys: np.ndarray, shift: np.uint64) -> np.ndarray:
    return ((keys.view(np.uint64) * _GOLDEN) >> shift).view(np.int64)


def score_chain(tables, stream: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """log P(stream[i] | its history) for every position, NaN where ``offset`` < 1.

    Parameters
    ----------
    tables : BackoffTables
        With ``unlisted_logbow == 0`` (a normalized back-off model).
    stream : ndarray
        (L,) ids.
    offset : ndarray
        (L,) position of each id in its segment (0 at a segment's first id), or (L,) bool:
        True where the id has a history (``offset >= 1``), all that is used of it.

    Notes
    -----
    log P(w_i | h) = log p(longest listed n-gram ending at i, order b)
    + sum_{j=b}^{min(offset_i, N-1)} log gamma(j-gram ending at i-1) (0 where it is not
    listed), added in the order logp, then j = 1, 2, ... like the dense reference
    (:meth:`BackoffTables.score_stream_reference`), so both give the same bits. The unigram
    score plus the back-off of the word before (j = 1) is computed everywhere; order 2 is
    probed at every position (one gather of the stream's pairs, no position list) and a hit
    overwrites that sum. Orders m >= 3 are probed only where the shorter n-gram ending one
    position earlier was found: log gamma of that (m-1)-gram context is added there first, and a
    hit of order m overwrites the sum with its log p (then gets the weights of orders >= m).

    Examples
    --------
    >>> from seqprob.ngram.tables import BackoffTables
    >>> t = BackoffTables(3, [np.arange(3)], [np.log([0.5, 0.25, 0.25])], [])
    >>> np.exp(score_chain(t, np.array([0, 2, 1]), np.array([0, 1, 2]))).tolist()
    [nan, 0.25, 0.25]
    """
    N, L, V = tables.order, len(stream), tables.vocab_size
    out = np.take(tables.logp[0], stream).astype(np.float64, copy=False)  # (L,) unigram scores (a new array)
    has_history = offset if offset.dtype == bool else offset >= 1  # (L,)
    if N == 1 or L < 2:
        out[~has_history] = np.nan  # nothing predicted at a segment start
        return out
    scored, tail = has_history[1:], out[1:]  # (L-1,) views: positions 1 .. L-1
    tail += np.take(tables.logbow[0], stream[:-1])  # j = 1, right where order 2 misses
    index = tables.probe_index(2)
    hit, rec = index.probe(stream[:-1] * V + stream[1:])  # (L-1,), (L-1, C)
    hit &= scored
    np.copyto(tail, rec[:, LOGP if N > 2 else TOP_LOGP].view(np.float64), where=hit)  # (overwrites j = 1)
    out[~has_history] = np.nan
    if N == 2:
        return out
    goes_on = np.append(scored, False)  # (L,) position i + 1 continues i's segment
    found = np.flatnonzero(hit[:-1] & scored[1:])  # (h,) order-2 hits (at found + 1) probed at order 3
    cand = found + 2  # (h,) positions probed at order m, after a hit of order m - 1
    for m in range(3, N + 1):
        out[cand] += rec[:, LOGBOW].view(np.float64)[found]  # j = m - 1, unless overwritten below
        ctx = rec[:, ROW][found]  # (h,) rows of the (m-1)-grams found: a damaged one would
        index._check_range(ctx, len(tables.keys[m - 2]), "a record's row")  # miss silently
        index = tables.probe_index(m)
        hit, rec = index.probe(ctx * V + stream[cand])
        found = np.flatnonzero(hit)  # (h,)
        pos = cand[found]
        out[pos] = rec[:, LOGP if m < N else TOP_LOGP].view(np.float64)[found]  # the longer match
        found = found[goes_on[pos]]  # hits whose next position is probed at order m + 1
        if m == N or not len(found):
            break
        cand = cand[found] + 1
    return out
