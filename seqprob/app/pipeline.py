"""The one pipeline the demo and the report draw from: sentences, corpora, models, measurements.

Both tell the same story on the toy language, so they share its parts here: the example
sentences, how corpora are sampled from P*, the names and settings of the n-gram baselines,
the sentence stream a GPT trains on, the shipped model's training history, and the held-out
cross-entropies the learning curves are drawn against.
"""
from __future__ import annotations

import logging

import numpy as np

__all__ = ["EXAMPLE_SENTENCES", "AGREEMENT_PAIR", "PROMPT", "TRUTH_NAME", "GPT_NAME", "ADDK_K",
           "IMPOSSIBLE_PREFIX_NOTE", "sample_corpora", "ngram_specs", "fit_ngrams", "sentence_stream", "shipped_history",
           "heldout_cross_entropies"]

log = logging.getLogger(__name__)

#: The three sentences of the story: likely, impossible (unknown words), a fact.
EXAMPLE_SENTENCES = ("the cat sat on the mat", "the cat sat zx oj squid", "paris is the capital of france")
#: Subject and verb separated by a relative clause: more words apart than a trigram sees.
AGREEMENT_PAIR = ("the cat that the dogs chase sleeps", "the cat that the dogs chase sleep")
#: The prompt that sampling continues.
PROMPT = "the cat"
#: Names of the true source and of the GPT in every table and figure.
TRUTH_NAME, GPT_NAME = "P*", "gpt"
#: The add-k constant of the add-k baselines.
ADDK_K = 0.01


def sample_corpora(truth, n_train: int, n_test: int, seed: int = 0) -> tuple:
    """(training sentences, held-out sentences) sampled from ``truth`` with seeds ``seed`` and
    ``seed + 1``."""
    return truth.sample(n_train, seed=seed), truth.sample(n_test, seed=seed + 1)


def ngram_specs(orders, kinds=("mle", "addk", "mkn")) -> dict:
    """Name -> unfitted estimator: ``mle-N``, ``addk-N`` (k = :data:`ADDK_K`), ``mkn-N``."""
    from .. import ngram

    make = {"mle": lambda n: ngram.MLE(order=n), "addk": lambda n: ngram.AddK(order=n, k=ADDK_K),
            "mkn": lambda n: ngram.ModifiedKneserNey(order=n)}
    return {f"{kind}-{n}": make[kind](n) for n in orders for kind in kinds}


def fit_ngrams(specs: dict, lines, tokenizer) -> dict:
    """Fit every estimator of ``specs`` on ``lines`` (KenLM's discount fallback on small
    corpora is expected and silenced)."""
    from ..ngram import expected_discount_fallback

    with expected_discount_fallback():
        return {name: model.fit(lines, tokenizer=tokenizer) for name, model in specs.items()}


def sentence_stream(lines, tokenizer) -> np.ndarray:
    """One token stream ``<s> w_1 .. w_n </s> <s> ...`` from sentences, for window sampling.

    Each sentence starts with its x_0 = ``<s>``, so a window starting there is scored exactly
    as :func:`seqprob.score` scores a sentence.

    Examples
    --------
    >>> import seqprob as sp
    >>> tok = sp.WhitespaceTokenizer.fit(["a b"])
    >>> [tok.vocab.tokens[i] for i in sentence_stream(["a b", "b"], tok)]
    ['<s>', 'a', 'b', '</s>', '<s>', 'b', '</s>']
    """
    bos, eos = tokenizer.vocab.bos_id, tokenizer.vocab.eos_id
    parts = [np.array([bos, *tokenizer.encode(line), eos], dtype=np.int64) for line in lines]
    return np.concatenate(parts)


def shipped_history():
    """The training history saved beside the default model (``history.csv``), or None."""
    import pandas as pd

    from ..registry import default_model_dir

    path = default_model_dir() / "history.csv"
    if not path.is_file():
        return None
    try:
        with path.open("r", encoding="utf-8") as handle:
            return pd.read_csv(handle)
    except (OSError, ValueError) as exc:
        log.warning("the default model's history.csv is unreadable (%s)", exc)
        return None


#: What a row means after a token of probability 0 (shown wherever such a sentence is drawn).
IMPOSSIBLE_PREFIX_NOTE = (
    "After a token of probability 0 the prefix itself is impossible and P(next | prefix) = 0/0 "
    "is undefined: the sentence's log P is already -inf whatever follows. P* and the joint table "
    "return a uniform row there (over the words and </s>) so that every row stays a distribution; "
    "n-gram models back off to shorter contexts. The finite bars after an inf are that "
    "convention, not evidence about the later words.")

def heldout_cross_entropies(models: dict, heldout, tokenizer) -> dict:
    """name -> :class:`~seqprob.analysis.truth.CrossEntropy` of each model on ``heldout``
    (each model with its own tokenizer when it has one): the learning curves' reference lines,
    which :func:`seqprob.plots.learning_curves` puts on the training stream's scale."""
    from ..analysis.truth import cross_entropy
    from ..protocols import model_tokenizer

    return {name: cross_entropy(m, heldout, tokenizer=model_tokenizer(m, tokenizer))
            for name, m in models.items()}
