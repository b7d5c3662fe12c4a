"""ARPA back-off language model files: read any common dialect, write KenLM's.

An ARPA file lists n-grams with log10 P(w | h) and, for contexts, log10 back-off weights;
an unlisted n-gram backs off: log P(w | h) = bow(h) + log P(w | h'). seqprob reads what
KenLM, SRILM, IRSTLM and others write:

- text before ``\\data\\`` is ignored (and a UTF-8 byte-order mark); blank lines anywhere;
  ``ngram n=c`` counts, which must match the sections;
- ``<s>`` written with log10 prob 0 (KenLM) or -99 (SRILM): either way it is never predicted;
- ``-99`` means probability 0 (SRILM's pseudo-zero) and reads as -inf;
- ``<unk>`` or ``<UNK>``; a file without either gets ``<unk>`` at log10 prob -100 (as KenLM,
  with a warning);
- a missing back-off means 0; the highest order has none (a non-zero one is an error);
- ``\\end\\`` closes the file (its absence means a truncated file: an error).

Anything malformed raises :class:`~seqprob.errors.ArpaFormatError` naming the 1-based line.
"""
from __future__ import annotations

import contextlib
import gzip
import logging
import math
import warnings
import zlib
from pathlib import Path

import numpy as np

from .. import _parallel
from .._progress import progress_bar
from .._io import as_path, atomic_write
from ..errors import ArpaFormatError, InputError, SeqProbFileError
from ..functional import LN10
from ..registry import register_model_format
from ..tokenizers import WhitespaceTokenizer
from ..vocab import BOS, EOS, UNK, Vocab
from . import _arpa_fast as _fast
from .base import BackoffTablesModel
from .counts import MAX_ORDER, lookup_keys
from .tables import BackoffTables

__all__ = ["read_arpa", "write_arpa", "arpa_writer", "ArpaModel", "BLOCK_BYTES"]

log = logging.getLogger(__name__)

_ZERO = -99.0  # SRILM's log10 pseudo-zero


#: The model :func:`read_arpa` returns: another name of
#: :class:`~seqprob.ngram.base.BackoffTablesModel` (the one model made of back-off tables, also
#: what ``load_ngram``, ``prune_entropy`` and ``Mixture.to_backoff`` give), kept as
#: ``seqprob.ArpaModel``.
ArpaModel = BackoffTablesModel


def _model(tables: BackoffTables, vocab: Vocab, path: str) -> BackoffTablesModel:
    return BackoffTablesModel(tables, vocab, WhitespaceTokenizer(vocab), path=path)


# ---------------------------------------------------------------------------- reading


def read_arpa(path, progress: bool | None = None) -> BackoffTablesModel:
    """Read an ARPA file (``.gz`` is decompressed) into a back-off model.

    Parameters
    ----------
    path : str or path-like
    progress : bool or None
        Progress bar over the n-grams (None: only for files of over a million n-grams on an
        interactive terminal).

    Returns
    -------
    BackoffTablesModel
        Its tables, vocabulary (``<unk>``, ``<s>``, ``</s>`` at ids 0, 1, 2, then the unigrams
        in file order), a :class:`WhitespaceTokenizer` (unknown words become ``<unk>``) and
        ``path``.

    Raises
    ------
    ArpaFormatError
        Malformed content; ``err.line`` is the 1-based line number.

    Notes
    -----
    Sections are parsed a whole column at a time (numbers by pandas' C parser, words by a hash
    of their bytes checked byte for byte; :mod:`seqprob.ngram._arpa_fast`); a file with
    anything unusual (another kind of whitespace, ``inf``, a malformed line...) is read line
    by line instead, which gives the same model or names the offending line.

    Examples
    --------
    >>> import tempfile, os
    >>> text = "\\\\data\\\\\\nngram 1=4\\n\\n\\\\1-grams:\\n-1\\t<unk>\\n0\\t<s>\\n-0.5\\t</s>\\n-0.3\\ta\\n\\\\end\\\\\\n"
    >>> p = os.path.join(tempfile.mkdtemp(), "a.arpa"); _ = open(p, "w").write(text)
    >>> read_arpa(p).order
    1
    """
    path = str(as_path(path))
    data = _read_bytes(path)
    model = _read_fast(data, path, progress)
    if model is None:  # something the column parser does not handle: the line-by-line reader
        model = _read_lines(data, path)  # decides, and names the line of any error
    log.info("read %s: order %d, n-grams %s", path, model.order, model.tables_.sizes())
    return model


