"""Word-level and character-level tokenizers with ``<unk>``, ``<s>``, ``</s>``."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from ..errors import InputError
from ..vocab import BOS, EOS, UNK, Vocab, check_ids
from .base import Tokenizer, check_text, iter_texts, register_tokenizer

__all__ = ["WhitespaceTokenizer", "CharTokenizer"]

_SPECIALS = (UNK, BOS, EOS)


def _vocab_from_counts(counts: Counter, order: list, min_count: int) -> Vocab:
    if min_count < 1:
        raise InputError(f"min_count must be >= 1, got {min_count}", value=min_count, limit=1)
    kept = [u for u in order if counts[u] >= min_count]
    return Vocab([UNK, BOS, EOS] + kept)


@register_tokenizer
class WhitespaceTokenizer(Tokenizer):
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

    def __init__(self, vocab: Vocab | None = None):
        self.vocab_ = vocab

    @classmethod
    def fit(cls, lines: Iterable[str], min_count: int = 1) -> "WhitespaceTokenizer":
        """Build the vocabulary from ``lines``; words seen fewer than ``min_count`` times become ``<unk>``."""
        if isinstance(lines, str):
            raise InputError("fit() takes an iterable of lines, not a single string")
        counts: Counter = Counter()
        for line in iter_texts(lines, "lines"):
            words = line.split()
            bad = [w for w in words if w in _SPECIALS]
            if bad:
                raise InputError(f"reserved symbol {bad[0]!r} inside the training text", token=bad[0])
            counts.update(words)
        if not counts:
            raise InputError("cannot fit a tokenizer on an empty corpus (no words found)")
        return cls(_vocab_from_counts(counts, list(counts), min_count))

    def encode(self, text: str) -> list[int]:
        """Ids of the whitespace-separated words of ``text`` (unknown words -> ``<unk>``)."""
        lookup = self.vocab.lookup
        return [lookup(w) for w in check_text(text).split()]

    def pieces(self, text: str) -> list[str]:
        return check_text(text).split()

    def decode(self, ids) -> str:
        """The tokens of ``ids`` joined by single spaces."""
        return " ".join(self.token_strings(check_ids(ids, len(self.vocab), allow_empty=True)))

    def to_dict(self) -> dict:
        return {"vocab": self.vocab.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "WhitespaceTokenizer":
        return cls(Vocab.from_dict(data["vocab"]))


@register_tokenizer
class CharTokenizer(Tokenizer):
    """One token per Unicode character; unseen characters map to ``<unk>``.

    Examples
    --------
    >>> tok = CharTokenizer.fit(["abc"])
    >>> tok.decode(tok.encode("cab"))
    'cab'
    """

    kind = "char"

    def __init__(self, vocab: Vocab | None = None):
        self.vocab_ = vocab

    @classmethod
    def fit(cls, texts: Iterable[str], min_count: int = 1) -> "CharTokenizer":
        """Build the vocabulary from the characters of ``texts`` (sorted for a stable order)."""
        if isinstance(texts, str):
            texts = [texts]
        counts: Counter = Counter()
        for text in iter_texts(texts):
            counts.update(text)
        if not counts:
            raise InputError("cannot fit a tokenizer on an empty corpus (no characters found)")
        return cls(_vocab_from_counts(counts, sorted(counts), min_count))

    def encode(self, text: str) -> list[int]:
        """Ids of the characters of ``text`` (unknown characters -> ``<unk>``)."""
        lookup = self.vocab.lookup
        return [lookup(c) for c in check_text(text)]

    def pieces(self, text: str) -> list[str]:
        return list(check_text(text))

    def decode(self, ids) -> str:
        """The characters of ``ids`` concatenated."""
        return "".join(self.token_strings(check_ids(ids, len(self.vocab), allow_empty=True)))

    def to_dict(self) -> dict:
        return {"vocab": self.vocab.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "CharTokenizer":
        return cls(Vocab.from_dict(data["vocab"]))
