"""Sliding windows for texts longer than a model's context, over the model contract.

A model with a finite context window tells its width by an attribute (read by
:func:`~seqprob.scoring.core.context_size`, in this order): ``model.context_size``,
``model.block_size``, or ``model.config.block_size`` (the numpy GPT). Models without one
(n-grams, P*) read the whole sequence at once and need no window.

Window plan (:func:`seqprob.functional.plan_windows`, which the GPT's own ``stride`` uses too): the first window holds the first W inputs; each later
window ends ``stride`` rows after the previous one and starts W' = W (or W - 1 with
``bos_per_window``, whose windows are ``<s>`` + W - 1 ids) inputs before its end. Its new rows
are its last ``stride`` ones; the last window ends at the last row (right-aligned) and so gives
its new rows more context when fewer than ``stride`` are left. Every row is computed exactly
once with at least W' - stride + 1 inputs of context (x_0 included for the first window).
"""
from __future__ import annotations

import logging

import numpy as np

from ..checks import check_int
from ..errors import ContextLengthError, InputError
from ..functional import LN2, check_stride, plan_windows
from ..protocols import StreamingScorer
from .core import check_logprobs, context_size, row_stats, score_batched, stream_stats

__all__ = ["window_logprobs", "window_token_logprobs", "window_token_stats", "score_windowed"]

log = logging.getLogger(__name__)




def _check_ignored_stride(stride) -> None:
    """A model without a finite context (an n-gram model) ignores ``stride``, but a value given
    must still be a window step (None or an integer >= 1): a typo is not silently dropped."""
    if stride is not None:
        check_int("stride", stride, low=1)


def _windows_for(model, n: int, stride, bos_per_window: bool):
    width = context_size(model)
    if width is None:
        _check_ignored_stride(stride)
        return None
    if stride is not None:  # checked even when this sequence fits: a bad value is never dropped
        stride = check_stride(stride, width, bos_per_window)
    if n <= width:
        return None
    if stride is None:
        raise ContextLengthError(f"{n} positions exceed the model's context of {width}: pass stride= "
                                 f"(1 .. {width}) to score it with sliding windows", value=n, limit=width)
    return plan_windows(n, width, stride, bos_per_window)


def _bos(model) -> int:
    bos = model.vocab.bos_id
    if bos is None:
        raise InputError("bos_per_window=True needs a model vocabulary with <s>", role="bos")
    return int(bos)


def _window_input(model, ids: np.ndarray, start: int, end: int, bos_per_window: bool) -> tuple:
    """Inputs of one window and how many leading rows belong to the added ``<s>``."""
    if bos_per_window and start > 0:
        return np.concatenate([[_bos(model)], ids[start:end]]), 1
    return ids[start:end], 0


def window_logprobs(model, ids, stride: int | None = None, bos_per_window: bool = False) -> np.ndarray:
    """(T, V) rows log P(x_t = v | window context) for ids x_0 .. x_{T-1}.

    Sequences within the model's context (or any model without one) go to ``model.logprobs``
    whole; longer ones need ``stride`` (else :class:`ContextLengthError`), see the module notes.

    Notes
    -----
    Row p comes from the window (start, end, new) with new <= p < end:
    log P(x_{p+1} = v | x_start .. x_p) (``<s>`` before x_start with ``bos_per_window``).

    Examples
    --------
    >>> import seqprob as sp
    >>> m = sp.default_model()
    >>> ids = [m.vocab.bos_id] + m.tokenizer.encode(" ".join(["the cat sat on the mat"] * 8))
    >>> window_logprobs(m, ids, stride=8).shape == (len(ids), len(m.vocab))
    True
    """
    ids = np.asarray(ids, dtype=np.int64)
    windows = _windows_for(model, len(ids), stride, bos_per_window)
    if windows is None:
        return np.asarray(model.logprobs(ids))
    parts = []
    for start, end, new in windows:
        inputs, extra = _window_input(model, ids, start, end, bos_per_window)
        parts.append(np.asarray(model.logprobs(inputs))[extra + new - start:])  # (end - new, V)
    return np.concatenate(parts, axis=0)  # (T, V)


