"""Plots of scored text: per-token surprisal, the chain rule as a running sum, next-token
distributions at several temperatures, and the size of the joint lookup table."""
from __future__ import annotations

import math

import numpy as np

from ..checks import check_int
from ..errors import InputError
from ._style import (IMPOSSIBLE_COLOR, check_frame, color, finish, finite_max, fit_texts, mark_impossible,
                     new_axes, new_figure, shorten, wrap_text)

__all__ = ["surprisal", "cumulative_logprob", "sentence_comparison", "next_token", "lookup_table"]

_SCORE_COLUMNS = ("model", "seq", "position", "token", "logprob")


def _one_seq(df, seq, what: str):
    check_frame(df, _SCORE_COLUMNS, what)
    sub = df[df["seq"] == seq]
    if len(sub) == 0:
        raise InputError(f"{what}: no rows for seq={seq!r} (sequences: {sorted(df['seq'].unique())})",
                         value=seq)
    return sub


def _title_text(df, seq, limit: int = 160) -> str:
    """The quoted text of ``seq`` (cut to ``limit`` characters with an ellipsis), else its number."""
    texts = df.attrs.get("texts") or []
    if isinstance(seq, (int, np.integer)) and 0 <= seq < len(texts) and texts[seq]:
        return f'"{shorten(texts[seq], limit)}"'
    return f"sequence {seq}"


def _token_ticks(ax, x, labels) -> None:
    """Token labels under ``x``: slanted when there are many, and then only every k-th when
    slanted lines of text would touch at the Axes' width before layout (fit_texts thins
    further if the layout leaves less room)."""
    import matplotlib
    from matplotlib.font_manager import FontProperties

    x, labels = list(x), [str(t) for t in labels]
    slant, step = len(x) > 8, 1
    if slant:  # neighbouring 45° labels need a line height / sin 45° between their ticks
        size = FontProperties(size=matplotlib.rcParams["xtick.labelsize"]).get_size_in_points()
        room = 0.85 * ax.get_window_extent().width / max(len(x) - 1, 1)
        step = max(1, math.ceil(1.2 * size * ax.figure.dpi / 72 / math.sin(math.radians(45)) / room))
    ax.set_xticks(x[::step], labels[::step], rotation=45 if slant else 0, ha="right" if slant else "center",
                  rotation_mode="anchor" if slant else "default")


