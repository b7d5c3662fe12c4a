"""Turning training lines into chunks of word ids, fast (C-level splitting and dict look-ups)."""
from __future__ import annotations

import itertools
from typing import Iterable, Iterator

import numpy as np

from ..errors import InputError
from ..tokenizers import WhitespaceTokenizer
from ..vocab import BOS, EOS, UNK, Vocab

__all__ = ["line_chunks", "encode_chunks", "build_whitespace_vocab"]

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


def line_chunks(lines: Iterable, chunk_chars: int) -> Iterator[tuple[int, list]]:
    """Yield (number of the chunk's first line, list of str lines) of about ``chunk_chars``."""
    if isinstance(lines, (str, bytes)):
        raise InputError("fit() takes an iterable of lines (a list, a file's lines), not a single "
                         "string; use seqprob._io.read_lines(path) for a file")
    buf: list = []
    size, first = 0, 1
    for lineno, line in enumerate(lines, start=1):
        text = _as_text(line, lineno)
        buf.append(text)
        size += len(text) + 1
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


def _encode_growing(chunk: list, first: int, index: dict):
    _, lengths, flat = _split(chunk)
    uniq = dict.fromkeys(flat)
    if any(w in uniq for w in _RESERVED):
        raise _reserved_error(chunk, first, uniq)
    new = [w for w in uniq if w not in index]
    index.update(zip(new, range(len(index), len(index) + len(new))))
    ids = np.fromiter(map(index.__getitem__, flat), dtype=np.int64, count=len(flat))
    return ids, lengths


def _encode_whitespace(chunk: list, first: int, vocab: Vocab):
    _, lengths, flat = _split(chunk)
    unk = -1 if vocab.unk_id is None else vocab.unk_id
    ids = np.fromiter(map(vocab._index.get, flat, itertools.repeat(unk)), dtype=np.int64,
                      count=len(flat))
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
