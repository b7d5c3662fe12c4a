"""Conditional scores: a continuation scored after a context that is read but not scored.

The text ``context + sep + continuation`` is tokenized as a whole (so the tokens are the ones
the model would see); rows of tokens lying wholly in the context are dropped, and a token whose
non-space bytes straddle the join is kept and marked ``spans_join`` instead of being split.
"""
from __future__ import annotations

import warnings

import numpy as np

from ._io import check_text
from .errors import ContextLengthError, InputError
from .scoring import _model_tokenizer, encode_for_model
from .windows import context_size
from .words import _SPACE_BYTES, token_byte_spans, word_scores

__all__ = ["conditional_logprob", "encode_with_context", "drop_context"]


def _join_class(spans: np.ndarray, raw: bytes, join: int) -> tuple[int, np.ndarray]:
    """(number of leading context tokens, (T,) bool token straddles the join)."""
    n_context, straddle = 0, np.zeros(len(spans), dtype=bool)
    for t, (a, b) in enumerate(spans.tolist()):
        core = [i for i in range(a, b) if raw[i] not in _SPACE_BYTES]
        in_context = (core[-1] < join) if core else (b <= join)
        straddle[t] = bool(core) and core[0] < join <= core[-1]
        if in_context and n_context == t:
            n_context += 1
    return n_context, straddle


def encode_with_context(model, text: str, context: str, sep: str, tokenizer, bos: bool, eos: bool,
                        stride=None):
    """Encode ``context + sep + text`` for ``model``; returns (encoded, n_context, straddle).

    ``n_context`` counts the tokens wholly in the context (their rows are not scored);
    ``straddle`` (T,) marks the token that spans the join.
    """
    check_text(text, "text")
    check_text(context, "context")
    tok = _model_tokenizer(model, tokenizer)
    if tok is None:
        raise InputError("scoring with a context needs a tokenizer: pass tokenizer=...")
    full = context + sep + text if context else text
    enc = encode_for_model(model, full, tok, bos, eos)
    width = context_size(model)
    if stride is None and width is not None and len(enc.ids) - 1 > width:
        raise ContextLengthError(f"context + text take {len(enc.ids) - 1} positions, more than the model's "
                                 f"context of {width}: pass stride= to score with sliding windows",
                                 value=len(enc.ids) - 1, limit=width)
    raw = full.encode("utf-8")
    n_context, straddle = _join_class(token_byte_spans(tok, full, tok.encode(full)), raw,
                                      len(context.encode("utf-8")) if context else 0)
    if n_context >= len(tok.encode(full)) and not eos:
        raise InputError(f"nothing left to score after the context {context!r:.60}", context=context)
    return enc, n_context, np.append(straddle, False) if eos else straddle


def drop_context(frame, n_context: list, straddle: list, bos: bool):
    """Rows of ``frame`` (one model of :func:`seqprob.score`) after each sequence's context,
    with a ``spans_join`` column."""
    keep = np.ones(len(frame), dtype=bool)
    marks = np.zeros(len(frame), dtype=bool)
    offset = 0
    for seq, (n, mark) in enumerate(zip(n_context, straddle)):
        rows = int((frame["seq"].to_numpy() == seq).sum())
        lost = n if bos else max(n - 1, 0)  # with bos=False token 1 has no row
        keep[offset:offset + lost] = False
        marks[offset:offset + rows] = mark[len(mark) - rows:]
        offset += rows
    frame = frame.assign(spans_join=marks)
    return frame[keep].reset_index(drop=True)


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
    log P(w_1..w_k | c) = sum_{t > |c|} log P(x_t | x_<t) - log P(B | c) + log P(B | c, w), the last
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
    from .scoring import score

    df = score(model, [continuation], tokenizer=tokenizer, eos=eos, context=context, sep=sep,
               distribution=False, stride=stride)
    if df["spans_join"].any():
        warnings.warn(f"a token spans the join of {context!r:.40} and {continuation!r:.40}: its "
                      "log-prob is counted with the continuation (use level='word')", UserWarning, stacklevel=2)
    return float(df["logprob"].sum())
