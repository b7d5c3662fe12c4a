"""Turning training lines into chunks of word ids, fast (C-level splitting and dict look-ups)."""
from __future__ import annotations

import itertools
import os
from typing import Iterable, Iterator

import numpy as np

from .._io import check_text, read_lines
from ..errors import InputError
from ..tokenizers import WhitespaceTokenizer
from ..vocab import BOS, EOS, UNK, Vocab

__all__ = ["line_chunks", "encode_chunks", "build_whitespace_vocab", "spill_vocab"]

_RESERVED = (BOS, EOS, UNK)


def _as_text(line, lineno: int) -> str:
    if isinstance(line, str):
        return line
    if isinstance(line, (bytes, bytearray)):
        try:
            return bytes(line).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"line {lineno}: not valid UTF-8 ({exc.reason} at byte {exc.start})",
                             line=lineno) from None
    raise InputError(f"line {lineno}: lines must be str, got {type(line).__name__}", line=lineno)


def _check_unicode(part: list, lineno: int) -> None:
    """The text policy: a lone surrogate is refused."""
    joined = "".join(part)
    if joined.isascii():
        return
    for i, line in enumerate(part):
        check_text(line, f"line {lineno + i + 1}")


def line_chunks(lines: Iterable, chunk_chars: int, batch: int = 4096) -> Iterator[tuple[int, list]]:
    """Yield (number of the chunk's first line, list of str lines) of about ``chunk_chars``.

    ``lines`` is an iterable of str (or UTF-8 bytes), or a file name (``str`` or
    ``pathlib.Path``; ``.gz`` is decompressed), read lazily.
    """
    if isinstance(lines, (str, os.PathLike)):  # the corpus rule: a str names a file
        lines = read_lines(lines)
    if isinstance(lines, (bytes, bytearray)):
        raise InputError(f"fit() takes an iterable of lines (a list, an open file) or a file name, "
                         f"got {type(lines).__name__} {bytes(lines)[:40]!r}: decode it first "
                         f"(e.g. data.decode('utf-8').splitlines())", value=type(lines).__name__)
    try:
        it = iter(lines)
    except TypeError:
        raise InputError(f"fit() takes an iterable of lines, got {type(lines).__name__}") from None
    buf: list = []
    size, first, lineno = 0, 1, 0
    while True:
        part = list(itertools.islice(it, batch))
        if not part:
            break
        if not all(type(x) is str for x in part):
            part = [_as_text(x, lineno + i + 1) for i, x in enumerate(part)]
        _check_unicode(part, lineno)
        buf.extend(part)
        lineno += len(part)
        size += sum(map(len, part)) + len(part)
        if size >= chunk_chars:
            yield first, buf
            buf, size, first = [], 0, lineno + 1
    if buf:
        yield first, buf


def _split(chunk: list):
    split = list(map(str.split, chunk))
    lengths = np.fromiter(map(len, split), dtype=np.int64, count=len(split))
    return split, lengths, list(itertools.chain.from_iterable(split))


def _reserved_error(chunk: list, first: int, words) -> InputError:
    bad = next(w for w in _RESERVED if w in words)
    lineno = first + next(i for i, line in enumerate(chunk) if bad in line.split())
    return InputError(f"reserved symbol {bad!r} inside the training text (line {lineno}): "
                      "<s>, </s> and <unk> are added by seqprob", token=bad, line=lineno)


def encode_chunks(chunks: Iterable, tokenizer=None, index: dict | None = None) -> Iterator:
    """Yield (flat_ids, lengths) per chunk of lines.

    With ``index`` (a dict word -> id that grows by first appearance), words get new ids as
    they come (the vocabulary of :meth:`WhitespaceTokenizer.fit`). With a
    :class:`WhitespaceTokenizer`, words are looked up in its vocabulary (unknown -> ``<unk>``).
    Any other tokenizer encodes line by line.
    """
    for first, chunk in chunks:
        if index is not None:
            yield _encode_growing(chunk, first, index)
        elif type(tokenizer) is WhitespaceTokenizer:
            yield _encode_whitespace(chunk, first, tokenizer.vocab)
        else:
            yield _encode_generic(chunk, first, tokenizer)


# Joins the lines of a chunk for one C-level split. NUL is an ordinary character (text policy),
# so a line may hold this very word: _factorize detects that and says which code, if any, is
# the separator, so that callers never confuse it with a word of the text.
_SEP = "\x00"


def _factorize(chunk: list):
    """Factorize a chunk of lines into word codes.

    One join + split over the whole chunk (lines separated by a NUL word) and a hash-table
    factorization, instead of a Python loop per word.

    Parameters
    ----------
    chunk : list of str
        The lines.

    Returns
    -------
    codes : ndarray of int64
        The code of each word of the text, in order (never the separator's).
    uniq : list of str
        The distinct words in first-appearance order (``uniq[codes]`` are the words).
    lengths : ndarray of int64
        Words per line.
    sep : int
        The index in ``uniq`` of the separator, which no code refers to; -1 when ``uniq`` holds
        only words of the text (a NUL word in ``uniq`` is then a word like any other).
    """
    import pandas as pd

    words = f" {_SEP} ".join(chunk).split()
    codes, uniq = pd.factorize(np.array(words, dtype=object))
    uniq = list(uniq)
    if len(chunk) > 1:
        sep = uniq.index(_SEP)  # the join put it there
        is_sep = codes == sep
        seps = np.flatnonzero(is_sep)
        if len(seps) != len(chunk) - 1:  # a line holds a NUL word of its own: split line by line
            return _factorize_lines(chunk)
        bounds = np.concatenate([[-1], seps, [len(words)]])
        lengths = np.diff(bounds) - 1
        return codes[~is_sep], uniq, lengths, sep
    return codes, uniq, np.array([len(words)], dtype=np.int64), -1


