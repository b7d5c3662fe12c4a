"""``seqprob demo``: the whole story on the toy language, in well under a minute.

Samples a training corpus from the true distribution P*, fits n-gram tables (orders 1-5: MLE,
add-k, modified Kneser-Ney), loads the shipped GPT, scores the example sentences under P* and
every model, compares held-out cross-entropy with the true entropy, and writes figures and a
short report to an output folder. The terminal shows every table of the report, narrowed to
its width (the report keeps them whole); the line saying what was written comes last.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from .._io import atomic_write, ensure_writable_dir
from ..checks import check_int
from . import pipeline
from .tables import fit_table, fit_text
from .pipeline import AGREEMENT_PAIR, EXAMPLE_SENTENCES as EXAMPLES, GPT_NAME, TRUTH_NAME

__all__ = ["run_demo", "DemoResult", "EXAMPLES", "AGREEMENT_PAIR"]

log = logging.getLogger(__name__)

ORDERS = (1, 2, 3, 4, 5)
#: quick -> (training sentences, held-out sentences, agreement pairs, arithmetic-coded sentences)
SIZES = {False: (20_000, 1_000, 300, 200), True: (3_000, 300, 100, 50)}
#: What the demo does, in order: the steps of its progress bar.
STAGES = ("fitting n-gram models", "loading the GPT", "scoring the example sentences",
          "held-out cross-entropy", "long-range agreement", "arithmetic coding", "figures and report")


@dataclass
class DemoResult:
    """What the demo computed: the tables it printed and the files it wrote."""

    out: Path
    sentences: object          # DataFrame: log P of each example under each model
    surprisal: object          # DataFrame: per-token surprisal (bits) under selected models
    heldout: object            # DataFrame: held-out cross-entropy per model vs the true entropy
    agreement: object          # DataFrame: long-range agreement accuracy per model
    compression: object = None  # DataFrame: arithmetic-code size vs cross-entropy per model
    coded_sentences: int = 0    # held-out sentences the compression table codes
    unknown: dict = field(default_factory=dict)  # sentence -> words not in the vocabulary
    files: list = field(default_factory=list)
    seconds: float = 0.0


def _gpt(retrain: bool, quick: bool, seed: int, progress: bool):
    from .defaults import DEFAULT_RECIPE, QUICK_RECIPE, default_model, train_default_model

    if not retrain:
        return default_model(), None
    from dataclasses import replace

    recipe = replace(QUICK_RECIPE if quick else DEFAULT_RECIPE, seed=seed)
    return train_default_model(recipe=recipe, progress=progress)


def _sentence_table(df, names: list, texts: list):
    """log P of each text (columns) under each model (rows) from a ``score`` DataFrame."""
    from ..scoring import summarize

    table = summarize(df).pivot(index="model", columns="text", values="logprob")
    return table.loc[names, texts]


def _unknown_words(df, texts: list) -> dict:
    """Sentence -> its words that are not in the vocabulary (scored as ``<unk>``; P* gives them 0)."""
    first = df[df["model"] == df["model"].iloc[0]]
    oov = first[first["is_oov"]]
    return {texts[seq]: list(group["token"]) for seq, group in oov.groupby("seq", sort=True)}


def _surprisal_table(df, names: list):
    sub = df[df.model.isin(names) & (df.seq < len(EXAMPLES))]
    wide = sub.pivot_table(index=["seq", "position", "token"], columns="model", values="surprisal_bits",
                           sort=True)
    return wide[names]


def _heldout_table(models: dict, heldout, tokenizer, true_entropy: float):
    import pandas as pd

    from ..scoring import evaluate

    rows = []
    for name, model in models.items():
        ev = evaluate(model, heldout, tokenizer=tokenizer)
        rows.append({"model": name, "nats_per_token": -ev.logprob / ev.n_tokens,
                     "bits_per_token": ev.bits_per_token, "perplexity": ev.perplexity})
    table = pd.DataFrame(rows)
    truth_ce = float(table.loc[table.model == TRUTH_NAME, "nats_per_token"].iloc[0])
    table["kl_to_truth_nats"] = table["nats_per_token"] - truth_ce  # same sample: an unbiased KL estimate
    exact = {"model": "H(P*) exact", "nats_per_token": true_entropy,
             "bits_per_token": true_entropy / math.log(2), "perplexity": math.exp(true_entropy),
             "kl_to_truth_nats": float("nan")}
    return pd.concat([table, pd.DataFrame([exact])], ignore_index=True)


def _agreement_table(models: dict, names: list, n: int, seed: int):
    import pandas as pd

    from ..analysis import agreement_test

    rows = []
    for name in names:
        res = agreement_test(models[name], n=n, seed=seed)
        rows.append({"model": name, "accuracy": res.accuracy, "ci_low": res.ci_low,
                     "ci_high": res.ci_high, "pairs": n})
    return pd.DataFrame(rows)


def _figures(out: Path, scored, truth, lines, heldout, history, baselines: dict) -> list:
    """Every figure the demo can draw, as PNG files in ``out``; returns their paths.

    ``scored`` is the ``score`` DataFrame of every model; the sentence figures show the three
    examples under P*, the trigram and the GPT.
    """
    from .. import plots
    from ..analysis import sparsity_curve
    from ..ngram import expected_discount_fallback

    df = scored[scored["model"].isin([TRUTH_NAME, "mkn-3", GPT_NAME]) & (scored["seq"] < len(EXAMPLES))]
    figures = {
        "sentences_surprisal.png": plots.sentence_comparison(df),
        "chain_rule_cumulative.png": plots.cumulative_logprob(df, seq=0).figure,
        "lookup_table_size.png": plots.lookup_table(vocab_sizes=(len(truth.vocab), 50_257)).figure,
    }
    with expected_discount_fallback():
        curve = sparsity_curve(lines, heldout, orders=ORDERS, tokenizer=truth.tokenizer)
    figures["ngram_sparsity.png"] = plots.sparsity(curve).figure
    if history is not None:
        raw = pipeline.heldout_cross_entropies(baselines, heldout, truth.tokenizer)
        figures["learning_curves.png"] = plots.learning_curves(  # legend: the tables' figures too
            history, baselines=raw, true_entropy=truth.entropy(), tokens="stream").figure
    paths = []
    for name, fig in figures.items():
        path = out / name
        with atomic_write(path, "wb") as handle:
            fig.savefig(handle, format="png", dpi=110, bbox_inches="tight")
        paths.append(path)
    return paths


def _three_decimals(v) -> str:
    return f"{v:.3f}"


def _fmt(df) -> str:
    return df.to_string(float_format=_three_decimals)


def _unknown_text(unknown: dict) -> str:
    """One line per sentence naming its unknown words, then what the rows after them mean
    (empty when there are none)."""
    lines = [f"unknown words in {text!r}: {', '.join(words)} (not in the vocabulary: "
             "P* gives them probability 0, smoothed models score them as <unk>)"
             for text, words in unknown.items()]
    return "\n".join(lines + [pipeline.IMPOSSIBLE_PREFIX_NOTE] if lines else [])


def _sections(result: DemoResult) -> list:
    """(title, table, note) of every table the demo shows, in order: the terminal and
    ``report.md`` print this one list."""
    parts = [
        ("log P(sentence </s> | <s>) in nats (-inf: probability 0)", result.sentences,
         _unknown_text(result.unknown)),
        ("per-token surprisal in bits (inf: the model says impossible)", result.surprisal, ""),
        ("held-out cross-entropy per token vs the true entropy H(P*); KL = CE - H",
         result.heldout.set_index("model"), ""),
        ("long-range agreement: share of pairs where the correct verb form is preferred",
         result.agreement.set_index("model"), ""),
    ]
    if result.compression is not None:
        parts.append((f"arithmetic coding of {result.coded_sentences} held-out sentences: real code size vs "
                      "cross-entropy (bits per byte); P* is the optimal code",
                      result.compression.set_index("model"), ""))
    return parts


def _report_text(result: DemoResult, settings: dict) -> str:
    parts = ["# seqprob demo report", "",
             "Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()), ""]
    for title, table, note in _sections(result):
        parts += [f"## {title}", "", "```", _fmt(table), "```", ""] + ([note, ""] if note else [])
    parts += ["## Figures", ""]
    parts += [f"![{p.stem}]({p.name})" for p in result.files if p.suffix == ".png"]
    return "\n".join(parts) + "\n"


class _Stages:
    """The demo's progress: one bar over :data:`STAGES` on standard error (training adds its
    own bar under it); nothing when ``progress`` is false."""

    def __init__(self, progress: bool):
        from .._progress import progress_bar

        self.bar = progress_bar(len(STAGES), "demo", progress, unit="stage", leave=False)
        self.done = -1

    def __call__(self, name: str) -> None:
        """The previous stage is done; ``name`` starts."""
        if self.done >= 0:
            self.bar.update(1)
        self.done += 1
        self.bar.set_description_str(f"demo: {name}")

    def close(self) -> None:
        self.bar.close()


def run_demo(out="seqprob-demo", seed: int = 0, quick: bool = False, retrain: bool = False,
             progress: bool = True, echo=print, width: int | None = None) -> DemoResult:
    """Run the demo; print its tables with ``echo`` and write figures + ``report.md`` to ``out``.

    Parameters
    ----------
    out : str or Path
        Output folder (created; must be writable: checked before any work is done).
    seed : int
        Seed of the sampled corpora (and of the GPT when retraining).
    quick : bool
        Smaller corpora and fewer agreement pairs (a few seconds).
    retrain : bool
        Train the GPT from scratch instead of loading the shipped one (minutes; with
        ``quick``, a tiny model in seconds).
    progress : bool
        Show a progress bar over the demo's stages (and the training bar) on standard error.
    width : int, optional
        Width the printed tables and lines are narrowed to (default: the terminal's, see
        :func:`seqprob.app.tables.terminal_width`); ``report.md`` holds them whole.
    """
    from ..truth import toy_english

    seed = check_int("seed", seed, low=0)  # numpy's generators refuse negative seeds
    start = time.perf_counter()
    out = ensure_writable_dir(out)
    truth = toy_english()
    sizes = dict(zip(("train_sentences", "heldout_sentences", "agreement_pairs", "coded_sentences"),
                     SIZES[bool(quick)]))
    lines, heldout = pipeline.sample_corpora(truth, sizes["train_sentences"],
                                             sizes["heldout_sentences"], seed)
    echo(fit_text(f"P* = toy_english(): {len(truth.vocab)} tokens; sampled {len(lines)} training and "
                  f"{len(heldout)} held-out sentences (seed {seed})", width))
    stage = _Stages(progress)
    try:
        stage(STAGES[0])
        models = {TRUTH_NAME: truth,
                  **pipeline.fit_ngrams(pipeline.ngram_specs(ORDERS), lines, truth.tokenizer)}
        stage("training the GPT" if retrain else STAGES[1])
        models[GPT_NAME], history = _gpt(retrain, quick, seed, progress)
        result, scored = _measure(out, truth, models, heldout, sizes, seed, stage)
        stage(STAGES[-1])
        history = history if history is not None else pipeline.shipped_history()
        result.files = _figures(out, scored=scored, truth=truth, lines=lines, heldout=heldout,
                                history=history, baselines={k: models[k] for k in ("mkn-3", "mkn-5")})
        result.files.append(_write_report(out, result, {"seed": seed, "quick": quick,
                                                        "retrain": retrain, **sizes}))
    finally:
        stage.close()
    result.seconds = time.perf_counter() - start
    _echo_tables(result, echo, width)
    return result


def _measure(out: Path, truth, models: dict, heldout: list, sizes: dict, seed: int, stage) -> tuple:
    """Every table of the demo (one stage each): the DemoResult and the ``score`` DataFrame."""
    from ..scoring import score

    stage(STAGES[2])
    texts = list(EXAMPLES) + list(AGREEMENT_PAIR)
    scored = score(models, texts, tokenizer=truth.tokenizer, distribution=False)
    sentences = _sentence_table(scored, list(models), texts)
    surprisal = _surprisal_table(scored, [TRUTH_NAME, "mle-3", "addk-3", "mkn-3", "mkn-5", GPT_NAME])
    stage(STAGES[3])
    heldout_table = _heldout_table(models, heldout, truth.tokenizer, truth.entropy().per_token)
    stage(STAGES[4])
    agreement = _agreement_table(models, [TRUTH_NAME, "mkn-3", "mkn-5", GPT_NAME],
                                 sizes["agreement_pairs"], seed)
    stage(STAGES[5])
    coded = heldout[:sizes["coded_sentences"]]
    compression = _compression_table({k: models[k] for k in (TRUTH_NAME, "mkn-3", GPT_NAME)}, coded,
                                     truth.tokenizer)
    result = DemoResult(out, sentences, surprisal, heldout_table, agreement, compression,
                        coded_sentences=len(coded), unknown=_unknown_words(scored, texts))
    return result, scored


def _write_report(out: Path, result: DemoResult, settings: dict) -> Path:
    report = out / "report.md"
    with atomic_write(report) as handle:
        handle.write(_report_text(result, settings))
    return report


def _compression_table(models: dict, texts: list, tokenizer):
    """Prediction is compression: P* gives the shortest code of its own text."""
    from ..scoring.compression import compression_table

    return compression_table(models, texts, tokenizer=tokenizer)


def _echo_tables(result: DemoResult, echo, width: int | None) -> None:
    """Every table of the report, narrowed to ``width``; then what was written, last."""
    import pandas as pd

    for title, table, note in _sections(result):
        echo(fit_text("\n" + title, width))
        keyed = table.index.name is not None or not table.index.equals(pd.RangeIndex(len(table)))
        echo(fit_table(table, width, index=keyed, decimals=3))
        if note:
            echo(fit_text(note, width))
    echo(fit_text(f"\nwrote {len(result.files)} files to {result.out.resolve()} "
                  f"(report: {result.out / 'report.md'}) in {result.seconds:.1f} s", width))
