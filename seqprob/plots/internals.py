"""Plots of a transformer's insides: attention patterns, the logit lens, token embeddings."""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ._style import check_frame, color, finish, fit_texts, new_axes, new_figure, place_labels, prewrap

__all__ = ["attention", "logit_lens", "embeddings", "embedding_directions", "analogy"]

_MAX_LABELLED = 40  # longer sequences get no per-token tick labels


def _is_patterns_pair(data) -> bool:
    """True for the ``(attn, tokens)`` pair of :func:`seqprob.analysis.attention_patterns`."""
    return (isinstance(data, tuple) and len(data) == 2 and isinstance(data[0], np.ndarray)
            and data[0].ndim == 4 and isinstance(data[1], (list, tuple))
            and all(isinstance(t, str) for t in data[1]))


def _attention_array(data, tokens, text, tokenizer):
    """(L, H, T, T) patterns and T labels from a model (+ text), a cache or an array."""
    if hasattr(data, "attn"):  # an ActivationCache
        attn = data.attn
    elif _is_patterns_pair(data):  # what attention_patterns() returns: (attn, tokens)
        attn, tokens = data[0], (list(data[1]) if tokens is None else tokens)
    elif isinstance(data, (np.ndarray, list, tuple)):
        attn = data
    elif callable(getattr(data, "run_with_cache", None)):
        if text is None:
            raise InputError("attention(model) needs text=... (the sentence to look at)")
        from ..analysis.lens import attention_patterns

        return attention_patterns(data, text, tokenizer=tokenizer)
    else:
        raise InputError(f"{type(data).__name__} has no attention: attention() needs a transformer "
                         "(with run_with_cache), an ActivationCache or an array (n_layer, n_head, T, T)")
    try:
        attn = np.asarray(attn, dtype=np.float64)
    except (TypeError, ValueError) as exc:  # ragged lists, strings: numpy's message names neither
        raise InputError(f"attention patterns must be a numeric array (n_layer, n_head, T, T): {exc}",
                         value=type(attn).__name__) from None
    if attn.ndim == 2:
        attn = attn[None, None]
    if attn.ndim != 4 or attn.shape[-1] != attn.shape[-2] or attn.size == 0:
        raise InputError(f"attention patterns must have shape (n_layer, n_head, T, T), got {attn.shape}",
                         shape=attn.shape)
    if np.isnan(attn).any():
        raise InputError("attention patterns contain NaN")
    return attn, tokens


def attention(data, tokens=None, text=None, tokenizer=None, layers=None, heads=None, **style):
    """A layer x head grid of attention patterns, one T x T map each, token labels on the axes.

    Parameters
    ----------
    data : GPT, ActivationCache, (attn, tokens) or array (n_layer, n_head, T, T)
        With a model, pass ``text`` (and optionally ``tokenizer``); the labels come with it, as
        they do with the pair returned by :func:`seqprob.analysis.attention_patterns`.
    tokens : list of str, optional
        The T tokens (query = rows, key = columns) when ``data`` is an array.
    layers, heads : list of int, optional
        Subsets to draw.
    **style
        ``cmap`` (default "viridis"), ``title``, ``figsize``.

    Returns
    -------
    matplotlib.figure.Figure
        ``len(layers) * len(heads)`` images and one colour bar.

    Notes
    -----
    Row i of head h is softmax_j(q_i · k_j / sqrt(d_head)) over j <= i: where token i reads from.
    """
    attn, labels = _attention_array(data, tokens, text, tokenizer)
    L, H, T, _ = attn.shape
    layers = list(range(L)) if layers is None else list(layers)
    heads = list(range(H)) if heads is None else list(heads)
    for name, sel, lim in (("layer", layers, L), ("head", heads, H)):
        bad = [i for i in sel if not 0 <= int(i) < lim]
        if bad or not sel:
            raise InputError(f"{name} indices {bad or sel} out of range [0, {lim})", value=bad, limit=lim)
    if labels is not None and len(labels) != T:
        raise InputError(f"{len(labels)} token labels for T={T} positions", value=len(labels), limit=T)
    size = max(2.2, min(0.28 * T, 6.0))
    fig = new_figure(figsize=style.get("figsize", (size * len(heads) + 1.0, size * len(layers) + 0.6)))
    axes = fig.subplots(len(layers), len(heads), squeeze=False)
    image = None
    for r, l in enumerate(layers):
        for c, h in enumerate(heads):
            ax = axes[r, c]
            image = ax.imshow(attn[l, h], vmin=0.0, vmax=1.0, cmap=style.get("cmap", "viridis"))
            ax.set_title(f"layer {l + 1}, head {h + 1}", fontsize=9)
            _label_square(ax, labels, T, r == len(layers) - 1, c == 0)
            prewrap(ax)
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight (probability)")
    fig.suptitle(style.get("title", "Attention patterns: row = query token, column = key token it reads"))
    return fit_texts(fig)