def _read_lines(data: bytes, path: str) -> BackoffTablesModel:
    """The line-by-line reader: slower, but it names the line of any error."""
    lines = _decode_lines(data, path)
    declared, sections, _ = _parse_structure(lines, path)
    return _build(lines, declared, sections, path)


def _read_bytes(path: str) -> bytes:
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as handle:
            data = handle.read()
    except (OSError, EOFError, zlib.error) as exc:  # zlib.error: a corrupt .gz
        raise SeqProbFileError(f"cannot read ARPA file {path!r}: {getattr(exc, 'strerror', None) or exc}",
                               path=path) from exc
    return data.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark some editors write


def _decode_lines(data: bytes, path: str) -> list:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ArpaFormatError(f"{path!r} line {line}: not valid UTF-8 ({exc.reason} at byte {exc.start})",
                              line=line, path=path) from None
    return text.split("\n")


def _err(path: str, line: int, msg: str) -> ArpaFormatError:
    return ArpaFormatError(f"{path!r} line {line}: {msg}", line=line, path=path)


def _parse_structure(lines: list, path: str):
    """Split the file into declared counts and per-order lists of (line number, text)."""
    i, n = 0, len(lines)
    while i < n and lines[i].strip() != "\\data\\":
        i += 1
    if i == n:
        raise _err(path, 1, "no \\data\\ header: not an ARPA file")
    declared: dict = {}
    i += 1
    while i < n and not lines[i].strip().startswith("\\"):
        text = lines[i].strip()
        if text:
            order, count, line = _parse_count(text, path, i + 1)
            if order in declared:
                raise _err(path, line, f"\\data\\ declares the {order}-gram count twice (first at "
                           f"line {declared[order][1]})")
            declared[order] = (count, line)
        i += 1
    if not declared:
        raise _err(path, i + 1, "\\data\\ declares no 'ngram n=count' lines")
    orders = sorted(declared)
    if orders != list(range(1, len(orders) + 1)) or len(orders) > MAX_ORDER:
        raise _err(path, declared[orders[-1]][1], f"\\data\\ declares orders {orders}: "
                   f"expected 1 .. N with N <= {MAX_ORDER}")
    sections: dict = {}
    current = None
    while i < n:
        text = lines[i].strip()
        if text.startswith("\\"):
            if text == "\\end\\":
                _check_counts(declared, sections, path)
                return declared, sections, i + 1
            current = _parse_header(text, path, i + 1, len(sections) + 1)
            if current not in declared:
                raise _err(path, i + 1, f"section {text} is not declared in \\data\\")
            sections[current] = (i + 1, [])
        elif text:
            if current is None:
                raise _err(path, i + 1, f"n-gram line outside any section: {text[:40]!r}")
            sections[current][1].append(i + 1)
        i += 1
    raise _err(path, n, "no \\end\\ marker: the file is truncated")


def _parse_count(text: str, path: str, line: int):
    parts = text.split()
    try:
        if len(parts) == 2 and parts[0] == "ngram":
            order, count = parts[1].split("=")
            order, count = int(order), int(count)
            if order >= 1 and count >= 0:
                return order, count, line
    except ValueError:
        pass
    raise _err(path, line, f"expected 'ngram n=count' in \\data\\, got {text[:60]!r}")


def _parse_header(text: str, path: str, line: int, expected: int) -> int:
    if text.endswith("-grams:") and text[1:-7].isdigit():
        order = int(text[1:-7])
        if order != expected:
            raise _err(path, line, f"section {text} out of order: expected \\{expected}-grams:")
        return order
    raise _err(path, line, f"unknown section header {text!r} (expected \\{expected}-grams: or \\end\\)")