def surprisal(df, seq=0, models=None, ax=None, **style):
    """Bars of the surprisal -log2 P(x_t | x_<t) of every token of one sentence, one bar per model.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`seqprob.score` (columns model, seq, position, token, logprob).
    seq : int
        Which sequence to draw.
    models : list of str, optional
        Models to draw, in order (default: all, in the order of ``df``).
    ax : matplotlib Axes, optional
    **style
        ``title``, ``xlabel``, ``ylabel``, ``legend``, ``width`` (total bar width, 0.8).

    Returns
    -------
    matplotlib.axes.Axes
        One bar per finite value; a token with log P = -inf (or NaN) gets no bar but an ``X``
        marker labelled "impossible". The legend is right of the Axes; with many tokens only
        every k-th is labelled, and a long sentence in the title is cut with an ellipsis.

    Notes
    -----
    surprisal_bits = -log P / ln 2; the bars of a sentence add up to -log2 P(sentence).

    Examples
    --------
    >>> import seqprob as sp
    >>> tok = sp.WhitespaceTokenizer.fit(["the cat"])
    >>> df = sp.score({"uniform": sp.UniformModel(tok.vocab)}, "the cat", tokenizer=tok)
    >>> ax = surprisal(df)
    >>> len(ax.patches)
    3
    """
    sub = _one_seq(df, seq, "surprisal()")
    names = list(dict.fromkeys(sub["model"])) if models is None else list(models)
    positions = np.sort(sub["position"].unique())
    x = np.arange(len(positions))
    own = ax is None
    ax = new_axes(ax, figsize=(min(16.0, max(6.4, 0.6 * len(positions) * max(len(names), 1) ** 0.5)) + 2.0, 4.0))
    missing = [n for n in names if n not in set(sub["model"])]
    if missing:
        raise InputError(f"surprisal(): models {missing} are not in the DataFrame", value=missing)
    total = style.get("width", 0.8)
    width = total / max(len(names), 1)
    ymax = max(finite_max(-sub["logprob"] / math.log(2), 1.0), 0.5) * 1.15
    bad_x, bad_v, bad_tx = [], [], []
    for i, name in enumerate(names):
        rows = sub[sub["model"] == name].set_index("position").reindex(positions)
        lp = rows["logprob"].to_numpy(dtype=float)
        xi = x - total / 2 + width * (i + 0.5)
        ok = np.isfinite(lp)
        ax.bar(xi[ok], -lp[ok] / math.log(2), width=width, color=color(i), label=name)
        bad_x += list(xi[~ok])
        bad_v += list(lp[~ok])
        bad_tx += list(x[~ok])
    mark_impossible(ax, bad_x, ymax * 1.05, bad_v, text_xs=bad_tx)
    ax.set_ylim(0, ymax * (1.6 if bad_x else 1.0))
    labels = sub.drop_duplicates("position").set_index("position").reindex(positions)["token"]
    _token_ticks(ax, x, labels)
    return finish(ax, f"Surprisal per token: {_title_text(df, seq)}", "token x_t (position t = 1, 2, ...)",
                  "surprisal -log2 P(x_t | x_<t) (bits)", style, tidy=own, outside=True)


def cumulative_logprob(df, seq=0, models=None, ax=None, unit: str = "nats", **style):
    """The chain rule as a curve: log P(x_1..x_t) = sum of the per-token log-probs, for t = 0..T.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`seqprob.score`.
    seq : int
    models : list of str, optional
    ax : matplotlib Axes, optional
    unit : {"nats", "bits"}

    Returns
    -------
    matplotlib.axes.Axes
        One line per model, starting at 0 (t = 0, the empty prefix, P = 1). Once a token has
        log P = -inf the joint is -inf for ever: the line stops and an ``X`` labelled
        "impossible" marks the token. The legend (each model's log P) is right of the Axes.

    Notes
    -----
    log P(x_1..x_t | x_0) = sum_{s <= t} log P(x_s | x_<s) (the chain rule); the last point is
    the joint log-probability of the sentence.
    """
    if unit not in ("nats", "bits"):
        raise InputError(f"unit must be 'nats' or 'bits', got {unit!r}", value=unit)
    sub = _one_seq(df, seq, "cumulative_logprob()")
    names = list(dict.fromkeys(sub["model"])) if models is None else list(models)
    scale = 1.0 if unit == "nats" else 1 / math.log(2)
    own = ax is None
    ax = new_axes(ax, figsize=(min(16.0, max(6.4, 0.3 * len(sub["position"].unique()))) + 2.0, 4.0))
    positions = np.sort(sub["position"].unique())
    x0 = int(positions[0]) - 1
    lows, bad_x, bad_v = [0.0], [], []
    for i, name in enumerate(names):
        rows = sub[sub["model"] == name].sort_values("position")
        lp = rows["logprob"].to_numpy(dtype=float) * scale
        pos = rows["position"].to_numpy()
        ok = np.isfinite(lp)
        stop = len(lp) if ok.all() else int(np.argmin(ok))
        cum = np.concatenate([[0.0], np.cumsum(lp[:stop])])
        ax.plot(np.concatenate([[x0], pos[:stop]]), cum, marker="o", markersize=3, color=color(i),
                label=f"{name}: log P = {cum[-1]:.2f}" if stop == len(lp) else f"{name}: log P = -inf")
        lows.append(cum.min())
        if stop < len(lp):
            bad_x.append(pos[stop])
            bad_v.append(lp[stop])
    low = min(lows)
    mark_impossible(ax, bad_x, low - 0.08 * (abs(low) + 1), bad_v)
    ticks = sub.drop_duplicates("position").set_index("position").reindex(positions)["token"]
    _token_ticks(ax, [x0, *positions], ["<s>", *ticks])
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    return finish(ax, f"Chain rule: running sum of log-probs, {_title_text(df, seq)}",
                  "prefix x_1..x_t (token t)", f"log P(x_1..x_t | <s>) ({unit})", style, tidy=own, outside=True)


