"""Text straight to an ARPA file: :func:`fit_arpa`, and modified Kneser-Ney in bounded memory
without the model (like ``lmplz -S``).

:meth:`NGramModel.fit` with ``memory=`` bounds counting and merging, then builds the model's
tables in memory. :func:`fit_mkn_arpa` never builds the model: after the bounded counting it
streams over the merged tables on disk, order by order, and writes each ARPA section as soon
as it is complete:

1. adjusted counts of order m (continuation counts from order m+1's suffix rows; raw counts
   for n-grams starting with ``<s>``) and their count-of-counts -> discounts;
2. pass m over order m in blocks that never split a context: the context sums, gamma of every
   order-(m-1) context and p(w | h) = u(w | h) + gamma(h) p(w | h') of every row, with the
   lower order's p gathered from memory (one order at a time);
3. once pass m has given the back-off weights of order m-1, section m-1 is written.

Every floating-point operation is the one of :func:`seqprob.ngram._interpolate.interpolated_tables`
in the same order (a context's sums start at 0 and run over its rows in table order), so the
file is bit for bit the one ``write_arpa(ModifiedKneserNey(...).fit(...))`` writes.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from .._io import as_path
from ..errors import InputError
from ..vocab import Vocab
from ._external import SpillDir, chunk_plan, release
from ._interpolate import _forbid_bos, _n_predictable, _zero_specials
from .arpa import arpa_writer, write_arpa
from .base import NGramModel
from .counts import NGramCounts
from .kneser_ney import ModifiedKneserNey, kenlm_quirk_rows

__all__ = ["fit_arpa", "fit_mkn_arpa"]

log = logging.getLogger(__name__)


def fit_arpa(corpus, path, model=None, *, memory=None, temp_dir=None, tokenizer=None) -> dict:
    """Fit an n-gram estimator on a corpus and write it as an ARPA file (``seqprob ngram fit``).

    Parameters
    ----------
    corpus : iterable of str, or file name
        Training sentences, one per line: a list, any iterable (read once), or a text file named
        by a ``str`` or ``pathlib.Path`` (``.gz`` is decompressed, ``'-'`` is standard input):
        where seqprob reads a corpus, a ``str`` names a file.
    path : str or path-like
        The ARPA file, written atomically (nothing is left behind on failure).
    model : NGramModel, optional
        The estimator whose settings are used (default ``ModifiedKneserNey(order=3)``). It is
        not fitted by this call: a copy is, or, on the streamed path, no model at all.
    memory : int or str, optional
        A memory budget (``"1G"``, ``"512M"``, bytes), like ``lmplz -S``: counting spills
        sorted runs to ``temp_dir``; :class:`ModifiedKneserNey` (without ``prune``) is then
        estimated and written order by order and never held whole (:func:`fit_mkn_arpa`),
        the other estimators are built from the bounded counts. The file is byte for byte
        the one written without a budget. Default: everything in memory.
    temp_dir : str or path, optional
        Folder for the spill files (needs ``memory``).
    tokenizer : Tokenizer, optional
        As in :meth:`NGramModel.fit`.

    Returns
    -------
    dict
        ``sizes`` (n-grams per order), ``n_sentences``, ``n_tokens``, ``discounts`` (the
        estimator's discounts per order, None for estimators without).

    Raises
    ------
    InputError
        ``model`` is not an n-gram estimator, or one without an ARPA form (``StupidBackoff``
        is not normalized; ``AddK`` of order > 1 is refused once fitted), or the fit fails
        as in :meth:`NGramModel.fit`.

    Examples
    --------
    >>> import tempfile, os
    >>> from seqprob.ngram import ModifiedKneserNey
    >>> out = os.path.join(tempfile.mkdtemp(), "m.arpa")
    >>> lm = ModifiedKneserNey(order=2, discounts=[(0.5, 1, 1.5)] * 2)
    >>> fit_arpa(["a b c", "a c b"], out, lm, memory="1M")["sizes"]
    [6, 7]
    """
    path = as_path(path)  # a bad name is refused before the corpus is read
    est = _unfitted_copy(ModifiedKneserNey() if model is None else model)
    if memory is not None and type(est) is ModifiedKneserNey and est.prune is None:
        return fit_mkn_arpa(est, corpus, path, memory, temp_dir, tokenizer, est.progress)
    est.fit(corpus, tokenizer, memory=memory, temp_dir=temp_dir)
    write_arpa(est, path, progress=est.progress)
    return {"sizes": est.tables_.sizes(), "n_sentences": est.counts_.n_sentences,
            "n_tokens": est.counts_.n_tokens, "discounts": getattr(est, "discounts_", None)}


def _unfitted_copy(model) -> NGramModel:
    """A fresh estimator with ``model``'s settings, checked before any text is read."""
    if not isinstance(model, NGramModel):
        raise InputError(f"fit_arpa needs an n-gram estimator (e.g. ModifiedKneserNey(order=5)), "
                         f"got {type(model).__name__}", value=type(model).__name__)
    if not model.normalized:
        raise InputError(f"{type(model).__name__} scores are not a normalized distribution; an ARPA "
                         "file holds probabilities, so it is not written (use a smoothed estimator)")
    est = type(model)(**model.get_params())
    est._check_params()
    return est


def fit_mkn_arpa(model, lines, path, memory, temp_dir=None, tokenizer=None, progress=None) -> dict:
    """Fit ``model`` (a :class:`ModifiedKneserNey`) on ``lines`` and write its ARPA file to
    ``path`` without holding the model: peak memory follows ``memory``, not the model size.

    Parameters
    ----------
    model : ModifiedKneserNey
        Its settings (order, discounts, fallback, kenlm_quirk, min_count) are used; it is not
        fitted (no tables are kept).
    lines : iterable of str, or file name
        As in :meth:`NGramModel.fit`.
    path : str or path-like
        The ARPA file, written atomically.
    memory : int or str
        The budget (``"1G"``); see :func:`seqprob.ngram._external.chunk_plan`.
    temp_dir : path, optional
        Folder of the spill files.
    progress : bool or None
        The bar over the n-grams written (as in :func:`~seqprob.ngram.arpa.write_arpa`).

    Returns
    -------
    dict
        ``sizes`` (n-grams per order), ``n_sentences``, ``n_tokens``, ``discounts``.

    Notes
    -----
    Besides the budget, memory holds: the vocabulary; per order m, one int64 and one bool per
    order-m n-gram while adjusting; during pass m, p and gamma of order m-1 (two float64 per
    order-(m-1) n-gram) and the blocks. ``kenlm_quirk=True`` also reads every highest-order
    n-gram once as a word matrix.
    """
    model._check_params()
    if getattr(model, "prune", None) is not None:
        raise InputError("the streamed text -> ARPA path does not prune; fit(..., memory=...) then "
                         "write the model (count pruning needs the whole tables)", value=model.prune)
    plan = chunk_plan(memory, int(model.order))
    with SpillDir(temp_dir) as spill:
        counts, tok = model._count(lines, tokenizer, plan, spill)
        model._check_has_words(counts.n_sentences, counts.n_tokens)
        adjusted, stats = adjusted_to_disk(model, counts, tok.vocab, spill, _block(plan.budget))
        discounts = model._choose_discounts(stats)
        write_streamed(counts, tok.vocab, adjusted, discounts, Path(path), spill,
                       _block(plan.budget), progress)
    log.info("wrote %s: modified Kneser-Ney order %d, n-grams %s, in a %d-byte budget", path,
             counts.order, counts.sizes(), plan.budget)
    return {"sizes": counts.sizes(), "n_sentences": counts.n_sentences,
            "n_tokens": counts.n_tokens, "discounts": discounts}


def _block(budget: int) -> int:
    """Rows per block: ~200 bytes of temporaries a row, at most 1M rows (larger blocks only
    add memory: the per-block overhead is already small)."""
    return int(min(max(budget // 200, 4096), 1 << 20))


# --------------------------------------------------------------------------- adjusting


def adjusted_to_disk(model, counts: NGramCounts, vocab: Vocab, spill: SpillDir, block: int):
    """Adjusted counts of every order, saved as ``adjusted<m>.npy`` (order N: the raw counts),
    and the count-of-counts t1..t4 of each order (as :func:`kneser_ney._adjusted_with_stats`)."""
    N, V = counts.order, counts.vocab_size
    quirk = kenlm_quirk_rows(counts, vocab) if model.kenlm_quirk and N > 1 else [-1] * N
    bos_start = np.arange(V) == vocab.bos_id  # (U_m,) does the n-gram start with <s>?
    files, stats = [], []
    for m in range(1, N + 1):
        if m >= 2:
            bos_start = _gather_blocks(bos_start, counts.keys[m - 1], V, block)
        raw = counts.counts[m - 1]
        if m == N:
            a = raw
        else:
            a = _bincount_blocks(counts.suffix[m], len(counts.keys[m - 1]), block)
            if m >= 2:
                _copy_where_blocks(a, raw, bos_start, block)
        if m == 1:
            _zero_specials(a, vocab)  # <s> and <unk> get only interpolated mass
        stats.append(_stats(a, raw, quirk[m - 1] if m < N else -1, block))
        files.append(a if m == N else _save(spill, f"adjusted{m}.npy", a))
        release(raw, counts.keys[m - 1])
    return files, stats


def _stats(a: np.ndarray, raw: np.ndarray, quirk_row: int, block: int) -> list:
    """count_of_counts(a) block by block (``a`` may be memory-mapped), with ``raw[quirk_row]``
    in place of ``a[quirk_row]`` when ``quirk_row >= 0`` (lmplz's choice, kenlm_quirk_rows)."""
    hist = np.zeros(6, dtype=np.int64)  # (6,) how many counts are 0, 1, 2, 3, 4, >= 5
    for lo in range(0, len(a), block):
        hist += np.bincount(np.minimum(np.asarray(a[lo: lo + block]), 5), minlength=6)
        release(a)
    if quirk_row >= 0:
        hist[min(int(a[quirk_row]), 5)] -= 1
        hist[min(int(raw[quirk_row]), 5)] += 1
    return [int(hist[k]) for k in range(1, 5)]


def _copy_where_blocks(a: np.ndarray, raw: np.ndarray, where: np.ndarray, block: int) -> None:
    """a[where] = raw[where], reading the memory-mapped ``raw`` block by block."""
    for lo in range(0, len(a), block):
        sel = np.flatnonzero(where[lo: lo + block]) + lo
        a[sel] = raw[sel]
        release(raw)


def _gather_blocks(table: np.ndarray, keys: np.ndarray, V: int, block: int) -> np.ndarray:
    """table[keys // V] (the prefix rows), computed block by block."""
    out = np.empty(len(keys), dtype=table.dtype)
    for lo in range(0, len(keys), block):
        out[lo: lo + block] = table[np.asarray(keys[lo: lo + block]) // V]
        release(keys)
    return out


def _bincount_blocks(rows: np.ndarray, size: int, block: int) -> np.ndarray:
    """bincount(rows, minlength=size) over a memory-mapped array, block by block."""
    out = np.zeros(size, dtype=np.int64)
    for lo in range(0, len(rows), block):
        part = np.bincount(np.asarray(rows[lo: lo + block]))
        out[: len(part)] += part
        release(rows)
    return out


def _save(spill: SpillDir, name: str, arr: np.ndarray) -> np.ndarray:
    with spill.writing(name):
        np.save(spill.file(name), arr)
    return np.load(spill.file(name), mmap_mode="r") if len(arr) else arr


def _discount(x: np.ndarray, d) -> np.ndarray:
    return np.select([x == 1, x == 2, x >= 3], [d[0], d[1], d[2]], 0.0)


# --------------------------------------------------------------------------- interpolating


class _Sections:
    """What :meth:`ArpaSections.section` reads: keys, log-probs and back-off weights, the
    orders not yet final left None."""

    def __init__(self, counts: NGramCounts):
        self.keys, self.vocab_size, self.order = counts.keys, counts.vocab_size, counts.order
        self.logp = [None] * counts.order
        self.logbow = [None] * counts.order


def write_streamed(counts: NGramCounts, vocab: Vocab, adjusted: list, discounts: list,
                   path: Path, spill: SpillDir, block: int, progress) -> None:
    """Interpolate order by order and write every ARPA section as soon as it is complete."""
    N, sec = counts.order, _Sections(counts)
    p = _unigram_p(adjusted[0], discounts[0], vocab)  # (V,) unclamped, as interpolated_tables
    with arpa_writer(path, vocab, counts.sizes(), progress, "estimating + writing ARPA") as out:
        for m in range(2, N + 1):
            p_next, gamma = _pass(counts, m, adjusted[m - 1], discounts[m - 1], p, block, spill)
            sec.logp[m - 2], sec.logbow[m - 2] = _clamped_log(p), _log(gamma)
            del p, gamma
            out.section(sec, m - 1, release=lambda: release(*counts.keys))
            sec.logp[m - 2] = sec.logbow[m - 2] = None
            p = p_next
        sec.logp[N - 1] = _clamped_log(p) if N == 1 else p  # order N: logs from _pass
        out.section(sec, N, release=lambda: release(sec.logp[N - 1], *counts.keys))


def _unigram_p(a1: np.ndarray, d, vocab: Vocab) -> np.ndarray:
    a = np.asarray(a1).astype(np.float64)
    disc = _discount(a, d)
    den = a.sum() + 0.0
    gamma0 = (disc.sum() + 0.0) / den
    p = (a - disc) / den + gamma0 / _n_predictable(vocab)  # (V,)
    _forbid_bos(p, vocab)
    return p


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x, out=x)


def _clamped_log(p: np.ndarray) -> np.ndarray:
    return np.minimum(_log(p), 0.0, out=p)


def _context_blocks(keys: np.ndarray, V: int, block: int):
    """(lo, hi) row ranges of about ``block`` rows that never split a context."""
    U, lo = len(keys), 0
    while lo < U:
        hi = min(lo + block, U)
        while hi < U and keys[hi] // V == keys[hi - 1] // V:  # extend to the end of the context
            step = np.asarray(keys[hi: hi + block]) // V
            hi += int(np.searchsorted(step, keys[hi - 1] // V, side="right"))
        yield lo, hi
        lo = hi


def _pass(counts: NGramCounts, m: int, a_m, d, p_prev: np.ndarray, block: int, spill: SpillDir):
    """p(w | h) of every order-m row and gamma of every order-(m-1) context.

    The highest order's p is returned as clamped natural logs in a spill file (memory-mapped).
    """
    keys, suffix, V = counts.keys[m - 1], counts.suffix[m - 1], counts.vocab_size
    last = m == counts.order
    gamma = np.ones(len(counts.keys[m - 2]))  # contexts without continuations back off untouched
    out = None if last else np.empty(len(keys))
    handle = open(spill.file(f"logp{m}.bin"), "wb") if last else None
    try:
        for lo, hi in _context_blocks(keys, V, block):
            ctx = np.asarray(keys[lo:hi]) // V  # (b,) sorted
            c0 = int(ctx[0])
            local = ctx - c0
            x = np.asarray(a_m[lo:hi]).astype(np.float64)
            disc = _discount(x, d)
            S = np.bincount(local, weights=x) + 0.0
            has = S > 0
            S_safe = np.where(has, S, 1.0)
            g = np.where(has, (np.bincount(local, weights=disc) + 0.0) / S_safe, 1.0)
            gamma[c0: c0 + len(g)] = g
            p = (x - disc) / S_safe[local] + g[local] * p_prev[np.asarray(suffix[lo:hi])]
            if last:
                with spill.writing(f"{m}-gram probabilities"):
                    _clamped_log(p).tofile(handle)
            else:
                out[lo:hi] = p
            release(keys, suffix, a_m)
    finally:
        if handle is not None:
            handle.close()
    if last:
        out = np.asarray(np.memmap(spill.file(f"logp{m}.bin"), dtype=np.float64, mode="r")) \
            if len(keys) else np.zeros(0)
    return out, gamma
