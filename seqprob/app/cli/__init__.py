"""The ``seqprob`` command line. Each sub-command lives in its own module with a
``register(subparsers)`` function that adds its parser and sets ``func``."""
from __future__ import annotations

import argparse
import importlib
import logging
import sys
import warnings

from ...errors import SeqProbError

__all__ = ["main", "build_parser"]

# one module per sub-command, each with register(subparsers); imported lazily by build_parser.
_COMMAND_MODULES = ("demo", "score", "tokenize", "sample", "ngram", "ppl", "train", "report", "compress",
                    "explore")


class _Parser(argparse.ArgumentParser):
    """Bad usage is one line on stderr and exit status 2: the error, then this (sub-)command's
    usage folded onto the same line (argparse would print the usage on lines of its own)."""

    def error(self, message):
        usage = " ".join(self.format_usage().split()).removeprefix("usage: ")
        self.exit(2, f"{self.prog}: error: {message}; usage: {usage} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``seqprob`` argument parser with every sub-command registered."""
    parser = _Parser(
        prog="seqprob",
        description="A language model is a probability distribution over sequences: "
                    "score, sample, fit and compare models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    parser.add_argument("--version", action="version", version=f"seqprob {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(f".{name}", __name__).register(sub)
    return parser


def _version() -> str:
    from ... import __version__

    return __version__


def _parse(parser: argparse.ArgumentParser, argv):
    """Parse ``argv``; an unknown option is reported with the usage of its sub-command (not
    the top-level usage, which would not show the options that exist)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        command = sub.choices.get(getattr(args, "command", None) or "", parser)
        nested = getattr(args, f"{args.command}_command", None) if args.command else None
        inner = next((a for a in command._actions if isinstance(a, argparse._SubParsersAction)), None)
        if nested and inner is not None:
            command = inner.choices.get(nested, command)
        command.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


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
    args = _parse(parser, argv)
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