def _label_square(ax, labels, T, bottom: bool, left: bool) -> None:
    if labels is not None and T <= _MAX_LABELLED:
        ax.set_xticks(range(T), labels, rotation=90, fontsize=7)
        ax.set_yticks(range(T), labels, fontsize=7)
    if bottom:
        ax.set_xlabel("key position (token read)")
    if left:
        ax.set_ylabel("query position (token reading)")


def logit_lens(df, ax=None, value: str = "prob", **style):
    """Heat map of the logit lens: per layer (rows) and position (columns), the probability the
    residual stream already gives the next token, annotated with its rank.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`seqprob.analysis.logit_lens`.
    value : {"prob", "logprob"}
        Colour by probability (0..1) or log-probability (nats).

    Returns
    -------
    matplotlib.axes.Axes
        One image; column labels "context → next token".

    Notes
    -----
    p_l(x_t | x_<t) = softmax(ln_f(r_l) W_Uᵀ)[x_t]; the last row is the model's own prediction.
    """
    check_frame(df, ("layer", "position", "token", "context", "prob", "rank"), "logit_lens()")
    if value not in ("prob", "logprob"):
        raise InputError(f"value must be 'prob' or 'logprob', got {value!r}", value=value)
    grid = df.pivot_table(index="layer", columns="position", values=value, aggfunc="first")
    ranks = df.pivot_table(index="layer", columns="position", values="rank", aggfunc="first")
    heads = df.drop_duplicates("position").set_index("position").loc[grid.columns]
    own = ax is None
    ax = new_axes(ax, figsize=(max(6.4, 0.7 * grid.shape[1] + 2), max(3.0, 0.45 * grid.shape[0] + 1.8)))
    vals = grid.to_numpy(dtype=float)
    kw = dict(vmin=0.0, vmax=1.0) if value == "prob" else {}
    image = ax.imshow(np.where(np.isfinite(vals), vals, np.nan), aspect="auto", cmap="magma", origin="lower", **kw)
    for (i, j), r in np.ndenumerate(ranks.to_numpy()):
        ax.text(j, i, f"{int(r)}", ha="center", va="center", fontsize=7,
                color="white" if not np.isfinite(vals[i, j]) or vals[i, j] < 0.5 * np.nanmax(vals) else "black")
    ax.figure.colorbar(image, ax=ax, label="P(next token) (probability)" if value == "prob"
                       else "log P(next token) (nats)")
    names = (df.drop_duplicates("layer").set_index("layer").loc[grid.index, "layer_name"]
             if "layer_name" in df else grid.index.astype(str))
    ax.set_yticks(range(len(grid.index)), list(names), fontsize=8)
    if grid.shape[1] <= _MAX_LABELLED:
        ax.set_xticks(range(grid.shape[1]), [f"{c} → {t}" for c, t in zip(heads["context"], heads["token"])],
                      rotation=60, ha="right", fontsize=7)
    return finish(ax, "Logit lens: P and rank (number) of the next token, layer by layer",
                  "position t (context token x_t-1 → next token x_t)",
                  "layer (read-out point)", style, legend=False, tidy=own)


def _label_order(df, first) -> np.ndarray:
    """Row indices by labelling priority: rows in ``first`` (a mask), then the rest, each
    farthest from the centre first."""
    radius = np.hypot(df["pc1"] - df["pc1"].mean(), df["pc2"] - df["pc2"].mean()).to_numpy()
    order = np.argsort(-radius, kind="stable")
    return np.concatenate([order[first[order]], order[~first[order]]])


def embeddings(df, ax=None, label="auto", highlight=None, **style):
    """Token embeddings projected on two principal components, with labels.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`seqprob.analysis.embedding_pca` (token, pc1, pc2).
    label : bool or "auto"
        Write tokens beside their points: all that fit (True), none (False), or, with "auto",
        at most 50, the highlighted ones first, then those farthest out. A label goes to the
        first free place around its point; one that would overlap another is left out.
    highlight : dict of group name -> list of tokens, optional
        Colour these groups (e.g. {"feminine": [...], "plural": [...]}); others are grey.

    Returns
    -------
    matplotlib.axes.Axes
        One scatter collection per group (plus one for the rest); the legend is right of the
        Axes. Labels are placed for the figure's size when drawn: with ``ax=``, draw the rest
        of the figure first.
    """
    check_frame(df, ("token", "pc1", "pc2"), "embeddings()")
    own = ax is None
    ax = new_axes(ax, figsize=(8.5, 6.0))
    groups = dict(highlight or {})
    in_group = np.zeros(len(df), dtype=bool)
    for i, (name, toks) in enumerate(groups.items()):
        mask = df["token"].isin(list(toks)).to_numpy()
        in_group |= mask
        ax.scatter(df["pc1"][mask], df["pc2"][mask], s=22, color=color(i), label=name, zorder=3)
    ax.scatter(df["pc1"][~in_group], df["pc2"][~in_group], s=12, color="0.6",
               label="other tokens" if groups else "tokens", zorder=2)
    ev = df.attrs.get("explained_variance_ratio", [])
    pct = [f" ({100 * v:.0f}% of variance)" for v in ev] + ["", ""]
    finish(ax, "Token embeddings W_E, PCA", f"PC 1{pct[0]} (embedding units)",
           f"PC 2{pct[1]} (embedding units)", style, tidy=own, outside=True)
    if label is not False:
        order = _label_order(df, in_group)
        cap = len(order) if label is True else 50
        rows = df.iloc[order]
        place_labels(ax, rows["pc1"], rows["pc2"], rows["token"], fontsize=6, limit=cap, draw=not own)
    return ax