def _check_counts(declared: dict, sections: dict, path: str) -> None:
    for order, (count, line) in declared.items():
        if order not in sections:
            raise _err(path, line, f"\\data\\ declares ngram {order}={count} but there is no "
                       f"\\{order}-grams: section")
        found = len(sections[order][1])
        if found != count:
            raise _err(path, line, f"\\data\\ declares ngram {order}={count} but the \\{order}-grams: "
                       f"section (line {sections[order][0]}) has {found} entries")


def _line_pattern(order: int) -> str:
    words = "w1" if order == 1 else f"w1 .. w{order}"
    return f"'log10prob {words} [backoff]'"


def _number(field: str, what: str, path: str, ln: int, order: int, line: str) -> float:
    try:
        return float(field)
    except ValueError:
        hint = ", or one word too many" if what.startswith("back-off") else ""
        raise _err(path, ln, f"the {what} of this {order}-gram line is {field[:40]!r}, not a number"
                   f"{hint}: {line.strip()[:60]!r} (a line is {_line_pattern(order)}, fields separated "
                   "by whitespace)") from None


def _parse_entries(lines: list, linenos: list, order: int, highest: bool, path: str):
    """(words list, log10 probs, log10 back-offs) of one section."""
    words, probs, bows = [], [], []
    for ln in linenos:
        fields = lines[ln - 1].split()
        if len(fields) not in (order + 1, order + 2):
            raise _err(path, ln, f"a {order}-gram line needs {_line_pattern(order)}, "
                       f"got {len(fields)} fields")
        line = lines[ln - 1]
        p = _number(fields[0], "log10 probability (first field)", path, ln, order, line)
        b = _number(fields[order + 1], f"back-off (field {order + 2})", path, ln, order, line) \
            if len(fields) == order + 2 else 0.0
        if math.isnan(p) or math.isnan(b) or p > 0 or p == math.inf or b == math.inf:
            raise _err(path, ln, f"invalid log10 probability / back-off {p} / {b} "
                       "(must be finite or -inf, probability <= 0)")
        if highest and b != 0.0:
            raise _err(path, ln, f"back-off {b} on the highest order ({order}-grams) cannot be used")
        words.append(fields[1: order + 1])
        probs.append(p)
        bows.append(b)
    return words, np.array(probs, dtype=np.float64), np.array(bows, dtype=np.float64)


def _to_nats(log10_values: np.ndarray) -> np.ndarray:
    return np.where(log10_values == _ZERO, -np.inf, log10_values * LN10)


def _build(lines: list, declared: dict, sections: dict, path: str) -> BackoffTablesModel:
    N = len(declared)
    linenos = sections[1][1]
    words, probs, bows = _parse_entries(lines, linenos, 1, N == 1, path)
    vocab, logp1, logbow1 = _unigram_vocab(words, probs, bows, linenos, path)
    V = len(vocab)
    keys, logp, logbow = [np.arange(V, dtype=np.int64)], [logp1], [logbow1]
    for m in range(2, N + 1):
        linenos = sections[m][1]
        words, probs, bows = _parse_entries(lines, linenos, m, m == N, path)
        k, perm = _section_keys(words, linenos, m, vocab, keys, path)
        keys.append(k)
        logp.append(_to_nats(probs)[perm])
        logbow.append(_to_nats(bows)[perm])
    tables = BackoffTables(V, keys, logp, logbow[: N - 1])
    return _model(tables, vocab, path)


def _section_keys(words: list, linenos: list, m: int, vocab: Vocab, keys: list, path: str):
    """Prefix-linked sorted keys of one section and the permutation that sorts its entries."""
    index = vocab._index
    ids = np.array([[index.get(w, -1) for w in ws] for ws in words], dtype=np.int64).reshape(-1, m)
    bad = np.flatnonzero((ids < 0).any(axis=1))
    if len(bad):
        i = int(bad[0])
        word = next(w for w in words[i] if w not in index)
        raise _err(path, linenos[i], f"word {word!r} of this {m}-gram is not a unigram of the file")
    k, perm, missing, dup = _link_keys(ids, len(vocab), keys)
    if missing is not None:
        raise _err(path, linenos[missing], f"the context {' '.join(words[missing][:-1])!r} of this "
                   f"{m}-gram is not listed among the {m - 1}-grams")
    if dup is not None:
        raise _err(path, linenos[dup], f"{m}-gram {' '.join(words[dup])!r} is listed twice")
    return k, perm


