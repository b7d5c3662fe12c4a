"""Whole-column ARPA text: ``%.10g`` formatting, fields and word ids with numpy.

The ARPA writer and reader of :mod:`seqprob.ngram.arpa` spend their time on millions of short
fields. Here each field kind is handled as one array operation over a byte matrix:

- :func:`format_g10` turns floats into the exact bytes of C's ``"%.10g"`` (Python's
  ``f"{v:.10g}"``): |v| * 10**(9 - exponent) is one correctly rounded product (powers of ten
  up to 1e22 are exact), rounded to 10 digits whose text is built in two uint64 words; the
  rare values within 1e-5 of a rounding tie (and inf, nan, huge or tiny ones) are formatted
  by Python, so the output stays byte-identical.
- :func:`tokenize` finds the whitespace-separated fields of a text block and its lines;
- :func:`word_ids` maps word fields to vocabulary ids through a 64-bit hash of their bytes,
  every match checked byte for byte.

Rows are assembled in a fixed-width ``uint8`` matrix padded with 0 bytes and squeezed by one
boolean mask (:func:`squeeze`); ARPA text never contains a 0 byte (the callers check).
"""
from __future__ import annotations

import numpy as np

__all__ = ["format_g10", "squeeze", "name_matrix", "name_words", "word_ids", "tokenize", "VocabIndex"]

G10_WIDTH = 18  # sign + 16 bytes of fixed-form text; exponent form: sign d . 9 digits e-dd
_POW10 = 10.0 ** np.arange(23)  # exact in float64
_DIGITS = np.frombuffer(b"0123456789", dtype=np.uint8)


