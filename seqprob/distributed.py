"""Corpus evaluation over a partitioned corpus with Dask (the ``seqprob[distributed]`` extra).

Every partition is evaluated by :func:`seqprob.scoring.evaluate` where it lives; the driver adds
the per-partition sums (log-probabilities, token counts, characters) and recomputes every
figure from the totals. Fitting on a partitioned corpus is
:meth:`seqprob.ngram.NGramModel.fit_dask`.
"""
from __future__ import annotations

import math

from .errors import InputError
from .functional import LN10, LN2
from .scoring import Evaluation, evaluate

__all__ = ["evaluate_dask"]


def evaluate_dask(model, paths_or_bag, tokenizer=None, bos: bool = True, eos: bool = True) -> Evaluation:
    """:func:`seqprob.evaluate` of a corpus split in Dask partitions (sum of per-partition sums).

    Parameters
    ----------
    model : LanguageModel
        It must pickle (it travels to every worker; with a distributed cluster, fit it first).
    paths_or_bag : dask.bag.Bag of str, or list of paths
        The sentences, one per line, as in :meth:`~seqprob.ngram.NGramModel.fit_dask`.
    tokenizer, bos, eos
        As in :func:`seqprob.evaluate`.

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

    from .ngram._dask import _guard, partitions, shared

    model_key, tok_key = shared(model), shared(tokenizer)  # sent once per worker, not per task
    tasks = [dask.delayed(_guard)(i, _partition_sums, p, model_key, tok_key, bos, eos)
             for i, p in enumerate(partitions(paths_or_bag))]
    return _combine(dask.compute(*tasks), eos)


def _partition_sums(part, model, tokenizer, bos: bool, eos: bool) -> dict:
    """Additive figures of one partition (blank lines skipped as :func:`evaluate` does)."""
    lines = [line.strip() for line in part]
    kept = [t for t in lines if t]
    sums = {"skipped": len(lines) - len(kept), "chars": sum(map(len, kept)),
            "bytes": sum(len(t.encode("utf-8")) for t in kept), "n_kept": len(kept)}
    if not kept:
        return sums
    ev = evaluate(model, kept, tokenizer=tokenizer, bos=bos, eos=eos)
    for name in ("n_sentences", "n_words", "n_oov", "n_zeros", "n_tokens", "logprob"):
        sums[name] = getattr(ev, name)
    sums["logprob_excl_oov"] = _invert(ev.perplexity_excl_oov, ev.n_tokens - ev.n_oov, math.e)
    den = ev.n_words - ev.n_oov - ev.n_zeros + (ev.n_sentences if eos else 0)
    sums["log10_kept"] = _invert(ev.ppl, den, 10.0)
    sums["zeros"] = ev.zero_prob_tokens
    return sums


def _invert(ppl: float, count: int, base: float) -> float:
    """The log total a perplexity came from: ppl = base^(-total / count)."""
    if count <= 0 or math.isnan(ppl):
        return 0.0
    return -math.inf if math.isinf(ppl) else -math.log(ppl, base) * count


def _ratio(log_total: float, count: int, base: float = math.e) -> float:
    if count <= 0:
        return math.nan
    if not math.isfinite(log_total):
        return math.inf
    x = -log_total * math.log(base) / count
    return math.inf if x > 709 else math.exp(x)


def _combine(parts, eos: bool) -> Evaluation:
    total = {k: 0 for k in ("n_sentences", "n_words", "n_oov", "n_zeros", "n_tokens", "skipped",
                            "chars", "bytes", "logprob", "logprob_excl_oov", "log10_kept")}
    zeros, offset = [], 0
    for sums in parts:
        for key in total:
            total[key] += sums.get(key, 0)
        zeros.extend((line + offset, pos, tok) for line, pos, tok in sums.get("zeros", ()))
        offset += sums["n_kept"]
    if not total["n_tokens"]:
        raise InputError("nothing to evaluate: the corpus has no non-empty lines")
    t, n_tok = float(total["logprob"]), total["n_tokens"]
    kept_count = total["n_words"] - total["n_oov"] - total["n_zeros"]
    return Evaluation(
        n_sentences=total["n_sentences"], n_words=total["n_words"], n_oov=total["n_oov"],
        n_zeros=total["n_zeros"], n_tokens=n_tok, logprob=t, log10prob=t / LN10,
        perplexity=_ratio(t, n_tok),
        perplexity_excl_oov=_ratio(total["logprob_excl_oov"], n_tok - total["n_oov"]),
        ppl=_ratio(total["log10_kept"], kept_count + (total["n_sentences"] if eos else 0), 10.0),
        ppl1=_ratio(total["log10_kept"], kept_count, 10.0),
        bits_per_token=-t / LN2 / n_tok, bits_per_char=-t / LN2 / max(total["chars"], 1),
        bits_per_byte=-t / LN2 / max(total["bytes"], 1), n_skipped_empty=total["skipped"],
        zero_prob_tokens=tuple(zeros[:20]))
