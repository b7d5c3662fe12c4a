"""Word-level and character-level tokenizers with ``<unk>``, ``<s>``, ``</s>``."""
from __future__ import annotations

import os
from collections import Counter
from typing import Iterable

from .._io import read_lines
from ..checks import check_int
from ..errors import FileFormatError, InputError
from ..vocab import BOS, EOS, UNK, Vocab, check_ids
from .base import Tokenizer, check_text, iter_texts, register_tokenizer

__all__ = ["WhitespaceTokenizer", "CharTokenizer"]

_SPECIALS = (UNK, BOS, EOS)


class _UnitTokenizer(Tokenizer):
    """A vocabulary of units (words or characters) plus ``<unk>``, ``<s>``, ``</s>``.

    Subclasses define ``_split(text) -> list of units`` and ``_joiner`` (what ``decode`` puts
    between units).
    """

    _joiner = ""
    _unit_name = "units"

    def __init__(self, vocab: Vocab | None = None):
        self.vocab_ = vocab

    @staticmethod
    def _split(text: str) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def _fit(cls, texts, min_count, what: str, sort: bool):
        """Count the units of ``texts``; keep those seen >= ``min_count`` times."""
        check_int("min_count", min_count, low=1)
        counts: Counter = Counter()
        for text in iter_texts(texts, what):
            units = cls._split(text)
            reserved = [u for u in units if u in _SPECIALS]
            if reserved:
                raise InputError(f"reserved symbol {reserved[0]!r} inside the training text",
                                 token=reserved[0])
            counts.update(units)
        if not counts:
            raise InputError(f"cannot fit a tokenizer on an empty corpus (no {cls._unit_name} found)")
        order = sorted(counts) if sort else list(counts)
        return cls(Vocab([UNK, BOS, EOS] + [u for u in order if counts[u] >= min_count]))

    def encode(self, text: str) -> list[int]:
        """Ids of the units of ``text`` (unknown units -> ``<unk>``)."""
        lookup = self.vocab.lookup
        return [lookup(u) for u in self._split(check_text(text))]

    def pieces(self, text: str) -> list[str]:
        return self._split(check_text(text))

    def decode(self, ids) -> str:
        """The units of ``ids`` joined (words by single spaces, characters by nothing)."""
        return self._joiner.join(self.token_strings(check_ids(ids, len(self.vocab), allow_empty=True)))

    def to_dict(self) -> dict:
        return {"vocab": self.vocab.to_dict()}

    @classmethod
    def from_dict(cls, data: dict):
        if "vocab" not in data:
            raise FileFormatError("tokenizer JSON: missing field 'vocab'", field="vocab")
        return cls(Vocab.from_dict(data["vocab"]))


@register_tokenizer
class WhitespaceTokenizer(_UnitTokenizer):
    """Words split on whitespace; words outside the vocabulary map to ``<unk>``.

    Ids follow KenLM: ``<unk>`` = 0, ``<s>`` = 1, ``</s>`` = 2, then words by first appearance.

    Examples
    --------
    >>> tok = WhitespaceTokenizer.fit(["the cat sat", "the dog"])
    >>> tok.encode("the cat ran")
    [3, 4, 0]
    >>> tok.decode([3, 4])
    'the cat'
    """

    kind = "whitespace"
    default_word_boundary = "whole_word"
    _joiner = " "
    _unit_name = "words"
    _split = staticmethod(str.split)

    @classmethod
    def fit(cls, lines: Iterable[str], min_count: int = 1) -> "WhitespaceTokenizer":
        """Build the vocabulary from ``lines`` (an iterable of str, or a text file named by a
        ``str`` or ``pathlib.Path``); words seen fewer than ``min_count`` times become ``<unk>``."""
        if isinstance(lines, (str, os.PathLike)):  # the corpus rule: a str names a file
            lines = read_lines(lines)
        return cls._fit(lines, min_count, "lines", sort=False)


@register_tokenizer
class CharTokenizer(_UnitTokenizer):
    """One token per Unicode character; unseen characters map to ``<unk>``.

    Examples
    --------
    >>> tok = CharTokenizer.fit(["abc"])
    >>> tok.decode(tok.encode("cab"))
    'cab'
    """

    kind = "char"
    _unit_name = "characters"
    _split = staticmethod(list)

    @classmethod
    def fit(cls, texts: Iterable[str], min_count: int = 1) -> "CharTokenizer":
        """Build the vocabulary from the characters of ``texts`` (a str is one text), sorted."""
        return cls._fit([texts] if isinstance(texts, str) else texts, min_count, "texts", sort=True)
