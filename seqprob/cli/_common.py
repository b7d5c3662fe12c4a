"""Helpers shared by the CLI commands: loading models and tokenizers, printing tables."""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from ..errors import InputError, SeqProbFileError

FORMATS = ("table", "csv", "json")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (``--eval-every 0`` is an error, not "the default")."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


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


def load_model(path: str | None):
    """A model from ``path``: an ARPA file, a GPT checkpoint folder, a grammar spec (.json/.toml).

    Without a path: the shipped default GPT (trained on the toy language).
    """
    if path is None:
        from .. import default_model

        return default_model()
    p = Path(path)
    if not p.exists():
        raise SeqProbFileError(f"model {path!r} does not exist", path=path)
    if p.is_dir():
        from ..gpt import GPT

        return GPT.load(p)
    suffixes = "".join(p.suffixes[-2:])
    if suffixes.endswith((".arpa", ".arpa.gz")):
        from ..arpa import read_arpa

        return read_arpa(p)
    if p.suffix in (".json", ".toml"):
        from ..truth import ProbabilisticGrammar

        return ProbabilisticGrammar.from_toml(p) if p.suffix == ".toml" else ProbabilisticGrammar.from_json(p)
    raise InputError(f"cannot tell what kind of model {path!r} is: expected a .arpa file, a GPT "
                     "checkpoint folder, or a grammar .json/.toml", path=path)


def load_tokenizer_arg(spec: str | None, model=None):
    """``--tokenizer``: a saved tokenizer file, or the model's own tokenizer when omitted."""
    if spec is None:
        tok = getattr(model, "tokenizer", None)
        if tok is None:
            raise InputError("this model has no tokenizer of its own: pass --tokenizer PATH")
        return tok
    from ..tokenizers import load_tokenizer

    return load_tokenizer(spec)


def _fmt_cell(value) -> str:
    if isinstance(value, float):
        if math.isinf(value):
            return "-inf" if value < 0 else "inf"
        if math.isnan(value):
            return "nan"
        return f"{value:.4f}"
    return str(value)


def print_frame(df, fmt: str, file=None) -> None:
    """Print a DataFrame as an aligned table, CSV or JSON records (-inf kept as a string)."""
    out = file or sys.stdout
    if fmt == "csv":
        df.to_csv(out, index=False)
    elif fmt == "json":
        records = [{k: _json_value(v) for k, v in row.items()} for row in df.to_dict(orient="records")]
        json.dump(records, out, indent=1)
        out.write("\n")
    else:
        out.write(df.to_string(index=False, formatters={c: _fmt_cell for c in df.columns
                                                        if df[c].dtype.kind == "f"}) + "\n")


def _json_value(value):
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "-inf" if value < 0 else ("inf" if value > 0 else "nan")
    return value


def read_texts(args_texts, file_arg: str | None) -> list:
    """Texts from the command line, or one per line from a file (``-`` = stdin)."""
    from .._io import read_lines

    texts = list(args_texts or [])
    if file_arg:
        texts.extend(t for t in read_lines(file_arg) if t)
    if not texts:
        raise InputError("no text given: pass TEXT arguments or --file FILE")
    return texts
