"""``seqprob compress`` / ``seqprob decompress``: arithmetic coding with a language model."""
from __future__ import annotations

import gzip
import sys
import zlib
from pathlib import Path

from ...errors import InputError, SeqProbFileError
from ._common import (add_model_options, check_input_file, check_output_file, load_model, load_tokenizer_arg,
                      progress_wanted)
from ._files import gzip_output, looks_like_compressed


def register(sub) -> None:
    """Add the ``compress`` and ``decompress`` sub-commands to ``sub``."""
    for name, helptext, what, output in (
            ("compress", "arithmetic-code a text file with a model's next-token probabilities",
             "text file to compress, one sentence per line ('-' = stdin; .gz is decompressed)",
             "compressed file to write (atomically); an existing file that 'seqprob compress' did "
             "not write is only replaced with --force"),
            ("decompress", "decode a file written by 'seqprob compress' (same model needed)",
             "compressed file ('-' = stdin)",
             "text file to write (atomically; gzipped for a .gz name; default: stdout); an existing "
             "file is only replaced with --force")):
        p = sub.add_parser(name, help=helptext, description=helptext + ". The compressed size is the "
                           "model's cross-entropy on the text: a better model compresses better.")
        p.add_argument("input", metavar="INPUT", help=what)
        p.add_argument("-o", "--output", required=name == "compress", help=output)
        p.add_argument("--force", action="store_true", help="replace OUTPUT whatever it holds")
        add_model_options(p)
        p.set_defaults(func=run_compress if name == "compress" else run_decompress)


def _read(path: str, binary: bool):
    """The bytes of INPUT (binary) or its text; a ``.gz`` text file is decompressed."""
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        try:
            data = Path(path).read_bytes()
            if not binary and path.endswith(".gz"):
                data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise SeqProbFileError(f"cannot read {path!r}: {getattr(exc, 'strerror', None) or exc}",
                                   path=path) from exc
    return data if binary else _decode(data, path)


def _decode(data: bytes, path: str) -> str:
    """``data`` as UTF-8 text, or an InputError naming the line and byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1)
        where = "stdin" if path == "-" else repr(path)
        raise InputError(f"{where} line {line}: not valid UTF-8 ({exc.reason} at byte {column} of the "
                         "line): only UTF-8 text can be compressed", path=path, line=line) from None


def _checks(args, compressing: bool) -> None:
    """INPUT and OUTPUT before the model is loaded."""
    check_input_file(args.input, "INPUT")
    if compressing and str(args.output).endswith(".gz"):
        raise InputError(f"-o {args.output!r}: compress writes its own format (not gzip), so a .gz "
                         "name would mislead; choose another name, e.g. NAME.spz", path=args.output)
    if args.output is not None:
        check_output_file(args.output, "-o", force=args.force,
                          inputs=[args.input, args.model, args.tokenizer],
                          same_kind=looks_like_compressed if compressing else None,
                          kind="a file written by 'seqprob compress'" if compressing else "")


def run_compress(args) -> int:
    """Compress, write atomically, and report the size beside the model's cross-entropy."""
    from ..._io import atomic_write
    from ...scoring import compress

    _checks(args, compressing=True)
    text = _read(args.input, binary=False)
    if not text:
        raise InputError(f"INPUT {args.input!r} is empty: nothing to compress", path=args.input)
    size = len(text.encode("utf-8"))
    text = text[:-1] if text.endswith("\n") else text  # a final newline ends the last line
    model = load_model(args.model, progress_wanted(args), "compress", args.revision)
    tok = load_tokenizer_arg(args.tokenizer, model)
    data = compress(model, text, tokenizer=tok)
    with atomic_write(args.output, mode="wb") as handle:
        handle.write(data)
    print(_size_line(model, tok, text, size, data), file=sys.stderr)
    return 0


def _size_line(model, tok, text: str, size: int, data: bytes) -> str:
    """Sizes, the payload's bits per byte and the model's cross-entropy (when there is text)."""
    from ...scoring.compression import HEADER_BYTES
    from ...scoring import evaluate

    lines = [line for line in text.split("\n") if line]
    text_bytes = sum(len(line.encode("utf-8")) for line in lines)  # newlines left out, as in evaluate
    payload = len(data) - HEADER_BYTES
    line = f"{size} bytes -> {len(data)} bytes ({HEADER_BYTES} header + {payload} payload)"
    if not text_bytes:  # only empty lines: no rate to give
        return line + ": the input has empty lines only, so there is no rate per byte"
    line += f": payload {8 * payload / text_bytes:.4f} bits per byte of the lines' text"
    if len(lines) == text.count("\n") + 1:
        ev = evaluate(model, lines, tokenizer=tok)
        line += f"; the model's cross-entropy (evaluate): {ev.bits_per_byte:.4f} bits per byte"
    return line


def run_decompress(args) -> int:
    """Decode and write the text (stdout by default)."""
    from ..._io import atomic_write
    from ...scoring import decompress

    _checks(args, compressing=False)
    model = load_model(args.model, progress_wanted(args), "decompress", args.revision)
    tok = load_tokenizer_arg(args.tokenizer, model)
    text = decompress(model, _read(args.input, binary=True), tokenizer=tok) + "\n"
    if args.output is None:
        sys.stdout.write(text)
        return 0
    with gzip_output(args.output) as target, atomic_write(target) as handle:
        handle.write(text)  # gzipped for a .gz name
    return 0
