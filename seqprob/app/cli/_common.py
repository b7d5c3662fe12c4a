"""Helpers shared by the CLI commands: argument types, texts, tables. Loading models and
tokenizers lives in :mod:`._loading`, checking paths in :mod:`._files`."""
from __future__ import annotations

import argparse
import difflib
import json
import math
import sys

from ...errors import InputError
from ..tables import fit_table
from ._files import check_input_file, check_output_file, refuse_overwriting_inputs  # noqa: F401
from ._loading import MODEL_HELP, REVISION_HELP, TOKENIZER_HELP, load_model, progress_wanted, resolve_tokenizer  # noqa: F401

FORMATS = ("table", "csv", "json")


def did_you_mean(word: str, names) -> str:
    """``" (did you mean 'x'?)"`` for the name closest to ``word``, or ``""``."""
    names = list(names)
    prefixed = [n for n in names if n.startswith(word) and len(word) >= 3]
    close = prefixed[:1] or difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (``--eval-every 0`` is an error, not "the default")."""
    return _int_at_least(text, 1)


def seed_int(text: str) -> int:
    """argparse type: a seed, an integer >= 0 (numpy's generators refuse negative ones)."""
    return _int_at_least(text, 0)


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def add_format_option(parser) -> None:
    """``--format table|csv|json`` (table by default)."""
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="output format: an aligned table (default), or csv / json for pipes")


def add_model_options(parser) -> None:
    """``--model``, ``--tokenizer`` and ``--no-progress``, shared by every command that uses a model."""
    parser.add_argument("--model", metavar="PATH|ORG/NAME", help=MODEL_HELP)
    parser.add_argument("--revision", metavar="REV", help=REVISION_HELP)
    parser.add_argument("--tokenizer", metavar="PATH|FOLDER|word|char|NAME", help=TOKENIZER_HELP)
    add_progress_option(parser)


def add_progress_option(parser) -> None:
    """``--no-progress``: progress goes to stderr when it is a terminal, unless this is given."""
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bars or stage lines (shown on stderr when it is a terminal)")


def add_window_options(parser) -> None:
    """``--stride`` and ``--bos-per-window``: sliding windows for texts longer than the model's context."""
    parser.add_argument("--stride", type=int, default=None,
                        help="score texts longer than the model's context with sliding windows, "
                             "STRIDE new tokens per window (smaller = more context, slower)")
    parser.add_argument("--bos-per-window", action="store_true",
                        help="start every sliding window with <s>")


def load_tokenizer_arg(spec: str | None, model=None):
    """``--tokenizer`` of a command that has a model (see :func:`._loading.resolve_tokenizer`)."""
    return resolve_tokenizer(spec, model)


def table_text(df, width: int | None = None, drop=()) -> str:
    """``df`` as a terminal table that fits ``width`` columns (default: the terminal's); see
    :func:`seqprob.app.tables.fit_table`. CSV and JSON keep every column."""
    return fit_table(df, width, drop=drop, hint="; --format csv shows all")


def frame_records(df) -> list:
    """JSON-ready records of ``df`` (-inf/inf/nan kept as strings)."""
    return [{k: _json_value(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def print_frame(df, fmt: str, file=None, drop=()) -> None:
    """Print a DataFrame as an aligned table that fits the terminal (leaving out the columns
    ``drop``, first ones first, when it must: see :func:`table_text`), CSV or JSON records."""
    out = file or sys.stdout
    if fmt == "csv":
        df.to_csv(out, index=False)
    elif fmt == "json":
        json.dump(frame_records(df), out, indent=1)
        out.write("\n")
    else:
        out.write(table_text(df, drop=drop) + "\n")


def print_document(parts: dict, fmt: str, csv_key: str | None = None, file=None, drop=()) -> None:
    """Several tables as ONE document: a JSON object of name -> records, or for CSV the one
    table ``parts[csv_key]`` (the others are for the terminal), or titled terminal tables."""
    out = file or sys.stdout
    if fmt == "json":
        json.dump({name: frame_records(df) for name, df in parts.items()}, out, indent=1)
        out.write("\n")
    elif fmt == "csv":
        parts[csv_key].to_csv(out, index=False)
    else:
        out.write("\n\n".join(f"{name}:\n{table_text(df, drop=drop)}" for name, df in parts.items()) + "\n")


def _json_value(value):
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "-inf" if value < 0 else ("inf" if value > 0 else "nan")
    return value


def stdin_is_piped() -> bool:
    """Whether standard input is a pipe or a file (not a terminal, not closed or captured)."""
    stdin = sys.stdin
    try:
        return stdin is not None and not stdin.isatty() and stdin.readable()
    except (AttributeError, ValueError, OSError):
        return False


def read_texts(args_texts, file_arg: str | None) -> list:
    """Texts from the command line (a TEXT of '-' reads standard input), one per line from
    ``--file`` ('-' = stdin), or, when neither is given, one per line from standard input when
    it is not a terminal (``echo "the cat" | seqprob score``); blank lines are skipped."""
    from ..._io import read_lines

    check_input_file(file_arg, "--file", "; to score text itself, pass it as TEXT arguments or on stdin")
    texts = []
    for text in args_texts or []:
        texts.extend((t for t in read_lines("-") if t) if text == "-" else [text])
    if file_arg:
        texts.extend(t for t in read_lines(file_arg) if t)
    if not args_texts and not file_arg and stdin_is_piped():
        texts.extend(t for t in read_lines("-") if t)
    if not texts:
        raise InputError("no text given: pass TEXT arguments, --file FILE, or text on standard "
                         "input (one text per line)")
    return texts


#: Share of unknown tokens above which score and ppl warn.
OOV_WARN_SHARE = 0.2


def warn_unknown(n_oov: int, n_tokens: int, model, default: bool) -> None:
    """Warn (one line on stderr through ``warnings``) when many tokens are not in the model's
    vocabulary: their log P is that of ``<unk>`` (or -inf), so the figures say little."""
    import warnings

    if n_tokens == 0 or n_oov / n_tokens <= OOV_WARN_SHARE:
        return
    words = [w for w in model.vocab.tokens if w.isalpha()]
    what = (f"the default model knows the toy language only: {len(model.vocab)} lower-case words "
            f"(case-sensitive, no punctuation) such as {', '.join(words[:8])} (try 'seqprob sample' to see its sentences)"
            if default else f"the model's vocabulary has {len(model.vocab)} tokens")
    warnings.warn(f"{n_oov} of {n_tokens} tokens ({n_oov / n_tokens:.0%}) are not in the vocabulary "
                  f"and are scored as <unk>; {what}", UserWarning, stacklevel=2)
