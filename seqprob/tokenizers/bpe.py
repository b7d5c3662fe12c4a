"""Byte-level BPE: seqprob's fast trainer, encoding by a ``tiktoken.Encoding``.

The trainer makes exactly the merges of ``tiktoken._educational.bpe_train`` (same counts, same
tie-breaking) but counts each distinct pre-token once and updates pair counts incrementally,
so 2,000 merges on 4 MB of text take seconds instead of minutes.
"""
from __future__ import annotations

import heapq
import logging
from collections import Counter
from typing import Iterable, Mapping, Sequence

from ..checks import check_int
from ..errors import InputError
from .base import iter_texts, register_tokenizer
from .tiktoken_io import ENDOFTEXT, GPT2_PATTERN, EncodingTokenizer, _special_map

__all__ = ["BPETokenizer", "train_bpe_ranks"]

log = logging.getLogger(__name__)


def _count_pretokens(texts: Iterable[str], pattern: str) -> Counter:
    """Distinct pre-tokens (regex matches) with their counts, in order of first appearance."""
    import regex  # a dependency of tiktoken, like tiktoken imported only when training

    try:
        compiled = regex.compile(pattern)
    except regex.error as exc:
        raise InputError(f"invalid pre-tokenization pattern {pattern!r}: {exc}", pattern=pattern) from None
    counts: Counter = Counter()
    for text in iter_texts(texts):
        counts.update(compiled.findall(text))
    counts.pop("", None)  # a pattern that can match the empty string
    return counts


class _PairIndex:
    """Pair counts over the distinct words, with word sets and a lazy max-heap.

    Heap entries are ``(-count, word, byte_offset, pair)``: ``(word, byte_offset)`` is a lower
    bound on the pair's first occurrence (occurrences of an existing pair are only ever removed,
    so the true first occurrence can only move later); an entry whose count is stale is dropped,
    one whose first occurrence is stale is pushed back corrected.
    """

    def __init__(self, words: list[list[int]], freqs: list[int]):
        self.words, self.freqs = words, freqs
        self.count: dict[tuple[int, int], int] = {}
        self.where: dict[tuple[int, int], set[int]] = {}
        self.first: dict[tuple[int, int], tuple[int, int]] = {}
        for w, (word, freq) in enumerate(zip(words, freqs)):
            for off, pair in enumerate(zip(word, word[1:])):  # single bytes: offset == index
                if pair not in self.count:
                    self.count[pair], self.where[pair], self.first[pair] = 0, set(), (w, off)
                self.count[pair] += freq
                self.where[pair].add(w)
        self.heap = [(-c, *self.first[p], p) for p, c in self.count.items()]
        heapq.heapify(self.heap)

    def _first_occurrence(self, pair, lengths: list[int]) -> tuple[int, int]:
        w = min(self.where[pair])
        word, off = self.words[w], 0
        for i in range(len(word) - 1):
            if word[i] == pair[0] and word[i + 1] == pair[1]:
                return w, off
            off += lengths[word[i]]
        raise AssertionError("pair index out of sync")  # pragma: no cover

    def pop_best(self, lengths: list[int]):
        """The pair with the highest count, ties to the earliest first occurrence; None if none."""
        while self.heap:
            negc, w, off, pair = heapq.heappop(self.heap)
            if self.count.get(pair) != -negc:
                continue  # stale count: a newer entry exists (or the pair is gone)
            exact = self._first_occurrence(pair, lengths)
            if exact != (w, off):
                self.first[pair] = exact
                heapq.heappush(self.heap, (negc, *exact, pair))
                continue
            return pair
        return None

    def merge(self, pair, new_id: int) -> None:
        """Replace ``pair`` by ``new_id`` in every word holding it (left to right, no overlap)."""
        changed = set()
        for w in list(self.where[pair]):
            old = self.words[w]
            new = _merge_word(old, pair, new_id)
            self.words[w] = new
            before, after = Counter(zip(old, old[1:])), Counter(zip(new, new[1:]))
            freq = self.freqs[w]
            for p in before.keys() | after.keys():
                delta = after[p] - before[p]
                if not delta:
                    continue
                changed.add(p)
                self.count[p] = self.count.get(p, 0) + delta * freq
                if not after[p]:
                    self.where[p].discard(w)
                elif not before[p]:
                    self.where.setdefault(p, set()).add(w)
        for p in changed:
            c = self.count[p]
            if c:
                heapq.heappush(self.heap, (-c, *self.first.get(p, (0, 0)), p))
            else:
                del self.count[p]
                self.where.pop(p, None)
                self.first.pop(p, None)


