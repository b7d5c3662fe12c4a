"""Shared plotting helpers: palette, figure creation without leaks, input checks.

matplotlib is imported inside the functions only, so importing this module is cheap.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InputError

__all__ = ["OKABE_ITO", "IMPOSSIBLE", "color", "line_style", "new_axes", "new_figure", "check_frame",
           "mark_impossible", "finish", "fit_texts", "prewrap", "wrap_text", "place_labels", "shorten"]

#: The Okabe-Ito palette (colour-blind safe), reordered so the first colours contrast most.
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")

#: Label of values whose log-probability is -inf (P = 0) or NaN: drawn as gaps, never dropped.
IMPOSSIBLE = "impossible"

#: Colour of the "impossible" markers (a dark red, distinct from the model colours).
IMPOSSIBLE_COLOR = "#8B0000"


#: Line styles and markers of reference lines: two lines at the same height stay apart (a
#: dotted line is kept for the true entropy).
_DASHES = ("--", "-.", (0, (8, 2)), (0, (5, 1, 1, 1, 1, 1)), (0, (2, 1)), (0, (10, 2, 2, 2)))
_MARKERS = ("s", "^", "D", "v", "P", "*", "<", ">")


def color(i: int) -> str:
    """The i-th colour of the palette (cycling)."""
    return OKABE_ITO[int(i) % len(OKABE_ITO)]


def line_style(i: int, first_color: int = 0) -> dict:
    """Colour (from palette entry ``first_color`` on), dash pattern and marker of the i-th
    reference line: no two of the first 48 share all three, so lines that coincide can still be
    told apart."""
    i = int(i)
    return {"color": color(i + first_color), "linestyle": _DASHES[i % len(_DASHES)],
            "marker": _MARKERS[(i // len(_DASHES) + i) % len(_MARKERS)]}


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


def mark_impossible(ax, xs, y, values, text_xs=None, label: bool = True, ha: str = "center") -> None:
    """Mark positions ``xs`` whose values are -inf / NaN with an ``X`` at height ``y`` and the
    word "impossible" (once per distinct x of ``text_xs``, default ``xs``; aligned ``ha`` to
    it: "right" keeps a mark at the right edge inside the Axes), and add one legend entry. The
    data there is left as a gap."""
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
                    textcoords="offset points", xytext=(0, 7), ha=ha, va="bottom",
                    fontsize=7, color=IMPOSSIBLE_COLOR)


def finish(ax, title: str | None, xlabel: str, ylabel: str, style: dict, legend: bool = True,
           tidy: bool = False, outside: bool = False):
    """Apply title/labels (overridable through ``style``) and a legend; return ``ax``.

    ``outside`` puts the legend to the right of the axes, clear of the data (``legend_loc`` in
    ``style`` still wins); ``tidy`` fits the figure's texts (:func:`fit_texts`): pass it when the
    plot function made the figure itself."""
    ax.set_title(style.get("title", title) or "")
    ax.set_xlabel(style.get("xlabel", xlabel))
    ax.set_ylabel(style.get("ylabel", ylabel))
    prewrap(ax)
    if legend and style.get("legend", True) and ax.get_legend_handles_labels()[0]:
        kw = {"loc": style["legend_loc"]} if "legend_loc" in style else (
            {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0} if outside
            else {"loc": "best"})
        many = outside and len(ax.get_legend_handles_labels()[0]) > 16
        ax.legend(fontsize=style.get("legend_fontsize", 7 if many else 8),
                  ncols=style.get("legend_ncols", 2 if many else 1), **kw)
    if tidy:
        fit_texts(ax.figure)
    return ax


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, with an ellipsis."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[: max(1, limit - 1)]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"


def wrap_text(text, limit_px: float, max_lines: int, measure: bool = True) -> bool:
    """Wrap a Text artist so that it is at most ``limit_px`` long along its reading direction
    (at most ``max_lines`` lines, the last one cut with an ellipsis); True if it changed.
    Without ``measure`` the length is estimated from the characters (0.55 em each, on the long
    side), which needs no layout."""
    import textwrap

    s = text.get_text()
    if not s.strip() or not text.get_visible():
        return False
    longest = max(len(line) for line in s.split("\n"))
    if measure:
        ext = text.get_window_extent()
        size = ext.height if abs(text.get_rotation() % 180 - 90) < 1 else ext.width
    else:
        size = longest * 0.55 * text.get_fontsize() * _root(text).dpi / 72
    if size <= limit_px or longest < 8:
        return False
    chars = max(8, int(longest * limit_px / size * 0.97))
    lines = [w for part in s.split("\n") for w in (textwrap.wrap(part, chars) or [""])]
    if len(lines) > max_lines:
        lines = lines[: max_lines - 1] + [shorten(" ".join(lines[max_lines - 1:]), chars)]
    new = "\n".join(lines)
    if new == s:
        return False
    text.set_text(new)
    return True


def _axes_texts(ax, share: float = 1.0):
    """(Text, limit in px, max lines) for an Axes' title and labels (``share`` of its size)."""
    box = ax.get_window_extent()
    return [(ax.title, share * box.width, 4), (ax.xaxis.label, share * box.width, 3),
            (ax.yaxis.label, share * box.height, 3)]


