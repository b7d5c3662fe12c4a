"""Bounded-memory n-gram counting: sorted runs spilled to disk, then a k-way merge.

The corpus is read in chunks sized from a memory budget. Each chunk is counted on its own
(:func:`seqprob.ngram.counts.count_stream`: sorted prefix-linked integer keys per order) and written
to a spill directory as one *run* of ``.npy`` files. The runs are then merged order by order
with a k-way merge that holds one block of each run at a time:

- a run's order-m key ``row * V_run + w`` becomes the merged key ``map[row] * V + w``, where
  ``map`` (one file per run and order) sends the run's order-(m-1) rows to merged rows. Both
  tables are sorted lexicographically, so ``map`` is increasing and translated runs stay sorted;
- everything up to the smallest "last key of a block that is not the run's last" can be
  emitted: it is complete in every run. Equal keys are summed, and the merged rows are
  appended to each run's order-m map.

The merged tables are the same integer arrays the in-memory path builds (their content only
depends on the set of n-grams), memory-mapped from the spill directory, so the estimate and
the ARPA file written from them are bit for bit those of the in-memory path.
"""
from __future__ import annotations

import contextlib
import logging
import mmap
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import _parallel
from .counts import NGramCounts, count_stream, padded_stream
from ..errors import InputError, MemoryBudgetError, SeqProbFileError

__all__ = ["parse_memory", "SpillDir", "chunk_plan", "min_budget", "count_bounded", "release",
           "MIN_CHUNK_TOKENS"]

log = logging.getLogger(__name__)

#: A chunk must hold at least this many tokens (else the budget is refused).
MIN_CHUNK_TOKENS = 64
#: Estimated characters of text per token (a word and its space), to size line chunks.
CHARS_PER_TOKEN = 5
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_memory(value) -> int:
    """A memory budget in bytes: an int, or a string like ``"1G"``, ``"512M"``, ``"80K"``.

    Examples
    --------
    >>> parse_memory("1G"), parse_memory("1.5K"), parse_memory(4096)
    (1073741824, 1536, 4096)
    """
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        nbytes = int(value)
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([BKMGT]?)i?B?\s*", str(value), re.IGNORECASE)
        if match is None:
            raise MemoryBudgetError(f"memory budget {value!r} is not a size like '1G', '512M' or "
                                    "a number of bytes", value=value)
        nbytes = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    if nbytes <= 0:
        raise MemoryBudgetError(f"memory budget must be positive, got {value!r}", value=value, limit=1)
    return nbytes


def bytes_per_token(order: int) -> int:
    """Working memory one token of a chunk needs while it is split, encoded and counted.

    About 100 bytes of Python text objects per word (lines, split words, factorized codes)
    and 8 int64 arrays per order (stream, keys, sort buffers, inverse, rows) per position.
    """
    return 100 + 64 * (order + 2)


def min_budget(order: int) -> int:
    """The smallest budget accepted: a chunk of MIN_CHUNK_TOKENS tokens is half of it."""
    return 2 * MIN_CHUNK_TOKENS * bytes_per_token(order)


@dataclass(frozen=True)
class ChunkPlan:
    """How a memory budget is spent: tokens (and characters) per chunk, and how many chunks
    are counted at once (``in_flight``: one per thread while the calling thread reads on)."""

    budget: int
    chunk_tokens: int
    chunk_chars: int
    in_flight: int = 1


