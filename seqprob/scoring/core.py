"""The bottom of scoring: text and ids turned into x_0 .. x_T for a model, the model and
tokenizer resolved, batched calls of the model contract, the row statistics (log P, entropy,
rank) and the join of a context and a text.

Every sequence is scored as the chain rule reads it: x_0 = ``<s>`` is the context, every real
token x_1 .. x_T gets its own conditional P(x_t | x_<t) (the first one included), and with
``eos=True`` the end of the sentence P(``</s>`` | x_<=T) is scored too. The modules above this
one (windows, tokens, corpus, words, conditional, comparison, compression) import it and no
one else's private helpers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from .._io import check_text, text_items
from ..errors import ContextLengthError, InputError, WordAlignmentError, has_attribute
from ..functional import LN2, target_stats
from ..protocols import StreamingScorer, model_tokenizer
from ..vocab import Vocab, check_ids

__all__ = ["Encoded", "encode_for_model", "start_id", "x0_id", "RowsOnly", "resolve_tokenizer", "check_model", "check_models", "as_items",
           "score_batched", "row_stats", "stream_stats", "check_logprobs", "MAX_LOGPROB", "context_size",
           "token_byte_spans", "SPACE_BYTES", "encode_with_context", "drop_context"]


#: Largest number of floats one (B, T, V) block of ``model.logprobs`` may hold (128 MB at
#: float32); a single sequence longer than that is still scored whole.
_MAX_BLOCK_FLOATS = 2 ** 25
#: Token budget of one batch when only the scored tokens' log-probs are needed
#: (``model.token_logprobs``: a GPT keeps activations of a few floats per token and channel).
_MAX_BATCH_TOKENS = 2 ** 13


@dataclass
class Encoded:
    """One sequence ready for a model: ids x_0..x_T in the model's vocabulary."""

    ids: np.ndarray            # (T+1,) model ids, x_0 included
    tokens: list               # display strings of x_1..x_T
    oov: np.ndarray            # (T,) bool: token unknown to the model's vocabulary
    impossible: np.ndarray     # (T,) bool: unknown and no <unk> to stand for it: log P = -inf
    text: str | None = None


def resolve_tokenizer(model, tokenizer):
    """``tokenizer`` if given (checked to be a seqprob Tokenizer), else ``model.tokenizer``
    (None when the model has none)."""
    if tokenizer is not None and not all(callable(getattr(tokenizer, m, None))
                                         for m in ("encode", "pieces", "token_strings")):
        raise InputError(f"tokenizer must be a seqprob Tokenizer, got {type(tokenizer).__name__} "
                         f"{tokenizer!r:.40}", value=type(tokenizer).__name__)
    return model_tokenizer(model, tokenizer)


def check_model(model, label: str = "model"):
    """``model`` itself if it has what scoring needs; else InputError (NotFittedError when it
    is a model that has not been fitted)."""
    if not all(has_attribute(model, a) for a in ("vocab", "logprobs", "token_logprobs")):
        got = "None" if model is None else f"a {type(model).__name__}"
        raise InputError(f"{label} is not a LanguageModel (got {got}): it needs vocab, logprobs "
                         "and token_logprobs", model=label, value=type(model).__name__)
    return model


def check_models(models) -> dict:
    """``models`` (one model, or a mapping of name -> model) as a dict of name -> model, each
    checked by :func:`check_model`; one model is named after its class."""
    if isinstance(models, Mapping):
        models = dict(models)
        for name, model in models.items():
            check_model(model, f"model {name!r}")
    else:
        models = {type(models).__name__: check_model(models)}
    if not models:
        raise InputError("no models given to score")
    return models


def as_items(texts_or_ids, what: str = "texts_or_ids") -> list:
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


def start_id(vocab: Vocab) -> int:
    """The id of x_0, the token every sequence starts from: the vocabulary's BOS, else its EOS
    (a model trained without a BOS token sees documents separated by EOS, so EOS is the
    context a document starts after: lm-evaluation-harness's rolling log-likelihood does the
    same), else an :class:`InputError`.

    Examples
    --------
    >>> from seqprob.vocab import Vocab
    >>> start_id(Vocab(["<unk>", "<s>", "</s>", "a"])), start_id(Vocab(["a", "<|end|>"], bos=None, eos="<|end|>", unk=None))
    (1, 1)
    """
    if vocab.bos_id is not None:
        return vocab.bos_id
    if vocab.eos_id is not None:
        return vocab.eos_id
    raise InputError("the model's vocabulary has neither a BOS nor an EOS token to start from: pass "
                     "bos=False (the first token is then context only)", role="bos")