def _merge_word(word: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    a, b = pair
    out, i, n = [], 0, len(word)
    while i < n:
        if i < n - 1 and word[i] == a and word[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def train_bpe_ranks(texts: Iterable[str], n_merges: int, pattern: str = GPT2_PATTERN) -> dict[bytes, int]:
    """Learn up to ``n_merges`` byte-pair merges; return ``{token bytes: rank}`` (256 bytes first).

    Notes
    -----
    Each merge takes the adjacent pair with the highest count
    ``c(a, b) = sum_w f(w) * #{i : w_i = a, w_{i+1} = b}`` over distinct pre-tokens ``w`` with
    corpus frequency ``f(w)``. Ties go to the pair that occurs first in the training text,
    which is what ``tiktoken._educational.bpe_train`` does (``max`` over a ``Counter`` returns
    the first-inserted key), so both give identical ranks. Training stops early (with a
    warning) when no pair is left.
    """
    counts = _count_pretokens(texts, pattern)
    if not counts:
        raise InputError("cannot train BPE on empty text (no pre-tokens found)")
    ranks = {bytes([i]): i for i in range(256)}
    token_bytes = [bytes([i]) for i in range(256)]
    lengths = [1] * 256
    index = _PairIndex([list(w.encode("utf-8")) for w in counts], list(counts.values()))
    for _ in range(n_merges):
        pair = index.pop_best(lengths)
        if pair is None:
            log.warning("BPE training stopped after %d of %d merges: no pair left to merge",
                        len(ranks) - 256, n_merges)
            break
        new = token_bytes[pair[0]] + token_bytes[pair[1]]
        new_id = len(token_bytes)
        ranks[new] = new_id
        token_bytes.append(new)
        lengths.append(len(new))
        index.merge(pair, new_id)
    return ranks


@register_tokenizer
class BPETokenizer(EncodingTokenizer):
    """Byte-level BPE (GPT-2 style): trained by seqprob, encoded by ``tiktoken`` at its speed.

    Parameters
    ----------
    mergeable_ranks : mapping of bytes to int, optional
        ``{token bytes: rank}`` holding all 256 single bytes; usually from :meth:`train`.
    pattern : str
        Pre-tokenization regex (default: GPT-2's).
    special_tokens : mapping or sequence of str
        ``{text: id}`` or texts given ids after the last rank (default ``<|endoftext|>``,
        which is then both BOS and EOS).
    name : str
        Name of the ``tiktoken.Encoding``.

    Notes
    -----
    Every text is representable (``decode(encode(s)) == s`` for any str), so there is no
    ``<unk>``. ``encode`` treats special-token text as ordinary text. Vocabulary size =
    256 + merges + special tokens.

    Examples
    --------
    >>> tok = BPETokenizer.train(["the cat sat on the mat"] * 10, vocab_size=262)
    >>> tok.n_merges, len(tok.vocab)
    (5, 262)
    >>> tok.decode(tok.encode("the hat"))
    'the hat'
    """

    kind = "bpe"

    def __init__(self, mergeable_ranks: Mapping[bytes, int] | None = None, pattern: str = GPT2_PATTERN,
                 special_tokens: Mapping[str, int] | Sequence[str] = (ENDOFTEXT,), name: str = "seqprob-bpe"):
        self.pattern, self.special_tokens, self.name = pattern, special_tokens, name
        self.vocab_ = None
        if mergeable_ranks is not None:
            first_free = max(mergeable_ranks.values(), default=-1) + 1
            self._set_encoding(name, pattern, mergeable_ranks, _special_map(special_tokens, first_free))

    @classmethod
    def train(cls, texts: Iterable[str] | str, vocab_size: int, pattern: str = GPT2_PATTERN,
              special_tokens: Sequence[str] = (ENDOFTEXT,), name: str = "seqprob-bpe") -> "BPETokenizer":
        """Train on ``texts`` (a str is one text) up to ``vocab_size`` = 256 + merges + specials."""
        specials = list(dict.fromkeys([special_tokens] if isinstance(special_tokens, str) else special_tokens))
        minimum = 256 + len(specials)
        check_int("vocab_size", vocab_size)
        if vocab_size < minimum:
            raise InputError(f"vocab_size={vocab_size!r} is too small: a byte-level BPE needs at least "
                             f"256 + {len(specials)} special tokens = {minimum}", value=vocab_size, limit=minimum)
        ranks = train_bpe_ranks([texts] if isinstance(texts, str) else texts, vocab_size - minimum, pattern)
        return cls(ranks, pattern=pattern, special_tokens=specials, name=name)

    @classmethod
    def from_dict(cls, data: dict) -> "BPETokenizer":
        name, pattern, ranks, specials = cls._checked_fields(data)
        return cls(ranks, pattern=pattern, special_tokens=specials, name=name)
