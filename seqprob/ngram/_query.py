"""Corpus scoring of a back-off model as running sums, block by block of raw UTF-8 bytes.

A corpus file is read in blocks of whole lines (:meth:`seqprob._io.CorpusFile.blocks`; lines
given as str are joined into blocks), and each block is tokenized and scored in one
vectorized pass:

- fields: one comparison ``byte <= 32`` and its edges (the block has been checked to hold no
  whitespace but space, tab, CR and LF, and no other control byte: else it is split by Python's
  ``str.split``, like the line-by-line path);
- vocabulary ids: a word of at most 8 bytes *is* an integer (its bytes, zero-padded), looked up
  in the direct-mapped table of a :class:`WordIndex` (one cache-resident read; a shared slot
  holds its likeliest name, the others are found in a :class:`~seqprob.ngram._probe.ProbeIndex`);
  longer words go through :class:`seqprob.ngram._arpa_fast.VocabIndex` (a hash of all their bytes,
  every match checked byte for byte); unknown words become ``<unk>``;
- the stream ``<s> w .. </s> <s> ..`` is laid out with a mask of the positions that have a
  history, scored by the model (:func:`score_chain` straight from that mask for back-off
  tables), and only sums survive the block (with the first zero-probability tokens), so memory
  does not grow with the corpus.

Blocks are :data:`BLOCK_BYTES` = 128 KB (~32k positions): the block's temporary arrays stay
near the L2 cache, and under glibc's heap-trim threshold, so the memory a block frees is reused
by the next one instead of going back to the system and being faulted in again.

With several threads (:func:`seqprob.set_num_threads`, ``SEQPROB_NUM_THREADS``...) as many
blocks are scored at once on the ``_parallel`` pool (numpy releases the GIL in its loops); their
sums are added in block order, so the figures are the same bits at any thread count.
"""
from __future__ import annotations

import numpy as np

from . import _arpa_fast as fast
from .._io import CorpusFile
from .._parallel import for_row_blocks, num_threads
from ..tokenizers import WhitespaceTokenizer
from ._probe import ROW, ProbeIndex, _bucket, score_chain

SUM_FIELDS = ("n_sentences", "n_tokens", "n_oov", "n_zeros", "logprob", "logprob_excl_oov",
              "logprob_kept", "n_chars", "n_bytes", "n_skipped_empty")  #: the running sums of a pass

__all__ = ["corpus_sums", "WordIndex", "BLOCK_BYTES"]

BLOCK_BYTES = 1 << 17  # bytes of text per block: ~32k positions (see the module docstring)
_MAX_ZEROS = 20
_ODD_UNICODE = [c.encode() for c in "\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"] + \
               [chr(c).encode() for c in range(0x2000, 0x200B)]
_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], dtype=np.uint64)