def _link_keys(ids: np.ndarray, V: int, keys: list):
    """(n, m) word ids -> (sorted keys, sorting permutation, first entry whose context is not
    listed or None, first duplicate entry or None)."""
    m = ids.shape[1]
    rows = ids[:, 0]
    for j in range(1, m - 1):
        rows = np.where(rows >= 0, lookup_keys(keys[j], rows * V + ids[:, j]), -1)
    missing = np.flatnonzero(rows < 0)
    if len(missing):
        return None, None, int(missing[0]), None
    k = rows * V + ids[:, -1]  # (n,)
    perm = np.argsort(k, kind="stable")
    k = k[perm]
    dup = np.flatnonzero(k[1:] == k[:-1])
    return k, perm, None, (int(perm[dup[0] + 1]) if len(dup) else None)


def _unigram_vocab(words: list, probs: np.ndarray, bows: np.ndarray, linenos: list, path: str):
    names = [w[0] for w in words]
    if not set(names) - {BOS}:
        raise ArpaFormatError(f"{path!r} lists no unigram that can be predicted (ngram 1={len(names)}"
                              f"{': only <s>' if names else ''}): a back-off model needs its 1-grams, "
                              "the distribution every context backs off to", path=path)
    seen: dict = {}
    for name, ln in zip(names, linenos):
        if name in seen:
            raise _err(path, ln, f"unigram {name!r} listed twice (first at line {seen[name]})")
        seen[name] = ln
    unk = UNK if UNK in seen else ("<UNK>" if "<UNK>" in seen else None)
    extra = {}
    if unk is None:
        warnings.warn(f"{path}: no <unk> unigram; using log10 p(<unk>) = -100 as KenLM does", stacklevel=4)
        unk, extra[UNK] = UNK, (-100.0, 0.0)
    for special in (BOS, EOS):
        if special not in seen:
            warnings.warn(f"{path}: no {special} unigram; adding it with probability 0", stacklevel=4)
            extra[special] = (_ZERO, 0.0)
    tokens = [unk, BOS, EOS] + [w for w in names if w not in (unk, BOS, EOS)]
    vocab = Vocab(tokens, bos=BOS, eos=EOS, unk=unk)
    logp = np.empty(len(tokens))
    logbow = np.zeros(len(tokens))
    for tok, (p, b) in extra.items():
        logp[vocab.id(tok)], logbow[vocab.id(tok)] = p, b
    ids = np.fromiter((vocab._index[w] for w in names), dtype=np.int64, count=len(names))
    logp[ids], logbow[ids] = probs, bows
    logp = _to_nats(logp)
    vocab.mask_never_predicted(logp, -np.inf)  # <s> is context only, whatever the file says
    return vocab, logp, _to_nats(logbow)


# ---------------------------------------------------------------------------- column reader

# Whitespace that str.split() knows besides " \t\r\n" (and NUL): such files take the line reader.
_ODD_ASCII = [bytes([c]) for c in (0, 11, 12, 28, 29, 30, 31)]
_ODD_UNICODE = [c.encode() for c in "\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"] + \
               [chr(c).encode() for c in range(0x2000, 0x200B)]


class _Unusual(Exception):
    """The column reader met something that only the line reader handles or reports."""


def _read_fast(data: bytes, path: str, progress) -> BackoffTablesModel | None:
    """The model of a well-formed file, parsed column by column; None for anything else."""
    odd = _ODD_ASCII
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        odd = odd + _ODD_UNICODE
    if any(c in data for c in odd):
        return None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = _columns_model(data, path, progress)
    except _Unusual:
        return None
    for w in caught:  # only now: a fallback would warn again
        warnings.warn(w.message, w.category, stacklevel=3)
    return model


