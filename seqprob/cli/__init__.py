"""The ``seqprob`` command line. Each sub-command lives in its own module with a
``register(subparsers)`` function that adds its parser and sets ``func``."""
from __future__ import annotations

import argparse
import importlib
import logging
import sys
import warnings

from ..errors import SeqProbError

__all__ = ["main", "build_parser"]

# one module per sub-command, each with register(subparsers); imported lazily by build_parser.
_COMMAND_MODULES = ("demo", "score", "tokenize", "sample", "ngram", "ppl", "train", "report")


class _Parser(argparse.ArgumentParser):
    """Bad usage is one line on stderr and exit status 2 (argparse would print the usage too)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``seqprob`` argument parser with every sub-command registered."""
    parser = _Parser(
        prog="seqprob",
        description="A language model is a probability distribution over sequences: "
                    "score, sample, fit and compare models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(f".{name}", __name__).register(sub)
    return parser


def _one_line_warning(command: str):
    """Warnings (e.g. a discount fallback on tiny data) as one line, without a source excerpt."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"seqprob {command}: warning: {message}", file=sys.stderr)

    return show


def _one_line(exc) -> str:
    """The message on one line (a newline inside a quoted value would split it)."""
    return " ".join(str(exc).split("\n"))


def main(argv=None) -> int:
    """Entry point of the ``seqprob`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    name = " ".join(filter(None, [args.command, getattr(args, f"{args.command}_command", None)]))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")  # each distinct warning once per run
            warnings.showwarning = _one_line_warning(name)
            return int(args.func(args) or 0)
    except SeqProbError as exc:
        print(f"seqprob {name}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
