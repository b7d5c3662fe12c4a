"""Plots of fitting: learning curves against baselines and the true entropy, and the
sparsity of n-gram tables as the order grows."""
from __future__ import annotations

import math

import numpy as np

from ..errors import InputError
from ._style import IMPOSSIBLE, check_frame, color, finish, mark_impossible, new_axes

__all__ = ["learning_curves", "sparsity"]


def _as_nats(value, name: str) -> float:
    """A baseline given as nats/token, or an object with ``.logprob``/``.n_tokens`` (Evaluation)."""
    if hasattr(value, "logprob") and hasattr(value, "n_tokens"):
        return -float(value.logprob) / float(value.n_tokens)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"baseline {name!r} must be a number (nats/token) or an Evaluation, "
                         f"got {type(value).__name__}") from None
    if math.isnan(v):
        raise InputError(f"baseline {name!r} is NaN", value=value)
    return v


def learning_curves(history, baselines=None, true_entropy=None, ax=None, x: str = "tokens_seen",
                    unit: str = "nats", ylabel: str | None = None, **style):
    """Train and validation loss against tokens seen, with reference lines.

    Parameters
    ----------
    history : pandas.DataFrame
        Output of :func:`seqprob.train`: ``train_loss`` and ``val_loss`` (nats/token; NaN where
        no validation was run) against ``tokens_seen`` (or ``step``).
    baselines : dict of name -> float or Evaluation, optional
        Cross-entropies (nats/token) of other models on the validation text (e.g. n-grams),
        drawn as dashed horizontal lines; an infinite one is marked "impossible".
    true_entropy : float, optional
        The entropy rate of the source (nats/token): no model can go below it on average.
    x : {"tokens_seen", "step"}
    unit : {"nats", "bits"}
    ylabel : str, optional
        The y-axis label, to state what a token is (``{unit}`` is filled in); every curve and
        line must be on that one scale. Default ``"cross-entropy ({unit}/token)"``.

    Returns
    -------
    matplotlib.axes.Axes
        Lines: train, validation (if any), one per baseline, one for the true entropy.

    Notes
    -----
    loss = -(1/N) sum_t log P_θ(x_t | x_<t) (nats/token) = cross-entropy H(P*, P_θ) >= H(P*).
    """
    check_frame(history, (x, "train_loss"), "learning_curves()")
    if unit not in ("nats", "bits"):
        raise InputError(f"unit must be 'nats' or 'bits', got {unit!r}", value=unit)
    s = 1.0 if unit == "nats" else 1 / math.log(2)
    ax = new_axes(ax)
    h = history.sort_values(x)
    ax.plot(h[x], h["train_loss"] * s, color=color(0), label="train loss")
    if "val_loss" in h and h["val_loss"].notna().any():
        v = h[h["val_loss"].notna()]
        ax.plot(v[x], v["val_loss"] * s, color=color(1), marker="o", markersize=3, label="validation loss")
    xmax = float(h[x].max())
    bad = []
    for i, (name, value) in enumerate((baselines or {}).items()):
        nats = _as_nats(value, name)
        if not math.isfinite(nats):
            bad.append((name, nats))
            continue
        ax.axhline(nats * s, color=color(i + 2), linestyle="--", linewidth=1.2,
                   label=f"{name}: {nats * s:.3f} {unit}/token")
    if true_entropy is not None:
        te = _as_nats(true_entropy, "true entropy")
        ax.axhline(te * s, color="black", linestyle=":", linewidth=1.5,
                   label=f"true entropy H(P*): {te * s:.3f} {unit}/token")
    if bad:
        low, top = ax.get_ylim()
        mark_impossible(ax, [xmax] * len(bad), top, [-math.inf] * len(bad), label=False)
        ax.lines[-1].set_label("; ".join(name for name, _ in bad)
                               + f": {IMPOSSIBLE}, cross-entropy inf (a validation token has P = 0)")
        ax.set_ylim(low, top + 0.12 * (top - low))
    xlabel = "tokens seen (count)" if x == "tokens_seen" else f"{x} (count)"
    label = (ylabel or "cross-entropy ({unit}/token)").replace("{unit}", unit)
    return finish(ax, "Learning curves", xlabel, label, style)


def sparsity(df, ax=None, **style):
    """Perplexity against n-gram order on train and held-out text, with the share of held-out
    n-grams never seen in training (the emptiness of the lookup table).

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`seqprob.analysis.sparsity.sparsity_curve`: columns ``order``,
        ``train_perplexity``, ``heldout_perplexity``, ``unseen_share`` (0..1).

    Returns
    -------
    matplotlib.axes.Axes
        The perplexity Axes (log scale; two lines), with a twin Axes holding one bar per order
        for the unseen share (``ax.unseen_ax``). An infinite perplexity (some held-out token
        has P = 0) is a gap with an "impossible" marker.

    Notes
    -----
    perplexity = exp(-(1/N) sum_t log P(x_t | x_{t-n+1}..x_{t-1})); unseen share = share of
    held-out n-grams (x_{t-n+1}..x_t, with <s> padding) whose count in training is 0.
    """
    check_frame(df, ("order", "train_perplexity", "heldout_perplexity", "unseen_share"), "sparsity()")
    d = df.sort_values("order")
    ax = new_axes(ax)
    twin = ax.twinx()
    twin.bar(d["order"], 100 * d["unseen_share"], width=0.5, color="0.85", edgecolor="0.6",
             label="held-out n-grams unseen in training")
    twin.set_ylim(0, 105)
    twin.set_ylabel("held-out n-grams never seen in training (%)")
    ax.set_zorder(twin.get_zorder() + 1)
    ax.patch.set_visible(False)
    finite = []
    bad_x, bad_v = [], []
    for i, (col, label) in enumerate((("train_perplexity", "train"), ("heldout_perplexity", "held-out"))):
        y = d[col].to_numpy(dtype=float)
        ok = np.isfinite(y)
        ax.plot(d["order"].to_numpy()[ok], y[ok], marker="o", color=color(i), label=f"perplexity, {label}")
        finite += list(y[ok])
        bad_x += list(d["order"].to_numpy()[~ok])
        bad_v += [-math.inf if not np.isnan(v) else v for v in y[~ok]]
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter

    for axis in (ax.yaxis,):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if str(f"{v:g}")[0] in "25" else ""))
    if bad_x:
        mark_impossible(ax, bad_x, max(finite or [1.0]) * 1.5, bad_v)
    ax.set_xticks(d["order"].to_numpy())
    handles, labels = ax.get_legend_handles_labels()
    h2, l2 = twin.get_legend_handles_labels()
    ax.legend(handles + h2, labels + l2, fontsize=8, loc="upper center")
    ax.unseen_ax = twin
    return finish(ax, "Sparsity: longer contexts, emptier tables", "n-gram order n (tokens of context + 1)",
                  "perplexity (tokens, log scale)", style, legend=False)
