"""``seqprob compress`` / ``seqprob decompress``: arithmetic coding with a language model."""
from __future__ import annotations

import sys
from pathlib import Path

from ...errors import SeqProbFileError
from ._common import add_model_options, load_model, load_tokenizer_arg, refuse_overwriting_inputs


def register(sub) -> None:
    """Add the ``compress`` and ``decompress`` sub-commands to ``sub``."""
    for name, helptext, what in (
            ("compress", "arithmetic-code a text file with a model's next-token probabilities",
             "text file to compress, one sentence per line ('-' = stdin)"),
            ("decompress", "decode a file written by 'seqprob compress' (same model needed)",
             "compressed file ('-' = stdin)")):
        p = sub.add_parser(name, help=helptext, description=helptext + ". The compressed size is the "
                           "model's cross-entropy on the text: a better model compresses better.")
        p.add_argument("input", metavar="INPUT", help=what)
        p.add_argument("-o", "--output", required=name == "compress",
                       help="output file (written atomically)" + ("" if name == "compress" else
                                                                  "; default: stdout"))
        add_model_options(p)
        p.set_defaults(func=run_compress if name == "compress" else run_decompress)


def _read(path: str, binary: bool):
    if path == "-":
        return sys.stdin.buffer.read() if binary else sys.stdin.read()
    try:
        return Path(path).read_bytes() if binary else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SeqProbFileError(f"cannot read {path!r}: {exc.strerror or exc}", path=path) from exc


def run_compress(args) -> int:
    """Compress, write atomically, and report the size beside the model's cross-entropy."""
    from ..._io import atomic_write
    from ...scoring.compression import HEADER_BYTES, compress
    from ...scoring import evaluate

    refuse_overwriting_inputs(args.output, args.input, args.model, args.tokenizer)
    text = _read(args.input, binary=False)
    text = text[:-1] if text.endswith("\n") else text  # a final newline ends the last line
    model = load_model(args.model)
    tok = load_tokenizer_arg(args.tokenizer, model)
    data = compress(model, text, tokenizer=tok)
    with atomic_write(args.output, mode="wb") as handle:
        handle.write(data)
    lines = [line for line in text.split("\n") if line]
    text_bytes = sum(len(line.encode("utf-8")) for line in lines)  # newlines left out, as in evaluate
    line = (f"{len(text.encode('utf-8'))} bytes -> {len(data)} bytes ({HEADER_BYTES} header + "
            f"{len(data) - HEADER_BYTES} payload): payload {8 * (len(data) - HEADER_BYTES) / max(text_bytes, 1):.4f} "
            "bits per byte of the lines' text")
    if lines and len(lines) == text.count("\n") + 1:
        ev = evaluate(model, lines, tokenizer=tok)
        line += f"; the model's cross-entropy (evaluate): {ev.bits_per_byte:.4f} bits per byte"
    print(line, file=sys.stderr)
    return 0


def run_decompress(args) -> int:
    """Decode and write the text (stdout by default)."""
    from ..._io import atomic_write
    from ...scoring import decompress

    refuse_overwriting_inputs(args.output, args.input, args.model, args.tokenizer)
    model = load_model(args.model)
    tok = load_tokenizer_arg(args.tokenizer, model)
    text = decompress(model, _read(args.input, binary=True), tokenizer=tok) + "\n"
    if args.output is None:
        sys.stdout.write(text)
        return 0
    with atomic_write(args.output) as handle:
        handle.write(text)
    return 0
