"""The memory-mapped binary n-gram format (``.sqlm``): save a back-off model, map it back in
O(1), convert an ARPA file. The file layout is :mod:`seqprob.ngram._sqlm`'s.

Importing this module registers the format with :func:`seqprob.load_model` (a file named
``*.sqlm``).
"""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..registry import register_model_format
from ..tokenizers import WhitespaceTokenizer
from ._sqlm import MAGIC, read_sqlm, write_sqlm
from .arpa import read_arpa
from .base import BackoffTablesModel

__all__ = ["save_ngram", "load_ngram", "build_binary", "MAGIC"]


def save_ngram(model, path, hash: bool = True) -> Path:
    """Write a back-off n-gram model as a memory-mappable ``.sqlm`` file, atomically.

    Parameters
    ----------
    model : a fitted seqprob n-gram model, or one read from a file
        Anything with back-off tables (every estimator; ``StupidBackoff`` keeps its unlisted
        back-off weight).
    path : str or path-like
    hash : bool
        Also store the query records of every order >= 2 (one 32-byte record per n-gram, 16
        on the highest order, plus 4-byte bucket offsets, 2-4 per n-gram) so queries on the
        loaded model need no index build; without them the first query builds them in
        memory.

    Returns
    -------
    pathlib.Path

    Notes
    -----
    Sizes: 8 (key) + 8 (log prob) + 8 (back-off, not on the highest order) bytes per n-gram,
    plus 24-48 with ``hash=True`` (a query reads one record per order instead of a slot, a
    key, a probability and a back-off weight: four random reads). Probabilities are kept in
    float64, so a model saved, loaded and written as ARPA gives the same bytes as the original.

    Examples
    --------
    >>> import tempfile, os
    >>> from seqprob.ngram import WittenBell
    >>> m = WittenBell(order=2).fit(["a b", "b a"])
    >>> p = save_ngram(m, os.path.join(tempfile.mkdtemp(), "m.sqlm"))
    >>> bool((load_ngram(p).token_logprobs([1, 3, 4, 2]) == m.token_logprobs([1, 3, 4, 2])).all())
    True
    """
    if not hasattr(model, "_tables"):
        raise InputError(f"save_ngram needs a seqprob n-gram model, got {type(model).__name__}")
    return write_sqlm(model._tables(), model.vocab, getattr(model, "tokenizer", None), path, hash,
                      normalized=getattr(model, "normalized", True))


def load_ngram(path, verify: bool = False) -> BackoffTablesModel:
    """Memory-map a ``.sqlm`` file written by :func:`save_ngram` (O(1): nothing is read).

    Parameters
    ----------
    path : str or path-like
    verify : bool
        Also check the CRC-32 of every section (reads the whole file once).

    Returns
    -------
    BackoffTablesModel
        Scores exactly like the saved model; its arrays are read-only views of the file.

    Raises
    ------
    FileFormatError
        Not a seqprob n-gram file, another format version, a damaged header, a truncated
        file, or (``verify=True``) a section whose checksum differs.
    SeqProbFileError
        The file cannot be opened.

    Examples
    --------
    >>> import tempfile, os
    >>> from seqprob.ngram import KneserNey
    >>> p = save_ngram(KneserNey(order=3).fit(["a b c", "b c a"]), os.path.join(tempfile.mkdtemp(), "kn.sqlm"))
    >>> load_ngram(p, verify=True).order
    3
    """
    tables, vocab, whitespace, normalized, path = read_sqlm(path, verify)
    # only a whitespace tokenizer is recorded; for another, pass the tokenizer to the scoring
    model = BackoffTablesModel(tables, vocab, WhitespaceTokenizer(vocab) if whitespace else None, path=path)
    if not normalized:
        model.normalized = False  # scores, not probabilities: perplexity warns, ARPA refuses
    return model


def build_binary(arpa_path, out_path, hash: bool = True) -> Path:
    """Convert an ARPA file to the binary format (``seqprob ngram build-binary``).

    Examples
    --------
    >>> import tempfile, os
    >>> from seqprob.ngram import WittenBell, write_arpa
    >>> d = tempfile.mkdtemp()
    >>> a = write_arpa(WittenBell(order=2).fit(["a b"]), os.path.join(d, "m.arpa"))
    >>> build_binary(a, os.path.join(d, "m.sqlm")).name
    'm.sqlm'
    """
    return save_ngram(read_arpa(arpa_path), out_path, hash=hash)


def _is_sqlm(path: Path) -> bool:
    return path.is_file() and path.suffix == ".sqlm"


register_model_format("sqlm", _is_sqlm, load_ngram, "binary n-gram file (.sqlm)")