def format_g10(values: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """(n,) floats -> (n, 18) uint8: the bytes of ``"%.10g" % v``, right-padded with 0.

    ``out``, if given, is an (n, 18) uint8 array (a column slice of a wider row matrix may
    be given: the text is written in place, its padding zeroed) and is returned.

    Examples
    --------
    >>> squeeze(format_g10(np.array([-0.30103, 0.0, -1.5e-07, 1234567890123.0])), b" ")
    b'-0.30103 0 -1.5e-07 1.23456789e+12 '
    """
    values = np.asarray(values, dtype=np.float64)
    if out is None:
        out = np.zeros((len(values), G10_WIDTH), dtype=np.uint8)
    else:
        out[...] = 0
    mag = np.abs(values)
    with np.errstate(divide="ignore", invalid="ignore"):
        exp = np.floor(np.log10(mag)).astype(np.int64, copy=False) if len(values) else np.zeros(0, np.int64)
    exp = np.where(np.isfinite(mag) & (mag > 0), exp, 0)
    shift = 9 - exp
    ok = np.isfinite(mag) & (mag > 0) & (shift >= 0) & (shift <= 9 - _MIN_EXP)
    scaled = mag * _POW10[np.clip(shift, 0, 22)]  # one rounding: |error| < 2e-6
    with np.errstate(invalid="ignore"):
        frac = scaled - np.floor(scaled)
    ok &= (scaled >= 1e9) & (scaled < 1e10 - 1) & (np.abs(frac - 0.5) > 1e-5)
    digits = np.where(ok, np.floor(scaled + 0.5), 0).astype(np.int64)  # (n,) ten digits
    zero = mag == 0
    _write_zeros(out, values, zero)
    fixed = ok & (exp >= -4)
    _write_fixed(out, values, digits, exp, fixed)
    _write_digits(out, values, digits, exp, ok & ~fixed)
    for i in np.flatnonzero(~ok & ~zero):  # ties, huge/tiny, inf, nan: Python decides
        text = f"{values[i]:.10g}".encode()
        out[i, : len(text)] = np.frombuffer(text, dtype=np.uint8)
    return out


def _write_zeros(out: np.ndarray, values: np.ndarray, zero: np.ndarray) -> None:
    neg = zero & np.signbit(values)
    out[zero, 0] = ord("0")
    out[neg, 0], out[neg, 1] = ord("-"), ord("0")


_QUAD = np.array([list(f"{i:04d}".encode()) for i in range(10000)], dtype=np.uint8)  # (10000, 4)
_QUAD32 = _QUAD.view(np.uint32).ravel()  # (10000,) the 4 bytes of each as one word
_QUAD_TRAILING = np.array([4 if i == 0 else len(str(i)) - len(str(i).rstrip("0")) for i in range(10000)])

# Each output row is gathered from a per-row source of 29 byte columns:
_NUL, _SIGN, _ZERO, _DOT_IF, _E, _ESIGN, _ETENS, _EONES, _DOT = range(9)
_FULL, _KEPT = 9, 19  # 10 digits each: all of them / trailing zeros blanked
_MIN_EXP = -13  # the smallest decimal exponent format_g10 lays out itself (shift <= 22)


def _template(x: int) -> tuple:
    """(source columns of the text of a value with decimal exponent x, dot threshold)."""
    if 0 <= x < 10:  # ddd.ddd (the dot only if digits follow)
        cols = [_SIGN, *range(_FULL, _FULL + x + 1), _DOT_IF, *range(_KEPT + x + 1, _KEPT + 10)]
        return cols, x + 1
    if -4 <= x < 0:  # 0.000ddd
        return [_SIGN, _ZERO, _DOT, *[_ZERO] * (-x - 1), *range(_KEPT, _KEPT + 10)], 0
    return [_SIGN, _FULL, _DOT_IF, *range(_KEPT + 1, _KEPT + 10), _E, _ESIGN, _ETENS, _EONES], 1


_TEMPLATES = np.zeros((10 - _MIN_EXP, G10_WIDTH), dtype=np.intp)  # (23, 18) by x - _MIN_EXP
_DOT_AFTER = np.zeros(10 - _MIN_EXP, dtype=np.int64)
for _x in range(_MIN_EXP, 10):
    _cols, _DOT_AFTER[_x - _MIN_EXP] = _template(_x)
    _TEMPLATES[_x - _MIN_EXP, : len(_cols)] = _cols


_EXP_TENS = np.array([ord("0") + (-x) // 10 % 10 for x in range(_MIN_EXP, 10)], dtype=np.uint8)
_EXP_ONES = np.array([ord("0") + (-x) % 10 for x in range(_MIN_EXP, 10)], dtype=np.uint8)


def _ten_digits(digits: np.ndarray):
    """(k,) integers in [1e9, 1e10) -> (k, 10) ASCII digits and (k,) count of trailing zeros."""
    high, rest = np.divmod(digits, 10**8)
    mid, low = np.divmod(rest, 10**4)
    quads = np.stack([_QUAD32[high], _QUAD32[mid], _QUAD32[low]], axis=1)  # (k, 3) 4 bytes each
    chars = quads.view(np.uint8)[:, 2:]  # (k, 10): "00hh" "mmmm" "llll" without the "00"
    tz = _QUAD_TRAILING[low]
    tz = np.where(low == 0, 4 + _QUAD_TRAILING[mid], tz)
    tz = np.where(rest == 0, 8 + (high % 10 == 0), tz)  # high is 10 .. 99
    return chars, tz


_U64 = np.uint64
_BYTE_MASK = np.array([(1 << (8 * k)) - 1 for k in range(17)], dtype=object)  # first k of 16 bytes
_LOW_LO = np.array([int(m) & (2**64 - 1) for m in _BYTE_MASK], dtype=np.uint64)  # (17,)
_LOW_HI = np.array([int(m) >> 64 for m in _BYTE_MASK], dtype=np.uint64)
_DOT_LO = np.array([(ord(".") << (8 * p)) & (2**64 - 1) if p < 8 else 0 for p in range(17)], dtype=np.uint64)
_DOT_HI = np.array([ord(".") << (8 * (p - 8)) if 8 <= p < 16 else 0 for p in range(17)], dtype=np.uint64)
_ZEROS_WORD = np.array([int.from_bytes((b"0." + b"0" * (n - 2))[:n] if n >= 2 else b"", "little")
                        for n in range(8)], dtype=np.uint64)  # "0.", "0.0", ... as words


def _write_fixed(out: np.ndarray, values: np.ndarray, digits: np.ndarray, exp: np.ndarray,
                 fixed: np.ndarray) -> None:
    """Fixed form (-4 <= exp <= 9), built as 16-byte text in two uint64 words per value:
    the 10 digits, trailing zeros masked off (never the integer part), then either a "0.0.."
    prefix shifted in (exp < 0) or a dot inserted after the integer part (128-bit shifts)."""
    rows = np.flatnonzero(fixed)
    if not len(rows):
        return
    high, rest = np.divmod(digits[rows], 10**8)
    mid, low = np.divmod(rest, 10**4)
    q_high, q_mid, q_low = (_QUAD32[q].astype(_U64) for q in (high, mid, low))
    lo = (q_high >> _U64(16)) | (q_mid << _U64(16)) | (q_low << _U64(48))  # (k,) digits 0..7
    hi = q_low >> _U64(16)  # (k,) digits 8, 9
    tz = np.where(low == 0, np.where(rest == 0, 8 + (high % 10 == 0), 4 + _QUAD_TRAILING[mid]),
                  _QUAD_TRAILING[low])
    x = exp[rows]
    kept = np.maximum(10 - tz, x + 1)  # (k,) digits written: the integer part always
    lo, hi = lo & _LOW_LO[kept], hi & _LOW_HI[kept]
    point = np.clip(x + 1, 0, 16)  # (k,) bytes before the dot (x >= 0)
    dotted = (x >= 0) & (kept > point)
    head_lo, head_hi = lo & _LOW_LO[point], hi & _LOW_HI[point]
    tail_lo, tail_hi = lo ^ head_lo, hi ^ head_hi
    d_lo = head_lo | (tail_lo << _U64(8)) | _DOT_LO[point]
    d_hi = head_hi | (tail_hi << _U64(8)) | (tail_lo >> _U64(56)) | _DOT_HI[point]
    lead = np.clip(1 - x, 2, 5).astype(_U64)  # (k,) "0." .. "0.000" for x = -1 .. -4
    z_lo = (lo << (lead * _U64(8))) | _ZEROS_WORD[lead.astype(np.intp)]
    z_hi = (hi << (lead * _U64(8))) | (lo >> (_U64(64) - lead * _U64(8)))
    text = np.empty((len(rows), 2), dtype=_U64)  # (k, 2): 16 bytes of text
    text[:, 0] = np.where(x < 0, z_lo, np.where(dotted, d_lo, lo))
    text[:, 1] = np.where(x < 0, z_hi, np.where(dotted, d_hi, hi))
    line = out if len(rows) == len(out) else np.zeros((len(rows), G10_WIDTH), dtype=np.uint8)
    line[:, 0] = np.where(values[rows] < 0, ord("-"), 0)
    line[:, 1:17] = text.view(np.uint8)
    if line is not out:  # all rows fixed (the common case): written in place
        out[rows] = line


def _write_digits(out: np.ndarray, values: np.ndarray, digits: np.ndarray, exp: np.ndarray,
                  ok: np.ndarray) -> None:
    """Lay out the 10 significant digits by template (the exponent form: exp < -4)."""
    rows = np.flatnonzero(ok)
    if not len(rows):
        return
    full, trailing = _ten_digits(digits[rows])  # (k, 10), (k,)
    kept = 10 - trailing  # (k,) significant digits after stripping
    group = exp[rows] - _MIN_EXP  # (k,)
    src = np.zeros((_KEPT + 10, len(rows)), dtype=np.uint8)  # (29, k): one source byte per row
    src[[_ZERO, _DOT, _E, _ESIGN]] = np.frombuffer(b"0.e-", dtype=np.uint8)[:, None]
    src[_SIGN] = np.where(values[rows] < 0, ord("-"), 0)
    src[_DOT_IF] = np.where(kept > _DOT_AFTER[group], ord("."), 0)
    src[_ETENS] = _EXP_TENS[group]  # only read for exponents -13 .. -5: "e-05" .. "e-13"
    src[_EONES] = _EXP_ONES[group]
    src[_FULL:_KEPT] = full.T
    src[_KEPT:] = np.where(np.arange(10)[:, None] < kept, full.T, np.uint8(0))
    text = np.zeros((G10_WIDTH, len(rows)), dtype=np.uint8)  # (18, k)
    for g in np.flatnonzero(np.bincount(group)):  # a handful of exponents in practice
        sel = np.flatnonzero(group == g)
        text[:, sel] = src[_TEMPLATES[g]][:, sel]
    out[rows] = text.T


def squeeze(matrix: np.ndarray, sep: bytes | None = None) -> bytes:
    """Bytes of a padded (n, w) uint8 matrix without its 0 padding (``sep`` after each row)."""
    if sep is not None:
        matrix = np.concatenate([matrix, np.full((len(matrix), 1), sep[0], np.uint8)], axis=1)
    flat = matrix.ravel()  # np.compress of the flat array: ~2x a 2-D boolean index
    return np.compress(flat != 0, flat).tobytes()


def name_words(names: np.ndarray, sep: bytes) -> np.ndarray:
    """(V, k) uint64: each row of a padded (V, L) name matrix in k = ceil((L + 1) / 8) words
    of 8 bytes, ``sep`` in the last byte (the 0 padding between the name and it is
    squeezed out): the text of a word field, gathered as whole words.

    Examples
    --------
    >>> squeeze(name_words(name_matrix(["a", "bc"]), b" ").view(np.uint8).reshape(2, -1))
    b'a bc '
    """
    k = (names.shape[1] + 8) // 8
    padded = np.zeros((len(names), 8 * k), dtype=np.uint8)  # (V, 8k)
    padded[:, : names.shape[1]] = names
    padded[:, -1] = sep[0]
    return padded.view(np.uint64)


def name_matrix(names: list) -> np.ndarray:
    """(V, Lmax) uint8: the UTF-8 bytes of each name, right-padded with 0."""
    encoded = [n.encode("utf-8") for n in names]
    width = max(map(len, encoded), default=1)
    flat = np.frombuffer(b"".join(e.ljust(width, b"\0") for e in encoded), dtype=np.uint8)
    return flat.reshape(len(encoded), width).copy()


# ---------------------------------------------------------------------------- parsing

_WS = np.zeros(256, dtype=bool)
_WS[[9, 10, 13, 32]] = True


def tokenize(section: bytes):
    """Whitespace-separated fields of a text block, by line.

    Returns ``(buf, starts, ends, line_first, line_count)``: field byte ranges and, for each
    non-blank line, the index of its first field and its number of fields. The caller must
    have checked that no other whitespace (vertical tab, form feed, Unicode spaces) occurs.
    """
    buf = np.frombuffer(section, dtype=np.uint8)
    ws = np.concatenate([[True], _WS[buf], [True]])  # (n+2,)
    starts = np.flatnonzero(ws[:-2] & ~ws[1:-1])  # (F,)
    ends = np.flatnonzero(~ws[1:-1] & ws[2:]) + 1  # (F,)
    before = np.searchsorted(starts, np.flatnonzero(buf == 10))  # (lines-1,) fields before each \n
    count = np.diff(np.concatenate([[0], before, [len(starts)]]))  # (lines,) fields per line
    first = np.concatenate([[0], before])[count > 0]  # first field of each non-blank line
    count = count[count > 0]
    return buf, starts, ends, first, count


_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], dtype=np.uint64)


def _field_words(padded: np.ndarray, starts: np.ndarray, lengths: np.ndarray, n_words: int):
    """(n, n_words) uint64: the bytes of each field, 8 at a time, zero past its end."""
    view = np.ndarray(shape=(len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    out = np.empty((len(starts), n_words), dtype=np.uint64)
    for j in range(n_words):
        left = np.clip(lengths - 8 * j, 0, 8)
        out[:, j] = view[np.minimum(starts + 8 * j, len(view) - 1)] & _LOW_BYTES[left]
    return out


def _hash_words(words: np.ndarray) -> np.ndarray:
    h = np.full(len(words), 0x243F6A8885A308D3, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(words.shape[1]):
            h = (h ^ words[:, j]) * np.uint64(0x9E3779B97F4A7C15)
            h ^= h >> np.uint64(29)
    return h


class VocabIndex:
    """Byte-exact lookup of word fields in a vocabulary (hash, then a comparison of all bytes)."""

    def __init__(self, names: list):
        encoded = [n.encode("utf-8") for n in names]
        self.width = -(-max(map(len, encoded), default=1) // 8)  # 8-byte words per name
        flat = b"".join(e.ljust(8 * self.width, b"\0") for e in encoded)
        self.words = np.frombuffer(flat, dtype="<u8").reshape(len(encoded), self.width)  # (V, w)
        self.lengths = np.array([len(e) for e in encoded], dtype=np.int64)
        self.hashes = _hash_words(self.words)  # (V,)
        self.order = np.argsort(self.hashes)
        self.sorted = self.hashes[self.order]
        self.unique = len(self.sorted) < 2 or bool((self.sorted[1:] != self.sorted[:-1]).all())
        self.bits = max(int(4 * len(names)).bit_length(), 1)  # direct-mapped table, load <= 1/4
        self.slots = np.full(1 << self.bits, -1, dtype=np.int64)
        self.slots[self._slot(self.hashes)] = np.arange(len(names))  # a collision keeps one

    def _slot(self, hashes: np.ndarray) -> np.ndarray:
        return (hashes >> np.uint64(64 - self.bits)).astype(np.int64)

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """Id of the name with each hash, or -1 (one read; a binary search on a miss)."""
        ids = self.slots[self._slot(hashes)]  # (n,)
        miss = np.flatnonzero((ids < 0) | (self.hashes[np.maximum(ids, 0)] != hashes))
        if len(miss):
            pos = np.minimum(np.searchsorted(self.sorted, hashes[miss]), len(self.sorted) - 1)
            ids[miss] = np.where(self.sorted[pos] == hashes[miss], self.order[pos], -1)
        return ids


def word_ids(index: VocabIndex, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """Vocabulary id of each field, -1 where it is not a vocabulary word (None: give up)."""
    if not index.unique:
        return None
    padded = np.concatenate([buf, np.zeros(8, dtype=np.uint8)])
    lengths = ends - starts
    words = _field_words(padded, starts, lengths, index.width)  # (n, w)
    ids = index.lookup(_hash_words(words))  # (n,)
    safe = np.maximum(ids, 0)
    same = (ids >= 0) & (index.lengths[safe] == lengths) & (index.words[safe] == words).all(1)
    return np.where(same, ids, -1)