def prewrap(ax) -> None:
    """Wrap an Axes' title (a sentence, say) to an estimate of its room before any layout (the
    layout shrinks the Axes by its decorations), so that :func:`fit_texts` rarely has to lay
    the figure out twice; labels are left to the measured pass (the estimate is on the safe,
    narrow side and would wrap labels that fit)."""
    text, limit, lines = _axes_texts(ax, share=0.85)[0]
    wrap_text(text, limit, lines, measure=False)


def fit_texts(fig, rounds: int = 3):
    """Make a figure's texts readable after the layout: wrap every title, axis label and figure
    title to its Axes (or figure), cutting long ones with an ellipsis; label only every k-th
    fixed tick (token labels) where they would overlap; hide a text in an Axes that overlaps one
    drawn before it. Repeats until the layout is stable.

    Call it once the figure has all its Axes (the plot functions do when they make the figure);
    returns ``fig``."""
    root = _root(fig)
    for _ in range(rounds):
        _lay_out(root)
        changed = False
        for ax in root.get_axes():
            for text, limit, lines in _axes_texts(ax):
                changed |= wrap_text(text, limit, lines)
            changed |= _thin_ticks(ax.xaxis) | _thin_ticks(ax.yaxis)
            _declutter([t for t in ax.texts if t.get_visible() and t.get_text().strip()])
        for sub in [root, *root.subfigs, *(s for f in root.subfigs for s in f.subfigs)]:
            if getattr(sub, "_suptitle", None) is not None:
                changed |= wrap_text(sub._suptitle, 0.96 * sub.bbox.width, 4)
        if not changed:
            break
    return fig


def _thin_ticks(axis) -> bool:
    """Keep every k-th label of a fixed (categorical) tick axis, k the smallest step at which
    neighbouring labels no longer overlap; True if it changed the ticks."""
    from matplotlib.ticker import FixedLocator

    labels = [t for t in axis.get_ticklabels() if t.get_text()]
    locs = np.asarray(axis.get_ticklocs(), dtype=float)
    if not isinstance(axis.get_major_locator(), FixedLocator) or len(labels) < 2 or len(labels) != len(locs):
        return False
    ax, along_x = axis.axes, axis.axis_name == "x"
    other = float(np.mean(ax.get_ylim() if along_x else ax.get_xlim()))
    pts = ax.transData.transform(np.column_stack([locs, np.full(locs.shape, other)]) if along_x
                                 else np.column_stack([np.full(locs.shape, other), locs]))
    spacing = float(np.min(np.abs(np.diff(pts[:, 0 if along_x else 1]))))
    angle = math.radians(labels[0].get_rotation() % 180)
    boxes = [t.get_window_extent() for t in labels]
    if abs(math.sin(angle)) < 1e-3 or abs(math.cos(angle)) < 1e-3:  # upright or sideways: boxes are exact
        need = max(b.width if along_x else b.height for b in boxes)
    else:  # slanted: neighbouring baselines must be a line height apart
        line = labels[0].get_fontsize() * ax.figure.dpi / 72 * 1.15
        need = line / abs(math.sin(angle) if along_x else math.cos(angle))
    step = math.ceil(need * 1.05 / max(spacing, 1e-9))
    if step <= 1:
        return False
    keep = slice(None, None, step)
    axis.set_ticks(locs[keep], [t.get_text() for t in labels][keep])
    return True


