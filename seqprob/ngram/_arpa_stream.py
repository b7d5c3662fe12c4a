"""An ARPA writer that formats the tables block by block, in bounded memory.

It writes the same bytes as :func:`seqprob.ngram.arpa.write_arpa` (a test checks it) but never holds
the text of a whole order: each block of rows gets its words by walking the prefix-linked keys
down to the unigrams, and is formatted and written before the next one.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from .._io import as_path, atomic_write
from ..errors import InputError
from ..vocab import Vocab
from .tables import BackoffTables

__all__ = ["write_arpa_stream", "write_header", "write_section", "arpa_names", "progress_bar"]

log = logging.getLogger(__name__)


def write_arpa_stream(tables: BackoffTables, vocab: Vocab, path, block_rows: int | None = None,
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
    block_rows : int or None
        N-grams formatted per chunk (default: about 4 MB of text): memory is O(chunk), not O(model).
    progress : bool or None
        A tqdm bar over the n-grams (None: only on an interactive terminal).

    Returns
    -------
    pathlib.Path

    Notes
    -----
    Line of n-gram (h, w): ``log10 P(w | h) <TAB> h w [<TAB> log10 gamma(h w)]`` with
    log10 x = ln x / ln 10 and ``%.10g`` digits; probability 0 as -99, ``<s>`` as 0; no back-off
    column at the highest order (KenLM's layout, exactly :func:`seqprob.ngram.arpa.write_arpa`).

    Examples
    --------
    >>> import tempfile, os
    >>> from seqprob.ngram import WittenBell
    >>> m = WittenBell(order=2).fit(["a b", "b a"])
    >>> p = write_arpa_stream(m.tables_, m.vocab, os.path.join(tempfile.mkdtemp(), "m.arpa"))
    >>> p.read_text().splitlines()[1:3]
    ['ngram 1=5', 'ngram 2=6']
    """
    names = arpa_names(vocab)  # (V, longest name) bytes
    path = as_path(path)
    bar = progress_bar(progress, sum(tables.sizes()), "writing ARPA")
    try:
        with atomic_write(path, "wb") as handle:
            write_header(handle, tables.sizes())
            for m in range(1, tables.order + 1):
                write_section(handle, tables, m, names, vocab, bar, block_rows=block_rows)
            handle.write(b"\n\\end\\\n")
    finally:
        bar.close()
    log.info("wrote %s: n-grams %s", path, tables.sizes())
    return path


def write_header(handle, sizes: list) -> None:
    """``\\data\\`` and one ``ngram m=count`` line per order (a binary handle)."""
    handle.write(b"\\data\\\n" + b"".join(b"ngram %d=%d\n" % (m, n) for m, n in enumerate(sizes, 1)))


def write_section(handle, tables, m: int, names: np.ndarray, vocab: Vocab, bar, release=None,
                  block_rows: int | None = None) -> None:
    """Write the ``\\m-grams:`` section a few MB at a time with :func:`seqprob.ngram.arpa.write_arpa`'s
    vectorized formatter (``release()`` after each chunk)."""
    from .arpa import _section_text  # lazy: seqprob.arpa imports this package

    handle.write(b"\n\\%d-grams:\n" % m)
    for lines, chunk in _section_text(tables, m, names, vocab, block_rows):
        handle.write(chunk)
        bar.update(lines)
        if release is not None:
            release()


def arpa_names(vocab: Vocab) -> np.ndarray:
    """(V, longest) byte matrix of the ARPA spelling of every id (``<s>``, ``</s>``, ``<unk>``),
    refusing tokens an ARPA file cannot hold (the checks of :func:`seqprob.ngram.arpa.write_arpa`)."""
    from ._arpa_fast import name_matrix
    from .arpa import _arpa_names

    names = _arpa_names(vocab)
    if any("\0" in name for name in names):
        raise InputError("a token contains a NUL character, which an ARPA file cannot hold")
    return name_matrix(names)


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