def _factorize_lines(chunk: list):
    """:func:`_factorize` without the join (slower; for chunks that hold a NUL word)."""
    _, lengths, flat = _split(chunk)
    index = dict.fromkeys(flat)
    uniq = list(index)
    index = {w: i for i, w in enumerate(uniq)}
    codes = np.fromiter(map(index.__getitem__, flat), np.int64, count=len(flat))
    return codes, uniq, lengths, -1


def _encode_growing(chunk: list, first: int, index: dict):
    codes, uniq, lengths, sep = _factorize(chunk)
    seen = set(uniq)
    if any(w in seen for w in _RESERVED):
        raise _reserved_error(chunk, first, seen)
    # Only the separator is skipped (no code refers to it); a NUL word of the text gets an id.
    lut = np.empty(len(uniq), dtype=np.int64)
    for i, w in enumerate(uniq):
        if i != sep:
            lut[i] = index.setdefault(w, len(index))
    return lut[codes] if len(codes) else codes.astype(np.int64), lengths


def _encode_whitespace(chunk: list, first: int, vocab: Vocab):
    codes, uniq, lengths, _ = _factorize(chunk)  # the separator's lut entry is never read
    unk = -1 if vocab.unk_id is None else vocab.unk_id
    lut = np.fromiter((vocab._index.get(w, unk) for w in uniq), dtype=np.int64, count=len(uniq))
    ids = lut[codes] if len(codes) else codes.astype(np.int64)
    _check_ids(ids, chunk, first, vocab, lengths)
    return ids, lengths


def _encode_generic(chunk: list, first: int, tokenizer):
    encoded = [tokenizer.encode(line) for line in chunk]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    ids = np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.int64, count=int(lengths.sum()))
    _check_ids(ids, chunk, first, tokenizer.vocab, lengths)
    return ids, lengths


def _check_ids(ids: np.ndarray, chunk: list, first: int, vocab: Vocab, lengths: np.ndarray) -> None:
    special = [i for i in (vocab.bos_id, vocab.eos_id) if i is not None]
    bad = np.isin(ids, special) | (ids < 0)
    if not bad.any():
        return
    pos = int(np.flatnonzero(bad)[0])
    lineno = first + int(np.searchsorted(np.cumsum(lengths), pos, side="right"))
    if ids[pos] < 0:
        raise InputError(f"line {lineno}: a word is not in the tokenizer's vocabulary and it has "
                         "no <unk> token", line=lineno)
    token = vocab.tokens[int(ids[pos])]
    raise InputError(f"reserved symbol {token!r} inside the training text (line {lineno}): "
                     "sentence boundaries are added by seqprob", token=token, line=lineno)


def build_whitespace_vocab(chunks: Iterable, min_count: int) -> tuple[WhitespaceTokenizer, list]:
    """First pass for ``min_count > 1``: the vocabulary of words seen at least ``min_count``
    times, in first-appearance order (as :meth:`WhitespaceTokenizer.fit`). Returns the
    tokenizer and the chunks (kept for the second pass)."""
    from collections import Counter

    counts: Counter = Counter()
    kept = []
    for first, chunk in chunks:
        _, _, flat = _split(chunk)
        before = len(counts)
        counts.update(flat)
        if len(counts) != before and any(w in counts for w in _RESERVED):
            raise _reserved_error(chunk, first, counts)
        kept.append((first, chunk))
    words = [w for w, c in counts.items() if c >= min_count]
    return WhitespaceTokenizer(Vocab([UNK, BOS, EOS] + words)), kept


def spill_vocab(chunks: Iterable, min_count: int, spill, chunk_chars: int, batch: int = 4096):
    """Bounded-memory first pass for ``min_count > 1``: count words (the vocabulary is held)
    while writing the lines, one sentence per line, to ``spill``'s ``corpus.txt``; returns the
    tokenizer and the chunks of a second pass that re-reads that file."""
    from collections import Counter
    from pathlib import Path

    counts: Counter = Counter()
    path = spill.file("corpus.txt")
    with spill.writing("the corpus copy for min_count"), open(path, "w", encoding="utf-8") as out:
        for first, chunk in chunks:
            split, _, flat = _split(chunk)
            before = len(counts)
            counts.update(flat)
            if len(counts) != before and any(w in counts for w in _RESERVED):
                raise _reserved_error(chunk, first, counts)
            out.write("".join(" ".join(words) + "\n" for words in split))
    words = [w for w, c in counts.items() if c >= min_count]
    return WhitespaceTokenizer(Vocab([UNK, BOS, EOS] + words)), line_chunks(Path(path), chunk_chars, batch)
