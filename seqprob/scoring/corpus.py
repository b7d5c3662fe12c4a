"""Corpus scores: every figure of a corpus (:func:`evaluate`, :func:`perplexity`) under the
conventions of KenLM and SRILM, on one machine or over Dask partitions (:func:`evaluate_dask`),
and perplexity against the sliding-window stride (:func:`stride_sweep`).

Each is computed from additive running sums (:func:`corpus_sums`): token counts, OOVs, tokens of
probability 0, total log-probabilities, characters and bytes; a partitioned corpus adds the sums
of its partitions and gets the same figures as the whole.
"""
from __future__ import annotations

import functools
import logging
import math
import os
import warnings
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from .._io import CorpusFile, read_lines
from ..errors import InputError, SeqProbFileError
from ..functional import LN2, LN10
from ..protocols import CorpusScorer, is_normalized, model_tokenizer
from ..tokenizers.base import iter_texts
from .core import MAX_LOGPROB, check_model, context_size, encode_for_model
from .windows import score_windowed

__all__ = ["evaluate", "perplexity", "Evaluation", "corpus_sums", "evaluate_dask", "stride_sweep"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Evaluation:
    """Corpus figures under the conventions of KenLM and SRILM.

    Attributes
    ----------
    n_sentences, n_words, n_oov, n_zeros, n_tokens : int
        Lines scored; words (``</s>`` excluded, OOVs included); words unknown to the model;
        in-vocabulary tokens with probability 0; scored tokens (words + one ``</s>`` per line).
    logprob, log10prob : float
        Total log-probability of all scored tokens (OOVs scored as ``<unk>``).
    perplexity : float
        KenLM's "including OOVs": exp(-logprob / n_tokens).
    perplexity_excl_oov : float
        KenLM's "excluding OOVs": the OOV words' own terms removed from sum and count.
    ppl, ppl1 : float
        SRILM ``-ppl``: 10^(-L / (W - O - Z + S)) and 10^(-L / (W - O - Z)), L the log10 total
        without OOV and zero-probability terms.
    bits_per_token, bits_per_char, bits_per_byte : float
    zero_prob_tokens : tuple of (line, position, token)
        The first tokens that got probability 0 (why a perplexity is infinite).
    """

    n_sentences: int
    n_words: int
    n_oov: int
    n_zeros: int
    n_tokens: int
    logprob: float
    log10prob: float
    perplexity: float
    perplexity_excl_oov: float
    ppl: float
    ppl1: float
    bits_per_token: float
    bits_per_char: float
    bits_per_byte: float
    n_skipped_empty: int = 0
    zero_prob_tokens: tuple = field(default=(), repr=False)

    def to_dict(self) -> dict:
        """Every field by its name, ``{field: value}``."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _safe_exp(x: float) -> float:
    return math.inf if x > 709 else math.exp(x)


def _ratio_ppl(log_total: float, count: int, base: float = math.e) -> float:
    if count <= 0:
        return math.nan
    return _safe_exp(-log_total * math.log(base) / count) if math.isfinite(log_total) else math.inf


def evaluate(model, lines, tokenizer=None, bos: bool = True, eos: bool = True,
             stride: int | None = None, bos_per_window: bool = False):
    """Every corpus figure of ``model`` on ``lines`` (one sentence per line); blank lines skipped.

    Parameters
    ----------
    model : LanguageModel or dict of name -> LanguageModel
    lines : iterable of str, or file name
        The sentences, or a text file of them named by a ``str`` or ``pathlib.Path`` (``.gz``
        allowed, ``'-'`` = stdin): where seqprob reads a corpus, a ``str`` names a file.
    tokenizer, bos, eos, stride, bos_per_window
        As in :func:`~seqprob.scoring.tokens.score`.

    Returns
    -------
    Evaluation, or pandas.DataFrame
        Counts, total log-probability, perplexities (KenLM and SRILM conventions), bits; for a
        dict of models, a DataFrame with one row of those figures per model (index ``model``).

    Notes
    -----
    perplexity = exp(-sum_i log P(x_i | x_<i) / N) over all N scored tokens of the corpus.
    A figure whose denominator is 0 (every word an OOV or of probability 0) is NaN:
    undefined, as SRILM prints it. A model whose scores are not a normalized distribution
    (``model.normalized`` is False, e.g. stupid back-off) gets a warning: its "perplexity"
    is not one.

    Examples
    --------
    >>> import seqprob as sp
    >>> tok = sp.WhitespaceTokenizer.fit(["a b"])
    >>> ev = evaluate(sp.UniformModel(tok.vocab), ["a b", "b"], tokenizer=tok)
    >>> ev.n_tokens, round(ev.perplexity, 6)
    (5, 4.0)
    """
    if isinstance(model, Mapping):
        return _evaluate_each(model, lines, tokenizer=tokenizer, bos=bos, eos=eos, stride=stride,
                              bos_per_window=bos_per_window)
    sums = corpus_sums(check_model(model), lines, tokenizer, bos, eos, stride, bos_per_window)
    return _evaluation(model, sums, eos)


def corpus_sums(model, lines, tokenizer=None, bos: bool = True, eos: bool = True,
                stride: int | None = None, bos_per_window: bool = False) -> dict:
    """The running sums of :func:`evaluate` over ``lines`` (additive: the sums of two parts of a
    corpus add up to those of the whole, which is how :func:`evaluate_dask` combines partitions).

    A model that scores a whole corpus itself (:class:`~seqprob.protocols.CorpusScorer`, the
    n-gram models) streams it; any other model is scored line by line. Blank lines are skipped
    and counted (``n_skipped_empty``); ``zeros`` holds up to 20 (line, position, token) of
    probability 0, lines counted among the non-blank ones.
    """
    if (isinstance(model, CorpusScorer) and bos and stride is None
            and tokenizer in (None, model_tokenizer(model))):
        sums = model.corpus_sums(_stream_lines(lines), eos)  # n-gram models: streamed, vectorized
        if sums is not None:
            return _check_sums(model, sums)
    texts = _corpus_lines(lines)
    kept = [t for t in texts if t]
    if not kept:
        raise InputError("nothing to evaluate: the corpus has no non-empty lines")
    encoded = [encode_for_model(model, t, tokenizer, bos, eos) for t in kept]
    return _sums(encoded, score_windowed(model, encoded, False, stride, bos_per_window), len(texts) - len(kept))


def _evaluate_each(models: Mapping, lines, **options):
    """One row of :class:`Evaluation` figures per model (index ``model``); a corpus given as
    an iterator is read once and kept."""
    import pandas as pd

    if not models:
        raise InputError("no models given to evaluate")
    if not isinstance(lines, (str, os.PathLike)):
        lines = list(iter_texts(lines, "lines"))
    rows = {}
    for name, model in models.items():
        rows[name] = evaluate(check_model(model, f"model {name!r}"), lines, **options).to_dict()
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("model")


def _check_sums(model, sums: dict) -> dict:
    """``sums`` of ``model.corpus_sums`` itself, or :class:`InputError` when they show a
    log-probability that is NaN, +inf or (for a normalized model) above 0 (tolerance
    ``MAX_LOGPROB``): per token through ``sums["max_logprob"]`` when the scorer reports it,
    else through the total, which cannot exceed the tolerance times the number of tokens."""
    limit = MAX_LOGPROB if getattr(model, "normalized", True) else np.inf
    total, n_tok, top = sums["logprob"], sums["n_tokens"], sums.get("max_logprob")
    if top is not None and (math.isnan(top) or top > limit):
        what = f"a token log-probability of {top}"
    elif math.isnan(total) or total == math.inf or total > limit * max(n_tok, 1):
        what, top = f"a total log-probability of {total} over {n_tok} tokens", total
    else:
        return sums
    raise InputError(f"{type(model).__name__} gave {what}: a log-probability must be a number <= 0 "
                     f"(tolerance {MAX_LOGPROB}); is the model (e.g. an ARPA back-off) corrupt?",
                     value=float(top), limit=MAX_LOGPROB)


def _corpus_lines(lines) -> list:
    """Stripped lines of a corpus given as a path (``'-'``: stdin) or an iterable of str."""
    if isinstance(lines, (str, os.PathLike)):
        if str(lines) != "-" and not os.path.exists(lines):
            raise SeqProbFileError(f"cannot read corpus {str(lines)!r}: no such file (to score the "
                                   "text itself, pass a list of lines)", path=str(lines))
        return list(read_lines(lines))
    return [line.strip() for line in iter_texts(lines, "lines")]


def _stream_lines(lines):
    """The stripped lines of a corpus (path, ``'-'`` or iterable of str), read lazily (a path as
    a :class:`CorpusFile`, which a corpus scorer may also read in raw blocks)."""
    if isinstance(lines, (str, os.PathLike)):
        if str(lines) != "-" and not os.path.exists(lines):
            raise SeqProbFileError(f"cannot read corpus {str(lines)!r}: no such file (to score the "
                                   "text itself, pass a list of lines)", path=str(lines))
        return CorpusFile(lines)
    return (line.strip() for line in iter_texts(lines, "lines"))


def _warn_unnormalized(model) -> None:
    if model is not None and not is_normalized(model):
        warnings.warn(f"{type(model).__name__} scores are not a normalized distribution: its "
                      "perplexity is not comparable with a real model's", UserWarning, stacklevel=3)


def _sums(encoded: list, results: list, skipped: int) -> dict:
    """The running sums of scored sequences (see :func:`corpus_sums`)."""
    lp = np.concatenate([r["logprob"] for r in results])
    oov = np.concatenate([e.oov for e in encoded])
    zero = np.isneginf(lp) & ~oov
    zeros = tuple((i, int(p) + 1, e.tokens[p]) for i, e in enumerate(encoded)
                  for p in np.flatnonzero(np.isneginf(results[i]["logprob"]) & ~e.oov))[:20]
    return {"n_sentences": len(encoded), "n_tokens": len(lp), "n_oov": int(oov.sum()),
            "n_zeros": int(zero.sum()), "logprob": float(lp.sum()),
            "logprob_excl_oov": float(lp[~oov].sum()), "logprob_kept": float(lp[~oov & ~zero].sum()),
            "n_chars": sum(len(e.text) for e in encoded),
            "n_bytes": sum(len(e.text.encode("utf-8")) for e in encoded),
            "n_skipped_empty": skipped, "zeros": zeros}


def _evaluation(model, sums: dict, eos: bool) -> Evaluation:
    """The corpus figures from running sums (a warning when ``model`` is not normalized)."""
    n_sent, n_tok, n_oov, n_zero = (sums[k] for k in ("n_sentences", "n_tokens", "n_oov", "n_zeros"))
    if not n_sent:
        raise InputError("nothing to evaluate: the corpus has no non-empty lines")
    _warn_unnormalized(model)
    n_words = n_tok - (n_sent if eos else 0)
    total, zeros = sums["logprob"], tuple(sums["zeros"])
    L10 = sums["logprob_kept"] / LN10
    if n_zero:
        log.info("%d token(s) have probability 0 (first: %s): perplexity is inf", n_zero, zeros[:3])
    return Evaluation(
        n_sentences=n_sent, n_words=n_words, n_oov=n_oov, n_zeros=n_zero, n_tokens=n_tok,
        logprob=total, log10prob=total / LN10,
        perplexity=_ratio_ppl(total, n_tok),
        perplexity_excl_oov=_ratio_ppl(sums["logprob_excl_oov"], n_tok - n_oov),
        ppl=_ratio_ppl(L10, n_words - n_oov - n_zero + (n_sent if eos else 0), base=10),
        ppl1=_ratio_ppl(L10, n_words - n_oov - n_zero, base=10),
        bits_per_token=-total / LN2 / n_tok, bits_per_char=-total / LN2 / max(sums["n_chars"], 1),
        bits_per_byte=-total / LN2 / max(sums["n_bytes"], 1), n_skipped_empty=sums["n_skipped_empty"],
        zero_prob_tokens=zeros)


def perplexity(model, lines, tokenizer=None, bos: bool = True, eos: bool = True,
               stride: int | None = None, bos_per_window: bool = False):
    """Token-weighted corpus perplexity (KenLM's "including OOVs").

    Parameters
    ----------
    model : LanguageModel or dict of name -> LanguageModel
    lines : iterable of str, or file name
        One sentence per item (blank lines are skipped), or a text file named by a ``str`` or
        ``pathlib.Path``: where seqprob reads a corpus, a ``str`` names a file.
    tokenizer, bos, eos, stride, bos_per_window
        As in :func:`~seqprob.scoring.tokens.score`.

    Returns
    -------
    float, or pandas.Series
        The perplexity; for a dict of models, one per model (index ``model``).

    Notes
    -----
    PPL = exp(-(1/N) sum_i log P(x_i | x_<i)), N = all scored tokens (``</s>`` included):
    the exponential of the mean NLL per token, never a mean of per-sentence perplexities.
    See :func:`evaluate` for every other figure.

    Examples
    --------
    >>> import seqprob as sp
    >>> tok = sp.WhitespaceTokenizer.fit(["a b"])
    >>> round(perplexity(sp.UniformModel(tok.vocab), ["a b", "b a"], tokenizer=tok), 6)
    4.0
    """
    result = evaluate(model, lines, tokenizer=tokenizer, bos=bos, eos=eos, stride=stride,
                      bos_per_window=bos_per_window)
    return result["perplexity"] if isinstance(model, Mapping) else result.perplexity


def stride_sweep(model, texts, strides, tokenizer=None, bos_per_window: bool = False, eos: bool = True):
    """Perplexity of ``texts`` for each stride (the data of :func:`seqprob.plots.perplexity_by_stride`).

    Returns
    -------
    pandas.DataFrame
        Columns stride, perplexity, bits_per_token, n_tokens, context_size.

    Notes
    -----
    A smaller stride gives each token more context (at least W' - stride + 1 inputs), so for a
    model that uses its context the perplexity falls as the stride falls (stride = W' gives
    disjoint windows, lm-eval's rolling windows).

    Examples
    --------
    >>> import seqprob as sp
    >>> m = sp.default_model()
    >>> text = " ".join(sp.toy_english().sample(12, seed=0))
    >>> stride_sweep(m, [text], [8, 32]).columns.tolist()
    ['stride', 'perplexity', 'bits_per_token', 'n_tokens', 'context_size']
    """
    import pandas as pd

    rows = []
    for stride in strides:
        ev = evaluate(model, texts, tokenizer=tokenizer, eos=eos, stride=stride, bos_per_window=bos_per_window)
        rows.append((int(stride), ev.perplexity, ev.bits_per_token, ev.n_tokens, context_size(model)))
    return pd.DataFrame(rows, columns=["stride", "perplexity", "bits_per_token", "n_tokens", "context_size"])


def evaluate_dask(model, paths_or_bag, tokenizer=None, bos: bool = True, eos: bool = True,
                  revision: str | None = None) -> Evaluation:
    """:func:`seqprob.evaluate` of a corpus split in Dask partitions (sum of per-partition sums).

    Parameters
    ----------
    model : LanguageModel, or str
        A model object must pickle (it travels to every worker; with a distributed cluster,
        fit it first). A name instead (a Hugging Face ``"ORG/NAME"`` or a path, anything
        :func:`seqprob.load_model` takes) travels as the name and ``revision``: each worker
        loads the model once from its own cache or disk, and no weights are shipped.
    paths_or_bag : dask.bag.Bag of str, or list of paths
        The sentences, one per line, as in :meth:`~seqprob.ngram.NGramModel.fit_dask`.
    tokenizer, bos, eos
        As in :func:`seqprob.evaluate`.
    revision : str, optional
        With a model name: the branch, tag or commit of the cached snapshot.

    Returns
    -------
    Evaluation
        The figures of :func:`seqprob.evaluate` on all lines together (sums added in partition
        order, so totals agree with the single pass to float rounding).

    Raises
    ------
    PartitionError
        A partition failed; ``err.partition`` is its index.

    Notes
    -----
    perplexity = exp(-sum_p L_p / sum_p N_p), with L_p the total log-probability and N_p the
    scored tokens of partition p; the other figures likewise from summed parts.

    Examples
    --------
    >>> import dask.bag as db
    >>> import seqprob as sp
    >>> tok = sp.WhitespaceTokenizer.fit(["a b"])
    >>> bag = db.from_sequence(["a b", "b", "a"], npartitions=2)
    >>> ev = evaluate_dask(sp.UniformModel(tok.vocab), bag, tokenizer=tok)
    >>> ev.n_tokens, round(ev.perplexity, 6)
    (7, 4.0)
    """
    import dask

    from ..ngram._dask import guarded, partitions, shared

    named = isinstance(model, (str, os.PathLike))
    if not named and revision is not None:
        raise InputError("revision= applies to a model given by name", value=revision)
    fn = _named_partition_sums if named else _partition_sums
    if named:
        model_key = (os.fspath(model), _pinned(os.fspath(model), revision))
    else:
        model_key = shared(model)  # sent once per worker
    tok_key = shared(tokenizer)
    tasks = [dask.delayed(guarded)(i, fn, p, model_key, tok_key, bos, eos)
             for i, p in enumerate(partitions(paths_or_bag))]
    return _evaluation(None if named else model, _add(dask.compute(*tasks)), eos)


def _pinned(name: str, revision: str | None) -> str | None:
    """The commit a Hugging Face name's revision points at here (so that every worker loads the
    same snapshot even if a branch moves), or ``revision`` unchanged when the name is not cached
    here or is a path."""
    from .. import hub

    if os.path.exists(name) or not hub.is_hub_name(name):
        return revision
    try:
        return hub.resolve(name, revision, download=False).name
    except hub.HubError:
        return revision


@functools.lru_cache(maxsize=4)
def _load_named(name: str, revision: str | None):
    """The model of a name, loaded once per worker process."""
    from ..registry import load_model

    return load_model(name, revision=revision)


def _named_partition_sums(part, named: tuple, tokenizer, bos: bool, eos: bool) -> dict:
    """:func:`_partition_sums` with the model loaded on the worker from its (name, revision)."""
    return _partition_sums(part, _load_named(*named), tokenizer, bos, eos)


def _partition_sums(part, model, tokenizer, bos: bool, eos: bool) -> dict:
    """The running sums of one partition (blank lines skipped as :func:`evaluate` does)."""
    lines = [line.strip() for line in part]
    if not any(lines):
        return {**dict.fromkeys(_ADDED, 0), "n_skipped_empty": len(lines), "zeros": ()}
    return corpus_sums(model, lines, tokenizer, bos, eos)


#: The additive fields of :func:`corpus_sums`.
_ADDED = ("n_sentences", "n_tokens", "n_oov", "n_zeros", "logprob", "logprob_excl_oov", "logprob_kept",
          "n_chars", "n_bytes", "n_skipped_empty")


def _add(parts) -> dict:
    """The sums of a whole corpus from those of its parts, in order (line numbers of the
    zero-probability tokens shifted by the sentences before)."""
    total, zeros = dict.fromkeys(_ADDED, 0), []
    for sums in parts:
        zeros.extend((line + total["n_sentences"], pos, tok) for line, pos, tok in sums["zeros"])
        for key in _ADDED:
            total[key] += sums[key]
    return {**total, "zeros": tuple(zeros[:20])}
