"""Helpers shared by the CLI commands: loading models and tokenizers, printing tables."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

from ...errors import InputError

FORMATS = ("table", "csv", "json")


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


def refuse_overwriting_inputs(output, *inputs) -> None:
    """InputError when ``output`` is (a link to) one of the ``inputs`` files: the command
    would replace what it reads (``build-binary m.arpa m.arpa``). None and '-' are skipped."""
    if output is None or output == "-" or not os.path.exists(output):
        return
    for path in inputs:
        if path not in (None, "-") and os.path.exists(path) and os.path.samefile(output, path):
            raise InputError(f"the output {str(output)!r} is the input {str(path)!r}: refusing to "
                             "overwrite it (write to another path)", path=str(output))


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
    """``--model`` and ``--tokenizer``, shared by every command that uses a model."""
    parser.add_argument("--model", help="ARPA file, GPT checkpoint folder or grammar spec "
                                        "(default: the shipped GPT trained on the toy language)")
    parser.add_argument("--tokenizer", help="tokenizer file (default: the model's own)")


def add_window_options(parser) -> None:
    """``--stride`` and ``--bos-per-window``: sliding windows for texts longer than the model's context."""
    parser.add_argument("--stride", type=int, default=None,
                        help="score texts longer than the model's context with sliding windows, "
                             "STRIDE new tokens per window (smaller = more context, slower)")
    parser.add_argument("--bos-per-window", action="store_true",
                        help="start every sliding window with <s>")


def load_model(path: str | None):
    """``--model``: whatever ``path`` is (see :func:`seqprob.load_model`); the default model
    without a path."""
    from ...registry import load_model as load

    return load(path)


def load_tokenizer_arg(spec: str | None, model=None):
    """``--tokenizer``: a saved tokenizer file, or the model's own tokenizer when omitted."""
    if spec is None:
        tok = getattr(model, "tokenizer", None)
        if tok is None:
            raise InputError("this model has no tokenizer of its own: pass --tokenizer PATH")
        return tok
    from ...tokenizers import load_tokenizer

    return load_tokenizer(spec)


def _fmt_cell(value) -> str:
    if isinstance(value, float):
        if math.isinf(value):
            return "-inf" if value < 0 else "inf"
        if math.isnan(value):
            return "nan"
        return f"{value:.4f}"
    return str(value)


#: Units shown in the terminal table's headers (CSV and JSON keep the plain column names).
HEADER_UNITS = {"logprob": "logprob (nats)", "log10prob": "log10prob (log10)",
                "surprisal_bits": "surprisal (bits)", "entropy_bits": "entropy (bits)",
                "bits_per_token": "bits/token", "bits_per_char": "bits/char",
                "train_loss": "train_loss (nats/token)", "val_loss": "val_loss (nats/token)",
                "tokens": "tokens (count)", "n_tokens": "n_tokens (count)"}
#: Longest text cell of the terminal table; longer ones end in "…" (CSV/JSON keep them whole).
MAX_CELL = 40


def _clip(value, width: int = MAX_CELL) -> str:
    text = str(value)
    return text if len(text) <= width else text[:width - 1] + "…"


def table_text(df) -> str:
    """``df`` as an aligned terminal table: numbers right-aligned with 4 decimals, text left-
    aligned and cut to :data:`MAX_CELL` characters, units in the headers."""
    view = df.rename(columns={c: HEADER_UNITS.get(c, c) for c in df.columns})
    formatters = {}
    for name, column in zip(view.columns, df.columns):
        if df[column].dtype.kind == "f":
            formatters[name] = _fmt_cell
        elif df[column].dtype.kind == "O":
            cells = df[column].map(_clip)
            width = max([len(name), *cells.map(len)]) if len(cells) else len(name)
            view[name] = cells
            formatters[name] = (lambda w: lambda s: f"{s:<{w}}")(width)
    return view.to_string(index=False, formatters=formatters, justify="left")


def frame_records(df) -> list:
    """JSON-ready records of ``df`` (-inf/inf/nan kept as strings)."""
    return [{k: _json_value(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def print_frame(df, fmt: str, file=None) -> None:
    """Print a DataFrame as an aligned table (see :func:`table_text`), CSV or JSON records."""
    out = file or sys.stdout
    if fmt == "csv":
        df.to_csv(out, index=False)
    elif fmt == "json":
        json.dump(frame_records(df), out, indent=1)
        out.write("\n")
    else:
        out.write(table_text(df) + "\n")


def print_document(parts: dict, fmt: str, csv_key: str | None = None, file=None) -> None:
    """Several tables as ONE document: a JSON object of name -> records, or for CSV the one
    table ``parts[csv_key]`` (the others are for the terminal), or titled terminal tables."""
    out = file or sys.stdout
    if fmt == "json":
        json.dump({name: frame_records(df) for name, df in parts.items()}, out, indent=1)
        out.write("\n")
    elif fmt == "csv":
        parts[csv_key].to_csv(out, index=False)
    else:
        out.write("\n\n".join(f"{name}:\n{table_text(df)}" for name, df in parts.items()) + "\n")


def _json_value(value):
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "-inf" if value < 0 else ("inf" if value > 0 else "nan")
    return value


def read_texts(args_texts, file_arg: str | None) -> list:
    """Texts from the command line, or one per line from a file (``-`` = stdin)."""
    from ..._io import read_lines

    texts = list(args_texts or [])
    if file_arg:
        texts.extend(t for t in read_lines(file_arg) if t)
    if not texts:
        raise InputError("no text given: pass TEXT arguments or --file FILE")
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
