"""Perplexity with error bars: bootstrap intervals over sentences, and paired model differences.

The corpus figures are ratios of sums over sentences i (NLL_i nats, N_i tokens, b_i bytes):
bits per token = sum NLL_i / (ln 2 · sum N_i). The bootstrap redraws the sentences with
replacement (the same draws for every model, so differences are paired) and reads the interval
off the percentiles of the redrawn ratios.
"""
from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..checks import check_int, check_real, check_seed
from ..errors import InputError
from ..functional import LN2
from ..tokenizers.base import iter_texts
from .core import check_models
from .tokens import score, summarize

__all__ = ["compare", "Comparison", "bootstrap_ratio", "MIN_BOOT", "MAX_BOOT"]

#: Fewest bootstrap replicates accepted (fewer make the 2.5% tail a handful of draws).
MIN_BOOT = 100
#: Most bootstrap replicates accepted (beyond, the percentiles no longer move).
MAX_BOOT = 10 ** 6
#: Largest (n_boot, n_sentences) float64 matrix of redraw counts built whole, in bytes
#: (256 MiB); a larger one is drawn again in row chunks for each product (same counts).
WHOLE_BOOT_BYTES = 1 << 28


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
    n_boot = check_int("n_boot", n_boot, low=MIN_BOOT, high=MAX_BOOT)
    return n_boot, check_real("confidence", confidence, low=0, high=1, low_open=True, high_open=True)


