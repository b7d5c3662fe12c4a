"""The reliability diagram: predicted probability against observed frequency."""
from __future__ import annotations

from ..errors import InputError
from ._style import IMPOSSIBLE_COLOR, check_frame, color, finish, new_axes

__all__ = ["reliability"]


def reliability(df, ax=None, **style):
    """Reliability diagram with the expected calibration error (ECE).

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`seqprob.analysis.calibration` or
        :func:`seqprob.analysis.reliability_table` (bin_lower, bin_upper, count, confidence,
        accuracy; ``attrs["ece"]``).

    Returns
    -------
    matplotlib.axes.Axes
        One bar per non-empty bin (observed frequency), the diagonal of perfect calibration and
        the mean confidence of each bin as points; the ECE is in the legend. Empty bins draw
        nothing.

    Notes
    -----
    ECE = sum_b (n_b / N) abs(acc_b - conf_b); a calibrated model has every bar on the diagonal.
    """
    check_frame(df, ("bin_lower", "bin_upper", "count", "confidence", "accuracy"), "reliability()")
    d = df[df["count"] > 0]
    if len(d) == 0:
        raise InputError(f"reliability(): all {len(df)} bins are empty (count 0): nothing to plot",
                         value=len(df))
    own = ax is None
    ax = new_axes(ax, figsize=(5.5, 5.0))
    width = (d["bin_upper"] - d["bin_lower"]).to_numpy()
    centers = (d["bin_lower"] + width / 2).to_numpy()
    ece = df.attrs.get("ece")
    if ece is None:
        n = d["count"].sum()
        ece = float((d["count"] / n * (d["accuracy"] - d["confidence"]).abs()).sum())
    ax.bar(centers, d["accuracy"], width=width * 0.95, color=color(0), edgecolor="white",
           label=f"observed frequency (ECE = {ece:.3f})")
    ax.plot([0, 1], [0, 1], linestyle="--", color="black", linewidth=1, label="perfect calibration")
    ax.plot(d["confidence"], d["confidence"], linestyle="none", marker="o", markersize=4,
            color=color(1), label="mean predicted probability of the bin")
    for x, acc, conf in zip(centers, d["accuracy"], d["confidence"]):
        if abs(acc - conf) > 0:
            ax.plot([x, x], [min(acc, conf), max(acc, conf)], color=IMPOSSIBLE_COLOR, alpha=0.35, linewidth=3)
    for x, n in zip(centers, d["count"]):
        ax.annotate(f"n={int(n)}", (x, 0.01), fontsize=6, ha="center", rotation=90, va="bottom", color="white")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    kind = df.attrs.get("kind")
    what = {"top1": " (top-1 prediction)", "all": " (every token)"}.get(kind, "")
    return finish(ax, f"Calibration: reliability diagram{what}", "predicted probability (confidence, 0..1)",
                  "observed frequency (share that came true, 0..1)", style, tidy=own)
