"""The ``.sqlm`` file format: back-off tables memory-mapped, O(1) loading, pages shared by
processes (the public face is :mod:`seqprob.ngram.binary`).

Layout (all little-endian; every section starts on a 64-byte boundary)::

    0   8 bytes   magic b"SQLMNGRM"
    8   uint32    format version (1)
    12  uint32    header length H
    16  uint32    CRC-32 of the header bytes
    20  uint32    0 (reserved)
    24  H bytes   header: UTF-8 JSON (order, vocab size, special tokens, tokenizer kind, and the
                  index of sections: name, dtype, shape, offset, byte length, CRC-32)
    ... sections: keys.m (int64 sorted prefix-linked keys ``prefix_row * V + word``, then a
                  sentinel -1),
                  logp.m (float64 natural-log probabilities), logbow.m (float64 back-off
                  weights, orders 1 .. N-1), probe.m + buckets.m (orders >= 2: the query
                  records of :class:`~seqprob.ngram._probe.ProbeIndex`, int64 (key, row, log p,
                  log gamma) or (key, log p) on the highest order, in hash order, and int32
                  bucket entries: first record << 1 | several records), vocab.offsets (int64) + vocab.utf8. Files written before
                  the probe records hold slots.m instead (int32 open-addressing hash of keys.m:
                  row of the key or -1); they load and score the same (their probe records are
                  built in memory at the first query).

Loading maps the file (``mmap``, read-only, shared) and checks the magic, the version, the header CRC and
that every section lies inside the file: nothing proportional to the model is read, so it is
O(1) in the n-grams (the vocabulary, V strings, is decoded). ``verify=True`` also checks the
CRC-32 of every section (reads the whole file).
"""
from __future__ import annotations

import json
import mmap
import os
import struct
import zlib
from pathlib import Path

import numpy as np

from .._io import as_path, atomic_write
from .counts import KeyHash
from ..errors import FileFormatError, InputError, SeqProbFileError
from ..tokenizers import WhitespaceTokenizer
from ..vocab import Vocab
from ._probe import ProbeIndex, damaged
from .tables import BackoffTables

__all__ = ["write_sqlm", "read_sqlm", "SlotHash", "MAGIC", "VERSION"]

MAGIC = b"SQLMNGRM"
VERSION = 1
_PREFIX = struct.Struct("<8sIII4x")  # magic, version, header length, header CRC-32
_ALIGN = 64


class SlotHash:
    """Open-addressing hash (linear probing) over sorted keys, stored as rows only.

    ``slots[h]`` is the row of the key at slot h or -1; the key itself is read from the
    sorted key array, which ends with a sentinel -1 (``keys[-1]``, never a query: keys are
    >= 0), so an empty slot needs no test of its own. 4 bytes per slot, 2 to 4 slots per key.

    Examples
    --------
    >>> keys = np.array([3, 10, 42])
    >>> h = SlotHash.build(keys)
    >>> h.lookup(np.array([42, 5, 3])).tolist()
    [2, -1, 0]
    """

    def __init__(self, bits: int, slots: np.ndarray, keys_with_sentinel: np.ndarray):
        self.bits, self.slots, self.keys = int(bits), slots, keys_with_sentinel
        self.mask = (1 << self.bits) - 1
        self.shift = np.uint64(64 - self.bits)

    @classmethod
    def build(cls, keys: np.ndarray) -> "SlotHash":
        full = KeyHash(keys)  # (S, 2) key, row
        return cls(full.bits, full.table[:, 1].astype(np.int32), with_sentinel(keys))

    def lookup(self, queries: np.ndarray) -> np.ndarray:
        """Row of each query key, or -1 (home slot for all; probing only for collisions)."""
        queries = np.ascontiguousarray(queries, dtype=np.int64)
        slot = ((queries.view(np.uint64) * _GOLDEN) >> self.shift).view(np.int64)  # (n,)
        row = self.slots[slot].astype(np.intp)  # (n,) row at the home slot, or -1
        _check_rows(row, len(self.keys))
        hit = self.keys[row] == queries  # -1 reads the sentinel: a miss
        out = np.where(hit, row, -1)
        pending = np.flatnonzero(~hit & (row >= 0))
        slot = slot[pending]
        while len(pending):  # a collision: walk on from the home slot
            slot = (slot + 1) & self.mask
            row = self.slots[slot].astype(np.intp)
            _check_rows(row, len(self.keys))
            hit = self.keys[row] == queries[pending]
            out[pending[hit]] = row[hit]
            go_on = ~hit & (row >= 0)
            pending, slot = pending[go_on], slot[go_on]
        return out


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # the multiplier of seqprob.ngram.counts.KeyHash


