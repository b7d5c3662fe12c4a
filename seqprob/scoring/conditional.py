"""Conditional scores: a continuation scored after a context that is read but not scored.

The text ``context + sep + continuation`` is tokenized as a whole (so the tokens are the ones
the model would see); rows of tokens lying wholly in the context are dropped, and a token whose
non-space bytes straddle the join is kept and marked ``spans_join`` instead of being split
(the join itself: :func:`seqprob.scoring.core.encode_with_context`).
"""
from __future__ import annotations

import warnings

from .._io import check_text
from ..errors import InputError
from .tokens import score
from .words import word_scores

__all__ = ["conditional_logprob"]


def conditional_logprob(model, context: str, continuation: str, tokenizer=None, eos: bool = False,
                        sep: str = " ", level: str = "word", stride: int | None = None) -> float:
    """log P(continuation | context) in nats: the context is read, not scored.

    Parameters
    ----------
    model : LanguageModel
    context, continuation : str
        Joined as ``context + sep + continuation`` and tokenized as a whole. A non-str or a lone
        surrogate is an :class:`InputError`.
    tokenizer : Tokenizer, optional
        Defaults to ``model.tokenizer``.
    eos : bool
        Also score P(``</s>`` | context, continuation).
    level : {"word", "token"}
        ``"word"`` (exact): the sum of :func:`seqprob.word_scores` over the continuation's words,
        with the beginning-of-word correction at the join for leading-space tokenizers.
        ``"token"``: the plain sum of the continuation's token log-probs (a token spanning the join
        is included, with a warning).
    stride : int, optional
        Sliding windows when the whole text is longer than the model's context.

    Notes
    -----
    Word level, leading-space marks, B = word-initial tokens ∪ {``</s>``}:
    log P(w_1..w_k | c) = sum_{t > len(c)} log P(x_t | x_<t) - log P(B | c) + log P(B | c, w), the last
    term replaced by log P(``</s>`` | c, w) with ``eos``.

    Examples
    --------
    >>> import seqprob as sp
    >>> truth = sp.toy_english()
    >>> a = sp.conditional_logprob(truth, "the cat", "sat on the mat", eos=True)
    >>> b = sp.joint_logprob(truth, "the cat sat on the mat") - sp.joint_logprob(truth, "the cat", eos=False)
    >>> bool(abs(a - b) < 1e-12)
    True
    """
    check_text(context, "context")
    check_text(continuation, "continuation")
    if level not in ("word", "token"):
        raise InputError(f"level must be 'word' or 'token', got {level!r}", value=level)
    if level == "word":
        df = word_scores(model, [continuation], tokenizer=tokenizer, eos=eos, context=context, sep=sep,
                         stride=stride)
        return float(df["logprob"].sum())

    df = score(model, [continuation], tokenizer=tokenizer, eos=eos, context=context, sep=sep,
               distribution=False, stride=stride)
    if df["spans_join"].any():
        warnings.warn(f"a token spans the join of {context!r:.40} and {continuation!r:.40}: its "
                      "log-prob is counted with the continuation (use level='word')", UserWarning, stacklevel=2)
    return float(df["logprob"].sum())