def embedding_directions(df, ax=None, **style):
    """Tokens of gender and number pairs projected on the gender and number directions,
    with an arrow from each masculine/singular token to its partner.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`seqprob.analysis.embedding_directions` (token, kind, partner, gender,
        number).

    Returns
    -------
    matplotlib.axes.Axes
        One scatter per kind of pair (its tokens that are in no other kind); a token in pairs
        of two kinds (e.g. "man": man/woman and man/men) is one half-and-half point; one arrow
        per pair; each token labelled once, where its label overlaps no other (else left out).

    Notes
    -----
    x = e_v · d_gender, y = e_v · d_number; parallel arrows of equal length mean the model
    encodes the feature as one direction (queen - king ≈ woman - man).
    """
    check_frame(df, ("token", "kind", "partner", "gender", "number"), "embedding_directions()")
    own = ax is None
    ax = new_axes(ax, figsize=(8.5, 6.0))
    pos = {r.token: (r.gender, r.number) for r in df.itertuples()}
    kinds = list(dict.fromkeys(df["kind"]))
    pairs = df.attrs.get("pairs") or {k: [(r.token, r.partner) for r in df[df["kind"] == k].iloc[::2].itertuples()]
                                      for k in kinds}
    kinds_of = df.groupby("token", sort=False)["kind"].agg(lambda k: list(dict.fromkeys(k)))
    for i, kind in enumerate(kinds):
        sub = df[(df["kind"] == kind) & df["token"].map(lambda t: len(kinds_of[t]) == 1)]
        ax.scatter(sub["gender"], sub["number"], s=20, color=color(i), label=f"{kind} pairs", zorder=3)
        for a, b in pairs.get(kind, []):
            if a in pos and b in pos:
                ax.annotate("", xy=pos[b], xytext=pos[a],
                            arrowprops=dict(arrowstyle="->", color=color(i), alpha=0.6, linewidth=0.9))
    shared = [t for t, k in kinds_of.items() if len(k) > 1]
    if shared:
        first, second = (kinds.index(k) for k in kinds_of[shared[0]][:2])
        ax.plot([pos[t][0] for t in shared], [pos[t][1] for t in shared], linestyle="none", marker="o",
                markersize=6, fillstyle="left", color=color(first), markerfacecoloralt=color(second),
                markeredgecolor="0.2", markeredgewidth=0.5, zorder=4,
                label=f"in {kinds_of[shared[0]][0]} and {kinds_of[shared[0]][1]} pairs")
    cos = df.attrs.get("cosine_between_directions")
    title = "Gender and number directions"
    if cos is not None:
        title += f" (cosine between them: {cos:.2f})"
    finish(ax, title, "projection on the gender direction, feminine − masculine (embedding units)",
           "projection on the number direction, plural − singular (embedding units)", style, tidy=own,
           outside=True)
    tokens = list(pos)
    place_labels(ax, [pos[t][0] for t in tokens], [pos[t][1] for t in tokens], tokens, fontsize=7, draw=not own)
    return ax


def _cosine_floor(low: float) -> float:
    """The left end of a cosine axis: 0, -0.5 or -1, whichever first holds every bar."""
    return next((v for v in (0.0, -0.5) if low >= v), -1.0)


def analogy(df, ax=None, **style):
    """Horizontal bars of the candidates of an analogy, best first, by cosine.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`seqprob.analysis.analogy` (rank, token, cosine).

    Returns
    -------
    matplotlib.axes.Axes
        One bar per candidate; the best one is highlighted. The x axis runs from 0 (or -0.5,
        or -1 when a cosine is below 0) to 1, and its label names that range.
    """
    check_frame(df, ("rank", "token", "cosine"), "analogy()")
    d = df.sort_values("rank")
    own = ax is None
    ax = new_axes(ax, figsize=(5.5, 0.35 * len(d) + 1.5))
    y = np.arange(len(d))[::-1]
    ax.barh(y, d["cosine"], color=[color(1) if i == 0 else color(0) for i in range(len(d))])
    ax.set_yticks(y, [f"{t} ({r})" for t, r in zip(d["token"], d["rank"])])
    low = _cosine_floor(float(d["cosine"].min()))
    ax.set_xlim(low, 1.0)
    q = df.attrs.get("query", "a - b + c")
    return finish(ax, f"Analogy: nearest tokens to {q}", f"cosine similarity ({low:g}..1)",
                  "candidate token (rank)", style, legend=False, tidy=own)
