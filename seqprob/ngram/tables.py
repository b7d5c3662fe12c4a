"""Back-off tables: the scoring engine shared by every n-gram estimator and by ARPA files.

A back-off model lists, for each order m, some n-grams (h, w) with their full probability
log P(w | h), and for each listed context h a back-off weight log gamma(h). An unlisted
(h, w) backs off: log P(w | h) = log gamma(h) + log P(w | h'), h' = h without its first word
(an unlisted context has gamma = 1). Interpolated estimators (Kneser-Ney, Witten-Bell,
absolute discounting) are exactly of this form, which is what the ARPA format stores.

Keys use the prefix-linked layout of :mod:`seqprob.ngram.counts`: ``key = prefix_row * V + word``.
"""
from __future__ import annotations

import numpy as np

from ..base import PrefixState
from .counts import KeyHash, child_bounds, lookup_keys
from ._probe import ProbeIndex, score_chain

__all__ = ["BackoffTables", "NGramState", "ngram_rows", "segments_of_batch", "expand_children"]


#: The incremental state of an n-gram model is the one prefix state of every model (its
#: ``ids`` are the last n-1 ids): the name is kept for existing imports.
NGramState = PrefixState


def expand_children(pos: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """Every (position, child row) pair: position ``pos[i]`` once per row in ``[lo[i], hi[i])``.

    The child rows of a context are a contiguous range of the sorted keys of the next order
    (see :func:`seqprob.ngram.counts.child_bounds`); this flattens all ranges at once.

    Returns
    -------
    (ndarray, ndarray)
        ``r`` (N,) the repeated positions and ``child`` (N,) the rows, N = sum(hi - lo).

    Examples
    --------
    >>> r, child = expand_children(np.array([7, 9]), np.array([2, 10]), np.array([4, 11]))
    >>> r.tolist(), child.tolist()
    ([7, 7, 9], [2, 3, 10])
    """
    n = hi - lo  # (P,)
    r = np.repeat(pos, n)  # (N,)
    child = np.repeat(lo - np.cumsum(n) + n, n) + np.arange(int(n.sum()))  # (N,)
    return r, child


def segments_of_batch(batch: np.ndarray):
    """Flatten a (B, W) batch into one stream whose segments are the rows."""
    B, W = batch.shape
    seg = np.repeat(np.arange(B, dtype=np.int64) * W, W)  # (B*W,)
    return batch.reshape(-1), seg


def ngram_rows(keys: list, vocab_size: int, stream: np.ndarray, seg_start: np.ndarray,
               max_order: int, hashes=None) -> list:
    """Row of the m-gram ending at each position, for m = 1 .. max_order (-1: not listed).

    ``rows[m-1][i]`` is the row in ``keys[m-1]`` of stream[i-m+1 .. i], or -1 when that
    window crosses the start of its segment or is not in the table. Only positions whose
    (m-1)-gram prefix was found are looked up (the prefix-linked keys need it anyway).
    ``hashes(m)``, when given, returns a :class:`KeyHash` of order m (faster look-ups).
    """
    V = vocab_size
    offset = np.arange(len(stream), dtype=np.int64) - seg_start  # (L,)
    rows = [stream]
    prev = stream
    for m in range(2, max_order + 1):
        cur = np.full(len(stream), -1, dtype=np.int64)
        cand = np.flatnonzero(offset >= m - 1)
        if len(cand):
            cand = cand[prev[cand - 1] >= 0]
            if len(cand):
                query = prev[cand - 1] * V + stream[cand]
                cur[cand] = lookup_keys(keys[m - 1], query) if hashes is None else hashes(m).lookup(query)
        rows.append(cur)
        prev = cur
    return rows


class BackoffTables:
    """Listed n-grams with log-probabilities and back-off weights, order by order.

    Parameters
    ----------
    vocab_size : int
        V; order 1 lists every id 0 .. V-1.
    keys : list of ndarray
        Prefix-linked sorted keys per order (``keys[0] = arange(V)``).
    logp : list of ndarray
        log P(w | h) (natural log) of every listed n-gram, per order.
    logbow : list of ndarray
        log gamma of every n-gram of orders 1 .. N-1 used as a context (0 if it is not one).
    unlisted_logbow : float
        Weight applied when backing off from an unlisted context: 0 for a normalized model
        (ARPA semantics); log alpha for stupid back-off.

    Notes
    -----
    log P(w | h) = log p(h_{n-m*+1..} w) + sum_{j=m*}^{n-1} log gamma(h_{last j}), with m* the
    longest listed n-gram ending in w (ARPA back-off).

    Examples
    --------
    >>> t = BackoffTables(3, [np.arange(3)], [np.log([0.5, 0.25, 0.25])], [])  # a unigram model
    >>> np.exp(t.token_logprobs(np.array([[0, 2, 1]]))).tolist()
    [[0.25, 0.25]]
    """

    def __init__(self, vocab_size: int, keys: list, logp: list, logbow: list,
                 unlisted_logbow: float = 0.0):
        self.vocab_size = int(vocab_size)
        self.keys, self.logp, self.logbow = keys, logp, logbow
        self.unlisted_logbow = float(unlisted_logbow)
        self._child_bounds: dict = {}
        self._hashes: dict = {}
        self._probes: dict = {}

    @property
    def order(self) -> int:
        return len(self.keys)

    def sizes(self) -> list:
        return [len(k) for k in self.keys]

    # ------------------------------------------------------------------ scoring
    def score_stream(self, stream: np.ndarray, seg_start: np.ndarray) -> np.ndarray:
        """log P(stream[i] | its history inside its segment) for every position (NaN at starts).

        Probes each order only where the shorter n-gram matched (:func:`score_chain`); a model
        with a non-zero ``unlisted_logbow`` (stupid back-off) is scored by
        :meth:`score_stream_reference`.
        """
        if self.unlisted_logbow:
            return self.score_stream_reference(stream, seg_start)
        offset = np.arange(len(stream), dtype=np.int64) - seg_start  # (L,)
        return score_chain(self, stream, offset)

    def score_stream_reference(self, stream: np.ndarray, seg_start: np.ndarray) -> np.ndarray:
        """:meth:`score_stream` the direct way: every order looked up (binary search) at every
        position, then dense passes; the reference the fast path is tested against."""
        N = self.order
        L = len(stream)
        offset = np.arange(L, dtype=np.int64) - seg_start  # (L,)
        rows = ngram_rows(self.keys, self.vocab_size, stream, seg_start, N)
        target = offset >= 1
        best = np.where(target, 1, 0)  # (L,) longest listed n-gram ending at i
        for m in range(2, N + 1):
            best[rows[m - 1] >= 0] = m
        out = np.full(L, np.nan)
        for m in range(1, N + 1):
            sel = np.flatnonzero(best == m)
            out[sel] = self.logp[m - 1][rows[m - 1][sel]]
        for j in range(1, N):
            apply = np.flatnonzero(target & (offset >= j) & (best <= j))
            if not len(apply):
                continue
            ctx = rows[j - 1][apply - 1]
            bow = np.where(ctx >= 0, self.logbow[j - 1][np.maximum(ctx, 0)], self.unlisted_logbow)
            out[apply] += bow
        return out

    def token_logprobs(self, batch: np.ndarray) -> np.ndarray:
        """(B, T+1) ids -> (B, T) log P(x_t | x_<t)."""
        stream, seg = segments_of_batch(batch)
        return self.score_stream(stream, seg).reshape(batch.shape)[:, 1:]

    def logprob_rows(self, batch: np.ndarray) -> np.ndarray:
        """(B, T) ids -> (B, T, V): the full next-token distribution after every prefix."""
        B, T = batch.shape
        V, N = self.vocab_size, self.order
        stream, seg = segments_of_batch(batch)
        offset = np.arange(len(stream), dtype=np.int64) - seg  # (B*T,)
        rows = ngram_rows(self.keys, V, stream, seg, N - 1, self.hash) if N > 1 else [stream]
        out = np.broadcast_to(self.logp[0], (len(stream), V)).copy()  # (B*T, V)
        for m in range(2, N + 1):
            has = np.flatnonzero(offset >= m - 2)  # positions with a context of m-1 words
            ctx = rows[m - 2][has]
            listed = ctx >= 0
            if self.unlisted_logbow and (~listed).any():
                out[has[~listed]] += self.unlisted_logbow
            pos, ctx = has[listed], ctx[listed]
            if not len(pos):
                continue
            out[pos] += self.logbow[m - 2][ctx][:, None]
            r, child = expand_children(pos, *self.children(m, ctx))
            out[r, self.keys[m - 1][child] % V] = self.logp[m - 1][child]
        return out.reshape(B, T, V)

    def hash(self, m: int):
        """Row look-up of the order-m keys: the :class:`ProbeIndex` below the highest order,
        else a :class:`KeyHash` (built on first use)."""
        if m in self._hashes:
            return self._hashes[m]
        if m < self.order:
            return self.probe_index(m)
        self._hashes[m] = KeyHash(self.keys[m - 1])
        return self._hashes[m]

    def probe_index(self, m: int) -> ProbeIndex:
        """The query records of order m >= 2 (built on first use, or mapped from a ``.sqlm``).

        The records copy log p and log gamma: they are rebuilt when ``logp[m-1]`` or
        ``logbow[m-1]`` is replaced by another array (pruning and mixing recompute back-off
        weights that way); an array changed in place is not noticed.
        """
        logp, logbow = self.logp[m - 1], (self.logbow[m - 1] if m < self.order else None)
        built = self._probes.get(m)
        if built is None or built[0] is not logp or built[1] is not logbow:
            built = (logp, logbow, ProbeIndex.build(self.keys[m - 1], logp, logbow, rank=self._joint_logprob(m)))
            self._probes[m] = built
        return built[2]

    def _joint_logprob(self, m: int) -> np.ndarray:
        """(n_m,) log p(w_1) + log p(w_2 | w_1) + ... of each order-m n-gram's listed chain."""
        joint = self.logp[0]
        for j in range(2, m + 1):
            joint = joint[self.keys[j - 1] // self.vocab_size] + self.logp[j - 1]
        return joint

    def set_probe_index(self, m: int, index: ProbeIndex) -> None:
        """Use ``index`` (records of the current ``logp`` / ``logbow`` of order m) for order m."""
        self._probes[m] = (self.logp[m - 1], self.logbow[m - 1] if m < self.order else None, index)

    def bounds(self, m: int) -> np.ndarray:
        """Child offsets of order m over the order-(m-1) rows (computed once)."""
        if m not in self._child_bounds:
            self._child_bounds[m] = child_bounds(self.keys[m - 1], len(self.keys[m - 2]), self.vocab_size)
        return self._child_bounds[m]

    def children(self, m: int, ctx_rows: np.ndarray):
        """Range [lo, hi) of the order-m rows whose context is each order-(m-1) row."""
        b = self.bounds(m)
        return b[ctx_rows], b[ctx_rows + 1]

    # ------------------------------------------------------------------ introspection
    def words(self, m: int) -> np.ndarray:
        """(U_m, m) word ids of every listed order-m n-gram."""
        if m == 1:
            return self.keys[0][:, None].copy()
        V = self.vocab_size
        return np.column_stack([self.words(m - 1)[self.keys[m - 1] // V], self.keys[m - 1] % V])

    def index(self, m: int, ids) -> np.ndarray:
        """Row of each order-m n-gram given as an (n, m) id matrix, or -1 if unlisted."""
        ids = np.atleast_2d(np.asarray(ids, dtype=np.int64))
        rows = ids[:, 0].copy()
        for j in range(1, m):
            rows = np.where(rows >= 0, lookup_keys(self.keys[j], rows * self.vocab_size + ids[:, j]), -1)
        return rows
