"""Scoring text with any LanguageModel: per-token log-probs, joint probability, perplexity.

Every sequence is scored as the chain rule reads it: x_0 = ``<s>`` is the context, every real
token x_1 .. x_T gets its own conditional P(x_t | x_<t) (the first one included), and with
``eos=True`` the end of the sentence P(``</s>`` | x_<=T) is scored too.
"""
from __future__ import annotations

import logging
import math
import warnings
import os
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ._io import CorpusFile, read_lines, text_items, warn_if_file_name
from .errors import InputError, SeqProbFileError, has_attribute
from .functional import LN2, LN10, entropy as _entropy
from .protocols import CorpusScorer, is_normalized, model_tokenizer
from .tokenizers.base import iter_texts
from .vocab import Vocab, check_ids

__all__ = ["score", "summarize", "joint_logprob", "perplexity", "evaluate", "Evaluation",
           "encode_for_model"]

log = logging.getLogger(__name__)

#: Largest number of floats one (B, T, V) block of ``model.logprobs`` may hold (128 MB at
#: float32); a single sequence longer than that is still scored whole.
_MAX_BLOCK_FLOATS = 2 ** 25
#: Token budget of one batch when only the scored tokens' log-probs are needed
#: (``model.token_logprobs``: a GPT keeps activations of a few floats per token and channel).
_MAX_BATCH_TOKENS = 2 ** 13
#: Rows of V floats converted to float64 at a time for entropy and rank.
_STATS_FLOATS = 2 ** 22


@dataclass
class _Encoded:
    """One sequence ready for a model: ids x_0..x_T in the model's vocabulary."""

    ids: np.ndarray            # (T+1,) model ids, x_0 included
    tokens: list               # display strings of x_1..x_T
    oov: np.ndarray            # (T,) bool: token unknown to the model's vocabulary
    impossible: np.ndarray     # (T,) bool: unknown and no <unk> to stand for it: log P = -inf
    text: str | None = None


def _model_tokenizer(model, tokenizer):
    if tokenizer is not None and not all(callable(getattr(tokenizer, m, None))
                                         for m in ("encode", "pieces", "token_strings")):
        raise InputError(f"tokenizer must be a seqprob Tokenizer, got {type(tokenizer).__name__} "
                         f"{tokenizer!r:.40}", value=type(tokenizer).__name__)
    return model_tokenizer(model, tokenizer)


def _check_model(model, label: str = "model"):
    """``model`` itself if it has what scoring needs; else InputError (NotFittedError when it
    is a model that has not been fitted)."""
    if not all(has_attribute(model, a) for a in ("vocab", "logprobs", "token_logprobs")):
        got = "None" if model is None else f"a {type(model).__name__}"
        raise InputError(f"{label} is not a LanguageModel (got {got}): it needs vocab, logprobs "
                         "and token_logprobs", model=label, value=type(model).__name__)
    return model


def _as_models(models) -> dict:
    if isinstance(models, Mapping):
        models = dict(models)
        for name, model in models.items():
            _check_model(model, f"model {name!r}")
    else:
        models = {type(models).__name__: _check_model(models)}
    if not models:
        raise InputError("no models given to score")
    return models


def _as_items(texts_or_ids, what: str = "texts_or_ids") -> list:
    """The texts or id sequences to score, as a list: a str is one text, a ``pathlib.Path`` a
    file of texts (one per non-blank line), a 1-D array or a list of ints one id sequence."""
    if isinstance(texts_or_ids, (dict, bytes, bytearray, memoryview)) or texts_or_ids is None:
        kind = type(texts_or_ids).__name__
        hint = {"dict": " (its keys are not iterated as texts)", "NoneType": ""}.get(kind, ": decode it first")
        raise InputError(f"{what} must be a str, a list of str or a list of id sequences, got "
                         f"{'None' if texts_or_ids is None else 'a ' + kind}{hint}", value=kind)
    if isinstance(texts_or_ids, np.ndarray) and texts_or_ids.ndim == 1:
        return [texts_or_ids]
    try:
        items = text_items(texts_or_ids, what)
    except TypeError:
        raise InputError(f"{what} must be a str, a list of str or a list of id sequences, "
                         f"got {type(texts_or_ids).__name__}", value=type(texts_or_ids).__name__) from None
    if items and all(isinstance(x, (int, np.integer)) for x in items):
        return [items]  # one sequence of ids
    if not items:
        raise InputError(f"nothing to score: {what} is empty")
    return items


