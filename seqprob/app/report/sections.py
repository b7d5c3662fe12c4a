"""The sections of the report: each one computes its data, draws its figures and tables."""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

from ... import plots
from ...errors import SeqProbError
from ...protocols import model_tokenizer
from ..pipeline import IMPOSSIBLE_PREFIX_NOTE, TRUTH_NAME
from .context import ReportContext

__all__ = ["Section", "SECTIONS", "run_sections"]

log = logging.getLogger(__name__)


@dataclass
class Section:
    """One part of the report: figures ``(name, Figure, caption)``, tables ``(caption, DataFrame)``."""

    key: str
    title: str
    intro: str = ""
    figures: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    seconds: float = 0.0


def _fig(obj):
    return getattr(obj, "figure", obj)


def _score_tokenizer(ctx: ReportContext, models: dict):
    """None (each model its own tokenizer) when every model has one, else the report's."""
    return None if all(model_tokenizer(m) is not None for m in models.values()) else ctx.tokenizer


def _own_tokenizer(ctx: ReportContext, model):
    return model_tokenizer(model, None) or ctx.tokenizer


#: At most this many models in one figure of bars per token, and at most about this many bars
#: in one of its Axes (long sentences get fewer models, so that each bar stays visible).
FIGURE_MODELS, FIGURE_BARS = 6, 240


