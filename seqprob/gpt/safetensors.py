"""A small reader/writer of the safetensors format in numpy (no ``safetensors`` dependency).

Format: 8-byte little-endian header length n, n bytes of JSON ``{name: {"dtype", "shape",
"data_offsets": [begin, end]}, "__metadata__": {...}}``, then the raw little-endian bytes;
offsets are relative to the end of the header.

Examples
--------
>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "t.safetensors")
>>> save_file({"w": np.arange(3, dtype=np.float32)}, path)
>>> load_file(path)["w"].tolist()
[0.0, 1.0, 2.0]
"""
from __future__ import annotations

import json
import logging
import math
import mmap
import os
import struct
import weakref

import numpy as np

from .._io import as_path, atomic_write
from ..errors import CheckpointError, SeqProbFileError

__all__ = ["load_file", "save_file", "read_header", "bf16_to_float32", "release", "DTYPES"]

#: safetensors dtype name -> numpy dtype (little-endian). BF16 is decoded to float32.
DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_NAMES = {np.dtype(v).str: k for k, v in DTYPES.items() if k != "BF16"}
_MAX_HEADER = 100 * 2**20
log = logging.getLogger(__name__)


def read_header(path) -> tuple[dict, int]:
    """The JSON header (tensor entries and ``__metadata__``) and the byte offset of the data.

    Every entry is checked against the schema (the file formats page) before any tensor is read:
    ``dtype`` one of :data:`DTYPES`; ``shape`` a list of at most 8 integers in [0, 2**40]
    whose non-zero ones multiply to at most 2**40 (:data:`MAX_DIM`);
    ``data_offsets`` ``[begin, end]`` integers with ``0 <= begin <= end <= data bytes`` and
    ``end - begin`` = the shape's element count times the dtype's size; ranges not overlapping;
    no tensor name twice; ``__metadata__`` an object of strings.
    """
    path = os.fspath(as_path(path))
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            head = handle.read(8)
            if len(head) < 8:
                raise CheckpointError(f"{path!r} is truncated: {size} bytes, no safetensors header",
                                      path=path)
            (n,) = struct.unpack("<Q", head)
            if n > min(_MAX_HEADER, size - 8):
                raise CheckpointError(f"{path!r}: header length {n} exceeds the file size {size} or the "
                                      f"limit {_MAX_HEADER} (truncated or not a safetensors file)",
                                      path=path, value=n, limit=min(_MAX_HEADER, size - 8))
            raw = handle.read(n)
    except OSError as exc:
        what = "is a folder, not a file" if os.path.isdir(path) else (exc.strerror or str(exc))
        raise SeqProbFileError(f"cannot read {path!r}: {what}", path=path) from exc
    header = _parse_header_json(raw, path)
    _check_entries(header, path, size - 8 - n)
    return header, 8 + n


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise CheckpointError(f"safetensors header names {dup!r} twice", name=dup, field=dup)
    return dict(pairs)


def _parse_header_json(raw: bytes, path: str) -> dict:
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except CheckpointError as exc:
        raise CheckpointError(f"{path!r}: {exc}", path=path, **exc.data) from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CheckpointError(f"{path!r}: malformed safetensors header ({exc})", path=path) from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path!r}: safetensors header is not a JSON object", path=path)
    meta = header.get("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CheckpointError(f"{path!r}: field '__metadata__' must be an object of strings, got "
                              f"{meta!r:.60}", path=path, field="__metadata__")
    return header


def _declared_end(header: dict) -> int:
    """The largest well-formed ``data_offsets`` end in ``header`` (0 if none)."""
    ends = [entry["data_offsets"][1] for name, entry in header.items()
            if name != "__metadata__" and isinstance(entry, dict)
            and isinstance(entry.get("data_offsets"), list) and len(entry["data_offsets"]) == 2
            and all(map(_is_int, entry["data_offsets"]))
            and 0 <= entry["data_offsets"][0] <= entry["data_offsets"][1]]
    return max(ends, default=0)


def _check_entries(header: dict, path: str, data_bytes: int) -> None:
    declared = _declared_end(header)
    if declared > data_bytes:
        raise CheckpointError(f"{path!r} is shorter than its header declares: the tensors' "
                              f"data_offsets reach byte {declared}, the file has {data_bytes} data bytes "
                              f"({declared - data_bytes} missing: a truncated download or copy?); fetch "
                              f"or copy it again", path=path, value=data_bytes, limit=declared,
                              field="data_offsets")
    spans = []
    for name, entry in header.items():
        if name != "__metadata__":
            spans.append((*_check_entry(entry, name, path, data_bytes), name))
    spans.sort()
    for (b1, e1, n1), (b2, e2, n2) in zip(spans, spans[1:]):
        if b2 < e1:
            raise CheckpointError(f"{path!r}: tensors {n1!r} and {n2!r} overlap (bytes {b1}-{e1} and "
                                  f"{b2}-{e2})", path=path, name=n2, field="data_offsets")