def chunk_plan(budget, order: int) -> ChunkPlan:
    """Chunk size for a budget; :class:`MemoryBudgetError` when not even a minimal chunk fits.

    Half the budget goes to the chunks being counted: 1 MB at order 3 is 1,248 tokens, one
    chunk of them on one thread, or ``in_flight`` chunks of 1,248 // in_flight tokens counted
    at once on several.

    Examples
    --------
    >>> plan = chunk_plan("1M", 3)
    >>> plan.budget, plan.chunk_tokens == 1248 // plan.in_flight
    (1048576, True)
    """
    nbytes = parse_memory(budget)
    tokens = nbytes // (2 * bytes_per_token(order))  # half for the chunk, half for the rest
    if tokens < MIN_CHUNK_TOKENS:
        need = min_budget(order)
        raise MemoryBudgetError(f"memory budget {budget!r} ({nbytes} bytes) is below what one chunk "
                                f"of {MIN_CHUNK_TOKENS} tokens of order {order} needs ({need} bytes)",
                                value=budget, limit=need)
    # Counting is the slower side of the pipeline (sorting each order's keys): one chunk per
    # thread counted at once, each 1/n of the size, holds the same memory as one whole chunk.
    in_flight = max(1, min(_parallel.num_threads(), tokens // MIN_CHUNK_TOKENS))
    tokens //= in_flight
    return ChunkPlan(nbytes, int(tokens), int(tokens) * CHARS_PER_TOKEN, int(in_flight))


class SpillDir:
    """A fresh ``seqprob-ngram-*`` folder inside ``parent`` for spill files, removed on exit
    (success or failure). OS errors (read-only, full, missing) become :class:`SeqProbFileError`.
    """

    def __init__(self, parent=None):
        self.parent = parent

    def __enter__(self) -> "SpillDir":
        where = self.parent if self.parent is not None else tempfile.gettempdir()
        try:
            self.path = Path(tempfile.mkdtemp(prefix="seqprob-ngram-", dir=where))
        except OSError as exc:
            raise SeqProbFileError(f"cannot create spill files in temp directory {str(where)!r}: "
                                   f"{exc.strerror or exc}", path=str(where)) from exc
        return self

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def file(self, name: str) -> Path:
        return self.path / name

    @contextlib.contextmanager
    def writing(self, what: str):
        """Turn an OS error while writing spill files into a named :class:`SeqProbFileError`."""
        try:
            yield
        except OSError as exc:
            raise SeqProbFileError(f"cannot write {what} in temp directory {str(self.path.parent)!r}"
                                   f": {exc.strerror or exc} (full or read-only? choose another "
                                   "one with temp_dir= / -T)", path=str(self.path)) from exc


def release(*arrays) -> None:
    """Drop the resident pages of memory-mapped arrays (they stay in the page cache), so a
    sequential scan of a file does not grow the process's RSS."""
    for arr in arrays:
        base = arr
        while base is not None and not isinstance(getattr(base, "_mmap", None), mmap.mmap):
            base = getattr(base, "base", None)
        if base is not None and hasattr(mmap, "MADV_DONTNEED"):
            base._mmap.madvise(mmap.MADV_DONTNEED)


# --------------------------------------------------------------------------- runs


@dataclass
class Run:
    """One counted chunk on disk: per order m >= 2 the files of keys, counts and suffix rows."""

    index: int
    vocab_size: int
    sizes: list

    def array(self, spill: SpillDir, what: str, m: int) -> np.ndarray:
        return _load(spill.file(f"run{self.index}.{what}{m}.npy"))


def _load(path: Path) -> np.ndarray:
    return np.load(path, mmap_mode="r") if path.stat().st_size > 128 else np.load(path)


def save_run(counts: NGramCounts, index: int, spill: SpillDir) -> Run:
    """Write the tables of orders 2..N of one chunk as ``run<i>.{keys,counts,suffix}<m>.npy``."""
    with spill.writing(f"sorted run {index}"):
        for m in range(2, counts.order + 1):
            for what, arr in (("keys", counts.keys), ("counts", counts.counts), ("suffix", counts.suffix)):
                np.save(spill.file(f"run{index}.{what}{m}.npy"), arr[m - 1])
    return Run(index, counts.vocab_size, counts.sizes())


def count_runs(chunks, order: int, bos_id: int, eos_id: int, spill: SpillDir, in_flight: int = 1):
    """Count every chunk and spill it; returns (runs, unigram counts, sentences, tokens).

    With two threads or more (:func:`seqprob._parallel.num_threads`), up to ``in_flight``
    chunks are counted and written in pool threads while the calling thread reads and encodes
    the next one (the memory of ``in_flight`` chunks as integer tables and one as text).
    """
    items = ((flat, lengths, i) for i, (flat, lengths) in enumerate(_nonempty(chunks)))
    runs, unigram, n_sent, n_tok = [], np.zeros(0, dtype=np.int64), 0, 0
    for run, chunk_unigram, sentences, tokens in _parallel.map_ordered(
            lambda item: _count_run(*item, order, bos_id, eos_id, spill), items, ahead=in_flight):
        unigram = _add_padded(unigram, chunk_unigram)
        n_sent, n_tok = n_sent + sentences, n_tok + tokens
        runs.append(run)
    return runs, unigram, n_sent, n_tok


def _nonempty(chunks):
    for flat, lengths in chunks:
        lengths = np.asarray(lengths, dtype=np.int64)
        if len(lengths):
            yield flat, lengths


def _count_run(flat, lengths: np.ndarray, index: int, order: int, bos_id: int, eos_id: int,
               spill: SpillDir) -> tuple:
    """Count one chunk and spill it as run ``index``: (run, unigram counts, sentences, tokens)."""
    stream, seg = padded_stream(np.asarray(flat, dtype=np.int64), lengths, bos_id, eos_id)
    c = count_stream(stream, seg, order, int(max(stream.max(), bos_id, eos_id)) + 1)
    del stream, seg
    run = save_run(c, index, spill)
    log.debug("spilled run %d: n-grams %s", index, c.sizes())
    return run, c.counts[0], c.n_sentences, c.n_tokens


def _add_padded(total: np.ndarray, part: np.ndarray) -> np.ndarray:
    if len(part) > len(total):
        total = np.concatenate([total, np.zeros(len(part) - len(total), dtype=np.int64)])
    total[: len(part)] += part
    return total


# --------------------------------------------------------------------------- k-way merge


class _RunCursor:
    """Reads one run's order-m table block by block, with keys translated to merged rows."""

    def __init__(self, run: Run, m: int, spill: SpillDir, vocab_size: int):
        self.keys = run.array(spill, "keys", m)
        self.counts = run.array(spill, "counts", m)
        self.suffix = run.array(spill, "suffix", m)
        self.prev_map = None if m == 2 else _map(spill, run.index, m - 1, run.sizes[m - 2])
        self.run_vocab, self.vocab = run.vocab_size, vocab_size
        self.pos, self.size = 0, len(self.keys)
        self.map_file = spill.file(f"run{run.index}.map{m}.bin")

    def block(self, n: int) -> np.ndarray:
        """Merged keys of the next (at most) n rows."""
        keys = np.asarray(self.keys[self.pos: self.pos + n])  # (b,)
        prefix, last = np.divmod(keys, self.run_vocab)
        if self.prev_map is not None:
            prefix = self.prev_map[prefix]
        return prefix * self.vocab + last

    def take(self, n: int):
        """Counts and merged suffix rows of the next n rows; advances the cursor."""
        sl = slice(self.pos, self.pos + n)
        suffix = np.asarray(self.suffix[sl])
        if self.prev_map is not None:
            suffix = self.prev_map[suffix]
        self.pos += n
        out = np.asarray(self.counts[sl]), suffix
        release(self.keys, self.counts, self.suffix, self.prev_map)
        return out


def _map(spill: SpillDir, run: int, m: int, size: int) -> np.ndarray:
    path = spill.file(f"run{run}.map{m}.bin")
    return np.asarray(np.memmap(path, dtype=np.int64, mode="r")) if size else np.zeros(0, np.int64)


def merge_order(cursors: list, block: int, out: dict, spill: SpillDir) -> int:
    """k-way merge of one order; appends keys, counts, suffix to ``out``'s files; returns size.

    The merging of one round of blocks (a sort of the k sorted pieces) runs on the pool while
    this thread reads the next round and writes the previous one (:func:`_parallel.map_ordered`);
    the files are written in order, so they do not depend on the number of threads.
    """
    base = 0
    maps = [open(c.map_file, "wb") for c in cursors]
    try:
        for merged, take in _parallel.map_ordered(_merge_round, _rounds(cursors, block)):
            _write_round(merged, take, base, maps, out)
            base += len(merged[0])
        return base
    finally:
        for f in maps:
            f.close()


def _rounds(cursors: list, block: int):
    """(keys, counts, suffix, take) of each round: the complete prefix of every run's block
    (everything up to the smallest last key of a block that is not its run's last)."""
    while True:
        live = [i for i, c in enumerate(cursors) if c.pos < c.size]
        if not live:
            return
        blocks = {i: cursors[i].block(block) for i in live}
        bounded = [blocks[i][-1] for i in live if cursors[i].pos + len(blocks[i]) < cursors[i].size]
        cutoff = min(bounded) if bounded else None
        take = {i: len(b) if cutoff is None else int(np.searchsorted(b, cutoff, side="right"))
                for i, b in blocks.items()}
        parts = [cursors[i].take(n) for i, n in take.items()]
        keys = np.concatenate([blocks[i][:n] for i, n in take.items()])  # (n,)
        yield keys, [p[0] for p in parts], [p[1] for p in parts], take


def _merge_round(item):
    """Distinct keys, summed counts and suffix rows of one round, and each row's merged row."""
    keys, counts, suffixes, take = item
    uniq, inv = _unique_of_sorted_runs(keys)
    cnt = np.bincount(inv, weights=np.concatenate(counts), minlength=len(uniq))
    suf = np.empty(len(uniq), dtype=np.int64)
    suf[inv] = np.concatenate(suffixes)
    return (uniq, np.rint(cnt).astype(np.int64), suf, inv), take


def _write_round(merged, take: dict, base: int, maps: list, out: dict) -> None:
    """Append a merged round to the order's files, and each run's row map (old row -> merged)."""
    uniq, cnt, suf, inv = merged
    uniq.tofile(out["keys"])
    cnt.tofile(out["counts"])
    suf.tofile(out["suffix"])
    start = 0
    for i, n in take.items():
        (base + inv[start: start + n]).tofile(maps[i])
        start += n


def _unique_of_sorted_runs(keys: np.ndarray):
    """``np.unique(keys, return_inverse=True)`` for a concatenation of a few sorted runs.

    A stable argsort is numpy's timsort, which finds the runs and merges them: O(n log k)
    for k runs, about 4x faster here than the quicksort inside ``np.unique``.
    """
    order = np.argsort(keys, kind="stable")  # (n,)
    ordered = keys[order]
    first = np.empty(len(keys), dtype=bool)  # (n,) the first of its key
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    inv = np.empty(len(keys), dtype=np.int64)
    inv[order] = np.cumsum(first) - 1
    return ordered[first], inv


def merge_runs(runs: list, order: int, vocab_size: int, block: int, spill: SpillDir) -> tuple:
    """Merged (keys, counts, suffix) of orders 2..N, memory-mapped from the spill folder."""
    if len(runs) == 1 and runs[0].vocab_size == vocab_size:  # nothing to merge: the run is it
        return tuple([runs[0].array(spill, w, m) for m in range(2, order + 1)]
                     for w in ("keys", "counts", "suffix"))
    keys, counts, suffix = [], [], []
    for m in range(2, order + 1):
        cursors = [_RunCursor(r, m, spill, vocab_size) for r in runs]
        names = {w: spill.file(f"merged.{w}{m}.bin") for w in ("keys", "counts", "suffix")}
        with spill.writing(f"merged {m}-grams"), contextlib.ExitStack() as stack:
            out = {w: stack.enter_context(open(p, "wb")) for w, p in names.items()}
            size = merge_order(cursors, block, out, spill)
        for store, w in ((keys, "keys"), (counts, "counts"), (suffix, "suffix")):
            store.append(np.asarray(np.memmap(names[w], dtype=np.int64, mode="r")) if size
                         else np.zeros(0, dtype=np.int64))
        log.debug("merged %d runs of %d-grams: %d distinct", len(runs), m, size)
        _remove_merged(runs, m, order, spill)
    return keys, counts, suffix


def _remove_merged(runs: list, m: int, order: int, spill: SpillDir) -> None:
    """Delete what no later step reads once order m is merged: the runs' order-m tables, their
    order-(m-1) row maps (and the order-N ones), so the spill folder holds about one copy of
    the counts rather than two."""
    names = [f"{w}{m}.npy" for w in ("keys", "counts", "suffix")] + [f"map{m - 1}.bin"]
    names += [f"map{m}.bin"] if m == order else []
    for run in runs:
        for name in names:
            spill.file(f"run{run.index}.{name}").unlink(missing_ok=True)


def count_bounded(chunks, order: int, vocab_size, bos_id: int, eos_id: int, budget: int,
                  spill: SpillDir, in_flight: int = 1) -> NGramCounts:
    """Count n-grams like :func:`seqprob.ngram.counts.count_ngrams`, holding one chunk at a time.

    Parameters
    ----------
    chunks : iterable of (flat_ids, lengths)
        Chunks sized to the budget (see :func:`chunk_plan`).
    vocab_size : int or callable
        V, or a function giving it once every chunk was read.
    budget : int
        Bytes for the merge blocks (one block per run).
    spill : SpillDir
        Where runs and merged tables live; the returned arrays are memory-mapped from it.
    in_flight : int
        Chunks counted at once on the pool (:attr:`ChunkPlan.in_flight`).

    Notes
    -----
    Peak memory: while counting, the ``in_flight`` chunks counted at once (each 1/in_flight of
    the plan's chunk); while merging k runs, k blocks of ``block = budget / (k * 384 * r)`` rows
    each (8-byte key, count, suffix, inverse, sort space) for the r rounds in flight (1 on one
    thread, threads + 1 otherwise), plus the random-access row maps of the previous order
    (memory-mapped). The merged tables are the same for any chunking: :class:`NGramCounts`
    only depends on the n-gram set.
    """
    runs, unigram, n_sent, n_tok = count_runs(chunks, order, bos_id, eos_id, spill, in_flight)
    if not runs:
        raise InputError("cannot count n-grams of an empty corpus: there are no lines (sentences)")
    V = vocab_size() if callable(vocab_size) else int(vocab_size)
    if V < len(unigram):
        raise InputError(f"vocab_size {V} is smaller than the largest id seen + 1", value=V)
    threads = _parallel.num_threads()
    in_flight = threads + 1 if threads > 1 else 1  # merge rounds held at once (merge_order)
    block = max(budget // (384 * len(runs) * in_flight), 16)  # ~150 bytes a row: ~40% of the budget
    keys, counts, suffix = merge_runs(runs, order, V, block, spill)
    unigram = _add_padded(np.zeros(V, dtype=np.int64), unigram)
    return NGramCounts(order, V, [np.arange(V, dtype=np.int64)] + keys, [unigram] + counts,
                       [None] + suffix, n_sentences=n_sent, n_tokens=n_tok)