def window_token_logprobs(model, ids, stride: int | None = None, bos_per_window: bool = False) -> np.ndarray:
    """(T,) log P(x_t | window context) for ids x_0 .. x_T, by ``model.token_logprobs`` on each
    window (nothing of size V is built); windows as in :func:`window_logprobs`."""
    ids = np.asarray(ids, dtype=np.int64)
    windows = _windows_for(model, len(ids) - 1, stride, bos_per_window)
    if windows is None:
        return np.asarray(model.token_logprobs(ids), dtype=np.float64)
    parts = []
    for start, end, new in windows:
        inputs, extra = _window_input(model, ids, start, end + 1, bos_per_window)
        parts.append(np.asarray(model.token_logprobs(inputs), dtype=np.float64)[extra + new - start:])
    return np.concatenate(parts)  # (T,)


def window_token_stats(model, ids, stride: int | None = None, bos_per_window: bool = False) -> tuple:
    """(logprob, entropy, rank) (T,) each for ids x_0 .. x_T, by ``model.token_stats`` (a
    :class:`~seqprob.protocols.StreamingScorer`) on each window: nothing of size T x V is
    built; windows as in :func:`window_logprobs`, entropy in nats."""
    ids = np.asarray(ids, dtype=np.int64)
    windows = _windows_for(model, len(ids) - 1, stride, bos_per_window)
    if windows is None:
        return stream_stats(model, ids)
    parts = []
    for start, end, new in windows:
        inputs, extra = _window_input(model, ids, start, end + 1, bos_per_window)
        parts.append([a[extra + new - start:] for a in stream_stats(model, inputs)])
    return tuple(np.concatenate(cols) for cols in zip(*parts))  # (T,) each


def _score_long(model, enc, with_distribution: bool, stride, bos_per_window: bool) -> dict:
    """What :func:`~seqprob.scoring.core.score_batched` gives for one sequence, computed window
    by window."""
    if with_distribution and isinstance(model, StreamingScorer):
        lp, ent, rank = window_token_stats(model, enc.ids, stride, bos_per_window)
        ent = ent / LN2
    elif with_distribution:
        rows = window_logprobs(model, enc.ids[:-1], stride, bos_per_window)  # (T, V)
        lp, ent, rank = (a[0] for a in row_stats(rows[None], enc.ids[None, 1:]))
    else:
        lp = window_token_logprobs(model, enc.ids, stride, bos_per_window)  # (T,)
    out = {"logprob": np.where(enc.impossible, -np.inf, check_logprobs(lp, model, 0))}
    if with_distribution:
        out["entropy_bits"] = ent
        out["rank"] = np.where(enc.impossible, len(model.vocab), rank)
    return out


def score_windowed(model, encoded: list, with_distribution: bool, stride, bos_per_window: bool) -> list:
    """:func:`~seqprob.scoring.core.score_batched`'s results, with the sequences longer than the
    model's context scored by sliding windows (each alone: padding in a batch would move its
    last window)."""
    width = context_size(model)
    if width is None:
        _check_ignored_stride(stride)
        if stride is not None or bos_per_window:
            log.info("%s has no finite context: stride/bos_per_window ignored", type(model).__name__)
        return score_batched(model, encoded, with_distribution)
    if stride is not None:
        check_stride(stride, width, bos_per_window)
    long = {i for i, e in enumerate(encoded) if len(e.ids) - 1 > width}
    short = [i for i in range(len(encoded)) if i not in long]
    results: list = [None] * len(encoded)
    if short:
        for i, res in zip(short, score_batched(model, [encoded[i] for i in short], with_distribution)):
            results[i] = res
    for i in sorted(long):
        if stride is None and not bos_per_window:  # the model's own sliding, on this sequence
            results[i] = score_batched(model, [encoded[i]], with_distribution)[0]  # alone: padding
        else:                                      # would move its last window
            results[i] = _score_long(model, encoded[i], with_distribution, stride, bos_per_window)
    return results