def _figure_models(names: list, ctx: ReportContext, n_tokens: int) -> list:
    """The models a per-token figure of sentences up to ``n_tokens`` tokens draws: the truth
    and the main model always, then baselines in order, within the limits above."""
    keep = [n for n in names if n in (TRUTH_NAME, ctx.model_name)]
    cap = min(FIGURE_MODELS, max(2, FIGURE_BARS // max(n_tokens, 1)))
    chosen = set(keep) | set([n for n in names if n not in keep][:max(0, cap - len(keep))])
    return [n for n in names if n in chosen]


def sentences(ctx: ReportContext, s: Section) -> None:
    from ...scoring import score, summarize

    models = ctx.models()
    df = score(models, list(ctx.sentences), tokenizer=_score_tokenizer(ctx, models))
    drawn = _figure_models(list(models), ctx, int(df.groupby(["model", "seq"]).size().max()))
    left_out = (f" The figure shows {len(drawn)} of the {len(models)} models (the table has all)."
                if len(drawn) < len(models) else "")
    s.figures.append(("sentences", plots.sentence_comparison(df, models=drawn),
                      "Left: surprisal of each token (bits); right: the chain rule as a running sum of "
                      "log-probabilities (nats). An X marks a token with probability 0." + left_out))
    summary = summarize(df)[["model", "text", "n_tokens", "n_oov", "logprob", "log10prob", "perplexity"]]
    if (df["logprob"] == -math.inf).any():
        s.notes.append(IMPOSSIBLE_PREFIX_NOTE)
    s.tables.append(("Joint log-probability of each sentence (nats and log10; -inf = impossible)", summary))


def sampling(ctx: ReportContext, s: Section) -> None:
    from ...sampling import sample

    model, tok = ctx.model, _own_tokenizer(ctx, ctx.model)
    ids = [model.vocab.bos_id, *tok.encode(ctx.prompt)]
    row = model.start(ids).logprobs
    temps = (0.5, 1.0, 2.0)
    s.figures.append(("next_token", plots.next_token(row, model.vocab, temperatures=temps, k=12,
                                                     title=f'Next token after "{ctx.prompt}" ({ctx.model_name})'),
                      "softmax(log P / T): low T sharpens the distribution (lower entropy), high T flattens it."))
    import pandas as pd

    rows = [{"temperature": t, "sample": i + 1,
             "text": sample(model, ctx.prompt, tokenizer=tok, temperature=t, max_new_tokens=20, seed=10 * i + 1)}
            for t in temps for i in range(2)]
    s.tables.append((f'Samples continuing "{ctx.prompt}" (seeded)', pd.DataFrame(rows)))


def lookup(ctx: ReportContext, s: Section) -> None:
    V = len(ctx.tokenizer.vocab)
    s.figures.append(("lookup_table", plots.lookup_table(vocab_sizes=sorted({V, 1_000, 50_257})),
                      "A table with one probability per whole sequence needs V^T rows; the chain rule "
                      "needs one conditional distribution per prefix, computed by a function."))


def sparsity(ctx: ReportContext, s: Section) -> None:
    from ...analysis.sparsity import sparsity_curve
    from ...ngram import expected_discount_fallback

    with expected_discount_fallback():
        df = sparsity_curve(ctx.train_lines, ctx.test_lines, orders=ctx.sizes["orders"], tokenizer=ctx.tokenizer)
    s.figures.append(("sparsity", plots.sparsity(df),
                      "Modified Kneser-Ney n-grams of each order: the training perplexity keeps falling, "
                      "the held-out one stops improving as most held-out n-grams were never seen."))
    s.tables.append(("Perplexity and unseen share per order", df))


def _cross_entropies(ctx: ReportContext) -> tuple:
    """Held-out cross-entropy table, the truth's entropy (or None), and the raw estimates."""
    import pandas as pd

    from ...analysis.truth import cross_entropy

    h = ctx.truth.entropy() if ctx.truth is not None else None
    rows, raw = [], {}
    for name, model in ctx.models().items():
        if name == TRUTH_NAME:
            continue
        ce = raw[name] = cross_entropy(model, ctx.test_lines, tokenizer=_own_tokenizer(ctx, model))
        row = {"model": name, "cross-entropy (nats/token)": ce.per_token,
               "cross-entropy (bits/token)": ce.per_token_bits, "perplexity": ce.perplexity}
        if h is not None:
            row["KL(P* || model) (nats/token)"] = ce.per_token - h.per_token
        rows.append(row)
    return pd.DataFrame(rows), h, raw


def learning(ctx: ReportContext, s: Section) -> None:
    table, h, raw = _cross_entropies(ctx)
    base = {n: ce for n, ce in raw.items() if n != ctx.model_name}
    if ctx.history_stream:  # losses per token of "<s> w .. </s> <s> ..": one more (free) token per sentence
        tokens, ylabel = "stream", "cross-entropy ({unit} per stream token)"
        unit_note = ("The curves are per token of the training stream, where each sentence's </s> is "
                     "followed by a <s> the model predicts for free; so are the reference lines "
                     "(nats per sentence / (tokens per sentence + 1)), whose legend entries also give "
                     "nats per scored token, the unit of the table below.")
    else:
        tokens, ylabel = "scored", "cross-entropy ({unit} per scored token)"
        unit_note = "Every curve and line is in nats per scored token (words and </s>), as in the table below."
    s.figures.append(("learning_curves", plots.learning_curves(ctx.history, baselines=base, true_entropy=h,
                                                                  ylabel=ylabel, tokens=tokens),
                      f"History: {ctx.history_note}. Dashed, each with its own markers: held-out "
                      f"cross-entropy of the n-gram baselines; dotted: the true entropy, the floor no "
                      f"model can beat. {unit_note}"))
    if h is not None:
        s.notes.append(f"True entropy of the source: {h.per_token:.4f} nats/token "
                       f"({h.per_token / math.log(2):.4f} bits/token), {h.per_sentence:.3f} nats/sentence"
                       + (", exact." if getattr(h, "exact", False) else " (Monte Carlo estimate)."))
    s.tables.append((f"Held-out cross-entropy per scored token ({len(ctx.test_lines)} sentences)", table))


def attention(ctx: ReportContext, s: Section) -> None:
    fig = plots.attention(ctx.model, text=ctx.probe_sentence, tokenizer=_own_tokenizer(ctx, ctx.model))
    s.figures.append(("attention", fig, f'Attention patterns on "{ctx.probe_sentence}".'))


def lens(ctx: ReportContext, s: Section) -> None:
    from ...analysis.lens import logit_lens

    df = logit_lens(ctx.model, ctx.probe_sentence, tokenizer=_own_tokenizer(ctx, ctx.model))
    s.figures.append(("logit_lens", plots.logit_lens(df),
                      "Colour: probability of the true next token read from the residual stream after "
                      "each block; number: its rank (1 = top guess)."))
    last = df[df["layer"] == df["layer"].max()]
    s.tables.append(("Final layer: rank and probability of each next token",
                     last[["position", "context", "token", "prob", "rank", "top_token"]]))


def _present(vocab, words) -> list:
    return [w for w in words if w in vocab]


def embeddings(ctx: ReportContext, s: Section) -> None:
    from ...analysis.embeddings import default_pairs, embedding_pca, nearest_neighbors

    model = ctx.model
    pca = embedding_pca(model)
    pairs = default_pairs(model.vocab)
    groups = {"masculine": [a for a, _ in pairs["gender"]], "feminine": [b for _, b in pairs["gender"]],
              "plural": [b for _, b in pairs["number"]]}
    s.figures.append(("embeddings_pca", plots.embeddings(pca, highlight={k: v for k, v in groups.items() if v}),
                      "Token embeddings W_E projected on their first two principal components."))
    queries = _present(model.vocab, ["king", "queen", "cat", "cats", "paris", "sleeps", "on"])[:5]
    if not queries:
        queries = [t for t in pca["token"][:3]]
    nn = nearest_neighbors(model, queries, k=5)
    table = nn.groupby("query", sort=False).apply(
        lambda g: ", ".join(f"{n} ({v:.2f})" for n, v in zip(g["neighbor"], g["score"])), include_groups=False)
    import pandas as pd

    s.tables.append(("Nearest neighbours by dot product e_q · e_v", pd.DataFrame(
        {"query": table.index, "5 nearest (dot product)": table.to_numpy()})))


def arithmetic(ctx: ReportContext, s: Section) -> None:
    from ...analysis.embeddings import analogy, embedding_directions

    model = ctx.model
    if all(w in model.vocab for w in ("king", "man", "woman")):
        a = analogy(model, "king", "man", "woman", k=8)
        first = a["token"].iloc[0]
        rank = int(a.loc[a["token"] == "queen", "rank"].iloc[0]) if "queen" in set(a["token"]) else None
        s.notes.append(f"king - man + woman: the nearest token is {first!r}; 'queen' ranks "
                       + (f"{rank}." if rank else "below the top 8."))
        s.figures.append(("analogy", plots.analogy(a), "Candidates ranked by cosine with e_king - e_man + e_woman."))
        s.tables.append(("Analogy king - man + woman", a))
    else:
        s.notes.append("The vocabulary lacks king / man / woman: no analogy.")
    d = embedding_directions(model)
    s.figures.append(("directions", plots.embedding_directions(d),
                      "Each arrow joins a masculine (singular) token to its feminine (plural) partner; "
                      "parallel arrows mean one direction encodes the feature."))
    s.notes.append("Pair consistency (mean cosine of each pair's difference with its direction): "
                   + ", ".join(f"{k} {v:.2f}" for k, v in d.attrs["pair_consistency"].items())
                   + f"; cosine between the two directions {d.attrs['cosine_between_directions']:.2f}.")


def calibration(ctx: ReportContext, s: Section) -> None:
    import pandas as pd

    from ...analysis.calibration import calibration as calib
    from ...plots._style import new_figure

    lines = ctx.test_lines[: ctx.sizes["n_calibration"]]
    models = {ctx.model_name: ctx.model}
    kn = next((n for n in ctx.baselines if n.startswith(("mkn", "kn"))), None)  # a Kneser-Ney beside the model
    if kn:
        models[kn] = ctx.baselines[kn]
    fig = new_figure(figsize=(5.2 * len(models), 4.8))
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    rows = []
    for ax, (name, m) in zip(axes, models.items()):
        df = calib(m, lines, tokenizer=_own_tokenizer(ctx, m))
        plots.reliability(df, ax=ax, title=f"{name}: reliability (top-1)")
        rows.append({"model": name, "ECE (top-1)": df.attrs["ece"], "predictions": df.attrs["n"]})
    plots.fit_texts(fig)
    s.figures.append(("calibration", fig, "Bars: how often the top guess was right, per bin of its "
                                          "predicted probability; on the diagonal = calibrated."))
    s.tables.append(("Expected calibration error", pd.DataFrame(rows)))


#: (key, title, intro, function), in report order.
SECTIONS = (
    ("sentences", "Three sentences, token by token",
     "A language model is a probability distribution over sequences: the chain rule scores each "
     "token given the ones before it.", sentences),
    ("sampling", "Sampling and temperature", "", sampling),
    ("lookup", "Why not a lookup table?", "", lookup),
    ("sparsity", "Sparsity: n-grams of growing order", "", sparsity),
    ("learning", "Learning curves and the distance to the truth", "", learning),
    ("attention", "Attention patterns", "", attention),
    ("lens", "The logit lens", "", lens),
    ("embeddings", "Token embeddings", "", embeddings),
    ("arithmetic", "Embedding arithmetic", "", arithmetic),
    ("calibration", "Calibration", "", calibration),
)


def run_sections(ctx: ReportContext, only=None, progress=None) -> list:
    """Run every section; one that does not apply (e.g. attention of an n-gram) becomes a note.

    ``progress(i, n, section)``, when given, is called as each section starts (``seconds`` 0)
    and ends."""
    out = []
    chosen = [spec for spec in SECTIONS if only is None or spec[0] in only]
    for i, (key, title, intro, fn) in enumerate(chosen, start=1):
        s = Section(key, title, intro)
        if progress is not None:
            progress(i, len(chosen), s)
        t0 = time.perf_counter()
        try:
            fn(ctx, s)
        except SeqProbError as exc:
            log.info("section %s skipped: %s", key, exc)
            s.figures, s.tables = [], []
            s.notes.append(f"Not available for this model: {exc}")
        s.seconds = time.perf_counter() - t0
        out.append(s)
        if progress is not None:
            progress(i, len(chosen), s)
    return out
