"""The embedded default: a small GPT trained by seqprob on samples of ``toy_english()``.

Its weights and tokenizer ship as package data (``seqprob/data/default_gpt/``), loaded by the
library's :func:`seqprob.default_model` (re-exported here);
:func:`train_default_model` is the recipe that made them (run
``python analysis/train_default_model.py`` to rebuild, or ``seqprob demo --retrain``).
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path


from ..registry import default_model  # noqa: F401  (the loader lives in the library)
from .pipeline import sample_corpora, sentence_stream

__all__ = ["default_model", "train_default_model", "DefaultRecipe", "DEFAULT_RECIPE",
           "QUICK_RECIPE", "sentence_stream"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DefaultRecipe:
    """Every setting of the default model's training run (saved beside the weights)."""

    seed: int = 0
    n_train_sentences: int = 100_000
    n_val_sentences: int = 2_000
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    block_size: int = 32
    steps: int = 3_000
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 150
    weight_decay: float = 0.1
    grad_clip: float = 1.0


DEFAULT_RECIPE = DefaultRecipe()
#: A few-second version for ``seqprob demo --retrain --quick`` and the tests.
QUICK_RECIPE = replace(DEFAULT_RECIPE, n_train_sentences=5_000, n_val_sentences=200, steps=150,
                       warmup=20, n_embd=32)


def train_default_model(out=None, recipe: DefaultRecipe = DEFAULT_RECIPE, progress: bool = True):
    """Train the default GPT on samples of ``toy_english()`` (reproducible for ``recipe.seed``).

    Parameters
    ----------
    out : str or Path, optional
        Folder to save the model in (the recipe goes in ``training.json``, plus ``history.csv``).
    recipe : DefaultRecipe
        Corpus size, model size and optimizer settings.
    progress : bool
        Show the training progress bar.

    Returns
    -------
    (GPT, pandas.DataFrame)
        The model and its training history.
    """
    from ..gpt import GPT, GPTConfig
    from ..training import train
    from ..truth import toy_english

    truth = toy_english()
    tok = truth.tokenizer
    train_lines, val_lines = sample_corpora(truth, recipe.n_train_sentences, recipe.n_val_sentences,
                                            recipe.seed)
    train_ids, val_ids = sentence_stream(train_lines, tok), sentence_stream(val_lines, tok)
    config = GPTConfig(vocab_size=len(tok.vocab), block_size=recipe.block_size, n_layer=recipe.n_layer,
                       n_head=recipe.n_head, n_embd=recipe.n_embd)
    model = GPT(config, seed=recipe.seed, tokenizer=tok)
    start = time.perf_counter()
    history = train(model, train_ids, steps=recipe.steps, batch_size=recipe.batch_size, lr=recipe.lr,
                    seed=recipe.seed, val_ids=val_ids, eval_every=max(recipe.steps // 10, 1),
                    warmup=recipe.warmup, weight_decay=recipe.weight_decay,
                    grad_clip=recipe.grad_clip, progress=progress)
    seconds = time.perf_counter() - start
    log.info("trained the default model in %.1f s", seconds)
    if out is not None:
        _save(model, history, recipe, seconds, Path(out))
    return model, history


def _save(model, history, recipe: DefaultRecipe, seconds: float, out: Path) -> None:
    from .._io import atomic_write

    model.save(out, extra={"recipe": asdict(recipe), "train_seconds": round(seconds, 1)})
    with atomic_write(out / "history.csv") as handle:
        history.to_csv(handle, index=False)
