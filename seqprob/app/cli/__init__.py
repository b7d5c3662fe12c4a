"""The ``seqprob`` command line. Each sub-command lives in its own module with a
``register(subparsers)`` function that adds its parser and sets ``func``."""
from __future__ import annotations

import argparse
import importlib
import logging
import re
import sys
import warnings

from ...errors import InputError, SeqProbError
from ._common import did_you_mean

__all__ = ["main", "build_parser", "did_you_mean"]

# one module per sub-command, each with register(subparsers); imported lazily by build_parser.
_COMMAND_MODULES = ("demo", "score", "tokenize", "sample", "ngram", "ppl", "train", "report", "compress",
                    "explore")


class _Parser(argparse.ArgumentParser):
    """Bad usage is one line on stderr and exit status 2: the error, a "did you mean" when a
    name is close to a real one, then this (sub-)command's usage folded onto the same line
    (argparse would print the usage on lines of its own). Options are never abbreviated
    (``--temp`` is not silently ``--temperature``); sub-command parsers inherit that."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        usage = " ".join(self.format_usage().split()).removeprefix("usage: ")
        message += _suggest_choice(message)
        self.exit(2, f"{self.prog}: error: {message}; usage: {usage} (see {self.prog} --help)\n")


def _suggest_choice(message: str) -> str:
    """A suggestion for argparse's "invalid choice: 'x' (choose from 'a', 'b')"."""
    found = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)", message)
    if not found:
        return ""
    return did_you_mean(found.group(1), re.findall(r"'([^']*)'", found.group(2)))


DESCRIPTION = ("A language model is a probability distribution over sequences. score: log P of each "
               "token of texts; ppl: perplexity of a test corpus; sample: draw text; ngram: fit "
               "n-gram models (ARPA, .sqlm) and convert them; train: train a GPT; tokenize: show "
               "tokens; compress / decompress: arithmetic coding with a model; report: every "
               "figure in an HTML page; explore: the chain rule live in a local web page; demo: the "
               "whole story on the toy language.")


def build_parser() -> argparse.ArgumentParser:
    """The ``seqprob`` argument parser with every sub-command registered."""
    parser = _Parser(prog="seqprob", description=DESCRIPTION)
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
    the top-level usage, which would not show the options that exist) and the closest option
    it has."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = _command_parser(parser, args)
        options = [o for a in command._actions for o in a.option_strings if o.startswith("--")]
        hints = "".join(did_you_mean(e.split("=", 1)[0], options) for e in extra if e.startswith("--"))
        command.error(f"unrecognized arguments: {' '.join(extra)}{hints}")
    return args


def _command_parser(parser, args):
    """The parser of the (nested) sub-command ``args`` was parsed with."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command = sub.choices.get(getattr(args, "command", None) or "", parser)
    nested = getattr(args, f"{args.command}_command", None) if getattr(args, "command", None) else None
    inner = next((a for a in command._actions if isinstance(a, argparse._SubParsersAction)), None)
    if nested and inner is not None:
        command = inner.choices.get(nested, command)
    return command


def _check_arguments(args, command) -> None:
    """Command-line text must be UTF-8: an argument holding undecodable bytes (Python keeps
    them as lone surrogates) is named here, in the CLI's words."""
    for action in command._actions:
        values = getattr(args, action.dest, None)
        for value in values if isinstance(values, list) else [values]:
            if not isinstance(value, str):
                continue
            bad = next((i for i, c in enumerate(value) if "\ud800" <= c <= "\udfff"), None)
            if bad is not None:
                name = action.option_strings[-1] if action.option_strings else action.metavar or action.dest
                raw = value[bad].encode("utf-8", "surrogateescape")
                raise InputError(f"argument {name} {value.encode('utf-8', 'surrogateescape')!r} is "
                                 f"not valid UTF-8 (byte {raw.hex()} at character {bad + 1}): "
                                 "command-line text must be UTF-8", value=value)


def _cli_words(message: str, command) -> str:
    """A library message in the CLI's words: ``stride=`` becomes ``--stride``."""
    message = message.replace("pass discount_fallback=... to use fixed discounts",
                              "leave out --no-discount-fallback to use fixed discounts")
    for action in command._actions:
        flags = [o for o in action.option_strings if o.startswith("--")]
        if flags and action.dest not in ("help", "format"):
            message = re.sub(rf"\b{action.dest}=(\.\.\.)?(?=\W|$)", flags[0], message)
            if "_" in action.dest:
                message = re.sub(rf"(?<![-\w]){action.dest}\b(?!=)", flags[0], message)
    return message


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
    command = _command_parser(parser, args)
    try:
        _check_arguments(args, command)
        with warnings.catch_warnings():
            warnings.simplefilter("default")  # each distinct warning once per run
            warnings.showwarning = _one_line_warning(name)
            return int(args.func(args) or 0)
    except SeqProbError as exc:
        print(f"seqprob {name}: error: {_cli_words(_one_line(exc), command)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
