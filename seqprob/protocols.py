"""The one model contract every seqprob model follows (structural typing, no base class needed).

A language model assigns P(x_t | x_0 .. x_{t-1}) to every token of its vocabulary; by the
chain rule this defines P(x_1 .. x_T | x_0). x_0 is the start token ``<s>`` (BOS).

Second-tier contracts name the optional capabilities, each checked with ``isinstance`` against
the protocol (never by reading private attributes):

* :class:`Trainable` (``params``, ``loss_and_grads``): what :func:`seqprob.train` needs;
* :class:`Inspectable` (``run_with_cache``, ``unembed``): what the logit lens and the
  attention maps need;
* :class:`StreamingScorer` (``token_stats``): per-position log P, entropy and rank without
  handing out (T, V) rows, which scoring then never builds;
* two optional attributes, read through :func:`model_tokenizer` and :func:`is_normalized`:
  ``tokenizer`` (the model's own tokenizer, used when none is passed) and ``normalized``
  (``False`` for a model whose rows need not sum to one, e.g. stupid back-off).
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["LanguageModel", "State", "Trainable", "Inspectable", "CorpusScorer", "StreamingScorer",
           "model_tokenizer", "is_normalized"]


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
class Trainable(Protocol):
    """A model that gradient descent can train (:func:`seqprob.train`).

    Attributes
    ----------
    params : dict of str -> ndarray
        The parameters, updated in place by the optimizer.

    Methods
    -------
    loss_and_grads(batch) -> (float, dict)
        ``batch`` (B, T+1) ids: inputs ``batch[:, :-1]``, targets ``batch[:, 1:]``; the loss
        is the mean next-token NLL in nats, ``grads`` has the keys and shapes of ``params``.

    Notes
    -----
    :func:`seqprob.train` also reads ``config.block_size`` (the window length) unless
    ``block_size`` is passed, and uses ``flat_params_`` (one buffer) when the model has it.
    """

    params: Any

    def loss_and_grads(self, batch):
        """(loss, grads): mean next-token NLL (nats) of ``batch`` and d loss / d params."""


@runtime_checkable
class Inspectable(Protocol):
    """A transformer whose internals can be read (logit lens, attention maps).

    Methods
    -------
    run_with_cache(ids) -> cache
        ``cache.logits`` (T, V), ``cache.attn`` (n_layer, n_head, T, T), ``cache.resid``
        (n_layer + 1, T, C): the residual stream before the first and after every block.
    unembed(resid) -> (..., V)
        Logits of residual-stream vectors through the final norm and the unembedding.
    """

    def run_with_cache(self, ids):
        """Logits, attention patterns and the residual stream of one forward pass."""

    def unembed(self, resid):
        """Logits ln_f(resid) W_U^T of residual-stream vectors (..., C)."""


@runtime_checkable
class StreamingScorer(Protocol):
    """Optional: a model that computes what a scores table needs of each next-token
    distribution itself (the GPT), in memory that does not grow with T x V.

    ``token_stats(ids)`` takes x_0 .. x_T, shape (T+1,) or (B, T+1), and returns
    ``(logprob, entropy, rank)`` (a :class:`~seqprob.functional.TokenStats`), each (T,) or
    (B, T): log P(x_t | x_<t) and the entropy of P(. | x_<t) in nats, and 1 + the number of
    tokens more probable than x_t. They must equal what
    :func:`~seqprob.functional.target_stats` gives on the model's ``logprobs`` rows;
    :func:`seqprob.score` uses them in place of those rows whenever the model has them.
    """

    def token_stats(self, ids):
        """(logprob, entropy, rank) of the tokens of ids x_0 .. x_T."""


def model_tokenizer(model, tokenizer=None):
    """``tokenizer`` if given, else the model's own optional ``tokenizer`` attribute (or None).

    Examples
    --------
    >>> class Bare: pass
    >>> model_tokenizer(Bare()) is None, model_tokenizer(Bare(), "tok")
    (True, 'tok')
    """
    if tokenizer is not None:
        return tokenizer
    return getattr(model, "tokenizer", None)


def is_normalized(model) -> bool:
    """Whether every row of ``model`` is a distribution (the optional ``normalized``
    attribute; absent means True).

    Examples
    --------
    >>> class Scores: normalized = False
    >>> is_normalized(Scores()), is_normalized(object())
    (False, True)
    """
    return bool(getattr(model, "normalized", True))


@runtime_checkable
class CorpusScorer(Protocol):
    """Optional: a model that scores a whole corpus as running sums (the n-gram models).

    ``corpus_sums(lines, eos)`` takes stripped lines (an iterator, read once) and returns the
    sums :func:`seqprob.evaluate` needs (see ``seqprob.ngram._query.SUM_FIELDS``), or None,
    before reading anything, when it cannot (then ``evaluate`` scores line by line).
    """

    def corpus_sums(self, lines, eos: bool = True):
        """dict of running sums over ``lines``, or None."""
