"""What a report is built from: the text, the true source (if known), the model, the baselines."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from ... import _parallel
from ...errors import InputError
from ..pipeline import AGREEMENT_PAIR, EXAMPLE_SENTENCES, PROMPT, TRUTH_NAME, sentence_stream

__all__ = ["ReportContext", "build_context", "EXAMPLE_SENTENCES", "QUICK", "FULL"]

log = logging.getLogger(__name__)

#: Sizes of a quick report (< 30 s) and of a full one.
QUICK = {"n_train": 1500, "n_test": 200, "orders": (1, 2, 3, 4), "demo_steps": 60, "n_calibration": 150}
FULL = {"n_train": 10000, "n_test": 1000, "orders": (1, 2, 3, 4, 5), "demo_steps": 600, "n_calibration": 1000}

#: Words of the corpus sentence that the attention and logit-lens figures look at (the first
#: held-out line that short, else the start of the first one): few enough for a small
#: model's context and for one readable label per token.
PROBE_WORDS = 12


@dataclass
class ReportContext:
    """Everything the sections read; ``settings`` is printed in the report as given."""

    model: object
    model_name: str
    tokenizer: object
    train_lines: list
    test_lines: list
    truth: object = None
    baselines: dict = field(default_factory=dict)
    history: object = None
    history_note: str = ""
    #: True when the history's losses are per token of a ``<s> .. </s> <s> ..`` sentence stream
    #: (seqprob's default and demo runs): each sentence then adds one free ``<s>`` prediction.
    history_stream: bool = False
    settings: dict = field(default_factory=dict)
    sentences: tuple = EXAMPLE_SENTENCES
    probe_sentence: str = AGREEMENT_PAIR[0]
    prompt: str = PROMPT
    sizes: dict = field(default_factory=dict)

    def models(self) -> dict:
        """Every model to compare, the truth first (when known) and the main model last."""
        out = {TRUTH_NAME: self.truth} if self.truth is not None else {}
        out.update(self.baselines)
        if self.model is not None:
            out[self.model_name] = self.model
        return out


def train_demo_gpt(tokenizer, train_lines, test_lines, steps: int, seed: int = 0):
    """A small GPT trained for ``steps`` steps: (model, history). Used when no trained model
    (or no training history) is at hand, so the learning curves always have a real run."""
    from ...gpt import GPT, GPTConfig
    from ...training import train

    cfg = GPTConfig(vocab_size=len(tokenizer.vocab), block_size=32, n_layer=2, n_head=2, n_embd=32)
    model = GPT(cfg, seed=seed, tokenizer=tokenizer)
    with _parallel.one_blas_thread:  # tiny matrices: threads only add overhead (and thrash on a busy machine)
        history = train(model, sentence_stream(train_lines, tokenizer), steps=steps, batch_size=16, lr=1e-2,
                        seed=seed, val_ids=sentence_stream(test_lines, tokenizer), eval_every=max(1, steps // 6),
                        eval_windows=16, progress=False)
    return model, history


def _default_model():
    """The shipped GPT and its training history (``history.csv`` beside the weights), or
    (None, None) when this installation has no default model."""
    from ...registry import default_model
    from ..pipeline import shipped_history

    try:
        model = default_model()
    except (OSError, ValueError) as exc:  # shipped weights missing or unreadable
        log.warning("the default model could not be loaded (%s): training a small one", exc)
        return None, None
    history = getattr(model, "history_", None)
    if history is None:
        history = shipped_history()
    return model, history


def _fit_baselines(tokenizer, train_lines, orders) -> dict:
    from ..pipeline import fit_ngrams, ngram_specs

    specs = {**ngram_specs((3,)), **ngram_specs((max(orders),), kinds=("mkn",))}
    return fit_ngrams(specs, train_lines, tokenizer)


def _read_corpus(path, seed: int):
    from ..._io import read_lines

    lines = [t for t in read_lines(path) if t]
    if len(lines) < 10:
        raise InputError(f"corpus {str(path)!r} has {len(lines)} non-empty lines: a report needs at least 10",
                         value=len(lines), limit=10)
    order = np.random.default_rng(seed).permutation(len(lines))
    n_test = max(1, len(lines) // 10)
    return [lines[i] for i in order[n_test:]], [lines[i] for i in order[:n_test]]


def build_context(model=None, corpus=None, quick: bool = False, seed: int = 0, model_name: str | None = None,
                  baselines=None, history=None, need_model: bool = True,
                  need_history: bool = True) -> ReportContext:
    """Gather the report's inputs.

    Parameters
    ----------
    model : LanguageModel, optional
        Default: :func:`seqprob.default_model`; if it is unavailable, a small GPT trained here.
    corpus : path, optional
        A text file, one sentence per line (90 % train, 10 % held out). Default: sentences
        sampled from :func:`seqprob.truth.toy_english`, whose exact P* is then in every table.
    quick : bool
        Small sizes (:data:`QUICK`), for a report in seconds.
    baselines : dict of name -> fitted model, optional
        Default: n-grams (MLE, add-k, modified Kneser-Ney) fit on the training text.
    history : pandas.DataFrame, optional
        Training history of ``model`` (default: ``model.history_`` if it has one).
    need_model, need_history : bool
        Whether the sections to run need the model / a training history (without one, a small
        GPT is trained here for the learning curves).
    """
    t0 = time.perf_counter()
    sizes = dict(QUICK if quick else FULL)
    truth = None
    if corpus is None:
        from ...truth import toy_english

        from ..pipeline import sample_corpora

        truth = toy_english()
        train_lines, test_lines = sample_corpora(truth, sizes["n_train"], sizes["n_test"], seed)
        tokenizer = truth.tokenizer
        source = f"toy_english(): {sizes['n_train']} training and {sizes['n_test']} held-out samples"
    else:
        from ...tokenizers import WhitespaceTokenizer

        train_lines, test_lines = _read_corpus(corpus, seed)
        tokenizer = WhitespaceTokenizer.fit(train_lines)
        source = f"{corpus}: {len(train_lines)} training and {len(test_lines)} held-out lines"
    ctx = ReportContext(model=None, model_name=model_name or "model", tokenizer=tokenizer,
                        train_lines=train_lines, test_lines=test_lines, truth=truth, sizes=sizes)
    if need_model or need_history:
        _choose_model(ctx, model, history, sizes, seed, need_history)
    ctx.baselines = dict(baselines) if baselines is not None else _fit_baselines(tokenizer, train_lines, sizes["orders"])
    if truth is None:
        ctx.sentences = (*test_lines[:2], EXAMPLE_SENTENCES[1])
        short = [t for t in test_lines if len(t.split()) <= PROBE_WORDS]
        ctx.probe_sentence = short[0] if short else " ".join(test_lines[0].split()[:PROBE_WORDS])
        ctx.prompt = " ".join(test_lines[0].split()[:2])
    ctx.settings = {"mode": "quick" if quick else "full", "seed": seed, "text": source,
                    "model": ctx.model_name if ctx.model is not None else "(not needed)",
                    "model type": repr(ctx.model), "baselines": ", ".join(ctx.baselines),
                    "n-gram orders (sparsity)": ", ".join(map(str, sizes["orders"])),
                    "training history": ctx.history_note, **{f"size: {k}": v for k, v in sizes.items()},
                    "setup seconds": round(time.perf_counter() - t0, 2)}
    return ctx


def _choose_model(ctx: ReportContext, model, history, sizes: dict, seed: int, need_history: bool) -> None:
    """The model to report on and a training history for the learning curves."""
    note = "given" if history is not None else ""
    if model is None and ctx.truth is not None:
        model, shipped = _default_model()
        if model is not None:
            ctx.model_name = "default GPT"
            if history is None and shipped is not None:
                history, note = shipped, "the training run of the shipped default model"
    if history is None and model is not None and getattr(model, "history_", None) is not None:
        history, note = model.history_, "the model's own training history"
    if model is None or (history is None and need_history):
        demo, history = train_demo_gpt(ctx.tokenizer, ctx.train_lines, ctx.test_lines, sizes["demo_steps"], seed)
        if model is None:
            model, ctx.model_name = demo, f"GPT ({sizes['demo_steps']} steps here)"
        note = (f"a small demonstration GPT (2 layers, 32 dims) trained here for {sizes['demo_steps']} "
                "steps on the training text")
    ctx.history_note = note
    ctx.history_stream = note.startswith(("the training run of the shipped", "a small demonstration"))
    ctx.model, ctx.history = model, history