def _columns_model(data: bytes, path: str, progress) -> BackoffTablesModel:
    declared, sections = _split_sections(data)
    N = len(declared)
    with _bar(sum(declared.values()), "reading ARPA", progress) as bar:
        sec, buf, s, e, probs, bows = _section_columns(sections[1], 1, N == 1, declared[1])
        names = [sec[a:b].decode() for a, b in zip(s[:, 0].tolist(), e[:, 0].tolist())]
        if len(set(names)) != len(names):
            raise _Unusual
        vocab, logp1, logbow1 = _unigram_vocab([[n] for n in names], probs, bows, [0] * len(names), path)
        bar.update(len(names))
        V, index = len(vocab), _fast.VocabIndex(list(vocab.tokens))
        keys, logp, logbow = [np.arange(V, dtype=np.int64)], [logp1], [logbow1]
        for m in range(2, N + 1):
            sec, buf, s, e, probs, bows = _section_columns(sections[m], m, m == N, declared[m])
            ids = _fast.word_ids(index, buf, s.ravel(), e.ravel())
            if ids is None or (ids < 0).any():
                raise _Unusual
            k, perm, missing, dup = _link_keys(ids.reshape(-1, m), V, keys)
            if missing is not None or dup is not None:
                raise _Unusual
            keys.append(k)
            logp.append(_to_nats(probs)[perm])
            logbow.append(_to_nats(bows)[perm])
            bar.update(len(k))
    return _model(BackoffTables(V, keys, logp, logbow[: N - 1]), vocab, path)


def _split_sections(data: bytes):
    """({order: declared count}, {order: section bytes}) of a file the column reader takes."""
    headers = _header_lines(data)
    start = next((h for h in headers if h[2] == b"\\data\\"), None)
    current = next(headers, None)
    if start is None or current is None:
        raise _Unusual
    declared = _declared_counts(data[start[1]: current[0]])
    sections: dict = {}
    while current is not None:
        text, m = current[2], len(sections) + 1
        if text == b"\\end\\":
            if len(sections) != len(declared):
                raise _Unusual
            return declared, sections
        following = next(headers, None)
        if following is None or text != b"\\%d-grams:" % m or m not in declared:
            raise _Unusual
        sections[m] = data[current[1]: following[0]]
        current = following
    raise _Unusual


def _header_lines(data: bytes):
    """(start, end, stripped text) of each line whose first non-blank byte is a backslash."""
    pos = data.find(b"\\")
    while pos != -1:
        begin = data.rfind(b"\n", 0, pos) + 1
        if data[begin:pos].strip(b" \t\r"):
            pos = data.find(b"\\", pos + 1)
            continue
        end = data.find(b"\n", pos)
        end = len(data) if end == -1 else end
        yield begin, end, data[begin:end].strip(b" \t\r")
        pos = data.find(b"\\", end)


def _declared_counts(block: bytes) -> dict:
    declared: dict = {}
    for line in block.split(b"\n"):
        parts = line.split()
        if not parts:
            continue
        order, _, count = parts[1].partition(b"=") if len(parts) == 2 else (b"", b"", b"")
        if parts[0] != b"ngram" or not (order.isdigit() and count.isdigit()) or int(order) in declared:
            raise _Unusual
        declared[int(order)] = int(count)
    if sorted(declared) != list(range(1, len(declared) + 1)) or not 1 <= len(declared) <= MAX_ORDER:
        raise _Unusual
    return declared


def _section_columns(section: bytes, m: int, highest: bool, count: int):
    """(bytes, buffer, (n, m) word starts, (n, m) word ends, log10 probs, log10 back-offs)."""
    buf, starts, ends, first, fields = _fast.tokenize(section)
    if len(first) != count or not ((fields == m + 1) | (fields == m + 2)).all():
        raise _Unusual
    has_bow = fields == m + 2  # (n,)
    probs, bows = _number_columns(section, buf, starts, ends, first, has_bow, m)
    if np.isnan(probs).any() or np.isnan(bows).any() or (probs > 0).any() or (bows == np.inf).any() \
            or (highest and (bows != 0).any()):
        raise _Unusual
    word = first[:, None] + 1 + np.arange(m)  # (n, m) field index of each word
    return section, buf, starts[word], ends[word], probs, bows