def _check_item(item, what: str):
    """``item`` if it is a text (str) or a sequence of ids; else InputError naming it."""
    if isinstance(item, str) or (isinstance(item, np.ndarray) and item.dtype.kind in "iu"):
        return item
    kind = type(item).__name__
    if isinstance(item, (bytes, bytearray, memoryview)):
        raise InputError(f"{what} is {kind} {bytes(item)[:40]!r}: texts must be str, decode it "
                         f"first (e.g. {what}.decode('utf-8'))", value=kind)
    if not isinstance(item, (list, tuple, range, np.ndarray)):
        raise InputError(f"{what} is {'None' if item is None else kind + ' ' + repr(item)[:40]}: "
                         f"it must be a str (a text) or a sequence of int token ids",
                         value=kind)
    return item


def _remap(tok_ids: list, tok_vocab: Vocab, model_vocab: Vocab):
    """Map tokenizer ids to model ids by token string; unknown strings become <unk> or impossible.

    A model vocabulary without strings (:meth:`Vocab.ids_only`, a checkpoint loaded without its
    tokenizer) takes the tokenizer's ids as they are when both have one size, and refuses a
    tokenizer of another size: no string match could say which id is which token."""
    if model_vocab.same_ids(tok_vocab):
        ids = np.asarray(tok_ids, dtype=np.int64)
        oov = ids == (-1 if tok_vocab.unk_id is None else tok_vocab.unk_id)
        return ids, oov, np.zeros(len(ids), dtype=bool)
    if model_vocab.is_ids_only or tok_vocab.is_ids_only:
        raise InputError(f"the tokenizer has {len(tok_vocab)} tokens and the model {len(model_vocab)}, "
                         "and one of them has no token strings to match: its ids cannot be trusted to "
                         "be the model's (load the model with its own tokenizer, e.g. "
                         "GPT.from_hf(folder, tokenizer=tok))", value=len(tok_vocab), limit=len(model_vocab))
    strings = [tok_vocab.tokens[i] for i in tok_ids]
    ids = np.array([model_vocab.get(s, -1) for s in strings], dtype=np.int64)
    oov = (ids < 0) | np.array([i == tok_vocab.unk_id for i in tok_ids], dtype=bool)
    if model_vocab.unk_id is not None:
        ids[ids < 0] = model_vocab.unk_id
        return ids, oov, np.zeros(len(ids), dtype=bool)
    impossible = ids < 0
    ids[impossible] = 0  # any valid id as a stand-in: its log P is overwritten by -inf
    return ids, oov, impossible


def _special(vocab: Vocab, role: str) -> int:
    idx = getattr(vocab, f"{role}_id")
    if idx is None:
        flag = "bos" if role == "bos" else "eos"
        raise InputError(f"the model's vocabulary has no {role.upper()} token: pass {flag}=False",
                         role=role)
    return idx


