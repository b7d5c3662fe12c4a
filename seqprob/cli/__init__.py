"""The ``seqprob`` command line. Each sub-command lives in its own module with a
``register(subparsers)`` function that adds its parser and sets ``func``."""
from __future__ import annotations

import argparse
import importlib
import logging
import sys

from ..errors import SeqProbError

__all__ = ["main", "build_parser"]

# module name -> registered by it; a module that is missing is skipped so the CLI still works.
_COMMAND_MODULES = ("demo", "score", "tokenize", "sample", "ngram", "ppl", "train", "report")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seqprob",
        description="A language model is a probability distribution over sequences: "
                    "score, sample, fit and compare models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv=None) -> int:
    """Entry point of the ``seqprob`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except SeqProbError as exc:
        print(f"seqprob {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