def _check_rows(row: np.ndarray, n_keys: int) -> None:
    """A slot read from a file holds -1 or a row of the keys (the sentinel included)."""
    if len(row) and (row.min() < -1 or row.max() >= n_keys):
        bad = int(row.min()) if row.min() < -1 else int(row.max())
        raise damaged(None, f"corrupted n-gram hash slots (a slot holds row {bad}, outside "
                            f"-1..{n_keys - 1})", value=bad, limit=n_keys - 1)


def with_sentinel(keys: np.ndarray) -> np.ndarray:
    """``keys`` followed by -1."""
    return np.concatenate([np.asarray(keys, dtype=np.int64), [-1]])


# ---------------------------------------------------------------------------- writing


def write_sqlm(tables: BackoffTables, vocab: Vocab, tokenizer, path, hash: bool = True,
               normalized: bool = True) -> Path:
    """Write back-off tables and their vocabulary as a ``.sqlm`` file, atomically (see
    :func:`seqprob.ngram.binary.save_ngram`); ``tokenizer`` is recorded only as whether it
    is a :class:`WhitespaceTokenizer`; ``normalized=False`` marks scores that are not a
    distribution (stupid back-off)."""
    arrays = _section_arrays(tables, vocab, hash)
    header, blobs = _layout(tables, vocab, arrays, tokenizer, normalized)
    path = as_path(path)
    with atomic_write(path, "wb") as handle:
        handle.write(_PREFIX.pack(MAGIC, VERSION, len(header), zlib.crc32(header)) + header)
        position = _PREFIX.size + len(header)
        for offset, blob in blobs:
            handle.write(b"\0" * (offset - position))
            handle.write(blob)
            position = offset + len(blob)
    return path


def _section_arrays(tables: BackoffTables, vocab: Vocab, hash: bool) -> dict:
    encoded = [t.encode("utf-8") for t in vocab.tokens]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(e) for e in encoded])
    arrays = {"vocab.offsets": offsets, "vocab.utf8": np.frombuffer(b"".join(encoded), dtype=np.uint8)}
    for m in range(1, tables.order + 1):
        arrays[f"keys.{m}"] = with_sentinel(tables.keys[m - 1]).astype("<i8")  # (n_m + 1,)
        arrays[f"logp.{m}"] = np.ascontiguousarray(tables.logp[m - 1], dtype="<f8")
        if m < tables.order:
            arrays[f"logbow.{m}"] = np.ascontiguousarray(tables.logbow[m - 1], dtype="<f8")
        if hash and m > 1:
            index = tables.probe_index(m)
            arrays[f"probe.{m}"] = index.records.astype("<i8", copy=False)  # (n_m + 1, 4 or 2)
            arrays[f"buckets.{m}"] = index.buckets.astype(index.buckets.dtype.newbyteorder("<"), copy=False)
    return arrays


