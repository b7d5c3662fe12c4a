"""File helpers: atomic writes and reading text corpora (plain, gzip, stdin)."""
from __future__ import annotations

import contextlib
import gzip
import os
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Iterator

from .errors import InputError, SeqProbFileError


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", encoding: str | None = "utf-8"):
    """Open a temporary file beside ``path``; rename it over ``path`` only on success.

    A failure inside the ``with`` block leaves any earlier ``path`` untouched and no
    temporary file behind, so a crash never leaves a half-written model or report.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise SeqProbFileError(f"cannot write {str(path)!r}: folder {str(directory)!r} does not exist",
                               path=str(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise SeqProbFileError(f"cannot write {str(path)!r}: {exc.strerror}", path=str(path)) from exc
    try:
        kwargs = {} if "b" in mode else {"encoding": encoding, "newline": "\n"}
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a saved model should read like any file
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def ensure_writable_dir(path) -> Path:
    """Create ``path`` (and parents) if needed and check that files can be written in it."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".write-test.", delete=True)
        probe.close()
    except OSError as exc:
        raise SeqProbFileError(f"output folder {str(path)!r} is not writable: {exc.strerror or exc}",
                               path=str(path)) from exc
    return path


def read_lines(source, strip: bool = True) -> Iterator[str]:
    """Yield the lines of a text corpus: a path (``.gz`` is decompressed), ``'-'`` for stdin,
    or an iterable of strings. Non-UTF-8 bytes raise :class:`InputError` naming the line."""
    if isinstance(source, (str, os.PathLike)):
        yield from _read_file_lines(str(source), strip)
        return
    for line in source:
        yield line.strip() if strip else line


def _read_file_lines(path: str, strip: bool) -> Iterator[str]:
    """Decode line by line (not by buffered block) so a bad byte is reported on its own line."""
    if path == "-":
        handle = sys.stdin.buffer
    else:
        try:
            handle = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
        except OSError as exc:
            raise SeqProbFileError(f"cannot read corpus {path!r}: {exc.strerror or exc}", path=path) from exc
    try:
        for lineno, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"{path!r} line {lineno}: not valid UTF-8 ({exc.reason} at byte {exc.start})",
                                 path=path, line=lineno) from exc
            yield line.strip() if strip else line.rstrip("\r\n")
    except (OSError, EOFError, zlib.error) as exc:
        raise SeqProbFileError(f"cannot read corpus {path!r}: {exc}", path=path) from exc
    finally:
        if path != "-":
            handle.close()