def _number_columns(section: bytes, buf, starts, ends, first, has_bow, m: int):
    """(log10 probs, log10 back-offs) of a section's lines by pandas' C parser, which reads only
    the number columns: split on tabs when every line is exactly ``p<TAB>w1 .. wm[<TAB>b]``
    (KenLM's and SRILM's layout, three times faster), else on runs of spaces and tabs. A
    missing back-off reads as NaN (masked by ``has_bow``), so do ``nan`` and ``NA`` (the
    caller refuses a NaN); a field that is not a number, or a line count that differs from
    :func:`~seqprob.ngram._arpa_fast.tokenize`'s, raises :class:`_Unusual`."""
    if not len(first):
        return np.zeros(0), np.zeros(0)
    tabs = _tab_layout(section, buf, starts, ends, first, has_bow, m)
    if not tabs and section.count(b"\r") != section.count(b"\r\n"):
        raise _Unusual  # a lone CR ends a line for pandas, not for str.split
    width = 2 if tabs else m + 1  # fields before the back-off
    cols = [0, width] if has_bow.any() else [0]
    import csv
    import io

    import pandas as pd

    try:
        frame = pd.read_csv(io.BytesIO(section), sep="\t" if tabs else r"\s+", header=None,
                            names=range(width + len(cols) - 1), usecols=cols, dtype=np.float64,
                            quoting=csv.QUOTE_NONE, engine="c")
    except (ValueError, pd.errors.ParserError):
        raise _Unusual from None
    if len(frame) != len(first):
        raise _Unusual
    bows = np.where(has_bow, frame[width].to_numpy(), 0.0) if len(cols) > 1 else np.zeros(len(frame))
    return frame[0].to_numpy(), bows


def _tab_layout(section: bytes, buf, starts, ends, first, has_bow, m: int) -> bool:
    """True if every line is exactly ``p<TAB>w1 .. wm[<TAB>b]<LF>`` (no CR, no other tab)."""
    if b"\r" in section or len(np.flatnonzero(buf == 9)) != len(first) + has_bow.sum():
        return False
    last = ends[first + m + has_bow]  # (n,) end of each line's last field
    last = last[last < len(buf)]  # (the file's last line may lack its newline)
    bow_at = starts[first[has_bow] + m + 1]
    return bool((buf[starts[first] - 1] == 10).all() and (buf[ends[first]] == 9).all()
                and (buf[bow_at - 1] == 9).all() and (buf[last] == 10).all())


def _bar(total: int, desc: str, progress):
    """A bar over n-grams (``progress=None``: files of over a million, on a terminal)."""
    return progress_bar(total, desc, progress, unit=" n-grams", unit_scale=True, leave=False,
                        min_total=1_000_001)


# ---------------------------------------------------------------------------- writing


def write_arpa(model, path, progress: bool | None = None) -> Path:
    """Write a normalized back-off model as an ARPA file, atomically (KenLM's layout).

    Parameters
    ----------
    model : a fitted seqprob n-gram model or one read from a file
        Any estimator whose rows are back-off expressible: ``ModifiedKneserNey``,
        ``KneserNey``, ``WittenBell``, ``AbsoluteDiscount``, ``MLE`` (zeros written as -99),
        ``AddK`` of order 1. ``StupidBackoff`` (not normalized) and ``AddK`` of order > 1 (not a
        back-off model) raise :class:`~seqprob.errors.InputError`.
    path : str or path-like
        Destination; written through a temporary file, so a failure leaves nothing behind. A
        name ending in ``.gz`` is gzipped (KenLM's ``.arpa.gz``), and reads back as it is.
    progress : bool or None
        Progress bar over the n-grams (None: only for over a million n-grams on a terminal).

    Returns
    -------
    pathlib.Path

    Notes
    -----
    Each line is ``log10 P(w | h) <TAB> h w [<TAB> log10 gamma(h w)]``; the highest order has
    no back-off column; probability 0 is written as -99; ``<s>`` as 0 (KenLM's convention:
    it is never predicted). Numbers carry 10 significant digits (``"%.10g"``).

    Lines are assembled a block of about :data:`BLOCK_BYTES` at a time as byte matrices
    (numbers formatted by :func:`seqprob.ngram._arpa_fast.format_g10`, words gathered from a
    padded name matrix): no Python work per n-gram, and memory bounded by the block, not by
    the model.

    Examples
    --------
    >>> import tempfile, os
    >>> from seqprob.ngram import WittenBell
    >>> path = write_arpa(WittenBell(order=2).fit(["a b", "b a"]), os.path.join(tempfile.mkdtemp(), "wb.arpa"))
    >>> path.read_text().splitlines()[1:3]  # the n-gram counts per order
    ['ngram 1=5', 'ngram 2=6']
    """
    if not getattr(model, "normalized", True):
        raise InputError(f"{type(model).__name__} scores are not a normalized distribution; an ARPA "
                         "file holds probabilities, so it is not written (use a smoothed estimator)")
    if not hasattr(model, "_tables"):
        raise InputError(f"write_arpa needs a seqprob n-gram model, got {type(model).__name__}")
    tables = model._tables()
    with arpa_writer(path, model.vocab, tables.sizes(), progress) as out:
        for m in range(1, tables.order + 1):
            out.section(tables, m)
    return out.path


