"""The one model contract every seqprob model follows (structural typing, no base class needed).

A language model assigns P(x_t | x_0 .. x_{t-1}) to every token of its vocabulary; by the
chain rule this defines P(x_1 .. x_T | x_0). x_0 is the start token ``<s>`` (BOS).
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["LanguageModel", "State", "CorpusScorer"]


@runtime_checkable
class State(Protocol):
    """Incremental prediction state: a value, never mutated in place.

    ``logprobs`` is the (V,) array log P(next = v | prefix so far).
    """

    logprobs: Any


@runtime_checkable
class LanguageModel(Protocol):
    """What seqprob needs from a model.

    Attributes
    ----------
    vocab : Vocab
        The vocabulary it predicts over; ``len(vocab)`` = V.

    Methods
    -------
    logprobs(ids) -> (T, V) or (B, T, V)
        ``ids`` = x_0 .. x_{T-1}; row t-1 = log P(x_t = v | x_0 .. x_{t-1}) for every v.
    token_logprobs(ids) -> (T,) or (B, T)
        ``ids`` = x_0 .. x_T; entry t-1 = log P(x_t | x_0 .. x_{t-1}).
    start(prefix) -> State ; step(state, id) -> State
        Incremental prediction: ``start(prefix).logprobs`` equals ``logprobs(prefix)[-1]``.
    """

    vocab: Any

    def logprobs(self, ids):
        """(T, V) rows log P(x_t = v | x_<t) for ids x_0 .. x_{T-1}; (B, T, V) for a batch."""

    def token_logprobs(self, ids):
        """(T,) log P(x_t | x_<t) of the tokens of ids x_0 .. x_T; (B, T) for a batch."""

    def start(self, prefix) -> State:
        """State after reading ``prefix``; ``.logprobs`` is the (V,) next-token row."""

    def step(self, state: State, token_id: int) -> State:
        """A new state with ``token_id`` appended (``state`` itself is unchanged)."""


@runtime_checkable
class CorpusScorer(Protocol):
    """Optional: a model that scores a whole corpus as running sums (the n-gram models).

    ``corpus_sums(lines, eos)`` takes stripped lines (an iterator, read once) and returns the
    sums :func:`seqprob.evaluate` needs (see ``seqprob.ngram._stream.SUM_FIELDS``), or None,
    before reading anything, when it cannot (then ``evaluate`` scores line by line).
    """

    def corpus_sums(self, lines, eos: bool = True):
        """dict of running sums over ``lines``, or None."""
