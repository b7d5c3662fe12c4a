"""Input and output paths of the CLI commands, checked before any work starts."""
from __future__ import annotations

import contextlib
import gzip
import os
import shutil
from pathlib import Path

from ...errors import InputError, SeqProbFileError

__all__ = ["check_input_file", "check_output_file", "refuse_overwriting_inputs", "gzip_output",
           "looks_like_arpa", "looks_like_sqlm", "looks_like_compressed"]


def refuse_overwriting_inputs(output, *inputs) -> None:
    """InputError when ``output`` is (a link to) one of the ``inputs`` files: the command
    would replace what it reads (``build-binary m.arpa m.arpa``). None and '-' are skipped."""
    if output is None or output == "-" or not os.path.exists(output):
        return
    for path in inputs:
        if path not in (None, "-") and os.path.exists(path) and os.path.samefile(output, path):
            raise InputError(f"the output {str(output)!r} is the input {str(path)!r}: refusing to "
                             "overwrite it (write to another path)", path=str(output))


def check_input_file(path, what: str, hint: str = "") -> None:
    """SeqProbFileError unless ``path`` is '-' (stdin) or an existing file; ``what`` names the
    argument (``TEST``, ``--file``), ``hint`` says what to do instead."""
    if path is None or path == "-":
        return
    if path == "":
        raise InputError(f"{what} is an empty file name", path=path)
    p = Path(path)
    if p.is_dir():
        raise SeqProbFileError(f"{what} {path!r} is a folder, not a file{hint}", path=path)
    if not p.exists():
        raise SeqProbFileError(f"{what} {path!r}: no such file{hint}", path=path)


def check_output_file(path, what: str, *, force: bool = False, inputs=(), same_kind=None,
                      kind: str = "") -> None:
    """Check ``path`` can be written before the work starts: not empty, not a folder, in an
    existing writable folder, not one of ``inputs``, and (unless ``force``) not an existing file
    that ``same_kind(path)`` does not recognise as an earlier output of this kind (``kind``
    names it in the message)."""
    if path == "":
        raise InputError(f"{what} is an empty file name", path=path)
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise SeqProbFileError(f"{what} {path!r} is a folder: give a file name, e.g. "
                               f"{str(p / ('out' + ''.join(Path(path).suffixes)))!r}", path=path)
    if not folder.is_dir():
        state = "is not a folder" if folder.exists() else "does not exist"
        raise SeqProbFileError(f"cannot write {what} {path!r}: folder {str(folder)!r} {state} "
                               "(create it first)", path=path)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SeqProbFileError(f"cannot write {what} {path!r}: folder {str(folder)!r} is not "
                               "writable", path=path)
    refuse_overwriting_inputs(path, *inputs)
    if p.exists() and not force and (same_kind is None or not same_kind(p)):
        what_it_is = f" and is not {kind}" if kind else ""
        raise InputError(f"{what} {path!r} already exists{what_it_is}: refusing to replace it (pass "
                         "--force to replace it, or choose another name)", path=path)


def _head(path: Path, n: int = 64) -> bytes:
    """The first ``n`` bytes of ``path`` (decompressed when it is gzip); b"" if unreadable."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(n)
        if head[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as handle:
                head = handle.read(n)
    except (OSError, EOFError):
        return b""
    return head


def looks_like_arpa(path: Path) -> bool:
    """Whether ``path`` starts like an ARPA file (``\\data\\``, possibly gzipped)."""
    return _head(path).lstrip().startswith(b"\\data\\")


def looks_like_sqlm(path: Path) -> bool:
    """Whether ``path`` starts with the binary n-gram format's magic bytes."""
    from ...ngram.binary import MAGIC

    return _head(path, len(MAGIC)) == MAGIC


def looks_like_compressed(path: Path) -> bool:
    """Whether ``path`` starts with the header of ``seqprob compress``."""
    from ...scoring.compression import MAGIC

    return _head(path, len(MAGIC)) == MAGIC


@contextlib.contextmanager
def gzip_output(path):
    """Yield the path to write: ``path`` itself, or for a ``.gz`` name a temporary file beside
    it that is gzipped into ``path`` (atomically) once the block succeeds."""
    from ..._io import atomic_write, temp_name

    path = Path(path)
    if path.suffix != ".gz":
        yield path
        return
    plain = temp_name(path)
    try:
        yield plain
        with open(plain, "rb") as source, atomic_write(path, "wb") as handle:
            with gzip.GzipFile(filename="", mode="wb", fileobj=handle, compresslevel=6, mtime=0) as packed:
                shutil.copyfileobj(source, packed, 1 << 20)
    finally:
        with contextlib.suppress(OSError):
            plain.unlink()
