"""The explorer's JSON API, free of any web framework: request in (bytes), answer out (a dict).

Every number is the library's own: ``/api/score`` rows are :func:`seqprob.score`'s
(``eos=False``), the next-token distribution is :func:`seqprob.sampling.next_token_probs`'s,
samples are :func:`seqprob.sampling.generate`'s, word rows :func:`seqprob.word_scores`'s,
attention and the logit lens :mod:`seqprob.analysis.lens`'s. Floats travel with full precision
(JSON numbers written by ``repr``, which reads back to the same double); JSON has no infinity,
so ``-inf``, ``inf`` and NaN are the strings ``"-inf"``, ``"inf"`` and ``"nan"`` (as in
``seqprob score --format json``): ``float()`` reads all of them back.
"""
from __future__ import annotations

import json
import math
import numbers

import numpy as np

from ...errors import InputError, SeqProbError
from ...functional import LN2
from ...protocols import StreamingScorer
from ...scoring.core import RowsOnly, start_id

__all__ = ["ApiError", "Explorer", "dumps", "ARGMAX_TEMPERATURE", "MAX_BYTES", "MAX_TOKENS", "TOP"]

#: Default limit on a request body and on a text, in bytes.
MAX_BYTES = 100_000
#: Default limit on the tokens of a text.
MAX_TOKENS = 4096
#: Alternatives listed per token by ``/api/score``.
TOP = 10
#: What temperature 0 becomes: below the smallest normal double, where
#: :func:`seqprob.functional.softmax` returns the exact argmax (the T -> 0 limit).
ARGMAX_TEMPERATURE = math.ulp(0.0)


class ApiError(SeqProbError):
    """A request the explorer refuses; ``status`` is the HTTP status it answers with."""

    def __init__(self, status: int, message: str, **data):
        super().__init__(message, status=status, **data)