class _Redraws:
    """The (n_boot, n_items) counts of how often each item is drawn in each replicate, as the
    left operand of ``@``: built once when it takes at most :data:`WHOLE_BOOT_BYTES`, else
    drawn again in row chunks for every product (the same generator state each time, so the
    same counts), so memory stays bounded however many sentences there are. Chunked draws
    equal one whole draw: ``multinomial`` takes its rows from the stream in order."""

    ndim = 2

    def __init__(self, n_items: int, n_boot: int, seed):
        self.shape = (n_boot, n_items)
        self.rows = max(1, WHOLE_BOOT_BYTES // (8 * n_items))
        rng = check_seed(seed)
        # a Generator passed in gives a new independent child at each call (its seed sequence
        # counts the children spawned); an integer seed the same generator every time
        given = isinstance(seed, (np.random.Generator, np.random.BitGenerator))
        self._start = rng.spawn(1)[0] if given else rng
        self._whole = self._draw(copy.deepcopy(self._start), n_boot) if n_boot <= self.rows else None

    def _draw(self, rng, rows: int) -> np.ndarray:
        n = self.shape[1]
        return rng.multinomial(n, np.full(n, 1.0 / n), size=rows).astype(float)  # (rows, n)

    def __matmul__(self, x) -> np.ndarray:
        """(n_boot,) or (n_boot, k) for x (n_items,) or (n_items, k): several vectors at once
        cost one draw."""
        if self._whole is not None:
            return self._whole @ x
        rng, out = copy.deepcopy(self._start), np.empty(self.shape[:1] + np.shape(x)[1:])
        for lo in range(0, self.shape[0], self.rows):
            hi = min(lo + self.rows, self.shape[0])
            out[lo:hi] = self._draw(rng, hi - lo) @ x
        return out


def _numbers(name: str, values) -> np.ndarray:
    """``values`` as a non-empty 1-D float array of finite numbers, or InputError naming ``name``."""
    try:
        arr = None if values is None or isinstance(values, (str, bytes, dict)) else np.asarray(values)
    except (ValueError, TypeError):  # ragged nested sequences
        arr = None
    if arr is None or arr.dtype.kind not in "biuf" or arr.ndim != 1 or not len(arr):
        raise InputError(f"{name} must be a non-empty 1-D sequence of numbers, got {values!r:.60}",
                         value=type(values).__name__)
    arr = arr.astype(float)
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{name}[{i}] is {arr[i]}: every value must be a finite number", value=float(arr[i]))
    return arr


def _ratio_inputs(numer, denom, weights) -> tuple:
    """Checked (numer, denom): same length, finite, denominators >= 0 with a positive sum
    (a replicate whose denominators are all 0 is refused when drawn); ``weights`` None or of
    shape (n_boot, n)."""
    numer, denom = _numbers("numer", numer), _numbers("denom", denom)
    if len(numer) != len(denom):
        raise InputError(f"numer and denom must have the same length, got {len(numer)} and {len(denom)}",
                         value=len(numer), limit=len(denom))
    if (denom < 0).any() or not denom.sum() > 0:
        i = int(np.flatnonzero(denom < 0)[0]) if (denom < 0).any() else 0
        raise InputError(f"denominators must be >= 0 with a positive sum, got denom[{i}] = {denom[i]} "
                         f"and a sum of {denom.sum()}", value=float(denom[i]), limit=0)
    if weights is not None and (np.ndim(weights) != 2 or np.shape(weights)[1] != len(numer)):
        raise InputError(f"weights must have shape (n_boot, {len(numer)}), got {np.shape(weights)}",
                         value=np.shape(weights), limit=len(numer))
    return numer, denom


def bootstrap_ratio(numer, denom, n_boot: int = 1000, seed=None, confidence: float = 0.95,
                    weights: np.ndarray | None = None) -> tuple[float, float, float]:
    """(sum numer / sum denom, low, high): percentile bootstrap interval over the items.

    Parameters
    ----------
    numer, denom : sequence of float
        One finite number (or bool) per item, the same length (>= 1); denominators >= 0 with
        a positive sum (a replicate that draws only zero denominators is an InputError).
    n_boot : int
        Replicates, in [``MIN_BOOT``, ``MAX_BOOT``] (memory stays bounded: past
        ``WHOLE_BOOT_BYTES`` the redraw counts are drawn in row chunks).
    seed : int, optional
        None, an integer >= 0, or a ``numpy.random.Generator`` (an independent child each call).
    confidence : float
        In (0, 1).
    weights : numpy.ndarray, optional
        (n_boot, items) redraw counts to use instead of drawing them.

    Raises
    ------
    InputError
        For any input outside the above, naming the value and the limit.

    Examples
    --------
    >>> est, low, high = bootstrap_ratio([3.0, 5.0, 4.0, 6.0], [2, 3, 2, 3], n_boot=200, seed=0)
    >>> est, low <= est <= high
    (1.8, True)
    """
    numer, denom = _ratio_inputs(numer, denom, weights)
    n_boot, confidence = _check(n_boot, confidence)
    w = _Redraws(len(numer), n_boot, seed) if weights is None else weights
    sums = w @ np.column_stack([numer, denom])  # (n_boot, 2): one pass over the redraws
    return _ratio_interval(numer, denom, sums, confidence)


def _ratio_interval(numer, denom, sums, confidence: float) -> tuple[float, float, float]:
    """(sum numer / sum denom, low, high) from the replicates' sums (n_boot, 2) of numer and denom."""
    if not (sums[:, 1] > 0).all():
        raise InputError("a bootstrap replicate drew only items whose denominator is 0: its ratio "
                         "is undefined (too few items with a denominator > 0)",
                         value=int((sums[:, 1] <= 0).sum()))
    reps = sums[:, 0] / sums[:, 1]
    tail = (1 - confidence) / 2
    low, high = np.quantile(reps, [tail, 1 - tail])
    return float(numer.sum() / denom.sum()), float(low), float(high)


def _per_sentence(name, model, texts, tokenizer, bos, eos, stride, bos_per_window) -> tuple:
    """(nll nats, tokens, bytes) per sentence, each (n,); InputError when ``model`` gives a
    token probability 0 (its perplexity would be infinite, its interval undefined)."""

    df = score(model, texts, tokenizer=tokenizer, bos=bos, eos=eos, distribution=False,
               stride=stride, bos_per_window=bos_per_window)
    zero = np.isneginf(df["logprob"].to_numpy(dtype=float))
    if zero.any():
        row = df.iloc[int(np.flatnonzero(zero)[0])]
        raise InputError(f"model {name!r} assigns probability 0 to token {row.token!r} (text {row.seq}, "
                         f"position {row.position}) of the texts: its perplexity is infinite and has no "
                         "interval; use a smoothed model (e.g. sp.ngram.KneserNey) or drop the text",
                         model=name, seq=int(row.seq), position=int(row.position), token=row.token)
    seq = summarize(df)
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
        The sentences (the unit the bootstrap redraws); at least 2. A dict, bytes or None is
        refused.
    tokenizer, bos, eos, stride, bos_per_window
        As in :func:`seqprob.score`.
    n_boot : int
        Bootstrap replicates, in [``MIN_BOOT`` = 100, ``MAX_BOOT`` = 10**6]. Memory stays
        bounded: an (n_boot, texts) matrix of redraw counts above ``WHOLE_BOOT_BYTES``
        (256 MiB, twice that while drawn) is drawn again in row chunks for each product.
    seed : int, optional
        Seed of the redraws (the same redraws for every model): None or an integer >= 0, or a
        ``numpy.random.Generator``, which gives an independent child each call.
    confidence : float
        Level of the intervals (0.95).

    Returns
    -------
    Comparison
        ``.models`` and ``.pairs`` DataFrames. Pairs compare bits per token when both models
        tokenize every sentence into the same number of tokens, else bits per byte.

    Raises
    ------
    InputError
        Bad ``n_boot``, ``confidence``, ``seed`` or texts, or a model that gives some token of the
        texts probability 0 (named: an unsmoothed model such as ``MLE``), whose perplexity is
        infinite and has no interval.

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


    models = check_models(models)
    n_boot, confidence = _check(n_boot, confidence)
    texts = [texts] if isinstance(texts, str) else list(iter_texts(texts, "texts"))
    if len(texts) < 2:
        raise InputError(f"the bootstrap redraws sentences: give at least 2 texts, got {len(texts)}",
                         value=len(texts), limit=2)
    weights = _Redraws(len(texts), n_boot, seed)  # checks the seed before any scoring
    stats = {name: _per_sentence(name, m, texts, tokenizer, bos, eos, stride, bos_per_window)
             for name, m in models.items()}
    # every model's (bits, tokens, bytes) columns in one product: one pass over the redraws
    # (drawn again in chunks past WHOLE_BOOT_BYTES) however many models and pairs
    stats = {name: (nll / LN2, tokens, nbytes) for name, (nll, tokens, nbytes) in stats.items()}
    sums = weights @ np.column_stack([col for s in stats.values() for col in s])  # (n_boot, 3k)
    sums = {name: sums[:, 3 * i:3 * i + 3] for i, name in enumerate(stats)}
    rows = [_model_row(name, stats[name], sums[name], confidence) for name in stats]
    pairs = [_pair_row(a, b, stats[a], stats[b], sums[a], sums[b], confidence)
             for a, b in itertools.combinations(stats, 2)]
    pair_cols = ["model_a", "model_b", "metric", "difference", "low", "high", "p_value"]
    return Comparison(pd.DataFrame(rows), pd.DataFrame(pairs, columns=pair_cols), confidence, n_boot)


def _model_row(name, stat, sums, confidence) -> dict:
    """One model's row from its per-sentence (bits, tokens, bytes) and their replicate sums."""
    bits, tokens, nbytes = stat
    bpt = _ratio_interval(bits, tokens, sums[:, [0, 1]], confidence)
    bpb = _ratio_interval(bits, nbytes, sums[:, [0, 2]], confidence)
    row = {"model": name, "n_sentences": len(bits), "n_tokens": int(tokens.sum()), "n_bytes": int(nbytes.sum())}
    for key, value in zip(("perplexity", "perplexity_low", "perplexity_high"), bpt):
        row[key] = 2.0 ** value if value < 1024 else math.inf  # past float64's range
    row.update(zip(("bits_per_token", "bits_per_token_low", "bits_per_token_high"), bpt))
    row.update(zip(("bits_per_byte", "bits_per_byte_low", "bits_per_byte_high"), bpb))
    return row


def _pair_row(a, b, sa, sb, sums_a, sums_b, confidence) -> dict:
    """The paired difference of two models' rates over the same replicates."""
    same_tokens = np.array_equal(sa[1], sb[1])
    metric = "bits_per_token" if same_tokens else "bits_per_byte"
    d = 1 if same_tokens else 2  # the denominator's column
    reps = sums_a[:, 0] / sums_a[:, d] - sums_b[:, 0] / sums_b[:, d]
    point = sa[0].sum() / sa[d].sum() - sb[0].sum() / sb[d].sum()
    tail = (1 - confidence) / 2
    low, high = np.quantile(reps, [tail, 1 - tail])
    R = len(reps)
    p = min(1.0, 2 * min((1 + (reps <= 0).sum()) / (R + 1), (1 + (reps >= 0).sum()) / (R + 1)))
    return {"model_a": a, "model_b": b, "metric": metric, "difference": float(point), "low": float(low),
            "high": float(high), "p_value": float(p)}
