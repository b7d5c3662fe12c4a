"""Perplexity with error bars: bootstrap intervals over sentences, and paired model differences.

The corpus figures are ratios of sums over sentences i (NLL_i nats, N_i tokens, b_i bytes):
bits per token = sum NLL_i / (ln 2 · sum N_i). The bootstrap redraws the sentences with
replacement (the same draws for every model, so differences are paired) and reads the interval
off the percentiles of the redrawn ratios.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from .errors import InputError
from .functional import LN2

__all__ = ["compare", "Comparison", "bootstrap_ratio", "MIN_BOOT"]

#: Fewest bootstrap replicates accepted (fewer make the 2.5% tail a handful of draws).
MIN_BOOT = 100


@dataclass(frozen=True)
class Comparison:
    """Result of :func:`compare`.

    Attributes
    ----------
    models : pandas.DataFrame
        Per model: n_sentences, n_tokens, n_bytes, perplexity (+ _low, _high), bits_per_token
        (+ _low, _high), bits_per_byte (+ _low, _high).
    pairs : pandas.DataFrame
        Per pair of models (a, b): metric, difference = a - b, low, high, p_value.
    confidence, n_boot : the interval's level and the replicates drawn.
    """

    models: object
    pairs: object
    confidence: float
    n_boot: int


def _check(n_boot, confidence) -> tuple[int, float]:
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < MIN_BOOT:
        raise InputError(f"n_boot must be an integer >= {MIN_BOOT}, got {n_boot!r}", value=n_boot, limit=MIN_BOOT)
    if not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise InputError(f"confidence must be in (0, 1), got {confidence!r}", value=confidence, limit=(0, 1))
    return int(n_boot), float(confidence)


def _weights(n_items: int, n_boot: int, seed) -> np.ndarray:
    """(n_boot, n_items) how often each sentence is drawn in each replicate."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=n_boot).astype(float)


def bootstrap_ratio(numer, denom, n_boot: int = 1000, seed=None, confidence: float = 0.95,
                    weights: np.ndarray | None = None) -> tuple[float, float, float]:
    """(sum numer / sum denom, low, high): percentile bootstrap interval over the items.

    Examples
    --------
    >>> est, low, high = bootstrap_ratio([3.0, 5.0, 4.0, 6.0], [2, 3, 2, 3], n_boot=200, seed=0)
    >>> est, low <= est <= high
    (1.8, True)
    """
    numer, denom = np.asarray(numer, dtype=float), np.asarray(denom, dtype=float)
    n_boot, confidence = _check(n_boot, confidence)
    w = _weights(len(numer), n_boot, seed) if weights is None else weights
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = (w @ numer) / (w @ denom)  # (n_boot,)
    tail = (1 - confidence) / 2
    low, high = np.quantile(reps, [tail, 1 - tail])
    return float(numer.sum() / denom.sum()), float(low), float(high)


def _per_sentence(model, texts, tokenizer, bos, eos, stride, bos_per_window) -> tuple:
    """(nll nats, tokens, bytes) per sentence, each (n,)."""
    from .scoring import score, summarize

    seq = summarize(score(model, texts, tokenizer=tokenizer, bos=bos, eos=eos, distribution=False,
                          stride=stride, bos_per_window=bos_per_window))
    return (-seq["logprob"].to_numpy(dtype=float), seq["n_tokens"].to_numpy(dtype=float),
            seq["n_bytes"].to_numpy(dtype=float))