# ----------------------------------------------------------------------------- JSON out
def _plain(value):
    """``value`` with numpy types made Python ones and non-finite floats made strings."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f" and np.isfinite(value).all():
            return value.astype(np.float64).tolist()
        return _plain(value.tolist())
    if isinstance(value, (np.bool_, np.integer, np.floating)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def dumps(payload) -> bytes:
    """``payload`` as compact UTF-8 JSON, floats exact, -inf / inf / NaN as strings.

    Examples
    --------
    >>> dumps({"logprob": float("-inf"), "p": np.float64(0.1)})
    b'{"logprob":"-inf","p":0.1}'
    """
    try:  # the C encoder, when the payload holds Python types and finite floats only
        text = json.dumps(payload, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        text = json.dumps(_plain(payload), allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8")


# ----------------------------------------------------------------------------- JSON in
def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _text(value) -> str:
    from ..._io import check_text

    return check_text(value, "text")


def _name(value) -> str:
    if not isinstance(value, str):
        raise InputError(f"model must be a model name (a string), got {type(value).__name__} {value!r:.40}")
    return value


def _names(value) -> list:
    if not isinstance(value, list) or not value:
        raise InputError(f"models must be a non-empty list of model names, got {value!r:.60}")
    return [_name(v) for v in value]


def _flag(value) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"logprobs must be true or false, got {value!r:.40}")
    return value


def _real(name, low=None, high=None, low_open=False, optional=False):
    from ...checks import check_real

    def check(value):
        if optional and value is None:
            return None
        try:
            return check_real(name, value, low=low, high=high, low_open=low_open)
        except OverflowError:  # an integer too large for a double
            raise InputError(f"{name} must be a finite number, got an integer of "
                             f"{len(str(abs(value)))} digits") from None
    return check


def _int(name, low, optional=False):
    from ...checks import check_int

    return lambda value: None if optional and value is None else check_int(name, value, low=low)


#: Every field a request may carry, with its check; the endpoints take subsets.
FIELDS = {
    "text": _text, "model": _name, "models": _names, "logprobs": _flag,
    "temperature": _real("temperature", low=0), "top_k": _int("top_k", 1, optional=True),
    "top_p": _real("top_p", low=0, high=1, low_open=True, optional=True), "k": _int("k", 1),
    "seed": _int("seed", 0), "layer": _int("layer", 0), "head": _int("head", 0),
}
#: The fields of each POST endpoint: (required, optional with defaults).
ENDPOINTS = {
    "score": ({"text"}, {"model": None}),
    "words": ({"text"}, {"model": None}),
    "next": ({"text"}, {"model": None, "temperature": 1.0, "top_k": None, "top_p": None, "k": 10,
                        "logprobs": False}),
    "sample": ({"text"}, {"model": None, "temperature": 1.0, "top_k": None, "top_p": None, "seed": 0}),
    "inside": ({"text", "layer", "head"}, {"model": None}),
    "compare": ({"text"}, {"models": None}),
}


def parse_request(body: bytes, endpoint: str) -> dict:
    """The checked fields of a request body (defaults filled in), or :class:`ApiError`:
    400 for a body that is not JSON, 422 for a wrong field, type or value."""
    try:
        payload = json.loads(body, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ApiError(400, f"the request body is not valid JSON ({str(exc)[:120]})") from None
    if not isinstance(payload, dict):
        raise ApiError(422, f"the request body must be a JSON object, got a {type(payload).__name__}")
    required, optional = ENDPOINTS[endpoint]
    unknown = sorted(set(payload) - required - set(optional))
    if unknown:
        raise ApiError(422, f"unknown field {unknown[0]!r:.60}: /api/{endpoint} takes "
                            f"{', '.join(sorted(required | set(optional)))}", field=unknown[0])
    missing = sorted(required - set(payload))
    if missing:
        raise ApiError(422, f"missing field {missing[0]!r}: /api/{endpoint} needs {', '.join(sorted(required))}",
                       field=missing[0])
    fields = dict(optional)
    for name, value in payload.items():
        try:
            fields[name] = FIELDS[name](value)
        except InputError as exc:
            raise ApiError(422, str(exc), field=name) from None
    return fields


# ----------------------------------------------------------------------------- helpers
class _Recording(RowsOnly):
    """A model that passes every call through and keeps what ``logprobs`` returned, so one
    forward pass gives both :func:`seqprob.score`'s rows and the alternatives (a model that
    does not stream scores through ``logprobs``)."""

    def __init__(self, model):
        super().__init__(model)
        self.rows = self.ids = None

    def logprobs(self, ids):
        self.rows = self._model.logprobs(ids)
        return self.rows

    def token_logprobs(self, ids):
        return self._model.token_logprobs(ids)

    def full_rows(self) -> np.ndarray:
        """The (B, T, V) log-prob rows of the positions scoring read."""
        return self.rows if self.rows is not None else self._model.logprobs(self.ids[..., :-1])


class _StreamRecording(_Recording):
    """The same for a :class:`~seqprob.protocols.StreamingScorer` (the GPT): scoring keeps its
    streamed numbers (the page shows :func:`seqprob.score`'s own, to the last bit), and the
    rows for the alternatives take one more forward pass of the ids it read."""

    def token_stats(self, ids):
        self.ids = np.asarray(ids)
        return self._model.token_stats(ids)


def _recording(model) -> _Recording:
    return _StreamRecording(model) if isinstance(model, StreamingScorer) else _Recording(model)


def _top(rows: np.ndarray, k: int) -> tuple:
    """Ids (T, k) of the k largest entries of each row (ties: smaller id first) and their values."""
    k = min(k, rows.shape[-1])
    idx = np.argpartition(-rows, k - 1, axis=-1)[:, :k] if k < rows.shape[-1] else \
        np.broadcast_to(np.arange(rows.shape[-1]), rows.shape)
    idx = np.sort(idx, axis=-1)
    order = np.argsort(-np.take_along_axis(rows, idx, -1), axis=-1, kind="stable")
    idx = np.take_along_axis(idx, order, -1)
    return idx, np.take_along_axis(rows, idx, -1).astype(np.float64)


def _entropy_bits(p: np.ndarray) -> float:
    """H(p) in bits, 0 log 0 = 0."""
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum() / LN2) + 0.0


def totals(logprob: np.ndarray, text: str) -> dict:
    """The chain rule's sums over a text's rows: log P(text) (nats) and what follows from it."""
    total = math.fsum(logprob.tolist())
    n, n_bytes = len(logprob), len(text.encode("utf-8"))
    nll = -total
    return {"total_logprob": total, "n_tokens": n, "n_bytes": n_bytes,
            "perplexity": math.exp(nll / n) if nll / n < 709 else math.inf,
            "bits_per_token": nll / (n * LN2), "bits_per_byte": nll / (n_bytes * LN2) if n_bytes else math.nan}


def _clip(message: str, width: int = 300) -> str:
    return message if len(message) <= width else message[:width - 1] + "…"


# ----------------------------------------------------------------------------- the API
class Explorer:
    """The models of one explorer and the answers of its JSON API.

    Parameters
    ----------
    served : list of ServedModel
        The models requests may choose from (the first one is the default).
    max_bytes : int
        Largest request body, and largest text in UTF-8 bytes (413 above it).
    max_tokens : int
        Largest text in tokens of the chosen model (413 above it).

    Examples
    --------
    >>> import json, seqprob as sp
    >>> from seqprob.app.explore.models import serve_model
    >>> ex = Explorer([serve_model("truth", sp.toy_english())])
    >>> out = ex.handle("score", json.dumps({"text": "the cat sat"}).encode())
    >>> [t["text"] for t in out["tokens"]], out["n_tokens"]
    (['the', 'cat', 'sat'], 3)
    """

    def __init__(self, served, max_bytes: int = MAX_BYTES, max_tokens: int = MAX_TOKENS):
        from ...checks import check_int

        self.served = {m.name: m for m in served}
        if not self.served or len(self.served) != len(served):
            raise InputError("the explorer needs at least one model, each with its own name")
        self.max_bytes = check_int("max_bytes", max_bytes, low=1)
        self.max_tokens = check_int("max_tokens", max_tokens, low=1)

    def handle(self, endpoint: str, body: bytes) -> dict:
        """The answer of ``POST /api/<endpoint>`` to ``body``, or :class:`ApiError` (its
        ``status`` says why: 400, 404, 413 or 422)."""
        if len(body) > self.max_bytes:
            raise ApiError(413, f"the request body has {len(body)} bytes, over the limit of "
                                f"{self.max_bytes} (--max-bytes)", value=len(body), limit=self.max_bytes)
        fields = parse_request(body, endpoint)
        try:
            return getattr(self, f"api_{endpoint}")(**fields)
        except ApiError:
            raise
        except SeqProbError as exc:  # the library's own checks: the request asked for something impossible
            raise ApiError(422, _clip(str(exc))) from None

    def models(self) -> dict:
        """``GET /api/models``: each model's name, kind, vocabulary size and context."""
        return {"models": [m.info() for m in self.served.values()],
                "limits": {"max_bytes": self.max_bytes, "max_tokens": self.max_tokens}}

    def model(self, name):
        """The :class:`ServedModel` called ``name`` (None: the first), or a 404."""
        if name is None:
            return next(iter(self.served.values()))
        if name not in self.served:
            raise ApiError(404, f"no model named {name!r:.80}: this explorer serves "
                                f"{', '.join(self.served)}", value=name)
        return self.served[name]

    def _ids(self, served, text: str) -> list:
        """The text's token ids, or a 413 when the text is over a limit."""
        size = len(text.encode("utf-8"))
        if size > self.max_bytes:
            raise ApiError(413, f"the text has {size} bytes, over the limit of {self.max_bytes} (--max-bytes)",
                           value=size, limit=self.max_bytes)
        ids = served.tokenizer.encode(text)
        if len(ids) > self.max_tokens:
            raise ApiError(413, f"the text has {len(ids)} tokens, over the limit of {self.max_tokens} "
                                "(--max-tokens)", value=len(ids), limit=self.max_tokens)
        return ids

    def _strings(self, served, ids) -> list:
        strings = served.strings
        return [strings[i] for i in np.asarray(ids, dtype=np.int64).ravel().tolist()]

    def vocab(self, name) -> dict:
        """``GET /api/vocab?model=NAME``: the display string of every token id of a model."""
        served = self.model(name)
        return {"model": served.name, "tokens": served.strings}

    # ------------------------------------------------------------------ text and words
    def _score(self, served, text: str, keep=None):
        """:func:`seqprob.score`'s rows of ``text`` (eos=False) and ``keep(rows)`` of the
        (T, V) log-prob rows they came from, under the model's lock."""
        from ...scoring import score

        self._ids(served, text)
        recording = _recording(served.model)
        with served.lock:
            df = score(recording, text, tokenizer=served.tokenizer, eos=False)
            kept = None if keep is None else keep(np.asarray(recording.full_rows())[0])
        return df, kept

    def api_score(self, text: str, model=None) -> dict:
        """``POST /api/score``: every token's row, its 10 likeliest alternatives, the totals."""
        served = self.model(model)
        df, (top_ids, top_lp) = self._score(served, text, keep=lambda rows: _top(rows, TOP))
        strings, tokens = served.strings, []
        cols = [df[c].tolist() for c in ("position", "token", "token_id", "logprob", "surprisal_bits",
                                         "entropy_bits", "rank", "is_oov")]
        for pos, tok, tid, lp, bits, ent, rank, oov, ids, lps in zip(*cols, top_ids.tolist(), top_lp.tolist()):
            top = [{"text": strings[i], "id": i, "logprob": v} for i, v in zip(ids, lps) if v > -math.inf]
            tokens.append({"position": pos, "text": tok, "id": tid, "logprob": lp, "surprisal_bits": bits,
                           "entropy_bits": ent, "rank": rank, "is_oov": oov, "top": top})
        lp = df["logprob"].to_numpy()
        return {"model": served.name, "tokens": tokens, **totals(lp, text), "note": _impossible_note(lp)}

    def api_words(self, text: str, model=None) -> dict:
        """``POST /api/words``: :func:`seqprob.word_scores` rows (eos=False) of the text."""
        from ...scoring.core import context_size
        from ...scoring import word_scores

        served = self.model(model)
        n = len(self._ids(served, text)) + 1  # the inputs word_scores reads: x_0 and the tokens
        width = context_size(served.model)
        stride = max(1, width // 2) if width is not None and n > width else None
        with served.lock:
            df = word_scores(served.model, text, tokenizer=served.tokenizer, eos=False, stride=stride)
        cols = ("word", "logprob", "surprisal_bits", "n_tokens", "first_position", "last_position")
        words = [dict(zip(cols, row)) for row in zip(*(df[c].tolist() for c in cols))]
        return {"model": served.name, "word_boundary": served.tokenizer.word_boundary, "words": words,
                **totals(df["logprob"].to_numpy(), text)}

    # ------------------------------------------------------------------ next token
    def _next_row(self, served, text: str) -> tuple:
        """x_0 .. x_t of the text and the (V,) row log P(next | text) a sampler draws from."""
        ids = [start_id(served.model.vocab), *self._ids(served, text)]
        with served.lock:
            row = np.array(served.model.start(np.asarray(ids, dtype=np.int64)).logprobs, dtype=np.float64)
        served.model.vocab.mask_never_predicted(row, -np.inf)  # as generate() does: <s> is never next
        return ids, row

    def api_next(self, text: str, model=None, temperature=1.0, top_k=None, top_p=None, k=10,
                 logprobs=False) -> dict:
        """``POST /api/next``: the k likeliest next tokens under softmax(u / T), top-k, top-p
        (those of probability > 0), and the entropy of that distribution."""
        from ...sampling import next_token_probs

        served = self.model(model)
        ids, row = self._next_row(served, text)
        p = next_token_probs(row, temperature or ARGMAX_TEMPERATURE, top_k, top_p)  # (V,)
        best = np.argsort(-p, kind="stable")[:min(k, int(np.count_nonzero(p)))]
        strings = self._strings(served, best)
        out = {"model": served.name, "n_context": len(ids), "temperature": temperature, "top_k": top_k,
               "top_p": top_p, "entropy_bits": _entropy_bits(p),
               "tokens": [{"text": s, "id": int(i), "prob": float(p[i]), "logprob": float(row[i])}
                          for s, i in zip(strings, best)]}
        if logprobs:
            out["logprobs"] = row
        return out

    def api_sample(self, text: str, model=None, temperature=1.0, top_k=None, top_p=None, seed=0) -> dict:
        """``POST /api/sample``: one token drawn (seeded) from the distribution of ``/api/next``;
        drawing ``</s>`` ends the text (returned unchanged, ``ended`` true)."""
        from ...sampling import generate

        served = self.model(model)
        ids = [start_id(served.model.vocab), *self._ids(served, text)]
        with served.lock:
            token = generate(served.model, ids, max_new_tokens=1, temperature=temperature or ARGMAX_TEMPERATURE,
                             top_k=top_k, top_p=top_p, seed=seed, stop_at_eos=False)[0]
        ended = token == served.model.vocab.eos_id
        new = text if ended else text + _continuation(served.tokenizer, text, ids[1:], token)
        return {"model": served.name, "seed": seed, "ended": ended, "text": new,
                "token": {"text": self._strings(served, [token])[0], "id": token}}


    # ------------------------------------------------------------------ inside f_theta
    def api_inside(self, text: str, layer: int, head: int, model=None) -> dict:
        """``POST /api/inside``: one head's attention pattern over x_0 .. x_T and the logit lens
        (the top next token read after every block, at every position, the last one included)."""
        from ...analysis.lens import attention_patterns, logit_lens
        from ...protocols import Inspectable

        served = self.model(model)
        if not isinstance(served.model, Inspectable):
            raise ApiError(422, f"model {served.name!r} ({served.kind}) has no attention or residual stream: "
                                "Inside f_θ needs a transformer", model=served.name)
        self._ids(served, text)
        with served.lock:
            attn, tokens = attention_patterns(served.model, text, tokenizer=served.tokenizer, eos=False)
            lens = logit_lens(served.model, text, tokenizer=served.tokenizer, eos=True)
        n_layer, n_head = attn.shape[:2]
        for name, value, size in (("layer", layer, n_layer), ("head", head, n_head)):
            if value >= size:
                raise ApiError(422, f"{name} must be an integer in [0, {size - 1}] (model {served.name!r} "
                                    f"has {size} {name}s), got {value}", field=name, value=value, limit=size - 1)
        cols = ("layer", "layer_name", "position", "context", "token", "logprob", "prob", "rank", "top_token")
        rows = [dict(zip(cols, row)) for row in zip(*(lens[c].tolist() for c in cols))]
        return {"model": served.name, "layer": layer, "head": head, "n_layer": n_layer, "n_head": n_head,
                "tokens": tokens, "attention": attn[layer, head], "logit_lens": rows}

    # ------------------------------------------------------------------ compare
    def api_compare(self, text: str, models=None) -> dict:
        """``POST /api/compare``: every chosen model's rows on the same tokens, the difference
        to a baseline, and with an exact language P* among them, the KL(P* || model) per position."""
        chosen = [self.model(n) for n in (models or list(self.served))]
        truth = next((m for m in chosen if m.kind == "truth"), None)
        scored = {m.name: self._score(m, text, keep=_truth_columns(m, truth)) for m in chosen}
        first = chosen[0].name
        tokens = scored[first][0]["token"].tolist()
        for m in chosen:
            if scored[m.name][0]["token"].tolist() != tokens:
                raise ApiError(422, f"models {first!r} and {m.name!r} split the text into different tokens: "
                                    "compare needs models that share a tokenizer", model=m.name)
        baseline = truth.name if truth is not None else first
        truth_lp = None if truth is None else scored[truth.name][0]["logprob"].to_numpy()
        base_bits = scored[baseline][0]["surprisal_bits"].to_numpy()
        rows = []
        for m in chosen:
            df, cols = scored[m.name]
            bits = df["surprisal_bits"].to_numpy()
            with np.errstate(invalid="ignore"):
                diff = bits - base_bits  # inf - inf is NaN: both models give the token probability 0
            kl = None if truth is None or m is truth else _kl_bits(scored[truth.name][1], cols, truth_lp)
            rows.append({"name": m.name, "kind": m.kind, "ids": df["token_id"].to_numpy(),
                         "logprob": df["logprob"].to_numpy(), "surprisal_bits": bits, "diff_bits": diff,
                         "kl_bits": kl, **totals(df["logprob"].to_numpy(), text)})
        return {"tokens": tokens, "positions": scored[first][0]["position"].to_numpy(), "baseline": baseline,
                "reference": None if truth is None else truth.name, "models": rows,
                "note": _impossible_note(*(df["logprob"].to_numpy() for df, _ in scored.values()))}


def _truth_columns(served, truth):
    """A ``keep`` for :meth:`Explorer._score`: the model's rows (float64) at the columns of the
    truth's vocabulary (tokens matched by string; an unknown one reads ``<unk>``, else log 0)."""
    if truth is None:
        return None
    vocab, truth_vocab = served.model.vocab, truth.model.vocab
    if vocab == truth_vocab:
        return lambda rows: rows.astype(np.float64)
    unk = -1 if vocab.unk_id is None else vocab.unk_id
    cols = np.array([vocab.get(s, unk) for s in truth_vocab.tokens], dtype=np.int64)

    def keep(rows):
        out = rows[:, np.maximum(cols, 0)].astype(np.float64)  # (T, V*)
        out[:, cols < 0] = -np.inf
        return out
    return keep


def _impossible_note(*logprobs: np.ndarray):
    """The library's note on rows after a token of probability 0, when a text has such rows."""
    from ..pipeline import IMPOSSIBLE_PREFIX_NOTE

    return IMPOSSIBLE_PREFIX_NOTE if any(np.isneginf(lp[:-1]).any() for lp in logprobs) else None


def _kl_bits(truth_rows: np.ndarray, rows: np.ndarray, truth_lp: np.ndarray) -> np.ndarray:
    """(T,) KL(P* || P) in bits of rows of log-probabilities over the truth's vocabulary; NaN
    where the context is impossible under P* (after a token P* gives probability 0 its rows are
    a convention, and P(next | context) = 0/0 is undefined)."""
    p = np.exp(truth_rows)  # (T, V*)
    on = p > 0
    with np.errstate(invalid="ignore", over="ignore"):
        gap = np.where(on, truth_rows - rows, 0.0)  # log P* - log P: +inf where P gives 0
        kl = (np.where(on, p, 0.0) * gap).sum(axis=-1) / LN2
    bad = ~np.isclose(p.sum(axis=-1), 1.0, atol=1e-6)
    bad[1:] |= np.cumsum(np.isneginf(truth_lp))[:-1] > 0  # x_<t holds a token of P* = 0
    kl[bad] = np.nan
    return np.maximum(kl, 0.0, where=~np.isnan(kl), out=kl)


def _continuation(tok, text: str, ids: list, token: int) -> str:
    """What ``token`` adds to ``text`` (tokenized as ``ids``): the tail of decode(ids + [token])
    beyond decode(ids), so unknown words of ``text`` stay as typed."""
    before, after = tok.decode(ids), tok.decode([*ids, token])
    tail = after[len(before):] if after.startswith(before) else tok.decode([token])
    if tok.word_boundary == "whole_word":  # whitespace is no token: one space between words
        tail = tail.lstrip()
        if text and not text[-1].isspace():
            tail = " " + tail
    return tail
