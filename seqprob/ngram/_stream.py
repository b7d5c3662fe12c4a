"""Corpus scoring of a back-off model as running sums, a few MB of text at a time.

Each chunk of lines is tokenized as bytes (fields split on whitespace, words found through a
hash of their bytes: :mod:`seqprob._arpa_fast`), laid out as one stream ``<s> w.. </s> <s> ..``
and scored in one vectorized pass; only sums (and the first zero-probability tokens) survive
the chunk, so memory does not grow with the corpus.
"""
from __future__ import annotations

import numpy as np

from .. import _arpa_fast as fast
from ..tokenizers import WhitespaceTokenizer

__all__ = ["corpus_sums", "SUM_FIELDS"]

SUM_FIELDS = ("n_sentences", "n_tokens", "n_oov", "n_zeros", "logprob", "logprob_excl_oov",
              "logprob_kept", "n_chars", "n_bytes", "n_skipped_empty")
_CHUNK_BYTES = 1 << 22
_MAX_ZEROS = 20
_ODD_ASCII = [bytes([c]) for c in (0, 11, 12, 28, 29, 30, 31)]
_ODD_UNICODE = [c.encode() for c in "\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"] + \
               [chr(c).encode() for c in range(0x2000, 0x200B)]


def corpus_sums(model, lines, eos: bool = True) -> dict | None:
    """Running sums of ``model`` over ``lines`` (stripped str; blank ones skipped), scored the
    KenLM way (``<s>`` context, ``</s>`` predicted when ``eos``), or None when the model's
    tokenizer is not a plain :class:`WhitespaceTokenizer` over its own vocabulary (the caller
    then scores line by line). Nothing of ``lines`` is consumed before that decision.

    Returns
    -------
    dict
        The counts and totals of :data:`SUM_FIELDS` (log-probabilities in nats) and
        ``zeros``: up to 20 (line, position, token) with probability 0.
    """
    tok, vocab = getattr(model, "tokenizer", None), model.vocab
    if type(tok) is not WhitespaceTokenizer or tok.vocab is not vocab or vocab.bos_id is None \
            or vocab.unk_id is None or (eos and vocab.eos_id is None):
        return None
    sums = dict.fromkeys(SUM_FIELDS, 0)
    sums.update(logprob=0.0, logprob_excl_oov=0.0, logprob_kept=0.0, zeros=[])
    index = _vocab_index(model)
    for chunk in _chunks(lines, sums):
        _add_chunk(model, index, chunk, eos, sums)
    return sums


def _vocab_index(model) -> fast.VocabIndex:
    cached = model.__dict__.get("_stream_index")
    if cached is None or cached[0] is not model.vocab:
        cached = (model.vocab, fast.VocabIndex(list(model.vocab.tokens)))
        model.__dict__["_stream_index"] = cached
    return cached[1]


def _chunks(lines, sums: dict):
    chunk, size = [], 0
    for line in lines:
        if not line:
            sums["n_skipped_empty"] += 1
            continue
        chunk.append(line)
        size += len(line) + 1
        if size >= _CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _word_ids(index: fast.VocabIndex, vocab, chunk: list):
    """(ids of all words, words per line, UTF-8 text of the chunk); unknown words -> -1."""
    text = "\n".join(chunk)
    data = text.encode("utf-8")
    odd = _ODD_ASCII + ([] if data.isascii() else _ODD_UNICODE)
    if any(c in data for c in odd):  # whitespace only str.split() knows: split in Python
        words = [line.split() for line in chunk]
        ids = np.array([vocab._index.get(w, -1) for ws in words for w in ws], dtype=np.int64)
        return ids, np.array([len(ws) for ws in words], dtype=np.int64), text, data
    buf, starts, ends, first, count = fast.tokenize(data)
    return fast.word_ids(index, buf, starts, ends), count, text, data


def _add_chunk(model, index, chunk: list, eos: bool, sums: dict) -> None:
    vocab = model.vocab
    ids, count, text, data = _word_ids(index, vocab, chunk)  # (W,), (n,)
    n = len(chunk)
    length = count + 1 + int(eos)  # (n,) ids per line: <s> words [</s>]
    start = np.concatenate([[0], np.cumsum(length)[:-1]])  # (n,)
    stream = np.full(int(length.sum()), vocab.eos_id if eos else 0, dtype=np.int64)  # (L,)
    stream[start] = vocab.bos_id
    word_line = np.repeat(np.arange(n), count)  # (W,)
    word_pos = start[word_line] + 1 + np.arange(len(ids)) - np.repeat(np.cumsum(count) - count, count)
    oov_words = ids < 0
    stream[word_pos] = np.where(oov_words, vocab.unk_id, ids)
    lp = model._score_stream(stream, np.repeat(start, length))  # (L,) NaN at each <s>
    scored = np.ones(len(stream), dtype=bool)
    scored[start] = False
    oov = np.zeros(len(stream), dtype=bool)
    oov[word_pos] = oov_words | (ids == vocab.unk_id)
    zero = np.isneginf(lp) & ~oov & scored
    kept = scored & ~oov & ~zero
    sums["n_sentences"] += n
    sums["n_tokens"] += int(scored.sum())
    sums["n_oov"] += int(oov.sum())
    sums["n_zeros"] += int(zero.sum())
    sums["logprob"] += float(lp[scored].sum())
    sums["logprob_excl_oov"] += float(lp[scored & ~oov].sum())
    sums["logprob_kept"] += float(lp[kept].sum())
    sums["n_chars"] += len(text) - (n - 1)
    sums["n_bytes"] += len(data) - (n - 1)
    _note_zeros(sums, np.flatnonzero(zero), start, stream, vocab)
    sums["_lines_done"] = sums.get("_lines_done", 0) + n


def _note_zeros(sums: dict, positions: np.ndarray, start: np.ndarray, stream: np.ndarray, vocab) -> None:
    room = _MAX_ZEROS - len(sums["zeros"])
    if room <= 0 or not len(positions):
        return
    positions = positions[:room]
    line = np.searchsorted(start, positions, side="right") - 1
    done = sums.get("_lines_done", 0)
    sums["zeros"] += [(done + int(i), int(p - start[i]), vocab.tokens[stream[p]])
                      for i, p in zip(line.tolist(), positions.tolist())]
