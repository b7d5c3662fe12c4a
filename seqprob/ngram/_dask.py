"""Fitting n-gram models on a partitioned corpus with Dask (the ``seqprob[distributed]`` extra).

Three steps, each a Dask graph over the partitions, run by whatever scheduler is active (a
``dask.distributed.Client`` if one was created, else Dask's local threads):

1. *vocabulary*: every partition lists its words with their counts in first-appearance order;
   the driver concatenates the lists in partition order, which gives exactly the ids of the
   single-machine fit (``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, then first appearance);
2. *counting* (map): every partition is counted with that vocabulary into sorted prefix-linked
   tables (:func:`seqprob.ngram.counts.count_ngrams`);
3. *merging* (tree reduce): tables are merged pairwise (:func:`seqprob.ngram.counts.merge_counts`),
   ``split_every`` at a time, up to one table per order.

This path serves the estimators that are not distributed further: their adjusted counts,
count-of-counts, discounts and interpolated tables are computed on the driver by the
estimator's own code. :class:`~seqprob.ngram.ModifiedKneserNey` goes through
:mod:`seqprob.ngram._dask_mkn` instead (steps 1-2 here, then map/reduce over hash buckets up
to the tables). Either way the model (and its ARPA file) is bit for bit the single-machine one.
"""
from __future__ import annotations

import os
from collections import Counter

from .._io import read_lines
from .counts import count_ngrams, merge_counts
from ..errors import InputError, PartitionError
from ..tokenizers import WhitespaceTokenizer
from ..vocab import BOS, EOS, UNK, Vocab
from ._corpus import _RESERVED, _reserved_error, _split, encode_chunks, line_chunks

__all__ = ["partitions", "fit_counts_dask", "dask_vocabulary", "shared", "guarded"]


def partitions(source) -> list:
    """One ``dask.delayed`` per partition of ``source``: a Dask bag of lines, or a list of
    text files (each file one partition; ``.gz`` decompressed; readable by every worker)."""
    import dask
    import dask.bag as db

    if isinstance(source, db.Bag):
        return source.to_delayed()
    if isinstance(source, (str, os.PathLike)):
        source = [source]
    try:
        paths = [os.fspath(p) for p in source]
    except TypeError:
        raise InputError(f"fit_dask takes a dask.bag.Bag of lines or a list of file paths, got "
                         f"{type(source).__name__}") from None
    if not paths:
        raise InputError("fit_dask needs at least one partition (file path)")
    return [dask.delayed(_FileLines)(p) for p in paths]


class _FileLines:
    """A partition given as a file path: its lines, read lazily where the task runs."""

    def __init__(self, path: str):
        self.path = path

    def __iter__(self):
        return iter(read_lines(self.path))


def shared(obj):
    """``obj`` as one Dask graph key: sent once to each worker that needs it, not once per task
    (a tokenizer, a model)."""
    import dask

    return dask.delayed(obj, traverse=False)


def guarded(index: int, fn, *args):
    """Run ``fn`` for partition ``index``; any failure becomes a :class:`PartitionError`."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - every failure of a partition is named the same way
        kind = type(exc).__name__
        raise PartitionError(f"partition {index} failed: {kind}: {exc}", partition=index,
                             cause=kind) from exc


def _words(part, chunk_chars: int) -> dict:
    """Word counts of one partition, in first-appearance order (a dict keeps insertion order)."""
    counts: Counter = Counter()
    for first, chunk in line_chunks(list(part), chunk_chars):
        _, _, flat = _split(chunk)
        counts.update(flat)
        if any(w in counts for w in _RESERVED):
            raise _reserved_error(chunk, first, counts)
    return dict(counts)


def _count(part, tokenizer, order: int, chunk_chars: int):
    """Sorted n-gram tables of one partition (None for an empty partition)."""
    lines = list(part)
    if not lines:
        return None
    V, vocab = len(tokenizer.vocab), tokenizer.vocab
    chunks = encode_chunks(line_chunks(lines, chunk_chars), tokenizer)
    return count_ngrams(chunks, order, V, vocab.bos_id, vocab.eos_id)


def _merge(parts: list, vocab_size: int):
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else merge_counts(parts, vocab_size)


def _tree_reduce(items: list, vocab_size: int, split_every: int):
    import dask

    while len(items) > 1:
        items = [dask.delayed(_merge)(items[i: i + split_every], vocab_size)
                 for i in range(0, len(items), split_every)]
    return items[0]


def dask_vocabulary(parts: list, min_count: int, chunk_chars: int) -> WhitespaceTokenizer:
    """The single-machine fit's vocabulary: words in first-appearance order over partitions."""
    import dask

    tasks = [dask.delayed(guarded)(i, _words, p, chunk_chars) for i, p in enumerate(parts)]
    total: Counter = Counter()
    for words in dask.compute(*tasks):
        total.update(words)  # partition order: first appearance over the whole corpus
    kept = [w for w, c in total.items() if c >= min_count]
    return WhitespaceTokenizer(Vocab([UNK, BOS, EOS] + kept))


def fit_counts_dask(source, order: int, tokenizer, min_count: int, chunk_chars: int,
                    split_every: int = 8):
    """(NGramCounts, tokenizer) of a partitioned corpus, counted and merged on Dask."""
    import dask

    parts = partitions(source)
    if tokenizer is None:
        tokenizer = dask_vocabulary(parts, min_count, chunk_chars)
    tok = shared(tokenizer)
    tasks = [dask.delayed(guarded)(i, _count, p, tok, order, chunk_chars)
             for i, p in enumerate(parts)]
    (counts,) = dask.compute(_tree_reduce(tasks, len(tokenizer.vocab), split_every))
    if counts is None:
        raise InputError("cannot count n-grams of an empty corpus: every partition is empty")
    return counts, tokenizer