def sentence_comparison(df, seqs=None, models=None, **style):
    """A grid: one row per sentence, surprisal bars on the left, the running sum on the right.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`seqprob.score` for several sentences and models.
    seqs : list of int, optional
        Sentences to draw (default: all).
    models : list of str, optional
        Models to draw, in order (default: all).
    **style
        ``suptitle``, ``figsize``; the rest goes to :func:`surprisal` and
        :func:`cumulative_logprob`.

    Returns
    -------
    matplotlib.figure.Figure
        ``2 * len(seqs)`` Axes, one row (a SubFigure titled with the sentence, wrapped to the
        width) per sentence; each row's legend, right of the running sum, names the models
        and gives each one's log P of that sentence.
    """
    check_frame(df, _SCORE_COLUMNS, "sentence_comparison()")
    seqs = list(dict.fromkeys(df["seq"])) if seqs is None else list(seqs)
    texts = [_title_text(df, s, limit=600) for s in seqs]
    rows = [3.6 + 0.22 * min(4, len(t) // 150) for t in texts]  # room for a wrapped sentence title
    fig = new_figure(figsize=style.pop("figsize", (14, sum(rows))))
    subs = fig.subfigures(len(seqs), 1, squeeze=False, height_ratios=rows)[:, 0]
    style = {**style, "legend": False}
    for sub, s, text in zip(subs, seqs, texts):
        left, right = sub.subplots(1, 2, width_ratios=(1.0, 1.0))
        surprisal(df, seq=s, models=models, ax=left, **{"title": "Surprisal per token", **style})
        cumulative_logprob(df, seq=s, models=models, ax=right,
                           **{"title": "Chain rule: running sum of log-probs", **style})
        n = len(right.get_legend_handles_labels()[0])
        right.legend(fontsize=8 if n <= 12 else 7, ncols=1 if n <= 16 else 2, loc="upper left",
                     bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
        wrap_text(sub.suptitle(text, fontsize=10), 0.9 * sub.bbox.width, 4, measure=False)
    fig.suptitle(style.get("suptitle", "The same sentences under several models"))
    return fit_texts(fig)


def _token_labels(tokens, V: int) -> list:
    if tokens is None:
        return [str(i) for i in range(V)]
    labels = list(getattr(tokens, "tokens", tokens))
    if len(labels) != V:
        raise InputError(f"next_token(): {len(labels)} token labels for a distribution over V={V}",
                         value=len(labels), limit=V)
    return [str(t) for t in labels]


def next_token(logprobs, tokens=None, temperatures=(0.5, 1.0, 2.0), k: int = 10, ax=None,
               top_p: float | None = None, **style):
    """Top-k bars of the next-token distribution softmax(log P / T) at several temperatures.

    Parameters
    ----------
    logprobs : array_like, shape (V,)
        Log P(next = v | prefix) (e.g. ``model.start(ids).logprobs``); -inf entries are tokens
        that cannot come next.
    tokens : Vocab or list of str, optional
        Labels of the V entries.
    temperatures : sequence of float
        Temperatures T > 0 (T -> 0 is the argmax, large T flattens the distribution).
    k : int
        How many tokens to show: the k most likely at T = 1.
    top_p : float, optional
        Apply nucleus filtering (as the sampler does) before drawing.

    Returns
    -------
    matplotlib.axes.Axes
        ``len(temperatures) * k`` bars; the legend gives each temperature's entropy in bits.

    Notes
    -----
    p_T(v) = exp(u_v / T) / sum_w exp(u_w / T); H_T = -sum_v p_T(v) log2 p_T(v), over all V.
    """
    from ..sampling import next_token_probs

    row = np.asarray(logprobs, dtype=np.float64)
    if row.ndim != 1 or row.size == 0:
        raise InputError(f"next_token() needs one (V,) row of log-probs, got shape {row.shape}",
                         shape=row.shape)
    if np.isnan(row).any():
        raise InputError(f"next_token(): the log-probs contain NaN at index {int(np.argmax(np.isnan(row)))}")
    temperatures = list(temperatures)
    if not temperatures:
        raise InputError("next_token() needs at least one temperature")
    check_int("k", k, low=1, whole_floats=True)
    labels = _token_labels(tokens, row.size)
    top = np.argsort(-row, kind="stable")[: min(int(k), row.size)]
    own = ax is None
    ax = new_axes(ax, figsize=(max(6.4, 0.55 * len(top) * len(temperatures) ** 0.5), 4.0))
    width = 0.8 / len(temperatures)
    for i, t in enumerate(temperatures):
        p = next_token_probs(row, temperature=t, top_p=top_p)  # (V,)
        h = max(0.0, float(-(p[p > 0] * np.log2(p[p > 0])).sum()))
        ax.bar(np.arange(len(top)) - 0.4 + width * (i + 0.5), p[top], width=width, color=color(i),
               label=f"T = {t:g}: entropy H = {h:.2f} bits")
    ax.set_xticks(np.arange(len(top)), [labels[j] for j in top], rotation=45 if len(top) > 6 else 0,
                  ha="right" if len(top) > 6 else "center")
    ax.set_ylim(0, 1.05)
    return finish(ax, f"Next-token distribution at {len(temperatures)} temperatures (top {len(top)})",
                  "next token v (the most likely at T = 1)", "P_T(next = v) (probability)", style, tidy=own)


def lookup_table(vocab_sizes=(27, 1_000, 50_257), max_length: int = 100, ax=None, **style):
    """Rows of the joint lookup table, V^T, against the number of atoms in the universe (10^80).

    Parameters
    ----------
    vocab_sizes : int or sequence of int
        Vocabulary sizes V to draw, one line each.
    max_length : int
        Longest sequence length T on the x axis.

    Returns
    -------
    matplotlib.axes.Axes
        One line per V plus the horizontal atoms line; y is log10 of the row count (drawn with
        ``10^k`` tick labels: V^T overflows floating point long before T = 100).

    Notes
    -----
    rows(V, T) = V^T, log10 rows = T log10 V; the chain rule needs T conditionals of V numbers.
    """
    from ..table import ATOMS_IN_UNIVERSE_LOG10, lookup_table_size

    sizes = [vocab_sizes] if isinstance(vocab_sizes, (int, np.integer)) else list(vocab_sizes)
    if not sizes:
        raise InputError("lookup_table() needs at least one vocabulary size")
    check_int("max_length", max_length, low=1, whole_floats=True)
    own = ax is None
    ax = new_axes(ax)
    T = np.arange(1, int(max_length) + 1)
    for i, V in enumerate(sizes):
        y = np.array([lookup_table_size(V, int(t)) for t in T])
        cross = T[y > ATOMS_IN_UNIVERSE_LOG10]
        note = f", passes 10^80 at T = {cross[0]}" if cross.size else ""
        ax.plot(T, y, color=color(i), label=f"V = {V:,}{note}")
    ax.axhline(ATOMS_IN_UNIVERSE_LOG10, color=IMPOSSIBLE_COLOR, linestyle="--",
               label="atoms in the observable universe (~10^80)")
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"$10^{{{v:.0f}}}$"))
    return finish(ax, "A joint lookup table needs V^T rows", "sequence length T (tokens)",
                  "rows V^T (log scale, count)", style, tidy=own)
