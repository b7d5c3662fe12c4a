"""Distances to the truth: how far is a model P_θ from the exact source P*?

Every function takes any :class:`~seqprob.protocols.LanguageModel` (only ``vocab``,
``token_logprobs`` are used) and sentences as strings with the tokenizer that the model
reads. Tokens per sentence = words + ``</s>`` (``eos=True``), the unit of the entropy rate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..protocols import model_tokenizer

__all__ = ["cross_entropy", "true_entropy", "kl_per_token", "agreement_test", "sentence_logprobs",
           "CrossEntropy", "KLEstimate", "AgreementResult"]

_BATCH = 512


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise InputError(f"confidence must be in (0, 1), got {confidence!r}", value=confidence, limit=(0, 1))
    from scipy.stats import norm  # scipy.stats is slow to import: only when a CI is asked for

    return float(norm.ppf(0.5 + confidence / 2))


def _tokenizer_of(model, tokenizer):
    tok = model_tokenizer(model, tokenizer)
    if tok is None:
        raise InputError(f"{type(model).__name__} has no .tokenizer: pass tokenizer=...")
    return tok


def _special(model, name: str) -> int:
    idx = getattr(model.vocab, f"{name}_id", None)
    if idx is None:
        role = {"bos": "<s> (x_0)", "eos": "</s>"}[name]
        raise InputError(f"{type(model).__name__}'s vocabulary has no {role} token; needed here", token=name)
    return int(idx)


def _ratio_stderr(num: np.ndarray, den: np.ndarray, ratio: float) -> float:
    """Delta-method standard error of sum(num) / sum(den) over i.i.d. pairs (num_i, den_i)."""
    n = len(num)
    if n < 2 or not np.isfinite(num).all():
        return math.inf
    return float((num - ratio * den).std(ddof=1) / (math.sqrt(n) * den.mean()))


def sentence_logprobs(model, sentences, tokenizer=None, eos: bool = True) -> tuple:
    """Joint log P(sentence) under ``model`` for each sentence, and its scored token count.

    Parameters
    ----------
    model : LanguageModel
    sentences : sequence of str
    tokenizer : Tokenizer, optional
        Defaults to ``model.tokenizer``.
    eos : bool
        Also score P(``</s>`` | sentence) (a distribution over finite sentences).

    Returns
    -------
    logprob : ndarray (N,), float64, natural log (-inf when a token has probability 0)
    tokens : ndarray (N,), int64, tokens scored (words + 1 with ``eos``)

    Notes
    -----
    log P(x) = sum_t log P(x_t | x_0 .. x_{t-1}), x_0 = ``<s>``. Sentences are grouped by length,
    so batches need no padding and the result is exact.

    Examples
    --------
    >>> from seqprob.truth import toy_english
    >>> logp, tokens = sentence_logprobs(toy_english(), ["the cat sat on the mat", "the cat sat zx"])
    >>> tokens.tolist(), bool(np.isneginf(logp[1]))
    ([7, 5], True)
    """
    if isinstance(sentences, str):
        raise InputError("sentences must be a list of strings, not a single string")
    tok = _tokenizer_of(model, tokenizer)
    bos = _special(model, "bos")
    tail = [_special(model, "eos")] if eos else []
    encoded = [[bos, *tok.encode(s), *tail] for s in sentences]
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    out = np.zeros(len(encoded))
    for length in np.unique(lengths[lengths > 1]):
        idx = np.flatnonzero(lengths == length)
        for start in range(0, len(idx), _BATCH):
            chunk = idx[start:start + _BATCH]
            batch = np.array([encoded[i] for i in chunk], dtype=np.int64)  # (B, T+1)
            out[chunk] = np.asarray(model.token_logprobs(batch), dtype=np.float64).sum(axis=1)
    return out, lengths - 1


@dataclass(frozen=True)
class CrossEntropy:
    """Cross-entropy of a model on sentences (nats). ``float(ce)`` = ``per_token``."""

    per_token: float
    per_sentence: float
    per_token_stderr: float
    n_sentences: int
    n_tokens: int
    confidence: float = 0.95

    @property
    def per_token_bits(self) -> float:
        return self.per_token / math.log(2)

    @property
    def perplexity(self) -> float:
        return math.exp(self.per_token) if self.per_token < 700 else math.inf

    @property
    def ci(self) -> tuple:
        """Confidence interval of ``per_token`` (delta method over sentences)."""
        z = _z(self.confidence)
        return (self.per_token - z * self.per_token_stderr, self.per_token + z * self.per_token_stderr)

    def __float__(self) -> float:
        return self.per_token


def cross_entropy(model, samples, tokenizer=None, eos: bool = True, confidence: float = 0.95) -> CrossEntropy:
    """Cross-entropy H(P*, P_θ) of ``model`` estimated on ``samples`` drawn from P*.

    Notes
    -----
    per_token = -sum_k log P_θ(x_k) / sum_k len(x_k) (token-weighted: len(x) counts ``</s>``);
    its standard error comes from the delta method for a ratio of sums over i.i.d. sentences.
    A sentence with probability 0 makes it ``inf``. On samples from P*, per_token - H(P*) per
    token estimates KL(P* || P_θ) per token (see :func:`kl_per_token`).

    Examples
    --------
    >>> from seqprob.truth import toy_english
    >>> g = toy_english()
    >>> ce = cross_entropy(g, g.sample(2000, seed=1))
    >>> abs(ce.per_token - g.entropy().per_token) < 0.1
    True
    """
    logp, tokens = sentence_logprobs(model, samples, tokenizer=tokenizer, eos=eos)
    if len(logp) == 0 or tokens.sum() == 0:
        raise InputError("cross_entropy needs at least one sentence with a token to score")
    nll, den = -logp, tokens.astype(np.float64)
    per_token = float(nll.sum() / den.sum())
    return CrossEntropy(per_token=per_token, per_sentence=float(nll.mean()),
                        per_token_stderr=_ratio_stderr(nll, den, per_token), n_sentences=len(nll),
                        n_tokens=int(tokens.sum()), confidence=confidence)


def true_entropy(truth, **kwargs):
    """Entropy of the true source (``truth.entropy(**kwargs)``): exact for a deterministic grammar.

    Returns the grammar's :class:`~seqprob.truth.GrammarEntropy` (``per_sentence``, ``per_token``, nats).
    """
    return truth.entropy(**kwargs)


@dataclass(frozen=True)
class KLEstimate:
    """KL(P* || P_θ) per token (nats) with a confidence interval, estimated on samples of P*."""

    per_token: float
    stderr: float
    ci_low: float
    ci_high: float
    per_sentence: float
    cross_entropy_per_token: float
    entropy_per_token: float
    n_samples: int
    n_tokens: int
    confidence: float

    @property
    def per_token_bits(self) -> float:
        return self.per_token / math.log(2)

    @property
    def ci(self) -> tuple:
        return (self.ci_low, self.ci_high)


def kl_per_token(truth, model, n: int = 2000, seed=0, tokenizer=None, samples=None,
                 confidence: float = 0.95) -> KLEstimate:
    """KL(P* || P_θ) per token, estimated on ``n`` sentences sampled from ``truth``.

    Parameters
    ----------
    truth : ProbabilisticGrammar (or any model with ``sample`` and ``tokenizer``)
    model : LanguageModel
        Must score ``</s>`` (its probabilities are then a distribution over finite sentences).
    n, seed : number of sentences drawn from P* and the seed (ignored when ``samples`` is given).
    tokenizer : the model's tokenizer (default ``model.tokenizer``); P* uses ``truth.tokenizer``.
    samples : sequence of str, optional
        Sentences already drawn from P* (e.g. a held-out set).

    Notes
    -----
    With d_k = log P*(x_k) - log P_θ(x_k) and L_k the P* tokens of x_k (words + ``</s>``),

        KL per token = sum_k d_k / sum_k L_k  ->  KL(P* || P_θ) / E[L]   (ratio of sums),

    with standard error from the delta method, sqrt(var(d_k - KL L_k) / n) / mean(L), and a
    normal confidence interval. d_k is computed per sentence, so the noise of log P* and of
    log P_θ largely cancels; KL(P* || P*) is exactly 0 with stderr 0. If P_θ gives a sampled
    sentence probability 0 the estimate is ``inf``.

    Examples
    --------
    >>> from seqprob.table import UniformModel
    >>> from seqprob.truth import toy_english
    >>> g = toy_english()
    >>> kl_per_token(g, g, n=200).per_token
    0.0
    >>> kl = kl_per_token(g, UniformModel(g.vocab), n=200, tokenizer=g.tokenizer)
    >>> bool(kl.ci_low > 1.0)  # uniform over 213 tokens: log(213) - H(P*) ≈ 3.5 nats/token
    True
    """
    if samples is None:
        samples = truth.sample(n, seed=seed)
    samples = list(samples)
    if not samples:
        raise InputError("kl_per_token needs at least one sample sentence")
    log_true, tokens = sentence_logprobs(truth, samples, tokenizer=getattr(truth, "tokenizer", None))
    log_model, _ = sentence_logprobs(model, samples, tokenizer=tokenizer)
    with np.errstate(invalid="ignore"):
        d = log_true - log_model  # (n,) inf where the model gives probability 0
    den = tokens.astype(np.float64)
    kl = float(d.sum() / den.sum())
    se = _ratio_stderr(d, den, kl)
    z = _z(confidence)
    return KLEstimate(per_token=kl, stderr=se, ci_low=kl - z * se, ci_high=kl + z * se,
                      per_sentence=float(d.mean()), cross_entropy_per_token=float(-log_model.sum() / den.sum()),
                      entropy_per_token=float(-log_true.sum() / den.sum()), n_samples=len(samples),
                      n_tokens=int(tokens.sum()), confidence=confidence)


@dataclass(frozen=True)
class AgreementResult:
    """Share of agreement contexts where the model prefers the correct verb form."""

    accuracy: float
    n_pairs: int
    n_correct: int
    ci_low: float
    ci_high: float
    table: object  # pandas DataFrame, one row per pair

    @property
    def ci(self) -> tuple:
        return (self.ci_low, self.ci_high)


def _wilson(k: int, n: int, confidence: float) -> tuple:
    z = _z(confidence)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _continuations(model, tok, bos: int, prefix: str, words: tuple) -> list:
    """log P(word | prefix) for each word (summed over its tokens when it has several)."""
    p_ids = tok.encode(prefix)
    fulls = [[bos, *tok.encode(f"{prefix} {w}")] for w in words]
    if all(len(f) == len(fulls[0]) for f in fulls):
        rows = np.asarray(model.token_logprobs(np.array(fulls, dtype=np.int64)), dtype=np.float64)
    else:
        rows = [np.asarray(model.token_logprobs(np.array(f, dtype=np.int64)), dtype=np.float64) for f in fulls]
    out = []
    for full, row in zip(fulls, rows):
        if full[1:len(p_ids) + 1] == p_ids:
            out.append(float(row[len(p_ids):].sum()))
        else:  # tokenization of the prefix changed: chain-rule difference
            head = model.token_logprobs(np.array([bos, *p_ids], dtype=np.int64)).sum() if p_ids else 0.0
            with np.errstate(invalid="ignore"):
                out.append(float(row.sum() - head))
    return out


def agreement_test(model, pairs=None, tokenizer=None, n: int = 200, seed=0,
                   confidence: float = 0.95) -> AgreementResult:
    """Share of subject-verb agreement contexts where ``model`` prefers the correct verb form.

    Parameters
    ----------
    model : LanguageModel
    pairs : sequence of AgreementPair or (prefix, correct, wrong) tuples, optional
        Default: ``seqprob.truth.agreement_pairs(n, seed)`` from toy English, where a relative
        clause or a prepositional phrase separates the subject from its verb.
    tokenizer : the model's tokenizer (default ``model.tokenizer``).

    Returns
    -------
    AgreementResult
        ``accuracy`` with a Wilson confidence interval; ``table`` has one row per pair with
        ``logprob_correct``, ``logprob_wrong`` (nats, conditional on the prefix) and ``margin``.

    Notes
    -----
    A pair counts as correct when log P(correct | <s> prefix) > log P(wrong | <s> prefix)
    strictly; a tie (e.g. both -inf) counts as wrong. A model that ignores the subject sits
    near 50% on balanced pairs.

    Examples
    --------
    >>> from seqprob.truth import toy_english
    >>> g = toy_english()
    >>> agreement_test(g, n=20).accuracy  # the truth always prefers the grammatical verb
    1.0
    >>> agreement_test(g, [("the cats that the dog sees", "sleep", "sleeps")]).n_correct
    1
    """
    import pandas as pd

    if pairs is None:
        from ..truth import agreement_pairs
        pairs = agreement_pairs(n=n, seed=seed)
    rows = [_agreement_row(model, _tokenizer_of(model, tokenizer), _special(model, "bos"), p) for p in pairs]
    if not rows:
        raise InputError("agreement_test needs at least one pair")
    table = pd.DataFrame(rows)
    k = int(table["is_correct"].sum())
    lo, hi = _wilson(k, len(table), confidence)
    return AgreementResult(accuracy=k / len(table), n_pairs=len(table), n_correct=k, ci_low=lo, ci_high=hi,
                           table=table)


def _agreement_row(model, tok, bos: int, pair) -> dict:
    if isinstance(pair, (tuple, list)):
        if len(pair) != 3:
            raise InputError(f"an agreement pair is (prefix, correct, wrong), got {pair!r}", value=pair)
        prefix, correct, wrong = pair
        extra = {}
    else:
        prefix, correct, wrong = pair.prefix, pair.correct, pair.wrong
        extra = {"kind": pair.kind, "attractor": pair.attractor}
    good, bad = _continuations(model, tok, bos, prefix, (correct, wrong))
    with np.errstate(invalid="ignore"):
        margin = good - bad
    return {"prefix": prefix, "correct": correct, "wrong": wrong, **extra, "logprob_correct": good,
            "logprob_wrong": bad, "margin": margin, "is_correct": bool(good > bad)}