def _lay_out(fig) -> None:
    """Place every Axes and text as a render would: run the figure's layout engine (which
    measures the texts but draws nothing, fast even with thousands of bars), or, without one,
    a draw that renders nothing."""
    engine = fig.get_layout_engine()
    if engine is None:
        fig.draw_without_rendering()
    else:
        engine.execute(fig)


def _root(obj):
    """The top-level Figure of an Axes, a SubFigure or a Figure."""
    fig = getattr(obj, "figure", obj)
    return getattr(fig, "figure", fig)


def _overlaps(box, boxes, pad: float = 3.0) -> bool:
    """Whether ``box`` comes within ``pad`` pixels of one of ``boxes``."""
    return any(box.x0 < b.x1 + pad and b.x0 < box.x1 + pad and box.y0 < b.y1 + pad and b.y0 < box.y1 + pad
               for b in boxes)


def _declutter(texts) -> None:
    """Hide each of ``texts`` (in priority order) that overlaps one kept before it (on the
    current layout)."""
    boxes = []
    for t in texts:
        box = t.get_window_extent()
        if _overlaps(box, boxes):
            t.set_visible(False)
        else:
            boxes.append(box)


#: Offsets (points) tried in turn for a point's label: right-above first, then around it.
_OFFSETS = ((3, 3, "left", "bottom"), (3, -3, "left", "top"), (-3, 3, "right", "bottom"),
            (-3, -3, "right", "top"), (0, 5, "center", "bottom"), (0, -5, "center", "top"),
            (6, 0, "left", "center"), (-6, 0, "right", "center"))


def place_labels(ax, xs, ys, labels, fontsize: float = 7, limit: int | None = None, draw: bool = True,
                 **kw) -> list:
    """Label points without overlaps: each label (in the given order, most important first)
    takes the first of eight places around its point that is inside the Axes and clear of the
    labels placed before; a label with no free place is left out, and so is every label after
    the first ``limit`` placed. Returns the placed Text artists.

    Call it when the figure has its final size and Axes; it lays the figure out first unless
    ``draw`` is False (the caller just did)."""
    from matplotlib.transforms import Bbox

    if draw:
        _lay_out(_root(ax))
    inside = ax.get_window_extent()
    points = ax.transData.transform(np.column_stack([np.asarray(xs, float), np.asarray(ys, float)]))
    probe, sizes = ax.text(0, 0, "", fontsize=fontsize), {}
    px = _root(ax).dpi / 72
    boxes, placed = [], []
    for (x, y), (u, v), label in zip(zip(xs, ys), points, map(str, labels)):
        if limit is not None and len(placed) >= limit:
            break
        if label not in sizes:
            probe.set_text(label)
            ext = probe.get_window_extent()
            sizes[label] = (ext.width, ext.height)
        w, h = sizes[label]
        for dx, dy, ha, va in _OFFSETS:
            x0 = u + dx * px - {"left": 0.0, "center": w / 2, "right": w}[ha]
            y0 = v + dy * px - {"bottom": 0.0, "center": h / 2, "top": h}[va]
            box = Bbox.from_bounds(x0, y0, w, h)
            if (x0 >= inside.x0 and x0 + w <= inside.x1 and y0 >= inside.y0 and y0 + h <= inside.y1
                    and not _overlaps(box, boxes)):
                boxes.append(box)
                t = ax.annotate(label, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                                fontsize=fontsize, annotation_clip=False, **kw)
                t.set_in_layout(False)
                placed.append(t)
                break
    probe.remove()
    return placed


def finite_max(values, default: float = 1.0) -> float:
    """Largest finite value (``default`` when there is none)."""
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    return float(arr.max()) if arr.size else default