def compare(models, texts, tokenizer=None, n_boot: int = 1000, seed=None, confidence: float = 0.95,
            bos: bool = True, eos: bool = True, stride: int | None = None,
            bos_per_window: bool = False) -> Comparison:
    """Perplexity, bits per token and per byte of each model with bootstrap intervals, and the
    paired difference of every pair of models with an interval and a p-value.

    Parameters
    ----------
    models : LanguageModel or dict of name -> LanguageModel
    texts : list of str
        The sentences (the unit the bootstrap redraws); at least 2.
    tokenizer, bos, eos, stride, bos_per_window
        As in :func:`seqprob.score`.
    n_boot : int
        Bootstrap replicates, >= 100.
    seed : int, optional
        Seed of the redraws (the same redraws for every model).
    confidence : float
        Level of the intervals (0.95).

    Returns
    -------
    Comparison
        ``.models`` and ``.pairs`` DataFrames. Pairs compare bits per token when both models
        tokenize every sentence into the same number of tokens, else bits per byte.

    Notes
    -----
    Estimate = sum_i NLL_i / (ln 2 sum_i N_i); replicate r uses counts c_ri of sentence i in a
    draw of n sentences with replacement. Interval = the (1 ± confidence)/2 quantiles of the
    replicates (perplexity = 2^bits per token, so its interval maps through). Paired difference
    d = metric_a - metric_b on the same redraws; two-sided p-value
    p = min(1, 2 min((1 + #{d_r <= 0}) / (R + 1), (1 + #{d_r >= 0}) / (R + 1))).

    Examples
    --------
    >>> import seqprob as sp
    >>> truth = sp.toy_english()
    >>> texts = truth.sample(50, seed=0)
    >>> cmp = compare({"truth": truth}, texts, n_boot=200, seed=0)
    >>> row = cmp.models.iloc[0]
    >>> bool(row.perplexity_low <= row.perplexity <= row.perplexity_high)
    True
    """
    import pandas as pd

    from .scoring import _as_models

    models = _as_models(models)
    n_boot, confidence = _check(n_boot, confidence)
    texts = [texts] if isinstance(texts, str) else list(texts)
    if len(texts) < 2:
        raise InputError(f"the bootstrap redraws sentences: give at least 2 texts, got {len(texts)}",
                         value=len(texts), limit=2)
    stats = {name: _per_sentence(m, texts, tokenizer, bos, eos, stride, bos_per_window)
             for name, m in models.items()}
    weights = _weights(len(texts), n_boot, seed)
    rows = [_model_row(name, *s, weights, n_boot, confidence) for name, s in stats.items()]
    pairs = [_pair_row(a, b, stats[a], stats[b], weights, confidence)
             for a, b in itertools.combinations(stats, 2)]
    pair_cols = ["model_a", "model_b", "metric", "difference", "low", "high", "p_value"]
    return Comparison(pd.DataFrame(rows), pd.DataFrame(pairs, columns=pair_cols), confidence, n_boot)


def _model_row(name, nll, tokens, nbytes, weights, n_boot, confidence) -> dict:
    bpt = bootstrap_ratio(nll / LN2, tokens, n_boot, confidence=confidence, weights=weights)
    bpb = bootstrap_ratio(nll / LN2, nbytes, n_boot, confidence=confidence, weights=weights)
    row = {"model": name, "n_sentences": len(nll), "n_tokens": int(tokens.sum()), "n_bytes": int(nbytes.sum())}
    for key, value in zip(("perplexity", "perplexity_low", "perplexity_high"), bpt):
        row[key] = 2.0 ** value if math.isfinite(value) else math.inf
    row.update(zip(("bits_per_token", "bits_per_token_low", "bits_per_token_high"), bpt))
    row.update(zip(("bits_per_byte", "bits_per_byte_low", "bits_per_byte_high"), bpb))
    return row


def _pair_row(a, b, sa, sb, weights, confidence) -> dict:
    same_tokens = np.array_equal(sa[1], sb[1])
    metric = "bits_per_token" if same_tokens else "bits_per_byte"
    den_a, den_b = (sa[1], sb[1]) if same_tokens else (sa[2], sb[2])
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = (weights @ (sa[0] / LN2)) / (weights @ den_a) - (weights @ (sb[0] / LN2)) / (weights @ den_b)
        point = sa[0].sum() / LN2 / den_a.sum() - sb[0].sum() / LN2 / den_b.sum()
    tail = (1 - confidence) / 2
    low, high = np.quantile(reps, [tail, 1 - tail])
    R = len(reps)
    p = min(1.0, 2 * min((1 + (reps <= 0).sum()) / (R + 1), (1 + (reps >= 0).sum()) / (R + 1)))
    return {"model_a": a, "model_b": b, "metric": metric, "difference": float(point), "low": float(low),
            "high": float(high), "p_value": float(p)}
