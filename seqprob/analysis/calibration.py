"""Calibration: when a model says "70 %", is it right 70 % of the time?

The reliability diagram bins predictions by their probability and compares each bin's mean
predicted probability (confidence) with how often the prediction came true (observed frequency).
"""
from __future__ import annotations

import numpy as np

from ..checks import check_int
from ..errors import InputError

__all__ = ["reliability_table", "expected_calibration_error", "calibration"]


def _check_pairs(probs, correct):
    p = np.asarray(probs, dtype=np.float64).ravel()
    c = np.asarray(correct).ravel()
    if p.size == 0:
        raise InputError("calibration needs at least one prediction, got none")
    if p.size != c.size:
        raise InputError(f"probs and correct differ in size: {p.size} vs {c.size}", value=c.size, limit=p.size)
    if np.isnan(p).any() or (p < 0).any() or (p > 1 + 1e-9).any():
        bad = p[np.isnan(p) | (p < 0) | (p > 1 + 1e-9)][0]
        raise InputError(f"probabilities must lie in [0, 1], got {bad!r}", value=float(bad), limit=(0.0, 1.0))
    return np.clip(p, 0.0, 1.0), c.astype(np.float64)


def reliability_table(probs, correct, n_bins: int = 10):
    """Bin predictions by probability; compare confidence with observed frequency.

    Parameters
    ----------
    probs : array_like of float in [0, 1]
        Predicted probabilities of events.
    correct : array_like of bool
        Whether each event happened.
    n_bins : int
        Equal-width bins over [0, 1] (the last one includes 1).

    Returns
    -------
    pandas.DataFrame
        One row per bin: bin_lower, bin_upper, count, confidence (mean predicted probability),
        accuracy (observed frequency), gap = accuracy - confidence (NaN for empty bins);
        ``attrs["ece"]`` and ``attrs["n"]``.

    Notes
    -----
    ECE = sum_b (n_b / N) abs(acc_b - conf_b) (Guo et al. 2017).

    Examples
    --------
    >>> round(reliability_table([0.9, 0.9, 0.1], [1, 1, 0], n_bins=2).attrs["ece"], 3)
    0.1
    """
    import pandas as pd

    p, c = _check_pairs(probs, correct)
    n_bins = check_int("n_bins", n_bins, low=1, whole_floats=True)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    b = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)  # (N,)
    count = np.bincount(b, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.bincount(b, weights=p, minlength=n_bins) / count
        acc = np.bincount(b, weights=c, minlength=n_bins) / count
    df = pd.DataFrame({"bin_lower": edges[:-1], "bin_upper": edges[1:], "count": count,
                       "confidence": conf, "accuracy": acc, "gap": acc - conf})
    nonempty = count > 0
    df.attrs["ece"] = float((count[nonempty] / p.size * np.abs(acc - conf)[nonempty]).sum())
    df.attrs["n"] = int(p.size)
    return df


def expected_calibration_error(probs, correct, n_bins: int = 10) -> float:
    """ECE = sum_b (n_b / N) abs(observed frequency_b - mean probability_b), in [0, 1]."""
    return reliability_table(probs, correct, n_bins).attrs["ece"]


def _predictions(model, texts, tokenizer, kind: str, eos: bool):
    from ..scoring import encode_for_model

    probs, hits = [], []
    for text in texts:
        enc = encode_for_model(model, text, tokenizer=tokenizer, bos=True, eos=eos)
        rows = np.exp(np.asarray(model.logprobs(enc.ids[:-1]), dtype=np.float64))  # (T, V)
        target = enc.ids[1:]
        if kind == "top1":
            guess = rows.argmax(axis=1)
            probs.append(rows[np.arange(len(target)), guess])
            hits.append(guess == target)
        else:
            probs.append(rows.ravel())
            hits.append((np.arange(rows.shape[1])[None, :] == target[:, None]).ravel())
    return np.concatenate(probs), np.concatenate(hits)


def calibration(model, texts, tokenizer=None, n_bins: int = 10, kind: str = "top1", eos: bool = True):
    """Reliability-diagram data and ECE of a model's next-token predictions on ``texts``.

    Parameters
    ----------
    model : LanguageModel
    texts : str or list of str
    tokenizer : Tokenizer, optional
        Default: ``model.tokenizer``.
    n_bins : int
    kind : {"top1", "all"}
        ``top1``: the probability of the model's top guess vs whether the guess is the next
        token. ``all``: every (position, token) probability vs whether that token came next.
    eos : bool
        Also predict ``</s>``.

    Returns
    -------
    pandas.DataFrame
        See :func:`reliability_table`; ``attrs`` also hold ``kind`` and ``n_positions``.

    Notes
    -----
    top1: conf_t = max_v P(v | x_<t), hit_t = [argmax_v P(v | x_<t) = x_t].
    """
    if kind not in ("top1", "all"):
        raise InputError(f"kind must be 'top1' or 'all', got {kind!r}", value=kind)
    texts = [texts] if isinstance(texts, str) else list(texts)
    if not texts:
        raise InputError("calibration() needs at least one text")
    probs, hits = _predictions(model, texts, tokenizer, kind, eos)
    df = reliability_table(probs, hits, n_bins)
    df.attrs["kind"] = kind
    df.attrs["n_positions"] = int(len(probs) if kind == "top1" else len(probs) // len(model.vocab))
    return df