def corpus_sums(model, lines, eos: bool = True) -> dict | None:
    """Running sums of ``model`` over a corpus, scored the KenLM way (``<s>`` context, ``</s>``
    predicted when ``eos``), or None when the model's tokenizer is not a plain
    :class:`WhitespaceTokenizer` over its own vocabulary (the caller then scores line by line;
    nothing of ``lines`` is consumed before that decision).

    Parameters
    ----------
    model : BackoffLanguageModel
    lines : CorpusFile or iterable of str
        A corpus file (read in raw blocks) or stripped lines; blank lines are skipped.
    eos : bool

    Returns
    -------
    dict
        The counts and totals of ``SUM_FIELDS`` (log-probabilities in nats), ``zeros``: up
        to 20 (line, position, token) with probability 0, and ``max_logprob``: the largest
        token log-probability (NaN if any is; above 0 or NaN: a corrupt model).

    Examples
    --------
    >>> from seqprob.ngram import KneserNey
    >>> m = KneserNey(order=2, discount=0.5).fit(["a b", "b a"])
    >>> s = corpus_sums(m, iter(["a b", "", "zebra"]))
    >>> s["n_sentences"], s["n_tokens"], s["n_oov"], s["n_skipped_empty"]
    (2, 5, 1, 1)
    """
    tok, vocab = getattr(model, "tokenizer", None), model.vocab
    if type(tok) is not WhitespaceTokenizer or tok.vocab is not vocab or vocab.bos_id is None \
            or vocab.unk_id is None or (eos and vocab.eos_id is None):
        return None
    sums, index, threads = _new_sums(), word_index(model), num_threads()
    if threads > 1:
        _build_probes(model)  # before the threads share the model
    blocks = lines.blocks(BLOCK_BYTES) if isinstance(lines, CorpusFile) else _joined(lines, sums)
    for batch in _batches(blocks, threads):  # ``threads`` blocks at a time, one per thread
        parts = for_row_blocks(lambda lo, hi: [_block_sums(model, index, b, eos) for b in batch[lo:hi]],
                               len(batch), work=sum(map(len, batch)), min_work=1 << 16)
        for part in (part for done in parts for part in done):  # in block order
            _merge(sums, part)
    del sums["lines_done"]
    return sums


def _new_sums() -> dict:
    sums = dict.fromkeys(SUM_FIELDS, 0)
    sums.update(logprob=0.0, logprob_excl_oov=0.0, logprob_kept=0.0, zeros=[], lines_done=0,
                max_logprob=-np.inf)  # the largest token log-prob: > 0 or NaN means a corrupt model
    return sums


def _build_probes(model) -> None:
    tables = getattr(model, "tables_", None)
    if tables is not None and not tables.unlisted_logbow:
        for m in range(2, tables.order + 1):
            tables.probe_index(m)


def _batches(blocks, size: int):
    batch = []
    for block in blocks:
        batch.append(block)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _block_sums(model, index, block: bytes, eos: bool) -> dict:
    """The sums of one block on its own (its zero-probability tokens numbered from its first line)."""
    part = _new_sums()
    words = _block_words(index, block) or _python_words(model.vocab, block)
    part["n_skipped_empty"] += words.pop("blank")
    if len(words["count"]):
        _add_block(model, words, eos, part)
    return part


def _max_nan(a: float, b: float) -> float:
    """max(a, b), NaN if either is (Python's max would drop a NaN)."""
    return float(np.maximum(a, b))


def _merge(sums: dict, part: dict) -> None:
    for field in SUM_FIELDS:
        sums[field] += part[field]
    room = _MAX_ZEROS - len(sums["zeros"])
    sums["zeros"] += [(sums["lines_done"] + i, p, t) for i, p, t in part["zeros"][:max(room, 0)]]
    sums["lines_done"] += part["lines_done"]
    sums["max_logprob"] = _max_nan(sums["max_logprob"], part["max_logprob"])


def word_index(model) -> "WordIndex":
    """The model's :class:`WordIndex` (built once per vocabulary, kept on the model; words
    ordered by unigram probability inside a hash bucket when the model has tables)."""
    cached = model.__dict__.get("_word_index")
    if cached is None or cached[0] is not model.vocab:
        tables = getattr(model, "tables_", None)
        likely = tables.logp[0] if tables is not None and len(tables.logp[0]) == len(model.vocab) else None
        cached = (model.vocab, WordIndex(list(model.vocab.tokens), likely))
        model.__dict__["_word_index"] = cached
    return cached[1]


def _joined(lines, sums: dict):
    """Blocks of about BLOCK_BYTES of the non-blank stripped ``lines``, joined by newlines."""
    chunk, size = [], 0
    for line in lines:
        if not line:
            sums["n_skipped_empty"] += 1
            continue
        chunk.append(line.replace("\n", " "))  # a newline inside a line is a space, not a break
        size += len(line) + 1
        if size >= BLOCK_BYTES:
            yield "\n".join(chunk).encode("utf-8")
            chunk, size = [], 0
    if chunk:
        yield "\n".join(chunk).encode("utf-8")