def _layout(tables: BackoffTables, vocab: Vocab, arrays: dict, tokenizer, normalized: bool = True):
    """(header bytes, [(offset, bytes)]): section offsets depend on the header length, so the
    header is laid out twice (offsets are aligned, the second pass is final). Scores that are
    not a distribution (stupid back-off) are marked ``"normalized": false``; the key is left out
    otherwise, so the files of normalized models keep their bytes."""
    sections = [{"name": n, "dtype": a.dtype.str, "shape": list(a.shape), "nbytes": int(a.nbytes),
                 "crc32": zlib.crc32(memoryview(np.ascontiguousarray(a)).cast("B"))}
                for n, a in arrays.items()]
    meta = {"format": "seqprob-ngram", "order": tables.order, "vocab_size": tables.vocab_size,
            "unlisted_logbow": tables.unlisted_logbow, "bos": vocab.bos, "eos": vocab.eos,
            "unk": vocab.unk, "tokenizer": "whitespace" if isinstance(tokenizer, WhitespaceTokenizer) else None,
            "hash_bits": {},  # the int32 slot hashes of older files (read, no longer written)
            "probe_bits": {n[8:]: int(a.shape[0]).bit_length() - 1 for n, a in arrays.items()
                           if n.startswith("buckets.")},
            "probe_longest": {str(m): tables.probe_index(m).longest for m in range(2, tables.order + 1)
                              if f"buckets.{m}" in arrays},
            "sections": sections}
    if not normalized:
        meta["normalized"] = False
    header = b""
    for _ in range(2):
        position = _align(_PREFIX.size + len(header) + 64)  # slack: offsets grow the header a little
        for s in sections:
            s["offset"], position = position, _align(position + s["nbytes"])
        header = json.dumps(meta, separators=(",", ":")).encode()
    if sections and sections[0]["offset"] < _PREFIX.size + len(header):
        raise AssertionError("header overlaps the first section")  # pragma: no cover
    blobs = [(s["offset"], memoryview(np.ascontiguousarray(arrays[s["name"]])).cast("B")) for s in sections]
    return header, blobs


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


# ---------------------------------------------------------------------------- reading


def read_sqlm(path, verify: bool = False):
    """(tables, vocab, whitespace, normalized, path) of a ``.sqlm`` file, memory-mapped (see
    :func:`seqprob.ngram.binary.load_ngram`); ``whitespace``: the saved model's tokenizer was
    a :class:`WhitespaceTokenizer` over its vocabulary; ``normalized``: its scores are a
    distribution (False for stupid back-off)."""
    path = str(as_path(path))
    data = _map(path)
    meta = _read_header(data, path)
    arrays = {s["name"]: _section(data, s, path, verify) for s in meta["sections"]}
    N, V = int(meta["order"]), int(meta["vocab_size"])
    tables = BackoffTables(V, [arrays[f"keys.{m}"][:-1] for m in range(1, N + 1)],
                           [arrays[f"logp.{m}"] for m in range(1, N + 1)],
                           [arrays[f"logbow.{m}"] for m in range(1, N)], float(meta["unlisted_logbow"]))
    for m, bits in meta["hash_bits"].items():
        tables._hashes[int(m)] = SlotHash(bits, arrays[f"slots.{m}"], arrays[f"keys.{m}"])
    for m, bits in meta.get("probe_bits", {}).items():
        tables.set_probe_index(int(m), ProbeIndex(bits, arrays[f"buckets.{m}"], arrays[f"probe.{m}"],
                                                  keys=tables.keys[int(m) - 1],
                                                  longest=meta.get("probe_longest", {}).get(m),
                                                  source=path))
    _check_unigrams(tables, path)
    whitespace, normalized = meta["tokenizer"] == "whitespace", meta.get("normalized", True) is not False
    return tables, _vocab(arrays, meta, path), whitespace, normalized, path


