"""An ARPA writer that formats the tables block by block, in bounded memory.

It writes the same bytes as :func:`seqprob.arpa.write_arpa` (a test checks it) but never holds
the text of a whole order: each block of rows gets its words by walking the prefix-linked keys
down to the unigrams, and is formatted and written before the next one.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np

from .._io import atomic_write
from ..errors import InputError
from ..functional import LN10
from ..vocab import BOS, EOS, UNK, Vocab
from .tables import BackoffTables

__all__ = ["write_arpa_stream", "write_section", "arpa_names", "progress_bar"]

log = logging.getLogger(__name__)


def write_arpa_stream(tables: BackoffTables, vocab: Vocab, path, block_rows: int = 1 << 16,
                      progress: bool | None = None) -> Path:
    """Write back-off tables as an ARPA file, ``block_rows`` n-grams at a time, atomically.

    Parameters
    ----------
    tables : BackoffTables
        A normalized model's tables (``model.tables_``).
    vocab : Vocab
        Its vocabulary (distinct ``<s>`` and ``</s>``; no whitespace inside tokens).
    path : str or path-like
        Destination, written through a temporary file (no partial output on failure).
    block_rows : int
        N-grams formatted per block: memory is O(block_rows), not O(model).
    progress : bool or None
        A tqdm bar over the n-grams (None: only on an interactive terminal).

    Returns
    -------
    pathlib.Path

    Notes
    -----
    Line of n-gram (h, w): ``log10 P(w | h) <TAB> h w [<TAB> log10 gamma(h w)]`` with
    log10 x = ln x / ln 10 and ``%.10g`` digits; probability 0 as -99, ``<s>`` as 0; no back-off
    column at the highest order (KenLM's layout, exactly :func:`seqprob.arpa.write_arpa`).

    Examples
    --------
    >>> import tempfile, os
    >>> from seqprob.ngram import WittenBell
    >>> m = WittenBell(order=2).fit(["a b", "b a"])
    >>> p = write_arpa_stream(m.tables_, m.vocab, os.path.join(tempfile.mkdtemp(), "m.arpa"))
    >>> p.read_text().splitlines()[1:3]
    ['ngram 1=5', 'ngram 2=6']
    """
    names = arpa_names(vocab)  # (V,) object
    path = Path(path)
    bar = progress_bar(progress, sum(tables.sizes()), "writing ARPA")
    try:
        with atomic_write(path) as handle:
            handle.write("\\data\\\n")
            for m, size in enumerate(tables.sizes(), start=1):
                handle.write(f"ngram {m}={size}\n")
            for m in range(1, tables.order + 1):
                write_section(handle, tables, m, names, vocab, block_rows, bar)
            handle.write("\n\\end\\\n")
    finally:
        bar.close()
    log.info("wrote %s: n-grams %s", path, tables.sizes())
    return path


def write_section(handle, tables, m: int, names: np.ndarray, vocab: Vocab, block_rows: int,
                  bar, release=None) -> None:
    """Write the ``\\m-grams:`` section, block by block (``release()`` after each block)."""
    handle.write(f"\n\\{m}-grams:\n")
    size = len(tables.keys[m - 1])
    for lo in range(0, size, block_rows):
        hi = min(lo + block_rows, size)
        handle.write(_block_text(tables, m, lo, hi, names, vocab))
        bar.update(hi - lo)
        if release is not None:
            release()


def _block_text(tables: BackoffTables, m: int, lo: int, hi: int, names: np.ndarray,
                vocab: Vocab) -> str:
    """The ARPA lines of rows lo..hi-1 of order m."""
    words = _word_columns(tables, m, np.arange(lo, hi, dtype=np.int64), names)  # m x (b,) object
    p10 = np.asarray(tables.logp[m - 1][lo:hi]) / LN10  # (b,)
    b10 = None if m == tables.order else np.asarray(tables.logbow[m - 1][lo:hi]) / LN10
    special = (m == 1 and lo <= vocab.bos_id < hi) or np.isneginf(p10).any() or \
        (b10 is not None and np.isneginf(b10).any())
    if special:
        return _block_text_slow(p10, b10, words, lo, m, vocab)
    cols = np.empty((hi - lo, m + 1 + (b10 is not None)), dtype=object)  # (b, columns)
    cols[:, 0] = p10
    for j, col in enumerate(words, start=1):
        cols[:, j] = col
    if b10 is not None:
        cols[:, -1] = b10
    line = "%.10g\t" + " ".join(["%s"] * m) + ("\n" if b10 is None else "\t%.10g\n")
    return (line * (hi - lo)) % tuple(cols.ravel().tolist())  # one C-level formatting call


def _block_text_slow(p10, b10, words: list, lo: int, m: int, vocab: Vocab) -> str:
    """Line by line, for blocks holding -inf (written -99) or the ``<s>`` unigram (written 0)."""
    text = words[0]
    for col in words[1:]:
        text = text + " " + col
    probs = _fmt(p10)
    if m == 1 and lo <= vocab.bos_id < lo + len(p10):
        probs[vocab.bos_id - lo] = "0"
    if b10 is None:
        return "".join(f"{p}\t{t}\n" for p, t in zip(probs, text.tolist()))
    return "".join(f"{p}\t{t}\t{b}\n" for p, t, b in zip(probs, text.tolist(), _fmt(b10)))


def _word_columns(tables: BackoffTables, m: int, rows: np.ndarray, names: np.ndarray) -> list:
    """Words 1..m (object arrays of str) of the given order-m rows, via the prefix rows."""
    V = tables.vocab_size
    words = []
    for j in range(m, 1, -1):
        keys = np.asarray(tables.keys[j - 1][rows])  # (b,)
        rows, last = np.divmod(keys, V)
        words.append(names[last])
    words.append(names[rows])
    return words[::-1]


def _fmt(log10: np.ndarray) -> list:
    return ["-99" if v == -math.inf else f"{v:.10g}" for v in log10.tolist()]


def arpa_names(vocab: Vocab) -> np.ndarray:
    """ARPA spelling of every id (``<s>``, ``</s>``, ``<unk>``), refusing unwritable tokens."""
    if vocab.bos_id is None or vocab.eos_id is None or vocab.bos_id == vocab.eos_id:
        raise InputError("an ARPA file needs distinct <s> and </s> tokens; this vocabulary has "
                         f"bos={vocab.bos!r}, eos={vocab.eos!r}")
    names = list(vocab.tokens)
    names[vocab.bos_id], names[vocab.eos_id] = BOS, EOS
    if vocab.unk_id is not None and vocab.unk != "<UNK>":
        names[vocab.unk_id] = UNK
    for i, name in enumerate(names):
        if not name or len(name.split()) != 1 or name != name.strip():
            raise InputError(f"token {name!r} (id {i}) is empty or contains whitespace: ARPA words "
                             "are whitespace-separated", token=name)
    if len(set(names)) != len(names):
        raise InputError("a token would appear twice in the ARPA file (it is also a special symbol)")
    return np.array(names, dtype=object)


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(progress, total: int, desc: str):
    if not progress and progress is not None:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(desc=desc, unit=" n-grams", total=total, leave=False,
                disable=None if progress is None else False)