class WordIndex:
    """Vocabulary id of word fields of a UTF-8 byte buffer, matched byte for byte.

    Names of at most 8 bytes (without a 0 byte) are keyed by their bytes read as one
    little-endian integer (zero-padded: the key is the word): a direct-mapped table of 8 slots
    per name gives the id (one 4-byte read, checked against the name's integer). A slot
    shared by several names holds the likeliest of them, marked shared (the sign bit): only a
    word that is not that name reads on, in a :class:`ProbeIndex` of all short names. Longer
    names go through :class:`seqprob.ngram._arpa_fast.VocabIndex`.

    Examples
    --------
    >>> idx = WordIndex(["<unk>", "<s>", "</s>", "cat", "concatenation"])
    >>> data = b"cat dog concatenation cat"
    >>> buf, starts, ends = _fields(np.frombuffer(data, dtype=np.uint8))
    >>> idx.ids(data, starts, ends).tolist()
    [3, -1, 4, 3]
    """

    def __init__(self, names: list, likeliness=None):
        encoded = [n.encode("utf-8") for n in names]
        likeliness = np.zeros(len(names)) if likeliness is None else np.nan_to_num(likeliness, neginf=-1e300)
        is_short = np.array([len(e) <= 8 and b"\0" not in e for e in encoded], dtype=bool)
        short = np.flatnonzero(is_short)
        packed = b"".join(encoded[i].ljust(8, b"\0") for i in short)
        keys = np.frombuffer(packed, dtype="<u8").view(np.int64)  # (S,) the words as integers
        self.short = ProbeIndex.build(keys, likeliness[short], np.zeros(len(short)), rows=short)
        self.shift = np.uint64(64 - max(int(8 * len(short) - 1).bit_length(), 4))
        self.direct = self._direct_table(keys, short, likeliness[short], len(names))
        self.packed = np.zeros(len(names) + 1, dtype=np.int64)  # (V+1,) each short name as an integer
        self.packed[short] = keys  # a long name and the empty slot (id V) keep 0: no word's key
        self.long_ids = np.flatnonzero(~is_short)
        self.long = fast.VocabIndex([names[i] for i in self.long_ids]) if len(self.long_ids) else None
        self.long_names = {encoded[i]: int(i) for i in self.long_ids}

    def _direct_table(self, keys: np.ndarray, ids: np.ndarray, likeliness: np.ndarray, V: int) -> np.ndarray:
        """(2**bits,) int32 per slot: V where empty, the id of its name, or of the likeliest of
        the names hashed there with the sign bit set (-2**31 | id) where several are."""
        slot = _bucket(keys, self.shift)  # (S,)
        direct = np.full(1 << (64 - int(self.shift)), V, dtype=np.int32)
        likeliest_last = np.lexsort((likeliness, slot))  # by slot, then ascending likeliness
        direct[slot[likeliest_last]] = ids[likeliest_last]  # the last write of a slot wins
        shared = np.bincount(slot, minlength=len(direct)) > 1
        direct[shared] |= np.int32(-2**31)
        return direct

    def ids(self, data: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """(F,) id of each field ``data[starts[k]:ends[k]]``, -1 where it is no vocabulary word."""
        padded = np.frombuffer(data + bytes(8), dtype=np.uint8)
        view = np.ndarray(shape=(len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
        length = ends - starts  # (F,)
        words = (view[starts] & _LOW_BYTES[np.minimum(length, 8)]).view(np.int64)  # (F,) first 8 bytes
        found = np.take(self.direct, _bucket(words, self.shift))  # (F,) id, V, or shared | id
        ids = found & np.int32(2**31 - 1)  # (F,)
        match = np.take(self.packed, ids) == words  # (F,) (a long field is redone below)
        ids = np.where(match, ids, -1)
        shared = np.flatnonzero((found < 0) > match)  # (s,) in a shared slot, not its likeliest name
        if len(shared):
            hit, rec = self.short.probe(words[shared])
            ids[shared] = np.where(hit, rec[:, ROW], -1)
        if len(length) and length.max() > 8:
            long = np.flatnonzero(length > 8)
            ids[long] = self._long_ids(padded, data, starts[long], ends[long])
        return ids

    def _long_ids(self, padded, data: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        found = None if self.long is None else fast.word_ids(self.long, padded, starts, ends)
        if found is not None:
            return np.where(found >= 0, self.long_ids[np.maximum(found, 0)], -1)
        return np.array([self.long_names.get(data[s:e], -1) for s, e in zip(starts.tolist(), ends.tolist())],
                        dtype=np.int64)


def _fields(buf: np.ndarray):
    """(buf, starts, ends) of the fields of a byte array split on bytes <= 32."""
    ws = np.empty(len(buf) + 2, dtype=bool)  # (n+2,) whitespace, padded with True
    ws[0] = ws[-1] = True
    np.less_equal(buf, 32, out=ws[1:-1])
    edges = np.flatnonzero(ws[1:] != ws[:-1])  # (2F,) field starts and ends, alternating
    return buf, edges[0::2].copy(), edges[1::2].copy()  # (F,), (F,) contiguous: faster indices


def _plain(data: bytes, buf: np.ndarray, n_newlines: int) -> bool:
    """True if the only bytes <= 32 of ``data`` are space, tab, CR and LF (``n_newlines`` of
    them LF): no whitespace that only ``str.split`` knows, no other control byte."""
    low = int(np.count_nonzero(buf < 32))  # (one pass: usually the newlines alone)
    if low != n_newlines and low != sum(int(np.count_nonzero(buf == c)) for c in (10, 9, 13)):
        return False
    return data.isascii() or not any(c in data for c in _ODD_UNICODE)


def _block_words(index: WordIndex, data: bytes) -> dict | None:
    """Words of a block of whole lines: ids (W,), count (n,) per non-blank line, the number of
    blank lines, and the bytes and characters of the stripped non-blank lines; None if the
    block needs Python's whitespace rules."""
    buf, starts, ends = _fields(np.frombuffer(data, dtype=np.uint8))
    newlines = np.flatnonzero(buf == 10)  # (lines-1 or lines,)
    if not _plain(data, buf, len(newlines)):
        return None
    before = np.searchsorted(starts, newlines)  # (.,) fields before each newline
    count = np.diff(np.concatenate([[0], before, [len(starts)]]))  # (.,) fields per line
    if data.endswith(b"\n"):
        count = count[:-1]  # nothing follows the last newline
    first = (np.cumsum(count) - count)[count > 0]  # (n,) first field of each non-blank line
    count = count[count > 0]  # (n,)
    n_bytes = int((ends[first + count - 1] - starts[first]).sum()) if len(count) else 0
    n_chars = n_bytes - (0 if data.isascii() else int(np.count_nonzero((buf & 0xC0) == 0x80)))
    return {"ids": index.ids(data, starts, ends), "count": count, "blank": len(newlines) + (
        not data.endswith(b"\n")) - len(count), "n_bytes": n_bytes, "n_chars": n_chars}


def _python_words(vocab, data: bytes) -> dict:
    """:func:`_block_words` by ``str.strip`` and ``str.split`` (Unicode whitespace)."""
    text = data.decode("utf-8")
    lines = [line.strip() for line in text.split("\n")[: text.count("\n") + (not text.endswith("\n"))]]
    kept = [line for line in lines if line]
    words = [line.split() for line in kept]
    ids = np.array([vocab._index.get(w, -1) for ws in words for w in ws], dtype=np.int64)
    return {"ids": ids, "count": np.array([len(ws) for ws in words], dtype=np.int64),
            "blank": len(lines) - len(kept), "n_bytes": sum(len(line.encode("utf-8")) for line in kept),
            "n_chars": sum(map(len, kept))}


def _add_block(model, words: dict, eos: bool, sums: dict) -> None:
    """Score one block's sentences and add them to the running sums."""
    vocab, ids, count = model.vocab, words["ids"], words["count"]
    n = len(count)
    stream, start, has_history = _layout(vocab, ids, count, eos)
    lp = _score(model, stream, start, has_history)  # (L,) NaN at each <s>
    lp[start] = 0.0  # so that a sum over the whole stream is one over the scored tokens
    is_oov = stream == vocab.unk_id  # (L,) every unknown word was mapped to <unk>
    total = float(lp.sum())
    n_oov = int(np.count_nonzero(is_oov))
    excl = total if not n_oov else float(np.where(is_oov, 0.0, lp).sum())
    n_zero, kept = 0, excl
    if np.isneginf(total):  # some token (OOV or not) has probability 0
        zero = np.isneginf(lp) & ~is_oov  # (L,)
        n_zero = int(np.count_nonzero(zero))
        kept = float(np.where(zero | is_oov, 0.0, lp).sum())
        if n_zero and len(sums["zeros"]) < _MAX_ZEROS:
            _note_zeros(sums, np.flatnonzero(zero), start, stream, vocab)
    sums["n_tokens"] += len(stream) - n
    sums["n_oov"] += n_oov
    sums["n_zeros"] += n_zero
    sums["logprob"] += total
    sums["max_logprob"] = _max_nan(sums["max_logprob"], float(lp.max()))  # NaN stays NaN
    sums["logprob_excl_oov"] += excl
    sums["logprob_kept"] += kept
    sums["n_sentences"] += n
    sums["n_chars"] += words["n_chars"]
    sums["n_bytes"] += words["n_bytes"]
    sums["lines_done"] += n


def _layout(vocab, ids: np.ndarray, count: np.ndarray, eos: bool):
    """(stream (L,), start (n,), has_history (L,)): ``<s> w .. [</s>]`` per sentence, unknown
    words (id -1) as ``<unk>``, and False at each ``<s>``."""
    length = count + 1 + int(eos)  # (n,) ids per sentence
    end = np.cumsum(length)  # (n,) one past each sentence
    start = end - length
    stream = np.empty(int(end[-1]), dtype=np.int64)  # (L,)
    has_history = np.ones(len(stream), dtype=bool)  # (L,)
    has_history[start] = False
    if eos:
        has_history[end - 1] = False  # (briefly: the word positions)
        stream[has_history] = np.where(ids < 0, vocab.unk_id, ids)
        has_history[end - 1] = True
        stream[end - 1] = vocab.eos_id
    else:
        stream[has_history] = np.where(ids < 0, vocab.unk_id, ids)
    stream[start] = vocab.bos_id
    return stream, start, has_history


def _score(model, stream: np.ndarray, start: np.ndarray, has_history: np.ndarray) -> np.ndarray:
    """The model's log P of each stream position (NaN at each ``<s>``): by :func:`score_chain`
    straight from the history mask when the model scores through its back-off tables."""
    if getattr(model, "scores_from_tables", False):
        tables = model._tables()
        if not tables.unlisted_logbow:
            return score_chain(tables, stream, has_history)
    length = np.diff(np.append(start, len(stream)))  # (n,)
    return model._score_stream(stream, np.repeat(start, length))


def _note_zeros(sums: dict, positions: np.ndarray, start: np.ndarray, stream: np.ndarray, vocab) -> None:
    positions = positions[: _MAX_ZEROS - len(sums["zeros"])]
    line = np.searchsorted(start, positions, side="right") - 1
    sums["zeros"] += [(sums["lines_done"] + int(i), int(p - start[i]), vocab.tokens[stream[p]])
                      for i, p in zip(line.tolist(), positions.tolist())]