def _map(path: str) -> np.ndarray:
    """The file as a read-only uint8 array over a shared memory map (plain ndarray views: no
    ``np.memmap`` subclass overhead on every fancy index)."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < _PREFIX.size:
                raise FileFormatError(f"{path!r} is not a seqprob n-gram binary: {size} bytes, "
                                      f"shorter than the {_PREFIX.size}-byte prefix", path=path)
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise SeqProbFileError(f"cannot read {path!r}: {exc.strerror or exc}", path=path) from exc
    return np.frombuffer(mapped, dtype=np.uint8)


def _read_header(data: np.ndarray, path: str) -> dict:
    magic, version, length, crc = _PREFIX.unpack(bytes(data[: _PREFIX.size]))
    if magic != MAGIC:
        raise FileFormatError(f"{path!r} is not a seqprob n-gram binary (starts with {magic!r}, "
                              f"expected {MAGIC!r}); ARPA text is read by read_arpa", path=path)
    if version != VERSION:
        raise FileFormatError(f"{path!r} is format version {version}; this seqprob reads version "
                              f"{VERSION}: rebuild it from the ARPA file (seqprob ngram build-binary)",
                              path=path, value=version, limit=VERSION)
    header = bytes(data[_PREFIX.size: _PREFIX.size + length])
    if len(header) != length or zlib.crc32(header) != crc:
        raise FileFormatError(f"{path!r}: the header is damaged or truncated (checksum or length "
                              f"mismatch: {len(header)} of {length} bytes)", path=path)
    return json.loads(header)


def _section(data: np.ndarray, s: dict, path: str, verify: bool) -> np.ndarray:
    end = s["offset"] + s["nbytes"]
    if end > len(data):
        raise FileFormatError(f"{path!r} is truncated: section {s['name']} ends at byte {end}, the "
                              f"file has {len(data)} bytes", path=path, value=len(data), limit=end)
    raw = data[s["offset"]: end]
    if verify and zlib.crc32(memoryview(raw)) != s["crc32"]:
        raise FileFormatError(f"{path!r}: section {s['name']} fails its CRC-32 check (the file is "
                              "damaged)", path=path)
    return raw.view(np.dtype(s["dtype"])).reshape(s["shape"])


def _check_unigrams(tables: BackoffTables, path: str) -> None:
    """Log p <= 0 (-inf allowed) and back-off weights below +inf, NaN refused, for the unigrams.

    O(V), like decoding the vocabulary; the higher orders are left to ``verify=True`` (a pass
    over them would make the O(1) load O(n-grams)).
    """
    logp = tables.logp[0]
    if not (logp <= 0).all():  # NaN fails the comparison too
        bad = int(np.flatnonzero(~(logp <= 0))[0])
        raise damaged(path, f"corrupted unigram log-probability {float(logp[bad])!r} of word id "
                             f"{bad} (must be <= 0)", value=float(logp[bad]), limit=0.0)
    if tables.order > 1 and not (tables.logbow[0] < np.inf).all():
        bad = int(np.flatnonzero(~(tables.logbow[0] < np.inf))[0])
        raise damaged(path, f"corrupted unigram back-off weight {float(tables.logbow[0][bad])!r} "
                             f"of word id {bad} (must be finite or -inf)",
                       value=float(tables.logbow[0][bad]))


def _vocab(arrays: dict, meta: dict, path: str) -> Vocab:
    """The vocabulary, decoded (always read at load: its damage is reported here)."""
    offsets, blob = arrays["vocab.offsets"], bytes(arrays["vocab.utf8"])
    V = int(meta["vocab_size"])
    if len(offsets) != V + 1 or offsets[0] != 0 or offsets[-1] != len(blob) or (np.diff(offsets) < 0).any():
        raise damaged(path, f"corrupted vocabulary offsets (expected {V + 1} non-decreasing "
                             f"offsets from 0 to {len(blob)})", limit=len(blob))
    bounds = offsets.tolist()
    try:
        tokens = [blob[a:b].decode("utf-8") for a, b in zip(bounds[:-1], bounds[1:])]
        return Vocab(tokens, bos=meta["bos"], eos=meta["eos"], unk=meta["unk"])
    except UnicodeDecodeError as exc:
        bad = next(i for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))
                   if not _is_utf8(blob[a:b]))  # the error path only: find the token's id
        raise damaged(path, f"corrupted vocabulary: token id {bad} is not valid UTF-8 "
                             f"({exc.reason})", value=bad) from None
    except InputError as exc:  # e.g. a damaged byte made two tokens equal
        raise damaged(path, f"corrupted vocabulary ({exc})") from None


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