#: Bytes of ARPA text formatted per block (a few MB: large enough that the per-block numpy
#: calls cost nothing, small enough that a block's byte matrices stay far below the model).
BLOCK_BYTES = 1 << 22


@contextlib.contextmanager
def arpa_writer(path, vocab: Vocab, sizes: list, progress: bool | None = None, desc: str = "writing ARPA"):
    """An ARPA file written section by section, atomically: the one writer of
    :func:`write_arpa` and of the streamed fit (which hands each order over as soon as its
    back-off weights are known).

    Parameters
    ----------
    path : str or path-like
    vocab : Vocab
        Distinct ``<s>`` and ``</s>``; no token with whitespace or NUL (refused here, before
        anything is written).
    sizes : list of int
        N-grams per order, for the ``\\data\\`` header.
    progress : bool or None
        Progress bar over the n-grams (None: only for over a million n-grams on a terminal).

    Yields
    ------
    ArpaSections
        ``section(tables, m)`` writes order m; the file ends (``\\end\\``) and is renamed into
        place when the block exits without an error, and is removed otherwise.
    """
    names = arpa_names(vocab)
    path = as_path(path)
    with atomic_write(path, "wb") as raw, _gzipped(raw, path) as handle, _bar(sum(sizes), desc, progress) as bar:
        handle.write(b"\\data\\\n" + b"".join(b"ngram %d=%d\n" % (m, n) for m, n in enumerate(sizes, 1)))
        out = ArpaSections(handle, names, vocab, bar, path)
        yield out
        handle.write(b"\n\\end\\\n")
    log.info("wrote %s: n-grams %s", path, list(sizes))


def _gzipped(handle, path: Path):
    """``handle`` itself, or a gzip stream into it for a ``.gz`` name (KenLM's convention for a
    compressed ARPA file, which :func:`read_arpa` reads back)."""
    if path.suffix != ".gz":
        return contextlib.nullcontext(handle)
    return gzip.GzipFile(filename="", mode="wb", fileobj=handle, compresslevel=6, mtime=0)


class ArpaSections:
    """The sections of an ARPA file being written (see :func:`arpa_writer`)."""

    def __init__(self, handle, names: np.ndarray, vocab: Vocab, bar, path: Path):
        self.handle, self.names, self.vocab, self.bar, self.path = handle, names, vocab, bar, path

    def section(self, tables, m: int, release=None) -> None:
        """Write the ``\\m-grams:`` section of ``tables`` (anything with ``keys``, ``logp``,
        ``logbow``, ``order`` and ``vocab_size`` like :class:`BackoffTables`), a block at a
        time; ``release()`` after each block (the streamed fit drops its mapped pages)."""
        self.handle.write(b"\n\\%d-grams:\n" % m)
        for lines, chunk in _section_text(tables, m, self.names, self.vocab):
            self.handle.write(chunk)
            self.bar.update(lines)
            if release is not None:
                release()


def arpa_names(vocab: Vocab) -> np.ndarray:
    """(V, longest) byte matrix of the ARPA spelling of every id (``<s>``, ``</s>``, ``<unk>``),
    refusing tokens an ARPA file cannot hold."""
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
        dup = next(n for i, n in enumerate(names) if n in names[:i])
        raise InputError(f"token {dup!r} would appear twice in the ARPA file (it is also a special "
                         "symbol)", token=dup)
    if any("\0" in name for name in names):  # the byte matrices pad names with NUL bytes
        raise InputError("a token contains a NUL character, which an ARPA file cannot hold")
    return _fast.name_matrix(names)


