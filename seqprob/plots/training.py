"""Plots of fitting: learning curves against baselines and the true entropy, and the
sparsity of n-gram tables as the order grows."""
from __future__ import annotations

import math
import textwrap

import numpy as np

from ..errors import InputError
from ._style import IMPOSSIBLE, check_frame, color, finish, line_style, mark_impossible, new_axes

__all__ = ["learning_curves", "sparsity"]


def _as_nats(value, name: str) -> float:
    """A number (nats/token), rejecting what is not one or is NaN."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"baseline {name!r} must be a number (nats/token), an Evaluation, a "
                         f"CrossEntropy or an entropy, got {type(value).__name__}") from None
    if math.isnan(v):
        raise InputError(f"baseline {name!r} is NaN", value=value)
    return v


def _positive(count, name: str, what: str) -> float:
    """A count that a per-token value divides by: more than 0."""
    if not float(count) > 0:
        raise InputError(f"baseline {name!r} has {what} = {count}: nothing was scored", value=count)
    return float(count)


#: Key of the true entropy among the reference lines (a name no baseline can have).
_TRUTH = object()


def _reference(value, name: str, tokens: str) -> tuple:
    """(value on the axis's scale, nats per scored token to show beside it or None).

    A number is taken to be on the axis's scale already. An ``Evaluation`` (logprob, n_tokens,
    n_sentences), a ``CrossEntropy`` (per_token, per_sentence, n_tokens, n_sentences) or an
    entropy (per_token, per_sentence, expected_tokens) is per scored token (words and
    ``</s>``); on a stream axis it becomes nats per sentence / (scored tokens per sentence + 1).
    """
    if hasattr(value, "logprob") and hasattr(value, "n_tokens"):
        nll, n = -float(value.logprob), _positive(value.n_tokens, name, "n_tokens")
        per_token, sentences = nll / n, float(getattr(value, "n_sentences", 0) or 0)
        per_sentence, length = (nll / sentences, n / sentences) if sentences else (None, None)
    elif hasattr(value, "per_token") and hasattr(value, "per_sentence"):
        per_token, per_sentence = float(value.per_token), float(value.per_sentence)
        length = (_positive(value.expected_tokens, name, "expected_tokens") if hasattr(value, "expected_tokens")
                  else float(value.n_tokens) / _positive(value.n_sentences, name, "n_sentences"))
    else:
        return _as_nats(value, name), None
    _as_nats(per_token, name)
    if tokens == "scored":
        return per_token, None
    if per_sentence is None:
        raise InputError(f"baseline {name!r}: an Evaluation without n_sentences cannot be put "
                         "per stream token; pass a number (nats per stream token)", value=name)
    return per_sentence / (length + 1.0), per_token


def _reference_label(name: str, value: float, scored, unit: str, tokens: str) -> str:
    if tokens == "scored":
        return f"{name}: {value:.3f} {unit}/token"
    text = f"{name}: {value:.3f} {unit}/stream token"
    return text + (f"\n= {scored:.3f} {unit}/scored token" if scored is not None else "")


def _reference_lines(ax, refs: dict, x0: float, x1: float, scale: float, unit: str, tokens: str) -> list:
    """Draw one line per finite reference (its own colour, dashes and staggered markers, so
    equal values stay distinguishable); return the names of the infinite ones."""
    grid = np.linspace(x0, x1, 41)
    bad = []
    for i, (key, (value, scored)) in enumerate(refs.items()):
        name = "true entropy H(P*)" if key is _TRUTH else str(key)
        if not math.isfinite(value):
            bad.append(name)
            continue
        style = ({"color": "black", "linestyle": ":", "marker": None, "linewidth": 1.6} if key is _TRUTH
                 else {**line_style(i, first_color=2), "linewidth": 1.3})
        shown = None if scored is None else scored * scale
        ax.plot(grid, np.full(grid.shape, value * scale), markevery=(2 * i % 8, 8), markersize=5, **style,
                label=_reference_label(name, value * scale, shown, unit, tokens))
    return bad


def learning_curves(history, baselines=None, true_entropy=None, ax=None, x: str = "tokens_seen",
                    unit: str = "nats", ylabel: str | None = None, tokens: str = "scored", **style):
    """Train and validation loss against tokens seen, with reference lines.

    Parameters
    ----------
    history : pandas.DataFrame
        Output of :func:`seqprob.train`: ``train_loss`` and ``val_loss`` (nats/token; NaN where
        no validation was run) against ``tokens_seen`` (or ``step``).
    baselines : dict of name -> float, Evaluation or CrossEntropy, optional
        Cross-entropies of other models on the validation text (e.g. n-grams), drawn as
        horizontal lines, each with its own dash pattern and markers; an infinite one is
        marked "impossible". A number is on the axis's scale; an ``Evaluation`` or a
        ``CrossEntropy`` is converted (see ``tokens``).
    true_entropy : float or entropy, optional
        The entropy rate of the source: no model can go below it on average. A number, or the
        result of ``truth.entropy()`` (converted like the baselines).
    x : {"tokens_seen", "step"}
    unit : {"nats", "bits"}
    ylabel : str, optional
        The y-axis label (``{unit}`` is filled in). Default: the unit per token of ``tokens``.
    tokens : {"scored", "stream"}
        What a token of the history is. "scored": a scored token (words and ``</s>``), as in
        :func:`seqprob.evaluate`. "stream": a token of the training stream
        ``<s> w .. </s> <s> ..``, which adds one (free) ``<s>`` per sentence; references given
        as objects are then drawn at nats per sentence / (tokens per sentence + 1), and their
        legend entry also shows the per-scored-token value that tables report.

    Returns
    -------
    matplotlib.axes.Axes
        Lines: train, validation (if any), one per baseline, one for the true entropy; the
        legend is to the right of the Axes, clear of the data.

    Notes
    -----
    loss = -(1/N) sum_t log P_θ(x_t | x_<t) (nats/token) = cross-entropy H(P*, P_θ) >= H(P*).
    """
    check_frame(history, (x, "train_loss"), "learning_curves()")
    if unit not in ("nats", "bits"):
        raise InputError(f"unit must be 'nats' or 'bits', got {unit!r}", value=unit)
    if tokens not in ("scored", "stream"):
        raise InputError(f"tokens must be 'scored' or 'stream', got {tokens!r}", value=tokens)
    s = 1.0 if unit == "nats" else 1 / math.log(2)
    refs = {name: _reference(value, name, tokens) for name, value in (baselines or {}).items()}
    if true_entropy is not None:
        refs[_TRUTH] = _reference(true_entropy, "true entropy", tokens)
    own = ax is None
    ax = new_axes(ax, figsize=_figsize(len(refs) + 2, tokens))
    h = history.sort_values(x)
    ax.plot(h[x], h["train_loss"] * s, color=color(0), label="train loss")
    if "val_loss" in h and h["val_loss"].notna().any():
        v = h[h["val_loss"].notna()]
        ax.plot(v[x], v["val_loss"] * s, color=color(1), marker="o", markersize=3, label="validation loss")
    xmax = float(h[x].max())
    bad = _reference_lines(ax, refs, float(h[x].min()), xmax, s, unit, tokens)
    if bad:
        low, top = ax.get_ylim()
        mark_impossible(ax, [xmax] * len(bad), top, [-math.inf] * len(bad), label=False, ha="right")
        ax.lines[-1].set_label("\n".join(textwrap.wrap(", ".join(bad) + f": {IMPOSSIBLE}, cross-entropy "
                                                         "inf (a validation token has P = 0)", 34)))
        ax.set_ylim(low, top + 0.12 * (top - low))
    xlabel = "tokens seen (count)" if x == "tokens_seen" else f"{x} (count)"
    default = "cross-entropy ({unit}/token)" if tokens == "scored" else "cross-entropy ({unit} per stream token)"
    label = (ylabel or default).replace("{unit}", unit)
    if len(refs) + 2 > 12:
        style.setdefault("legend_ncols", 2)
        style.setdefault("legend_fontsize", 7)
    return finish(ax, "Learning curves", xlabel, label, style, outside=True, tidy=own)


def _figsize(entries: int, tokens: str) -> tuple:
    """Room for the legend beside the Axes: one column up to 12 entries, then two."""
    cols = 1 if entries <= 12 else 2
    rows = math.ceil(entries / cols) * (2 if tokens == "stream" else 1)
    width = 6.4 + cols * (2.4 if tokens == "stream" else 2.0)
    return (width, max(4.5, 0.17 * rows + 1.2))


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
    own = ax is None
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
                  "perplexity (tokens, log scale)", style, legend=False, tidy=own)
