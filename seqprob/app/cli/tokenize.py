"""``seqprob tokenize``: show the token ids and token strings of texts."""
from __future__ import annotations

import argparse

from ..._io import read_lines
from ...errors import InputError
from ._common import add_format_option, print_frame, stdin_is_piped
from ._loading import resolve_tokenizer as _resolve

__all__ = ["register", "resolve_tokenizer", "tokenize_table"]

_EPILOG = """\
tokenizers (--tokenizer means the same in every command):
  PATH          a tokenizer saved by seqprob (JSON), a .tiktoken file or a Hugging Face tokenizer.json
  FOLDER        a model folder (e.g. from 'seqprob train'): its tokenizer.json
  char, word    characters / whitespace-separated words (here: fitted on the given texts;
                with a model: over the model's vocabulary)
  NAME          a tiktoken encoding (gpt2, r50k_base, p50k_base, p50k_edit, cl100k_base,
                o200k_base, o200k_harmony), read offline from TIKTOKEN_CACHE_DIR

examples:
  seqprob tokenize "the cat sat zx"
  echo "the cat sat" | seqprob tokenize
  seqprob tokenize "the cat sat" --tokenizer word
  seqprob tokenize "Hello, world" --tokenizer cl100k_base --format json
  seqprob tokenize "the cat" --tokenizer my_bpe.json --format csv
"""


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "tokenize", help="show token ids and token strings of texts",
        description="Split each TEXT into tokens and print one row per token: the text's index, "
                    "the position (1 = first token, as in 'seqprob score'), the token id and the "
                    "token's display string. Without TEXT, the lines of standard input (when it "
                    "is not a terminal).",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("texts", nargs="*", metavar="TEXT",
                        help="text(s) to tokenize; '-' reads lines from stdin")
    parser.add_argument("--tokenizer", "-t", metavar="PATH|FOLDER|word|char|NAME",
                        help="see 'tokenizers' below (default: the toy language's word tokenizer, "
                             "shared by the default model)")
    add_format_option(parser)
    parser.set_defaults(func=run)


def resolve_tokenizer(spec: str | None, texts=None):
    """A tokenizer from a CLI spec without a model (see :func:`._loading.resolve_tokenizer`)."""
    return _resolve(spec, None, texts)


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
    for text in args.texts or (["-"] if stdin_is_piped() else []):
        if text == "-":
            texts.extend(read_lines("-", strip=False))  # non-UTF-8 bytes: an error naming the line
        else:
            texts.append(text)
    if not texts or not any(texts):
        raise InputError("no text to tokenize: give at least one non-empty TEXT, or text on "
                         "standard input")
    df = tokenize_table(resolve_tokenizer(args.tokenizer, texts), texts)
    if args.format == "table":  # escape tabs, newlines and partial characters for display
        df = df.assign(token=df["token"].map(lambda s: repr(s)[1:-1]))
    print_frame(df, args.format)
    return 0
