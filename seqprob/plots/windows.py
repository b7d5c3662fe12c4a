"""Plots for long texts scored with sliding windows: loss by position, perplexity by stride."""
from __future__ import annotations

import numpy as np

from ._style import check_frame, color, finish, new_axes

__all__ = ["nll_by_position", "perplexity_by_stride"]


def nll_by_position(df, ax=None, unit: str = "nats", **style):
    """Mean negative log-likelihood of the tokens at each position, one line per model.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`seqprob.score` (columns model, position, logprob), e.g. of long texts
        scored with ``stride=``.
    unit : {"nats", "bits"}

    Returns
    -------
    matplotlib.axes.Axes

    Notes
    -----
    NLL(t) = -mean over sequences of log P(x_t | x_<t): with sliding windows it shows where the
    context is cut (a saw-tooth with period ``stride``); impossible tokens (-inf) make the mean
    infinite and are left out of that position's mean, with a count in the legend.

    Examples
    --------
    >>> import seqprob as sp
    >>> truth = sp.toy_english()
    >>> ax = nll_by_position(sp.score(truth, truth.sample(5, seed=0), distribution=False))
    >>> ax.get_xlabel()
    'position t (tokens)'
    """
    check_frame(df, ("model", "position", "logprob"), "nll_by_position()")
    scale = 1.0 if unit == "nats" else 1 / np.log(2)
    own = ax is None
    ax = new_axes(ax)
    for i, (name, sub) in enumerate(df.groupby("model", sort=False)):
        finite = sub[np.isfinite(sub["logprob"])]
        mean = (-finite["logprob"] * scale).groupby(finite["position"]).mean()
        bad = len(sub) - len(finite)
        label = str(name) + (f" ({bad} impossible tokens left out)" if bad else "")
        ax.plot(mean.index, mean.values, color=color(i), linewidth=1.2, label=label)
    return finish(ax, "Mean NLL by position", "position t (tokens)", f"mean NLL ({unit}/token)", style, tidy=own)


def perplexity_by_stride(sweep, ax=None, **style):
    """Perplexity against the sliding-window stride (:func:`seqprob.scoring.stride_sweep`).

    Parameters
    ----------
    sweep : pandas.DataFrame
        Columns stride, perplexity (and optionally model: one line per model).

    Returns
    -------
    matplotlib.axes.Axes

    Notes
    -----
    Each token sees at least W - stride + 1 tokens of context; stride = W is disjoint windows.

    Examples
    --------
    >>> import pandas as pd
    >>> ax = perplexity_by_stride(pd.DataFrame({"stride": [4, 8], "perplexity": [9.0, 11.0]}))
    >>> ax.get_ylabel()
    'perplexity (per token)'
    """
    check_frame(sweep, ("stride", "perplexity"), "perplexity_by_stride()")
    own = ax is None
    ax = new_axes(ax)
    groups = sweep.groupby("model", sort=False) if "model" in sweep.columns else [("model", sweep)]
    for i, (name, sub) in enumerate(groups):
        sub = sub.sort_values("stride")
        ax.plot(sub["stride"], sub["perplexity"], marker="o", color=color(i), label=str(name))
    return finish(ax, "Perplexity against stride", "stride (tokens per window)", "perplexity (per token)", style, tidy=own)