def _ngram_words(tables: BackoffTables, m: int, lo: int, hi: int) -> np.ndarray:
    """(hi - lo, m) word ids of the order-m n-grams in rows lo .. hi-1."""
    V = tables.vocab_size
    out = np.empty((hi - lo, m), dtype=np.int64)
    rows = np.arange(lo, hi)
    for j in range(m - 1, -1, -1):
        key = np.asarray(tables.keys[j][rows])  # (c,) prefix_row * V + word
        out[:, j], rows = key % V, key // V
    return out


def _log10_text(values: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    log10 = np.asarray(values, dtype=np.float64) / LN10
    return _fast.format_g10(np.where(log10 == -math.inf, _ZERO, log10), out)  # (c, 18)


def _section_text(tables: BackoffTables, m: int, names: np.ndarray, vocab: Vocab):
    """(lines, bytes) of the order-m section, about :data:`BLOCK_BYTES` at a time.

    Blocks are formatted on :mod:`seqprob._parallel`'s threads (numpy releases the GIL in
    its loops) and yielded in order: the bytes do not depend on the number of threads.
    """
    n, highest = len(tables.keys[m - 1]), m == tables.order
    words = [_fast.name_words(names, sep) for sep in (b" ", b"\n" if highest else b"\t")]
    step = max(1, BLOCK_BYTES // (2 * _fast.G10_WIDTH + m * (names.shape[1] + 1) + 2))
    bounds = [(lo, min(n, lo + step)) for lo in range(0, n, step)]
    texts = _parallel.map_ordered(lambda b: _block_text(tables, m, words, vocab, *b), bounds)
    for (lo, hi), text in zip(bounds, texts):
        yield hi - lo, text


_G10_WORDS = 3  # a number field: 18 bytes of text, its separator, padding (24 bytes)


def _block_text(tables: BackoffTables, m: int, words: list, vocab: Vocab, lo: int, hi: int) -> bytes:
    """The ARPA lines of the order-m n-grams in rows lo .. hi-1.

    Each line is laid out in 8-byte words, fields padded with 0 bytes that are squeezed out
    at the end: log10 p and a tab, the m words (each a row of ``words``: the name and its
    separator, gathered as whole uint64 words), [log10 back-off and a newline].
    """
    k, highest = words[0].shape[1], m == tables.order
    width = _G10_WORDS * (1 if highest else 2) + m * k
    row = np.empty((hi - lo, width), dtype=np.uint64)  # (c, width) the lines, padded
    text = row.view(np.uint8)  # (c, 8 width)
    _log10_text(tables.logp[m - 1][lo:hi], text[:, : _fast.G10_WIDTH])
    text[:, _fast.G10_WIDTH:24] = 0
    text[:, _fast.G10_WIDTH] = ord("\t")
    if m == 1 and lo <= vocab.bos_id < hi:
        text[vocab.bos_id - lo, : _fast.G10_WIDTH] = 0
        text[vocab.bos_id - lo, 0] = ord("0")
    ids = _ngram_words(tables, m, lo, hi)  # (c, m)
    for j in range(m):
        col = _G10_WORDS + j * k
        row[:, col: col + k] = words[1 if j == m - 1 else 0][ids[:, j]]
    if not highest:
        start = 8 * (width - _G10_WORDS)
        _log10_text(tables.logbow[m - 1][lo:hi], text[:, start: start + _fast.G10_WIDTH])
        text[:, start + _fast.G10_WIDTH:] = 0
        text[:, start + _fast.G10_WIDTH] = ord("\n")
    return _fast.squeeze(text)


# ---------------------------------------------------------------------------- registry


def _is_arpa_file(path) -> bool:
    return path.is_file() and path.name.endswith((".arpa", ".arpa.gz"))


register_model_format("arpa", _is_arpa_file, read_arpa, "ARPA back-off n-gram file (.arpa, .arpa.gz)")