def x0_id(vocab: Vocab, bos=True) -> int:
    """The id of x_0 for ``bos``: True is :func:`start_id` (the model's own), a string names
    the token to start from (e.g. ``"<|endoftext|>"``), which must be in the vocabulary."""
    if isinstance(bos, str):
        if bos not in vocab:
            raise InputError(f"bos={bos!r} is not a token of the model's vocabulary (bos is True, "
                             f"False, or the token to use as x_0)", value=bos)
        return vocab.id(bos)
    if not isinstance(bos, (bool, np.bool_)):
        raise InputError(f"bos must be True, False or a token string, got {bos!r}", value=bos)
    return start_id(vocab)


def _special(vocab: Vocab, role: str) -> int:
    if role == "bos":
        return start_id(vocab)
    idx = getattr(vocab, f"{role}_id")
    if idx is None:
        flag = "bos" if role == "bos" else "eos"
        raise InputError(f"the model's vocabulary has no {role.upper()} token: pass {flag}=False",
                         role=role)
    return idx


def encode_for_model(model, item, tokenizer=None, bos: bool = True, eos: bool = True,
                     what: str = "text_or_ids") -> Encoded:
    """Turn a text (or a list of ids in the model's vocabulary) into x_0 .. x_T for ``model``;
    ``what`` names ``item`` in errors."""
    vocab = names = model.vocab  # names: where the display string of </s> comes from
    item = _check_item(item, what)
    if isinstance(item, str):
        tok = resolve_tokenizer(model, tokenizer)
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
        ids = np.concatenate([[x0_id(vocab, bos)], ids])
    else:
        tokens, oov, impossible = tokens[1:], oov[1:], impossible[1:]
    if eos:
        ids = np.concatenate([ids, [_special(vocab, "eos")]])
        tokens = list(tokens) + [names.tokens[vocab.eos_id]]
        oov, impossible = np.append(oov, False), np.append(impossible, False)
    if len(ids) < 2:
        raise InputError("a sequence needs x_0 and at least one token to score "
                         f"(got {len(ids)} id(s) with bos={bos}, eos={eos})", length=len(ids))
    return Encoded(ids.astype(np.int64), list(tokens), oov, impossible,
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


def row_stats(rows: np.ndarray, targets: np.ndarray):
    """log P of ``targets``, entropy (bits) and rank from (B, T, V) rows, by
    :func:`~seqprob.functional.target_stats` (float64 in blocks of a few rows, so the
    temporaries stay small whatever the model's block size)."""
    B, T, V = rows.shape
    lp, ent, rank = target_stats(rows.reshape(B * T, V), targets.reshape(B * T))
    return lp.reshape(B, T), (ent / LN2).reshape(B, T), rank.reshape(B, T)


#: Largest log-probability accepted from a normalized model: float32 rounding can push
#: log P(certain token) a hair above 0.
MAX_LOGPROB = 1e-3


def check_logprobs(lp: np.ndarray, model, seq: int) -> np.ndarray:
    """``lp`` (T,) itself, or :class:`InputError` naming where the model gave NaN, +inf, or
    (for a model that claims to be normalized) a log-probability above 0, i.e. P > 1."""
    limit = MAX_LOGPROB if getattr(model, "normalized", True) else np.inf
    bad = np.isnan(lp) | np.isposinf(lp) | (lp > limit)
    if bad.any():
        t = int(np.flatnonzero(bad)[0])
        raise InputError(f"{type(model).__name__} returned log-probability {lp[t]} (sequence {seq}, "
                         f"scored token {t + 1}): a log-probability must be a number <= 0 "
                         f"(tolerance {MAX_LOGPROB})", seq=seq, position=t + 1, value=float(lp[t]),
                         limit=MAX_LOGPROB)
    return lp


def _model_output(model, method: str, batch: np.ndarray, shape: tuple) -> np.ndarray:
    """``model.<method>(batch)`` as a float64 array of ``shape``, or InputError naming the model."""
    out = np.asarray(getattr(model, method)(batch))
    if out.shape != shape or out.dtype.kind not in "fiu":
        raise InputError(f"{type(model).__name__}.{method} returned shape {out.shape} dtype {out.dtype} "
                         f"for ids of shape {batch.shape}; expected {shape} numbers",
                         shape=out.shape, limit=shape)
    return out


def score_batched(model, encoded: list, with_distribution: bool) -> list:
    """Per sequence: dict of (T,) arrays logprob [, entropy_bits, rank]. Batched, right-padded.

    Without ``with_distribution`` only ``model.token_logprobs`` is called, so a model that
    overrides it (the GPT) never builds a (B, T, V) block. With it, a
    :class:`~seqprob.protocols.StreamingScorer` (the GPT) computes the three columns by
    ``model.token_stats``, streaming the vocabulary (see :attr:`seqprob.GPT.score_budget_bytes`);
    any other model hands over its (B, T, V) rows, at most ``_MAX_BLOCK_FLOATS`` of them a
    batch, reduced by :func:`row_stats`.
    """
    lengths = np.array([len(e.ids) for e in encoded])
    V = len(model.vocab)
    streamed = with_distribution and isinstance(model, StreamingScorer)
    budget = _MAX_BATCH_TOKENS if streamed or not with_distribution else max(_MAX_BLOCK_FLOATS // V, 1)
    results: list = [None] * len(encoded)
    for idx in _batches(lengths, budget):
        batch = _pad([encoded[i].ids for i in idx], pad_id=int(encoded[idx[0]].ids[-1]))
        lp, ent, rank = _batch_stats(model, batch, with_distribution, streamed)  # (B, T) each
        for row, i in enumerate(idx):
            n = len(encoded[i].ids) - 1
            seq_lp = check_logprobs(lp[row, :n], model, i)
            out = {"logprob": np.where(encoded[i].impossible, -np.inf, seq_lp)}
            if with_distribution:
                out["entropy_bits"] = ent[row, :n]
                out["rank"] = np.where(encoded[i].impossible, V, rank[row, :n])
            results[i] = out
    return results


def _batch_stats(model, batch: np.ndarray, with_distribution: bool, streamed: bool) -> tuple:
    """(logprob, entropy_bits, rank) of a padded batch x_0 .. x_T (B, T+1), each (B, T);
    entropy and rank are None without ``with_distribution``."""
    B, T = batch[:, 1:].shape
    V = len(model.vocab)
    if streamed:
        lp, ent, rank = stream_stats(model, batch)
        return lp, ent / LN2, rank
    if with_distribution:
        rows = _model_output(model, "logprobs", batch[:, :-1], (B, T, V))  # (B, T, V)
        return row_stats(rows, batch[:, 1:])
    return _model_output(model, "token_logprobs", batch, (B, T)).astype(np.float64), None, None


def stream_stats(model, ids: np.ndarray) -> tuple:
    """``model.token_stats(ids)`` as float64 logprob and entropy (nats) and int64 rank, each
    of ``ids[..., 1:]``'s shape; InputError naming the model when it returns anything else."""
    stats = model.token_stats(ids)
    shape = ids[..., 1:].shape
    if not isinstance(stats, tuple) or len(stats) != 3:
        raise InputError(f"{type(model).__name__}.token_stats must return (logprob, entropy, rank), "
                         f"got {type(stats).__name__}", value=type(stats).__name__)
    out = tuple(np.asarray(a) for a in stats)
    for name, a in zip(("logprob", "entropy", "rank"), out):
        if a.shape != shape or a.dtype.kind not in "fiu":
            raise InputError(f"{type(model).__name__}.token_stats returned {name} of shape {a.shape} "
                             f"dtype {a.dtype} for ids of shape {ids.shape}; expected {shape} numbers",
                             shape=a.shape, limit=shape)
    return out[0].astype(np.float64), out[1].astype(np.float64), out[2].astype(np.int64)


class RowsOnly:
    """``model`` seen without its :class:`~seqprob.protocols.StreamingScorer` capability:
    scoring takes its (T, V) log-probability rows. For comparing the two paths, and for a
    caller that keeps the rows (the explorer's alternatives); every other attribute is the
    model's own.

    Examples
    --------
    >>> from seqprob.protocols import StreamingScorer
    >>> from seqprob.gpt import GPT, GPTConfig
    >>> gpt = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
    >>> isinstance(gpt, StreamingScorer), isinstance(RowsOnly(gpt), StreamingScorer)
    (True, False)
    """

    def __init__(self, model):
        self._model = model

    def __getattr__(self, name):
        if name == "token_stats":
            raise AttributeError(name)
        return getattr(self._model, name)


def context_size(model) -> int | None:
    """The model's context width W (inputs per call), or None when it has no limit.

    Reads ``model.context_size``, else ``model.block_size``, else ``model.config.block_size``.

    Examples
    --------
    >>> import seqprob as sp
    >>> context_size(sp.default_model()), context_size(sp.toy_english())
    (32, None)
    """
    for value in (getattr(model, "context_size", None), getattr(model, "block_size", None),
                  getattr(getattr(model, "config", None), "block_size", None)):
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return int(value)
    return None


SPACE_BYTES = frozenset(b" \t\n\r\x0b\x0c")


def token_byte_spans(tokenizer, text: str, ids: list) -> np.ndarray:
    """(T, 2) byte offsets [start, end) of each token of ``ids`` (= ``tokenizer.encode(text)``)
    in ``text.encode("utf-8")``; :class:`WordAlignmentError` when they do not tile the text."""
    raw = text.encode("utf-8")
    if hasattr(tokenizer, "decode_bytes"):
        lengths = [len(tokenizer.decode_bytes([i])) for i in ids]
        if tokenizer.decode_bytes(ids) != raw:
            raise WordAlignmentError(f"the tokens of {text!r:.60} do not spell the text back",
                                     text=text)
        ends = np.cumsum(lengths)
        return np.stack([ends - lengths, ends], axis=1).reshape(-1, 2)  # (T, 2)
    spans, cursor = [], 0
    for piece in tokenizer.pieces(text):
        at = text.find(piece, cursor)
        if at < 0:  # pieces are not surface strings (e.g. "Ġcat"): decode prefixes instead
            return _prefix_spans(tokenizer, text, ids)
        start, cursor = len(text[:at].encode("utf-8")), at + len(piece)
        spans.append((start, len(text[:cursor].encode("utf-8"))))
    return np.array(spans, dtype=np.int64).reshape(-1, 2)  # (T, 2)


def _prefix_spans(tokenizer, text: str, ids: list) -> np.ndarray:
    """Token spans from the decoded prefixes ids[:k] (each must be a prefix of ``text``)."""
    ends = []
    for k in range(1, len(ids) + 1):
        prefix = tokenizer.decode(ids[:k])
        if not text.startswith(prefix):
            raise WordAlignmentError(f"cannot locate token {k} of {text!r:.60}: the decoded prefix "
                                     f"{prefix!r:.60} is not a prefix of the text", position=k, text=text)
        ends.append(len(prefix.encode("utf-8")))
    ends = np.array(ends, dtype=np.int64)
    return np.stack([np.concatenate([[0], ends[:-1]]), ends], axis=1).reshape(-1, 2)  # (T, 2)


def _join_class(spans: np.ndarray, raw: bytes, join: int) -> tuple[int, np.ndarray]:
    """(number of leading context tokens, (T,) bool token straddles the join)."""
    n_context, straddle = 0, np.zeros(len(spans), dtype=bool)
    for t, (a, b) in enumerate(spans.tolist()):
        core = [i for i in range(a, b) if raw[i] not in SPACE_BYTES]
        in_context = (core[-1] < join) if core else (b <= join)
        straddle[t] = bool(core) and core[0] < join <= core[-1]
        if in_context and n_context == t:
            n_context += 1
    return n_context, straddle


def encode_with_context(model, text: str, context: str, sep: str, tokenizer, bos: bool, eos: bool,
                        stride=None):
    """Encode ``context + sep + text`` for ``model``; returns (encoded, n_context, straddle).

    ``n_context`` counts the tokens wholly in the context (their rows are not scored);
    ``straddle`` (T,) marks the token that spans the join.
    """
    check_text(text, "text")
    check_text(context, "context")
    tok = resolve_tokenizer(model, tokenizer)
    if tok is None:
        raise InputError("scoring with a context needs a tokenizer: pass tokenizer=...")
    full = context + sep + text if context else text
    enc = encode_for_model(model, full, tok, bos, eos)
    width = context_size(model)
    if stride is None and width is not None and len(enc.ids) - 1 > width:
        raise ContextLengthError(f"context + text take {len(enc.ids) - 1} positions, more than the model's "
                                 f"context of {width}: pass stride= to score with sliding windows",
                                 value=len(enc.ids) - 1, limit=width)
    raw = full.encode("utf-8")
    n_context, straddle = _join_class(token_byte_spans(tok, full, tok.encode(full)), raw,
                                      len(context.encode("utf-8")) if context else 0)
    if n_context >= len(tok.encode(full)) and not eos:
        raise InputError(f"nothing left to score after the context {context!r:.60}", context=context)
    return enc, n_context, np.append(straddle, False) if eos else straddle


def drop_context(frame, n_context: list, straddle: list, bos: bool):
    """Rows of ``frame`` (one model of :func:`seqprob.score`) after each sequence's context,
    with a ``spans_join`` column."""
    keep = np.ones(len(frame), dtype=bool)
    marks = np.zeros(len(frame), dtype=bool)
    offset = 0
    for seq, (n, mark) in enumerate(zip(n_context, straddle)):
        rows = int((frame["seq"].to_numpy() == seq).sum())
        lost = n if bos else max(n - 1, 0)  # with bos=False token 1 has no row
        keep[offset:offset + lost] = False
        marks[offset:offset + rows] = mark[len(mark) - rows:]
        offset += rows
    frame = frame.assign(spans_join=marks)
    return frame[keep].reset_index(drop=True)