def encode_for_model(model, item, tokenizer=None, bos: bool = True, eos: bool = True,
                     what: str = "text_or_ids") -> _Encoded:
    """Turn a text (or a list of ids in the model's vocabulary) into x_0 .. x_T for ``model``;
    ``what`` names ``item`` in errors."""
    vocab = names = model.vocab  # names: where the display string of </s> comes from
    item = _check_item(item, what)
    if isinstance(item, str):
        tok = _model_tokenizer(model, tokenizer)
        if tok is None:
            raise InputError("scoring text needs a tokenizer: pass tokenizer=... or score ids")
        tok_ids = tok.encode(item)
        if not tok_ids:
            raise InputError(f"empty text {item!r}: nothing to score")
        tokens = tok.pieces(item)
        if len(tokens) != len(tok_ids):
            tokens = tok.token_strings(tok_ids)
        ids, oov, impossible = _remap(tok_ids, tok.vocab, vocab)
        names = tok.vocab if vocab.is_ids_only else vocab
    else:
        ids = check_ids(item, len(vocab), name=what)
        if ids.ndim != 1:
            raise InputError(f"a sequence of ids must be 1-D, got shape {ids.shape}", shape=ids.shape)
        tokens = [vocab.tokens[i] for i in ids.tolist()]
        oov = ids == (-1 if vocab.unk_id is None else vocab.unk_id)
        impossible = np.zeros(len(ids), dtype=bool)
    if bos:
        ids = np.concatenate([[_special(vocab, "bos")], ids])
    else:
        tokens, oov, impossible = tokens[1:], oov[1:], impossible[1:]
    if eos:
        ids = np.concatenate([ids, [_special(vocab, "eos")]])
        tokens = list(tokens) + [names.tokens[vocab.eos_id]]
        oov, impossible = np.append(oov, False), np.append(impossible, False)
    if len(ids) < 2:
        raise InputError("a sequence needs x_0 and at least one token to score "
                         f"(got {len(ids)} id(s) with bos={bos}, eos={eos})", length=len(ids))
    return _Encoded(ids.astype(np.int64), list(tokens), oov, impossible,
                    item if isinstance(item, str) else None)


def _batches(lengths: np.ndarray, budget: int):
    """Group sequence indices (sorted by length) so each padded batch holds at most ``budget``
    tokens (a longer sequence forms a batch of its own)."""
    order = np.argsort(lengths, kind="stable")
    batch: list = []
    for i in order:
        if batch and (len(batch) + 1) * lengths[i] > budget:
            yield batch
            batch = []
        batch.append(int(i))
    if batch:
        yield batch


def _pad(seqs: list, pad_id: int) -> np.ndarray:
    width = max(len(s) for s in seqs)
    out = np.full((len(seqs), width), pad_id, dtype=np.int64)  # (B, T+1)
    for row, s in zip(out, seqs):
        row[: len(s)] = s
    return out


