"""Shared plotting helpers: palette, figure creation without leaks, input checks.

matplotlib is imported inside the functions only, so importing this module is cheap.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError

__all__ = ["OKABE_ITO", "IMPOSSIBLE", "color", "new_axes", "new_figure", "check_frame",
           "mark_impossible", "finish"]

#: The Okabe-Ito palette (colour-blind safe), reordered so the first colours contrast most.
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")

#: Label of values whose log-probability is -inf (P = 0) or NaN: drawn as gaps, never dropped.
IMPOSSIBLE = "impossible"

#: Colour of the "impossible" markers (a dark red, distinct from the model colours).
IMPOSSIBLE_COLOR = "#8B0000"


def color(i: int) -> str:
    """The i-th colour of the palette (cycling)."""
    return OKABE_ITO[int(i) % len(OKABE_ITO)]


def new_figure(figsize=(6.4, 4.0), **kwargs):
    """A new Figure. Under an interactive backend (Jupyter, ``plt.ion()``) it is a pyplot figure
    so it displays; otherwise a bare ``matplotlib.figure.Figure`` that pyplot never tracks, so
    scripts, tests and the report leak no figures (save it with ``fig.savefig``)."""
    import matplotlib

    kwargs.setdefault("layout", "constrained")
    if matplotlib.is_interactive():
        import matplotlib.pyplot as plt

        return plt.figure(figsize=figsize, **kwargs)
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, **kwargs)


def new_axes(ax=None, figsize=(6.4, 4.0)):
    """``ax`` if given (checked), else the Axes of a new figure."""
    if ax is not None:
        from matplotlib.axes import Axes

        if not isinstance(ax, Axes):
            raise InputError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
        return ax
    return new_figure(figsize).add_subplot()


def check_frame(df, columns, what: str):
    """Raise :class:`InputError` unless ``df`` is a non-empty DataFrame with ``columns``."""
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise InputError(f"{what} needs a pandas DataFrame, got {type(df).__name__}")
    if len(df) == 0:
        raise InputError(f"{what} got an empty DataFrame: nothing to plot")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"{what} needs columns {list(columns)}; missing {missing} "
                         f"(got {list(df.columns)})", missing=missing)
    return df


def mark_impossible(ax, xs, y, values, text_xs=None, label: bool = True) -> None:
    """Mark positions ``xs`` whose values are -inf / NaN with an ``X`` at height ``y`` and the
    word "impossible" (once per distinct x of ``text_xs``, default ``xs``), and add one legend
    entry. The data there is left as a gap."""
    xs = list(xs)
    if not xs:
        return
    ax.plot(xs, [y] * len(xs), linestyle="none", marker="X", markersize=9, color=IMPOSSIBLE_COLOR,
            label=f"{IMPOSSIBLE}: log P = -inf (P = 0) or NaN" if label else None, zorder=5)
    text_xs = xs if text_xs is None else list(text_xs)
    done = set()
    for x, v in zip(text_xs, values):
        key = round(float(x), 6)
        if key in done:
            continue
        done.add(key)
        ax.annotate(IMPOSSIBLE if np.isneginf(v) else f"{IMPOSSIBLE} (NaN)", (x, y),
                    textcoords="offset points", xytext=(0, 7), ha="center", va="bottom",
                    fontsize=7, color=IMPOSSIBLE_COLOR)


def finish(ax, title: str | None, xlabel: str, ylabel: str, style: dict, legend: bool = True):
    """Apply title/labels (overridable through ``style``) and a legend; return ``ax``."""
    ax.set_title(style.get("title", title) or "")
    ax.set_xlabel(style.get("xlabel", xlabel))
    ax.set_ylabel(style.get("ylabel", ylabel))
    if legend and style.get("legend", True) and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=style.get("legend_fontsize", 8), loc=style.get("legend_loc", "best"))
    return ax


def finite_max(values, default: float = 1.0) -> float:
    """Largest finite value (``default`` when there is none)."""
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    return float(arr.max()) if arr.size else default