MAX_DIM = 1 << 40  # elements of an axis, and of a shape without its zero-length axes


def _check_entry(entry, name: str, path: str, data_bytes: int) -> tuple[int, int]:
    """(begin, end) of one tensor entry, after checking its types, ranges and byte count."""
    where = f"{path!r}: tensor {name!r}"
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= set(entry):
        raise CheckpointError(f"{where}: entry must be an object with dtype, shape, data_offsets, "
                              f"got {entry!r:.80}", path=path, name=name)
    dtype_name, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype_name, str) or dtype_name not in DTYPES:
        raise CheckpointError(f"{where} has unsupported dtype {dtype_name!r:.40} (field 'dtype'; "
                              f"supported: {sorted(DTYPES)})", path=path, name=name, field="dtype")
    if not isinstance(shape, list) or len(shape) > 8 or \
            not all(_is_int(d) and 0 <= d <= MAX_DIM for d in shape):
        raise CheckpointError(f"{where}: field 'shape' must be a list of at most 8 integers in [0, 2**40], "
                              f"got {shape!r:.60}", path=path, name=name, field="shape")
    if math.prod(d for d in shape if d) > MAX_DIM:  # an empty tensor too: numpy refuses such shapes
        raise CheckpointError(f"{where}: shape {shape!r:.60} has more than 2**40 elements (zero-length "
                              f"axes aside)", path=path, name=name, field="shape")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_int, offsets))
            and 0 <= offsets[0] <= offsets[1] <= data_bytes):
        raise CheckpointError(f"{where}: field 'data_offsets' must be [begin, end] with 0 <= begin <= "
                              f"end <= {data_bytes} (the data bytes in the file), got {offsets!r:.60}",
                              path=path, name=name, field="data_offsets", limit=data_bytes)
    begin, end = offsets
    need = math.prod(shape) * DTYPES[dtype_name].itemsize
    if end - begin != need:
        raise CheckpointError(f"{where} {dtype_name}{shape} needs {need} bytes, its data_offsets give "
                              f"{end - begin}", path=path, name=name, field="data_offsets")
    return begin, end


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def load_file(path, skip=None, mapped: bool = False, bf16: set | None = None) -> dict:
    """Read every tensor of a safetensors file as numpy arrays (BF16 becomes float32).

    Parameters
    ----------
    path : str or Path
    skip : callable(name) -> bool, optional
        Tensors to leave unread (e.g. attention-mask buffers).
    mapped : bool
        Return read-only views on a memory map of the file instead of arrays read into
        fresh memory (BF16 and big-endian tensors are still converted copies). For a caller
        that copies the tensors elsewhere one at a time (``GPT.from_hf``): the file's pages
        come from the page cache, with no second copy of the weights to allocate and fault
        in, and :func:`release` drops each tensor's pages once it is copied. As with every memory
        map, the file must not be truncated while the views are in use. A file that cannot
        be mapped (some network or FUSE file systems) is read instead.
    bf16 : set, optional
        Given, BF16 tensors are returned undecoded (their uint16 bits; decode each with
        :func:`bf16_to_float32` when it is needed) and their names are added to this set,
        so that a caller copying tensors one at a time holds one decoded tensor at a time.

    Raises
    ------
    CheckpointError
        Truncated file, malformed header (see :func:`read_header`), unknown dtype, or a shape
        that does not match the byte range. Nothing is allocated before the whole header has
        been checked against the file's length.
    """
    path = os.fspath(as_path(path))
    header, start = read_header(path)
    names = [n for n in header if n != "__metadata__" and not (skip is not None and skip(n))]
    if bf16 is not None:
        bf16.update(n for n in names if header[n]["dtype"] == "BF16")
    decode = bf16 is None
    data = _map(path) if mapped else None
    if data is not None:
        return {name: _mapped_tensor(data, header[name], start, path, decode) for name in names}
    out = {}
    try:
        with open(path, "rb") as handle:
            for name in names:
                out[name] = _read_tensor(handle, header[name], start, decode)
    except OSError as exc:
        raise SeqProbFileError(f"cannot read {path!r}: {exc.strerror or exc}", path=path) from exc
    return out


