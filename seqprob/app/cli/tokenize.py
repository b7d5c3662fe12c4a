"""``seqprob tokenize``: show the token ids and token strings of texts."""
from __future__ import annotations

import argparse

from ..._io import read_lines
from ...errors import InputError
from ._common import add_format_option, print_frame

__all__ = ["register", "resolve_tokenizer", "tokenize_table"]

_EPILOG = """\
tokenizers:
  PATH          a tokenizer saved by seqprob (JSON) or a .tiktoken file
  FOLDER        a model folder (e.g. from 'seqprob train'): its tokenizer.json
  char, word    character / whitespace tokenizer fitted on the given texts
  NAME          a tiktoken encoding (gpt2, r50k_base, p50k_base, p50k_edit, cl100k_base,
                o200k_base, o200k_harmony), read offline from TIKTOKEN_CACHE_DIR

examples:
  seqprob tokenize "the cat sat zx"
  seqprob tokenize "the cat sat" --tokenizer word
  seqprob tokenize "Hello, world" --tokenizer cl100k_base --format json
  seqprob tokenize "the cat" --tokenizer my_bpe.json --format csv
"""


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "tokenize", help="show token ids and token strings of texts",
        description="Split each TEXT into tokens and print one row per token: the text's index, "
                    "the position (1 = first token, as in 'seqprob score'), the token id and the "
                    "token's display string.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("texts", nargs="+", metavar="TEXT", help="text(s) to tokenize; '-' reads lines from stdin")
    parser.add_argument("--tokenizer", "-t", metavar="PATH|char|word|NAME",
                        help="tokenizer file, 'char', 'word', or a tiktoken encoding name "
                             "(default: the toy language's word tokenizer, shared by the default model)")
    add_format_option(parser)
    parser.set_defaults(func=run)


def resolve_tokenizer(spec: str | None, texts=None):
    """A tokenizer from a CLI spec: ``char`` / ``word`` (fitted on ``texts``), a file, or a name;
    ``None`` gives the toy language's word tokenizer."""
    from pathlib import Path

    from ...tokenizers import CharTokenizer, TiktokenTokenizer, WhitespaceTokenizer, load_tokenizer

    if spec is None:
        from ...truth import toy_english

        return toy_english().tokenizer
    if spec == "char":
        return CharTokenizer.fit(texts or [])
    if spec == "word":
        return WhitespaceTokenizer.fit(texts or [])
    if Path(spec).is_file():
        return load_tokenizer(spec)
    if Path(spec).is_dir():
        return _folder_tokenizer(Path(spec))
    return TiktokenTokenizer(spec)


def _folder_tokenizer(folder):
    """The tokenizer saved in a model folder (``tokenizer.json``, as ``seqprob train`` writes)."""
    from ...errors import SeqProbFileError
    from ...tokenizers import load_tokenizer

    path = folder / "tokenizer.json"
    if not path.is_file():
        raise SeqProbFileError(f"folder {str(folder)!r} has no tokenizer.json: pass the tokenizer "
                               "file itself, or a model folder written by 'seqprob train'", path=str(folder))
    return load_tokenizer(path)


def tokenize_table(tokenizer, texts):
    """One row per token: ``seq, position, token_id, token`` (the token's display string).

    ``position`` t is the index of x_t when x_0 = ``<s>``, as in :func:`seqprob.score`
    (the first token is 1), so the two tables line up.
    """
    import pandas as pd

    rows = []
    for seq, text in enumerate(texts):
        ids = tokenizer.encode(text)
        for pos, (idx, token) in enumerate(zip(ids, tokenizer.token_strings(ids) if ids else []), start=1):
            rows.append({"seq": seq, "position": pos, "token_id": int(idx), "token": token})
    return pd.DataFrame(rows, columns=["seq", "position", "token_id", "token"])


def run(args) -> int:
    texts = []
    for text in args.texts:
        if text == "-":
            texts.extend(read_lines("-", strip=False))  # non-UTF-8 bytes: an error naming the line
        else:
            texts.append(text)
    if not texts or not any(texts):
        raise InputError("no text to tokenize: give at least one non-empty TEXT")
    df = tokenize_table(resolve_tokenizer(args.tokenizer, texts), texts)
    if args.format == "table":  # escape tabs, newlines and partial characters for display
        df = df.assign(token=df["token"].map(lambda s: repr(s)[1:-1]))
    print_frame(df, args.format)
    return 0