def _row_stats(rows: np.ndarray, targets: np.ndarray):
    """log P of ``targets``, entropy (bits) and rank from (B, T, V) rows, in float64 chunks
    (so the float64 temporaries stay small whatever the model's block size)."""
    B, T, V = rows.shape
    flat, tgt = rows.reshape(B * T, V), targets.reshape(B * T)
    lp, ent, rank = np.empty(B * T), np.empty(B * T), np.empty(B * T, dtype=np.int64)
    step = max(1, _STATS_FLOATS // V)
    for i in range(0, B * T, step):
        r = flat[i:i + step].astype(np.float64)  # (n, V)
        lp[i:i + step] = r[np.arange(len(r)), tgt[i:i + step]]
        with np.errstate(over="ignore", invalid="ignore"):  # a bad row: lp is refused after this
            ent[i:i + step] = _entropy(r, check_normalized=False) / LN2
        rank[i:i + step] = 1 + (r > lp[i:i + step, None]).sum(axis=-1)
    return lp.reshape(B, T), ent.reshape(B, T), rank.reshape(B, T)


def _check_not_nan(lp: np.ndarray, model, seq: int) -> np.ndarray:
    """``lp`` (T,) itself, or :class:`InputError` naming where the model gave NaN, +inf, or
    (for a model that claims to be normalized) a log-probability above 0, i.e. P > 1."""
    limit = _MAX_LOGPROB if getattr(model, "normalized", True) else np.inf
    bad = np.isnan(lp) | np.isposinf(lp) | (lp > limit)
    if bad.any():
        t = int(np.flatnonzero(bad)[0])
        raise InputError(f"{type(model).__name__} returned log-probability {lp[t]} (sequence {seq}, "
                         f"scored token {t + 1}): a log-probability must be a number <= 0 "
                         f"(tolerance {_MAX_LOGPROB})", seq=seq, position=t + 1, value=float(lp[t]),
                         limit=_MAX_LOGPROB)
    return lp


_MAX_LOGPROB = 1e-3  # float32 rounding can push log P(certain token) a hair above 0


def _model_output(model, method: str, batch: np.ndarray, shape: tuple) -> np.ndarray:
    """``model.<method>(batch)`` as a float64 array of ``shape``, or InputError naming the model."""
    out = np.asarray(getattr(model, method)(batch))
    if out.shape != shape or out.dtype.kind not in "fiu":
        raise InputError(f"{type(model).__name__}.{method} returned shape {out.shape} dtype {out.dtype} "
                         f"for ids of shape {batch.shape}; expected {shape} numbers",
                         shape=out.shape, limit=shape)
    return out


def _score_model(model, encoded: list, with_distribution: bool) -> list:
    """Per sequence: dict of (T,) arrays logprob [, entropy_bits, rank]. Batched, right-padded.

    Without ``with_distribution`` only ``model.token_logprobs`` is called, so a model that
    overrides it (the GPT) never builds a (B, T, V) block.
    """
    lengths = np.array([len(e.ids) for e in encoded])
    V = len(model.vocab)
    budget = max(_MAX_BLOCK_FLOATS // V, 1) if with_distribution else _MAX_BATCH_TOKENS
    results: list = [None] * len(encoded)
    for idx in _batches(lengths, budget):
        batch = _pad([encoded[i].ids for i in idx], pad_id=int(encoded[idx[0]].ids[-1]))
        if with_distribution:
            B, T = batch[:, :-1].shape
            rows = _model_output(model, "logprobs", batch[:, :-1], (B, T, V))  # (B, T, V)
            lp, ent, rank = _row_stats(rows, batch[:, 1:])  # (B, T) each
        else:
            lp = _model_output(model, "token_logprobs", batch, batch[:, 1:].shape).astype(np.float64)  # (B, T)
        for row, i in enumerate(idx):
            n = len(encoded[i].ids) - 1
            seq_lp = _check_not_nan(lp[row, :n], model, i)
            out = {"logprob": np.where(encoded[i].impossible, -np.inf, seq_lp)}
            if with_distribution:
                out["entropy_bits"] = ent[row, :n]
                out["rank"] = np.where(encoded[i].impossible, V, rank[row, :n])
            results[i] = out
    return results


def score(models, texts_or_ids, tokenizer=None, bos: bool = True, eos: bool = True,
          distribution: bool = True, context=None, sep: str = " ", stride: int | None = None,
          bos_per_window: bool = False):
    """Score every token of every sequence under every model.

    Parameters
    ----------
    models : LanguageModel or dict of name -> LanguageModel
    texts_or_ids : str, list of str, or list of id sequences (in the model's vocabulary,
        without BOS/EOS)
    tokenizer : Tokenizer, optional
        Turns texts into tokens; defaults to each model's own ``.tokenizer``. When the
        model's vocabulary differs, tokens are matched by their strings (unknown -> ``<unk>``,
        or probability 0 when the model has no ``<unk>``).
    bos : bool
        Prepend x_0 = ``<s>`` so the first real token gets P(x_1 | x_0). With ``bos=False`` the
        first token is only context and is not scored.
    eos : bool
        Also score P(``</s>`` | sentence) (KenLM's convention: a distribution over sentences).
    distribution : bool
        Also compute ``entropy_bits`` and ``rank`` (needs the full (T, V) rows; set False for
        huge vocabularies).
    context : str or list of str, optional
        Text read before each text (joined by ``sep``) but not scored: ``context + sep + text`` is
        tokenized as a whole, the context's tokens get no row, and a token straddling the join
        is kept and marked in the extra column ``spans_join`` (see :mod:`seqprob.conditional`).
    stride, bos_per_window
        Sliding windows for sequences longer than the model's context
        (:mod:`seqprob.windows`): each window adds ``stride`` scored rows; with
        ``bos_per_window`` every window starts with ``<s>``.

    Returns
    -------
    pandas.DataFrame
        One row per scored token per model: model, seq, position, token, token_id, logprob,
        log10prob, surprisal_bits, [entropy_bits, rank,] is_oov, is_eos. ``position`` t is the
        index of x_t (1 = first real token). ``df.attrs["texts"]`` keeps the texts.

    Notes
    -----
    logprob_t = log P(x_t | x_0 .. x_{t-1}) in nats; surprisal_bits = -logprob / ln 2;
    entropy_bits = -sum_v P(v | x_<t) log2 P(v | x_<t); rank = 1 + #{v : P(v) > P(x_t)}.
    The sum of a sequence's ``logprob`` column is its joint log-probability.

    Examples
    --------
    >>> import seqprob as sp
    >>> tok = sp.WhitespaceTokenizer.fit(["the cat sat"])
    >>> df = sp.score({"uniform": sp.UniformModel(tok.vocab)}, ["the cat"], tokenizer=tok)
    >>> df["token"].tolist()
    ['the', 'cat', '</s>']
    """
    import pandas as pd

    models, items = _as_models(models), _as_items(texts_or_ids)
    frames = []
    for name, model in models.items():
        if context is not None:
            frames.append(_score_in_context(name, model, items, context, sep, tokenizer, bos, eos,
                                            distribution, stride, bos_per_window))
            continue
        encoded = [encode_for_model(model, item, tokenizer, bos, eos, f"texts_or_ids[{i}]")
                   for i, item in enumerate(items)]
        results = _score_windowed(model, encoded, distribution, stride, bos_per_window)
        frames.append(_frame(name, encoded, results, bos, model.vocab))
    df = pd.concat(frames, ignore_index=True)
    df.attrs["texts"] = [item if isinstance(item, str) else None for item in items]
    df.attrs["bos"], df.attrs["eos"] = bos, eos
    return df


def _score_windowed(model, encoded: list, with_distribution: bool, stride, bos_per_window: bool) -> list:
    """:func:`_score_model`, with sliding windows (:mod:`seqprob.windows`) for sequences
    longer than the model's context."""
    from .windows import score_all

    return score_all(model, encoded, with_distribution, stride, bos_per_window, _score_model)


def _score_in_context(name, model, items, context, sep, tokenizer, bos, eos, distribution, stride,
                      bos_per_window):
    """One model's frame of continuation rows (see :mod:`seqprob.conditional`)."""
    from .conditional import drop_context, encode_with_context

    contexts = [context] * len(items) if isinstance(context, str) else list(context)
    if len(contexts) != len(items):
        raise InputError(f"context has {len(contexts)} items for {len(items)} texts",
                         value=len(contexts), limit=len(items))
    parts = [encode_with_context(model, item, ctx, sep, tokenizer, bos, eos, stride)
             for item, ctx in zip(items, contexts)]
    encoded = [p[0] for p in parts]
    results = _score_windowed(model, encoded, distribution, stride, bos_per_window)
    frame = _frame(name, encoded, results, bos, model.vocab)
    return drop_context(frame, [p[1] for p in parts], [p[2] for p in parts], bos)


def _frame(name: str, encoded: list, results: list, bos: bool, vocab: Vocab):
    import pandas as pd

    cols: dict = {k: [] for k in ("seq", "position", "token", "token_id", "is_oov", "is_eos")}
    for seq, (enc, res) in enumerate(zip(encoded, results)):
        n = len(enc.tokens)
        cols["seq"].append(np.full(n, seq))
        cols["position"].append(np.arange(1, n + 1) + (0 if bos else 1))
        cols["token"].extend(enc.tokens)
        cols["token_id"].append(enc.ids[1:])
        cols["is_oov"].append(enc.oov)
        cols["is_eos"].append(enc.ids[1:] == (-1 if vocab.eos_id is None else vocab.eos_id))
    data = {"model": name}
    data.update({k: (v if k == "token" else np.concatenate(v)) for k, v in cols.items()})
    lp = np.concatenate([r["logprob"] for r in results])
    data.update(logprob=lp, log10prob=lp / LN10, surprisal_bits=-lp / LN2 + 0.0)
    if "entropy_bits" in results[0]:
        data["entropy_bits"] = np.concatenate([r["entropy_bits"] for r in results])
        data["rank"] = np.concatenate([r["rank"] for r in results])
    df = pd.DataFrame(data)
    order = ["model", "seq", "position", "token", "token_id", "logprob", "log10prob",
             "surprisal_bits", "entropy_bits", "rank", "is_oov", "is_eos"]
    return df[[c for c in order if c in df.columns]]


def summarize(df, by: str = "seq"):
    """Sequence-level (``by="seq"``) or corpus-level (``by="model"``) figures from :func:`score`.

    Returns
    -------
    pandas.DataFrame
        Per model (and sequence): n_tokens, n_oov, logprob (nats), log10prob, perplexity,
        bits_per_token, bits_per_char, bits_per_byte (NaN when the text is unknown).

    Notes
    -----
    perplexity = exp(-sum logprob / n_tokens): token-weighted over the whole group, never a
    mean of per-sentence perplexities. bits_per_char = -sum logprob / (ln 2 · characters).

    Examples
    --------
    >>> import seqprob as sp
    >>> tok = sp.WhitespaceTokenizer.fit(["a b"])
    >>> df = sp.score({"u": sp.UniformModel(tok.vocab)}, ["a b", "b"], tokenizer=tok)
    >>> sp.summarize(df, by="model")[["n_tokens", "perplexity"]].round(6).values.tolist()
    [[5.0, 4.0]]
    """
    import pandas as pd

    if df is None or len(df) == 0:
        raise InputError("summarize() got an empty DataFrame: score something first")
    missing = {"model", "seq", "logprob", "is_oov"} - set(getattr(df, "columns", ()))
    if not isinstance(df, pd.DataFrame) or missing:
        raise InputError(f"summarize() needs the DataFrame of score(), got {type(df).__name__} "
                         f"without columns {sorted(missing)}", missing=sorted(missing))
    if by not in ("seq", "model"):
        raise InputError(f"by must be 'seq' or 'model', got {by!r}", value=by)
    lp = df["logprob"].to_numpy(dtype=float)
    bad = np.isnan(lp) | np.isposinf(lp)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"summarize() got log-probability {lp[row]} in row {row}: a log-probability "
                         "must be a number (-inf for probability 0)", value=float(lp[row]), row=row)
    texts = df.attrs.get("texts") or []
    chars = pd.Series([np.nan if t is None else len(t) for t in texts], dtype=float)
    nbytes = pd.Series([np.nan if t is None else len(t.encode("utf-8")) for t in texts], dtype=float)
    keys = ["model", "seq"] if by == "seq" else ["model"]
    g = df.groupby(keys, sort=False)
    out = g.agg(n_tokens=("logprob", "size"), n_oov=("is_oov", "sum"), logprob=("logprob", "sum"))
    if by == "seq":
        seqs = out.index.get_level_values("seq")
        out["n_chars"] = chars.reindex(seqs).to_numpy()
        out["n_bytes"] = nbytes.reindex(seqs).to_numpy()
        out["text"] = [texts[s] if s < len(texts) else None for s in seqs]
    else:
        per_model = df.drop_duplicates(["model", "seq"]).groupby("model", sort=False)["seq"]
        out["n_chars"] = per_model.apply(lambda s: chars.reindex(s).sum(min_count=len(s)))
        out["n_bytes"] = per_model.apply(lambda s: nbytes.reindex(s).sum(min_count=len(s)))
    nll_bits = -out["logprob"] / LN2
    out["log10prob"] = out["logprob"] / LN10
    with np.errstate(over="ignore"):
        out["perplexity"] = np.exp(-out["logprob"] / out["n_tokens"])
    out["bits_per_token"] = nll_bits / out["n_tokens"]
    out["bits_per_char"] = nll_bits / out["n_chars"]
    out["bits_per_byte"] = nll_bits / out["n_bytes"]
    return out.reset_index()


def joint_logprob(model, text_or_ids, tokenizer=None, bos: bool = True, eos: bool = True) -> float:
    """log P(x_1 .. x_T [</s>] | x_0) of one sequence, in nats: the chain-rule sum.

    Examples
    --------
    >>> import seqprob as sp
    >>> tok = sp.WhitespaceTokenizer.fit(["a b"])
    >>> round(joint_logprob(sp.UniformModel(tok.vocab), "a b", tokenizer=tok), 4)  # 3 tokens, V'=4
    -4.1589
    """
    if isinstance(text_or_ids, str):
        warn_if_file_name(text_or_ids, "text_or_ids")
    enc = encode_for_model(model, text_or_ids, tokenizer, bos, eos)
    return float(_score_model(model, [enc], with_distribution=False)[0]["logprob"].sum())


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
        As in :func:`score`.

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
    _check_model(model)
    if (isinstance(model, CorpusScorer) and bos and stride is None
            and tokenizer in (None, model_tokenizer(model))):
        sums = model.corpus_sums(_stream_lines(lines), eos)  # n-gram models: streamed, vectorized
        if sums is not None:
            return _evaluation(model, _check_sums(model, sums), eos)
    texts = _corpus_lines(lines)
    kept = [t for t in texts if t]
    if not kept:
        raise InputError("nothing to evaluate: the corpus has no non-empty lines")
    _warn_unnormalized(model)
    encoded = [encode_for_model(model, t, tokenizer, bos, eos) for t in kept]
    results = _score_windowed(model, encoded, False, stride, bos_per_window)
    return _figures(encoded, results, eos, len(texts) - len(kept))


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
        rows[name] = evaluate(_check_model(model, f"model {name!r}"), lines, **options).to_dict()
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("model")


def _check_sums(model, sums: dict) -> dict:
    """``sums`` of ``model.corpus_sums`` itself, or :class:`InputError` when they show a
    log-probability that is NaN, +inf or (for a normalized model) above 0 (tolerance
    ``_MAX_LOGPROB``): per token through ``sums["max_logprob"]`` when the scorer reports it,
    else through the total, which cannot exceed the tolerance times the number of tokens."""
    limit = _MAX_LOGPROB if getattr(model, "normalized", True) else np.inf
    total, n_tok, top = sums["logprob"], sums["n_tokens"], sums.get("max_logprob")
    if top is not None and (math.isnan(top) or top > limit):
        what = f"a token log-probability of {top}"
    elif math.isnan(total) or total == math.inf or total > limit * max(n_tok, 1):
        what, top = f"a total log-probability of {total} over {n_tok} tokens", total
    else:
        return sums
    raise InputError(f"{type(model).__name__} gave {what}: a log-probability must be a number <= 0 "
                     f"(tolerance {_MAX_LOGPROB}); is the model (e.g. an ARPA back-off) corrupt?",
                     value=float(top), limit=_MAX_LOGPROB)


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
    if not is_normalized(model):
        warnings.warn(f"{type(model).__name__} scores are not a normalized distribution: its "
                      "perplexity is not comparable with a real model's", UserWarning, stacklevel=3)


def _figures(encoded: list, results: list, eos: bool, skipped: int) -> Evaluation:
    lp = np.concatenate([r["logprob"] for r in results])
    oov = np.concatenate([e.oov for e in encoded])
    zero = np.isneginf(lp) & ~oov
    zeros = tuple((i, int(p) + 1, e.tokens[p]) for i, e in enumerate(encoded)
                  for p in np.flatnonzero(np.isneginf(results[i]["logprob"]) & ~e.oov))[:20]
    sums = {"n_sentences": len(encoded), "n_tokens": len(lp), "n_oov": int(oov.sum()),
            "n_zeros": int(zero.sum()), "logprob": float(lp.sum()),
            "logprob_excl_oov": float(lp[~oov].sum()), "logprob_kept": float(lp[~oov & ~zero].sum()),
            "n_chars": sum(len(e.text) for e in encoded),
            "n_bytes": sum(len(e.text.encode("utf-8")) for e in encoded),
            "n_skipped_empty": skipped, "zeros": zeros}
    return _evaluation(None, sums, eos)


def _evaluation(model, sums: dict, eos: bool) -> Evaluation:
    """The corpus figures from running sums (``model``: warn if it is not normalized)."""
    n_sent, n_tok, n_oov, n_zero = (sums[k] for k in ("n_sentences", "n_tokens", "n_oov", "n_zeros"))
    if not n_sent:
        raise InputError("nothing to evaluate: the corpus has no non-empty lines")
    if model is not None:
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
        As in :func:`score`.

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