def release(view: np.ndarray) -> None:
    """Drop the pages under ``view`` from this process if it is a view of a file mapped by
    :func:`load_file` (``mapped=True``), once its values have been copied elsewhere: they
    stay in the page cache, and a later read of them maps them again. Anything else is left
    alone, and so is a mapping the system will not advise (locked memory). This keeps a
    loader's resident memory near its own arrays plus one tensor."""
    where = _mapped_range(view)
    if where is not None:
        data, start, stop = where
        try:
            data.madvise(mmap.MADV_DONTNEED, start, stop - start)
        except OSError as exc:  # advice only (e.g. EINVAL on mlock'ed memory)
            log.debug("madvise refused (%s): pages kept", exc)


def _mapped_range(view: np.ndarray):
    """``(map, start, stop)``: the page-aligned byte range of the map under ``view``, or None
    when ``view`` is not a view of a map (or the platform has no MADV_DONTNEED)."""
    base = view
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    data = base if isinstance(base, mmap.mmap) else getattr(base, "obj", None)  # frombuffer: a memoryview
    if not isinstance(data, mmap.mmap) or data not in _FILE_MAPS or not hasattr(mmap, "MADV_DONTNEED") \
            or view.size == 0:
        return None  # not a file of load_file: e.g. a model's parameters in anonymous memory
    bounds = getattr(np, "byte_bounds", None) or np.lib.array_utils.byte_bounds
    lo, hi = bounds(view)
    origin = np.frombuffer(data, np.uint8).ctypes.data
    page = mmap.PAGESIZE
    start = (lo - origin) // page * page
    stop = min(len(data), -(-(hi - origin) // page) * page)
    return (data, start, stop) if 0 <= start < stop else None


def bf16_to_float32(raw: np.ndarray) -> np.ndarray:
    """float32 values of BF16 bits (uint16): the bits are the float32's upper half."""
    return (raw.astype(np.uint32) << 16).view(np.float32)


# The file maps _map made (weakly held): release() drops pages only under these, never under
# other maps such as the anonymous memory of a model's parameters (params.allocate), whose
# pages MADV_DONTNEED would turn into zeros.
_FILE_MAPS = weakref.WeakSet()


def _map(path: str):
    """A read-only memory map of the file, or None where it cannot be mapped (some network
    and FUSE file systems): the caller then reads the file instead."""
    try:
        with open(path, "rb") as handle:
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            _FILE_MAPS.add(data)
            return data
    except (OSError, ValueError) as exc:
        log.debug("cannot map %r (%s): reading it instead", path, exc)
        return None


def _mapped_tensor(data: mmap.mmap, entry: dict, start: int, path: str, decode: bool = True) -> np.ndarray:
    dtype_name, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
    dtype = DTYPES[dtype_name]
    if start + end > len(data):  # the header was checked against the file: it changed under us
        raise CheckpointError(f"{path!r} ended inside a tensor ({max(0, len(data) - start - begin)} of "
                              f"{end - begin} bytes)", path=path)
    if end == begin:
        arr = np.empty(shape, dtype=dtype)
    else:
        arr = np.frombuffer(data, dtype=dtype, count=(end - begin) // dtype.itemsize,
                            offset=start + begin).reshape(shape)
    return _decoded(arr, dtype_name, decode)


def _decoded(arr: np.ndarray, dtype_name: str, decode: bool = True) -> np.ndarray:
    """BF16 as float32 (or its raw bits unless ``decode``), other dtypes in the machine's
    byte order."""
    if dtype_name == "BF16":
        return bf16_to_float32(arr) if decode else arr
    return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))


def _read_tensor(handle, entry, start, decode: bool = True) -> np.ndarray:
    dtype_name, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
    dtype = DTYPES[dtype_name]
    handle.seek(start + begin)
    arr = np.empty(shape, dtype=dtype)  # the file's bytes go straight here: one copy, no bytes object
    got = handle.readinto(arr.reshape(-1).view(np.uint8)) if arr.nbytes else 0
    if got != end - begin:  # the header was checked against the file: it changed under us
        raise CheckpointError(f"{handle.name!r} ended inside a tensor ({got} of {end - begin} bytes read)",
                              path=handle.name)
    return _decoded(arr, dtype_name, decode)


def save_file(tensors: dict, path, metadata: dict | None = None) -> None:
    """Write named numpy arrays as a safetensors file (atomically), in the order given."""
    header, offset, blobs = {}, 0, []
    for name, arr in tensors.items():
        arr = np.asarray(arr)
        key = arr.dtype.newbyteorder("<").str if arr.dtype.itemsize > 1 else arr.dtype.str
        if key not in _NAMES:
            raise CheckpointError(f"cannot save tensor {name!r}: dtype {arr.dtype} has no safetensors name",
                                  name=name)
        data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _NAMES[key], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    with atomic_write(as_path(path), "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)))
        handle.write(raw)
        for data in blobs:
            handle.write(data)
