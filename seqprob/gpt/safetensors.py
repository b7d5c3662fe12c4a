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
import os
import struct

import numpy as np

from .._io import atomic_write
from ..errors import CheckpointError, SeqProbFileError

__all__ = ["load_file", "save_file", "read_header", "DTYPES"]

#: safetensors dtype name -> numpy dtype (little-endian). BF16 is decoded to float32.
DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_NAMES = {np.dtype(v).str: k for k, v in DTYPES.items() if k != "BF16"}
_MAX_HEADER = 100 * 2**20


def read_header(path) -> tuple[dict, int]:
    """The JSON header (tensor entries and ``__metadata__``) and the byte offset of the data."""
    path = os.fspath(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                raise CheckpointError(f"{path!r} is truncated: {size} bytes, no safetensors header",
                                      path=path)
            (n,) = struct.unpack("<Q", head)
            if n > min(_MAX_HEADER, size - 8):
                raise CheckpointError(f"{path!r}: header length {n} exceeds the file size {size} "
                                      f"(truncated or not a safetensors file)", path=path)
            raw = handle.read(n)
    except OSError as exc:
        raise SeqProbFileError(f"cannot read {path!r}: {exc.strerror or exc}", path=path) from exc
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path!r}: malformed safetensors header ({exc})", path=path) from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path!r}: safetensors header is not a JSON object", path=path)
    return header, 8 + n


def load_file(path, skip=None) -> dict:
    """Read every tensor of a safetensors file as numpy arrays (BF16 becomes float32).

    Parameters
    ----------
    path : str or Path
    skip : callable(name) -> bool, optional
        Tensors to leave unread (e.g. attention-mask buffers).

    Raises
    ------
    CheckpointError
        Truncated file, malformed header, unknown dtype, or a shape that does not match
        the byte range.
    """
    path = os.fspath(path)
    header, start = read_header(path)
    size = os.path.getsize(path)
    out = {}
    with open(path, "rb") as handle:
        for name, entry in header.items():
            if name == "__metadata__" or (skip is not None and skip(name)):
                continue
            out[name] = _read_tensor(handle, path, name, entry, start, size)
    return out


def _read_tensor(handle, path, name, entry, start, size) -> np.ndarray:
    try:
        dtype_name, shape, (begin, end) = entry["dtype"], list(entry["shape"]), entry["data_offsets"]
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"{path!r}: malformed header entry for {name!r}: {entry!r}", path=path) from None
    if dtype_name not in DTYPES:
        raise CheckpointError(f"{path!r}: tensor {name!r} has unsupported dtype {dtype_name!r} "
                              f"(supported: {sorted(DTYPES)})", path=path, name=name)
    dtype = DTYPES[dtype_name]
    count = int(np.prod(shape, dtype=np.int64))
    if end - begin != count * dtype.itemsize or begin < 0:
        raise CheckpointError(f"{path!r}: tensor {name!r} {dtype_name}{shape} needs "
                              f"{count * dtype.itemsize} bytes, header gives {end - begin}", path=path)
    if start + end > size:
        raise CheckpointError(f"{path!r} is truncated: tensor {name!r} ends at byte {start + end} "
                              f"but the file has {size}", path=path, name=name)
    handle.seek(start + begin)
    arr = np.frombuffer(handle.read(end - begin), dtype=dtype).reshape(shape)
    if dtype_name == "BF16":
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return arr.astype(arr.dtype.newbyteorder("="), copy=True)


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
    with atomic_write(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)))
        handle.write(raw)
        for data in blobs:
            handle.write(data)
