"""File helpers: atomic writes, temp-file policy, path containment, reading text corpora.

Temporary files and folders are named ``.NAME.seqprob-tmp-PID-RANDOM`` beside their target
``NAME``: recognisable, tied to the process that made them. Every failure Python sees removes
them; one left by a process that was killed (its pid is gone) is removed by the next write to
the same place.
"""
from __future__ import annotations

import contextlib
import errno
import gzip
import os
import secrets
import shutil
import sys
import zlib
from pathlib import Path
from typing import Iterator

from .errors import InputError, SeqProbError, SeqProbFileError

TMP_MARK = ".seqprob-tmp-"


def as_path(path, what: str = "path") -> Path:
    """``path`` (str, bytes or os.PathLike) as a Path; anything else (None, a number, a list)
    is an InputError naming what was given, not Python's TypeError from ``os.fspath``."""
    try:
        name = os.fsdecode(os.fspath(path))
    except TypeError:
        raise InputError(f"{what} must be a file name (str or os.PathLike), got "
                         f"{type(path).__name__} {str(path)[:60]!r}", value=path) from None
    if not name:  # Path("") would be ".", the current folder
        raise InputError(f"{what} is an empty file name", value=name)
    return Path(name)


def temp_name(path) -> Path:
    """A fresh temporary name beside ``path``: ``.NAME.seqprob-tmp-PID-RANDOM``."""
    path = Path(path)
    return path.with_name(f".{path.name}{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0  # exists but belongs to someone else (or nonsense: keep it)
    return True


def remove_stale_temps(path) -> list[Path]:
    """Delete temporaries beside ``path`` left by processes that no longer exist; return them."""
    path = as_path(path)
    directory = path.parent if str(path.parent) else Path(".")
    removed = []
    try:
        candidates = list(directory.glob(f".{_glob_escape(path.name)}{TMP_MARK}*"))
    except OSError:
        return removed
    for tmp in candidates:
        pid_text = tmp.name[len(f".{path.name}{TMP_MARK}"):].split("-", 1)[0]
        if not pid_text.isdigit() or _pid_alive(int(pid_text)):
            continue
        with contextlib.suppress(OSError):
            if tmp.is_dir() and not tmp.is_symlink():
                shutil.rmtree(tmp)
            else:
                tmp.unlink()
            removed.append(tmp)
    return removed


def _glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[]" else c for c in name)


def _writable_target(path: Path) -> Path:
    """The folder ``path`` will be written in, after checking ``path`` is not a folder itself."""
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        what = "is not a folder" if directory.exists() else "does not exist"
        raise SeqProbFileError(f"cannot write {str(path)!r}: folder {str(directory)!r} {what}",
                               path=str(path))
    if path.is_dir():
        raise SeqProbFileError(f"cannot write file {str(path)!r}: a folder of that name exists "
                               f"(give a file name, e.g. {str(path / 'out')!r})", path=str(path))
    return directory


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", encoding: str | None = "utf-8"):
    """Open a temporary file beside ``path``; rename it over ``path`` only on success.

    A failure inside the ``with`` block leaves any earlier ``path`` untouched and no
    temporary file behind, so a crash never leaves a half-written model or report. The
    temporary is ``.NAME.seqprob-tmp-PID-RANDOM``; stale ones of dead processes are removed
    first. An ``OSError`` while writing (permission, disk full) becomes a
    :class:`SeqProbFileError`, text that cannot be encoded (a lone surrogate) an
    :class:`InputError`.
    """
    path = as_path(path)
    _writable_target(path)
    remove_stale_temps(path)
    tmp = temp_name(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as exc:
        raise SeqProbFileError(f"cannot write {str(path)!r}: {exc.strerror or exc}", path=str(path)) from exc
    try:
        kwargs = {} if "b" in mode else {"encoding": encoding, "newline": "\n"}
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        left = remove_temp(tmp)
        raise_write_error(exc, path, left)
        raise


def remove_temp(tmp: Path) -> Path | None:
    """Remove the temporary file or folder ``tmp``; return it if it could not be removed (a
    folder made read-only meanwhile), so that the error can name what was left behind."""
    try:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp)
        else:
            tmp.unlink(missing_ok=True)
    except OSError:
        return tmp if os.path.lexists(tmp) else None
    return None


def _left_behind(left: Path | None) -> str:
    if left is None:
        return ""
    return (f"; the temporary {str(left)!r} could not be removed and was left behind (delete it; "
            "the next write to this name also removes it once this process has ended)")


def raise_write_error(exc: BaseException, path: Path, left: Path | None = None) -> None:
    """Turn an OSError or UnicodeEncodeError met while writing ``path`` into a SeqProbError;
    ``left``: a temporary that could not be removed, named in the message (and ``.data``).
    A SeqProbError raised inside the write gets the same note when something was left."""
    note = _left_behind(left)
    if isinstance(exc, SeqProbError):
        if note:
            exc.message += note
            exc.args = (exc.message,)
            exc.data["left_behind"] = exc.left_behind = str(left)
        return
    if isinstance(exc, UnicodeEncodeError):
        bad = exc.object[exc.start:exc.end]
        raise InputError(f"cannot write {str(path)!r}: text holds {bad!r}, which is not valid "
                         f"Unicode text (a lone surrogate, from bytes that were not UTF-8; only "
                         f"valid Unicode can be written as UTF-8){note}",
                         path=str(path), value=bad, left_behind=left and str(left)) from exc
    if isinstance(exc, OSError):
        reason = exc.strerror or errno.errorcode.get(exc.errno or 0, "") or str(exc)
        raise SeqProbFileError(f"cannot write {str(path)!r}: {reason}{note}", path=str(path),
                               left_behind=left and str(left)) from exc


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_temp_dir(path) -> Path:
    """A fresh temporary folder beside ``path`` (``.NAME.seqprob-tmp-PID-RANDOM``), after
    removing stale ones of dead processes; the caller renames it into place or removes it."""
    path = as_path(path)
    directory = path.parent if str(path.parent) else Path(".")
    remove_stale_temps(path)
    tmp = temp_name(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp.mkdir(0o777)
    except OSError as exc:
        raise SeqProbFileError(f"cannot write {str(path)!r}: {exc.strerror or exc}", path=str(path)) from exc
    return tmp


def resolve_inside(folder, name, what: str = "file") -> Path:
    """``folder / name``, refusing a ``name`` that would lead outside ``folder``.

    ``name`` must be a relative path (``str``) whose resolved location, symlinks followed,
    lies inside the resolved ``folder``: absolute paths, ``..`` steps and links that escape
    raise :class:`~seqprob.errors.FileFormatError` naming the entry.

    Examples
    --------
    >>> resolve_inside("/models/m", "model-00001.safetensors").name
    'model-00001.safetensors'
    >>> try:
    ...     resolve_inside("/models/m", "../other/x.bin")
    ... except ValueError as exc:
    ...     print(type(exc).__name__)
    FileFormatError
    """
    from .errors import FileFormatError

    if not isinstance(name, str) or not name or "\0" in name:
        raise FileFormatError(f"{what} name {name!r} in {str(folder)!r} must be a non-empty string",
                              path=str(folder), value=name)
    base = Path(folder)
    candidate = base / name
    if Path(name).is_absolute() or ".." in Path(name).parts:
        raise FileFormatError(f"{what} {name!r} escapes the folder {str(folder)!r}: referenced files "
                              f"must lie inside it", path=str(folder), value=name)
    try:
        inside = candidate.resolve().is_relative_to(base.resolve())
    except (OSError, RuntimeError) as exc:  # symlink loop
        raise FileFormatError(f"{what} {name!r} in {str(folder)!r} cannot be resolved: {exc}",
                              path=str(folder), value=name) from None
    if not inside:
        raise FileFormatError(f"{what} {name!r} escapes the folder {str(folder)!r} (through a "
                              f"symbolic link): referenced files must lie inside it",
                              path=str(folder), value=name)
    return candidate


def check_text(text, what: str = "text") -> str:
    """``text`` itself if it is valid text; else :class:`InputError` (the text policy).

    The text policy: text is a ``str`` of Unicode scalar values. ``bytes``
    are refused (decode them first); a lone surrogate (U+D800..U+DFFF, e.g. from
    ``surrogateescape``-decoded bytes) is refused, naming its position; NUL (U+0000) is an
    ordinary character.
    """
    if isinstance(text, str):
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InputError(f"{what} holds a lone surrogate {text[exc.start]!r} at character "
                                 f"{exc.start}: not valid Unicode text (it comes from bytes that are "
                                 f"not UTF-8; decode them strictly, or fix the source)", value=text[exc.start], position=exc.start) from None
        return text
    if isinstance(text, (bytes, bytearray, memoryview)):
        raise InputError(f"{what} must be a str, got {type(text).__name__} {bytes(text)[:40]!r}: "
                         f"decode it first (e.g. data.decode('utf-8'))", value=type(text).__name__)
    raise InputError(f"{what} must be a str, got {type(text).__name__} {text!r:.60}",
                     value=type(text).__name__)


def ensure_writable_dir(path) -> Path:
    """Create ``path`` (and parents) if needed and check that files can be written in it."""
    path = as_path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(path / "write-test")
        probe = temp_name(path / "write-test")  # .write-test.seqprob-tmp-PID-RANDOM
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as exc:
        raise SeqProbFileError(f"output folder {str(path)!r} is not writable: {exc.strerror or exc}",
                               path=str(path)) from exc
    return path


def read_lines(source, strip: bool = True) -> Iterator[str]:
    """Yield the lines of a text corpus: a path (``.gz`` is decompressed), ``'-'`` for stdin,
    or an iterable of strings. Non-UTF-8 bytes raise :class:`InputError` naming the line.

    This is the corpus rule: where seqprob reads a corpus (``fit``, ``evaluate``,
    ``perplexity``: parameters named ``lines``), a ``str`` or ``os.PathLike`` names a file;
    where it reads texts (``score``, ``word_scores``, ``compare``, ...), a ``str`` is one text
    and only a ``pathlib.Path`` names a file (:func:`text_items`).
    """
    if isinstance(source, (str, os.PathLike)):
        yield from _read_file_lines(str(source), strip)
        return
    if isinstance(source, (bytes, bytearray)):
        check_text(source, "corpus")
    for i, line in enumerate(source):
        check_text(line, f"corpus line {i + 1}")
        yield line.strip() if strip else line


def _open_corpus(path: str):
    if path == "-":
        return sys.stdin.buffer
    try:
        return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
    except ValueError:  # a NUL byte, a lone surrogate: no file has such a name
        raise InputError(f"cannot read corpus {path[:60]!r}: not a possible file name (a str given "
                         f"as a corpus names a file; to use the text itself, pass a list of lines)",
                         path=path) from None
    except FileNotFoundError as exc:
        raise SeqProbFileError(f"cannot read corpus {path!r}: no such file (a str given as a corpus "
                               f"names a file; to use the text itself, pass a list of lines: "
                               f"[{path[:40]!r}])", path=path) from exc
    except OSError as exc:
        raise SeqProbFileError(f"cannot read corpus {path!r}: {exc.strerror or exc}", path=path) from exc


def _decode_line(raw: bytes, path: str, lineno: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = "stdin" if path == "-" else repr(path)
        raise InputError(f"{where} line {lineno}: not valid UTF-8 ({exc.reason} at byte {exc.start}): "
                         f"seqprob reads text files as UTF-8 and replaces nothing; convert the file "
                         f"(e.g. iconv -f latin1 -t utf-8)",
                         path=path, line=lineno) from exc


def _read_file_lines(path: str, strip: bool) -> Iterator[str]:
    """Decode line by line (not by buffered block) so a bad byte is reported on its own line."""
    handle = _open_corpus(path)
    try:
        for lineno, raw in enumerate(handle, start=1):
            line = _decode_line(raw, path, lineno)
            yield line.strip() if strip else line.rstrip("\r\n")
    except (OSError, EOFError, zlib.error) as exc:
        raise SeqProbFileError(f"cannot read corpus {path!r}: {exc}", path=path) from exc
    finally:
        if path != "-":
            handle.close()


class CorpusFile:
    r"""A corpus file (plain, ``.gz``, or ``'-'`` for stdin), read as stripped lines by
    iterating (exactly :func:`read_lines`) or as raw UTF-8 blocks of whole lines (:meth:`blocks`).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "c.txt")
    >>> _ = open(path, "w").write(" a b \n\nc\n")
    >>> list(CorpusFile(path)), list(CorpusFile(path).blocks())
    (['a b', '', 'c'], [b' a b \n\nc\n'])
    """

    def __init__(self, path):
        self.path = str(path)

    def __iter__(self) -> Iterator[str]:
        return _read_file_lines(self.path, True)

    def blocks(self, size: int = 1 << 22) -> Iterator[bytes]:
        """Blocks of about ``size`` bytes, each ending just after a newline (the last one may
        not), checked to be UTF-8: a bad byte raises the :class:`InputError` of
        :func:`read_lines`, naming its line. A line longer than ``size`` is one block."""
        handle, lineno, pending = _open_corpus(self.path), 0, []
        try:
            while data := handle.read(size):
                cut = data.rfind(b"\n") + 1
                if not cut:
                    pending.append(data)
                    continue
                block, pending = b"".join([*pending, data[:cut]]), [data[cut:]]
                lineno = _check_block(block, self.path, lineno)
                yield block
            if tail := b"".join(pending):
                _check_block(tail, self.path, lineno)
                yield tail
        except (OSError, EOFError, zlib.error) as exc:
            raise SeqProbFileError(f"cannot read corpus {self.path!r}: {exc}", path=self.path) from exc
        finally:
            if self.path != "-":
                handle.close()


def _check_block(block: bytes, path: str, lineno: int) -> int:
    """Raise the error of the first line of ``block`` that is not UTF-8; return the number of
    lines read after it."""
    try:
        block.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = block.rfind(b"\n", 0, exc.start) + 1
        end = block.find(b"\n", exc.start)
        _decode_line(block[start: len(block) if end < 0 else end + 1], path,
                     lineno + block.count(b"\n", 0, start) + 1)
    return lineno + block.count(b"\n")


def text_items(texts, what: str = "texts") -> list:
    """The items of a texts argument as a list: a ``str`` is one text (a warning says so when
    it is also the name of a file), an ``os.PathLike`` is a file whose non-blank stripped lines
    are the texts; anything else is returned as a list, unchecked (items may be id sequences).
    """
    if isinstance(texts, str):
        warn_if_file_name(texts, what)
        return [texts]
    if isinstance(texts, os.PathLike):
        return [line for line in _read_file_lines(os.fspath(texts), True) if line]
    return list(texts)


def warn_if_file_name(text: str, what: str = "text") -> None:
    """Warn when a ``str`` read as a text is also the name of an existing file (one word, no
    spaces): the user most likely meant the file, which only a ``pathlib.Path`` names here."""
    import warnings

    if 0 < len(text) < 4096 and not any(c.isspace() for c in text) and os.path.isfile(text):
        warnings.warn(f"{what} {text!r} is read as a text, but it is also the name of a file: pass "
                      f"pathlib.Path({text!r}) to read the file's lines", UserWarning, stacklevel=4)
