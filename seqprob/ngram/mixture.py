"""Linear interpolation of language models: P(w | h) = sum_i lambda_i P_i(w | h).

:class:`Mixture` mixes any :class:`~seqprob.protocols.LanguageModel` s that share one
vocabulary (the same tokens in the same order: fit n-gram models with one tokenizer to mix
them); :meth:`Mixture.fit_weights` tunes the weights by EM on held-out text (SRILM
``compute-best-mix``); :meth:`Mixture.to_backoff` turns a mixture of back-off n-gram models
into one back-off model that ``write_arpa`` can write (SRILM ``ngram -mix-lm`` static
interpolation).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from ..base import BaseLanguageModel
from ..errors import InputError, has_attribute
from ..functional import logsumexp
from ..vocab import check_ids
from .counts import lookup_keys
from .base import BackoffTablesModel
from .prune import last_logprob, recompute_backoffs, suffix_rows
from .tables import BackoffTables

__all__ = ["Mixture", "MixtureWeightError", "interpolate", "em_weights", "MixtureState"]

log = logging.getLogger(__name__)


class MixtureWeightError(InputError):
    """Mixture weights that are not a distribution: negative, non-finite, not summing to 1,
    or not one per model."""


def check_weights(weights, n_models: int) -> np.ndarray:
    """``weights`` as a float array after checking it is a distribution over ``n_models``."""
    try:
        w = np.asarray(weights)
        if w.dtype.kind not in "fiu":  # "0.5" would convert silently, True would be 1
            raise TypeError
        w = w.astype(np.float64)
    except (TypeError, ValueError):
        raise MixtureWeightError(f"weights must be numbers, got {weights!r}", value=weights) from None
    if w.ndim != 1 or len(w) != n_models:
        raise MixtureWeightError(f"need one weight per model ({n_models}), got {weights!r}",
                                 value=weights, limit=n_models)
    if not np.isfinite(w).all() or (w < 0).any():
        raise MixtureWeightError(f"weights must be finite and >= 0, got {w.tolist()}", value=w.tolist(), limit=0)
    if abs(w.sum() - 1.0) > 1e-6:
        raise MixtureWeightError(f"weights must sum to 1 (within 1e-6), got sum {w.sum():.9g} "
                                 f"for {w.tolist()}", value=w.tolist(), limit=1.0)
    return w / w.sum()


def _check_models(models) -> list:
    models = list(models)
    if not models:
        raise InputError("a mixture needs at least one model")
    for i, m in enumerate(models):
        if not all(has_attribute(m, a) for a in ("vocab", "logprobs", "token_logprobs")):
            raise InputError(f"models[{i}] ({type(m).__name__}) is not a LanguageModel")
    first = models[0].vocab
    for i, m in enumerate(models[1:], start=1):
        v = m.vocab
        if tuple(v.tokens) != tuple(first.tokens) or (v.bos_id, v.eos_id, v.unk_id) != (
                first.bos_id, first.eos_id, first.unk_id):
            raise InputError(_vocab_mismatch(first, v, i), model=i)
    return models


def _vocab_mismatch(a, b, i: int) -> str:
    if len(a) != len(b):
        return (f"models[{i}] predicts over {len(b)} tokens, models[0] over {len(a)}: a mixture needs "
                "one vocabulary (fit the models with the same tokenizer)")
    j = next((k for k, (x, y) in enumerate(zip(a.tokens, b.tokens)) if x != y), None)
    if j is None:
        return f"models[{i}] marks different special tokens (<s>/</s>/<unk>) than models[0]"
    return (f"models[{i}] has token {b.tokens[j]!r} at id {j} where models[0] has {a.tokens[j]!r}: "
            "a mixture needs one vocabulary (fit the models with the same tokenizer)")


@dataclass(frozen=True)
class MixtureState:
    """Incremental state of a mixture: one state per component and the mixed next-token row."""

    ids: tuple
    states: tuple = field(repr=False)
    logprobs: np.ndarray = field(repr=False)


class Mixture(BaseLanguageModel):
    """Linear interpolation of language models over one vocabulary.

    Parameters
    ----------
    models : list of LanguageModel
        Components; all must have the same vocabulary (tokens and special ids).
    weights : sequence of float, optional
        lambda_i >= 0 summing to 1 (within 1e-6); default uniform.

    Attributes
    ----------
    weights_ : ndarray
        The weights in use (set by ``__init__``, updated by :meth:`fit_weights`).
    history_ : list of float
        Held-out log-likelihood (nats) after each EM iteration of the last ``fit_weights``.

    Notes
    -----
    log P(w | h) = logsumexp_i (log lambda_i + log P_i(w | h)); a component with lambda_i = 0
    is left out (it never turns a probability into NaN). Each row sums to 1 when every
    component's does.

    Examples
    --------
    >>> from seqprob.ngram import WittenBell, AddK
    >>> a = WittenBell(order=2).fit(["a b", "b a"])
    >>> b = AddK(order=1, k=1.0).fit(["a b", "b a"], tokenizer=a.tokenizer)
    >>> mix = Mixture([a, b], [0.7, 0.3])
    >>> float(abs(np.exp(mix.logprobs([1, 3])).sum(axis=-1) - 1).max()) < 1e-12
    True
    """

    def __init__(self, models, weights=None):
        self.models = _check_models(models)
        k = len(self.models)
        self.weights = weights
        self.weights_ = check_weights(np.full(k, 1.0 / k) if weights is None else weights, k)
        self.vocab_ = self.models[0].vocab
        self.history_: list = []

    @property
    def normalized(self) -> bool:
        """True when every component is normalized."""
        return all(getattr(m, "normalized", True) for m in self.models)

    @property
    def tokenizer(self):
        """The first component's tokenizer (None if it has none)."""
        return next((t for t in (getattr(m, "tokenizer", None) for m in self.models) if t is not None), None)

    def _active(self):
        return [(np.log(w), m) for w, m in zip(self.weights_, self.models) if w > 0]

    def _mix(self, parts: list) -> np.ndarray:
        return logsumexp(np.stack(parts), axis=0)

    def _logprobs(self, batch: np.ndarray) -> np.ndarray:
        return self._mix([lw + m.logprobs(batch) for lw, m in self._active()])  # (B, T, V)

    def _token_logprobs(self, batch: np.ndarray) -> np.ndarray:
        return self._mix([lw + m.token_logprobs(batch) for lw, m in self._active()])  # (B, T)

    def _start(self, ids: tuple) -> MixtureState:
        states = tuple(m.start(list(ids)) for m in self.models)
        return self._state(ids, states)

    def step(self, state, token_id: int) -> MixtureState:
        """New state after appending ``token_id`` (each component steps its own state)."""
        if not isinstance(state, MixtureState):
            return super().step(state, token_id)
        token = int(check_ids(np.asarray([token_id]), len(self.vocab), name="token_id")[0])
        states = tuple(m.step(s, token) for m, s in zip(self.models, state.states))
        return self._state(state.ids + (token,), states)

    def _state(self, ids: tuple, states: tuple) -> MixtureState:
        parts = [np.log(w) + np.asarray(s.logprobs) for w, s in zip(self.weights_, states) if w > 0]
        row = self._mix(parts)  # (V,)
        row.flags.writeable = False
        return MixtureState(ids=ids, states=states, logprobs=row)

    # ------------------------------------------------------------------ weights
    def component_logprobs(self, texts, tokenizer=None, eos: bool = True) -> np.ndarray:
        """(n_tokens, K) log P_i(x_t | x_<t) of every token of ``texts`` under each component."""
        tok = tokenizer if tokenizer is not None else self.tokenizer
        if tok is None:
            raise InputError("fit_weights needs a tokenizer (none given, and the models have none)")
        v = self.vocab
        seqs = []
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InputError(f"texts[{i}] must be a str, got {type(text).__name__}")
            seqs.append([v.bos_id] + list(tok.encode(text)) + ([v.eos_id] if eos else []))
        seqs = [s for s in seqs if len(s) >= 2]
        if not seqs:
            raise InputError("no held-out tokens to fit mixture weights on")
        return np.stack([_score_all(m, seqs) for m in self.models], axis=1)  # (n_tokens, K)

    def fit_weights(self, texts, tokenizer=None, eos: bool = True, max_iter: int = 200,
                    tol: float = 1e-9):
        """Tune the weights by EM on held-out ``texts`` (SRILM ``compute-best-mix``); returns self.

        Notes
        -----
        E-step: r_ti = lambda_i P_i(x_t) / sum_j lambda_j P_j(x_t); M-step: lambda_i = mean_t r_ti.
        Each iteration never lowers the held-out log-likelihood (``history_``). Starts from
        the current weights (a weight of exactly 0 stays 0: start from the uniform default);
        stops when the log-likelihood gains less than ``tol`` per token or after ``max_iter``.

        Examples
        --------
        >>> from seqprob.ngram import WittenBell
        >>> a = WittenBell(order=2).fit(["a b", "b a"])
        >>> b = WittenBell(order=1).fit(["a b", "b a"], tokenizer=a.tokenizer)
        >>> w = Mixture([a, b]).fit_weights(["a b a", "b b"]).weights_
        >>> bool(abs(w.sum() - 1) < 1e-12)
        True
        """
        L = self.component_logprobs(texts, tokenizer, eos)
        self.weights_, self.history_ = em_weights(L, self.weights_, max_iter=max_iter, tol=tol)
        log.info("mixture weights %s after %d EM iterations", np.round(self.weights_, 6).tolist(),
                 len(self.history_))
        return self

    # ------------------------------------------------------------------ static mixture
    def to_backoff(self) -> BackoffTablesModel:
        """One back-off model: the union of the components' n-grams (SRILM ``-mix-lm``).

        Notes
        -----
        Every n-gram (h, w) listed in some component gets the exact mixture probability
        sum_i lambda_i P_i(w | h); every context gets the back-off weight that makes its row
        sum to 1 (see :func:`~seqprob.ngram.prune.recompute_backoffs`). Exact: all listed
        n-grams, and any (h, w) whose context h is listed in no component (each component then
        backs off from h with weight 1). Approximate: an unlisted w after a listed h, which
        gets gamma(h) P_mix(w | h') instead of sum_i lambda_i gamma_i(h) P_i(w | h').
        ``write_arpa(mixture, path)`` writes this model.
        """
        tables = []
        for i, m in enumerate(self.models):
            t = getattr(m, "_tables", None)
            if t is None or not getattr(m, "normalized", True):
                raise InputError(f"models[{i}] ({type(m).__name__}) is not a normalized back-off "
                                 "n-gram model: only the dynamic mixture is available")
            tables.append(t())
        return BackoffTablesModel(static_mixture(tables, self.weights_), self.vocab, self.tokenizer)

    def _tables(self) -> BackoffTables:
        """Tables of :meth:`to_backoff` (so that ``write_arpa(mixture, path)`` works)."""
        return self.to_backoff().tables_

    def __repr__(self) -> str:
        names = ", ".join(type(m).__name__ for m in self.models)
        return f"Mixture([{names}], weights={np.round(self.weights_, 6).tolist()})"


def _score_all(model, seqs: list) -> np.ndarray:
    """log P(x_t | x_<t) of every token of every sequence, concatenated (one pass for n-grams)."""
    many = getattr(model, "token_logprobs_many", None)
    arrays = [np.asarray(s, dtype=np.int64) for s in seqs]
    parts = many(arrays) if many is not None else [model.token_logprobs(a) for a in arrays]
    return np.concatenate([np.asarray(p, dtype=np.float64) for p in parts])


def interpolate(models, weights=None) -> Mixture:
    """P(w | h) = sum_i lambda_i P_i(w | h): a :class:`Mixture` of ``models``.

    Examples
    --------
    >>> from seqprob.ngram import WittenBell
    >>> a = WittenBell(order=2).fit(["a b", "b a"])
    >>> mix = interpolate([a, a], [0.5, 0.5])
    >>> bool(np.allclose(mix.token_logprobs([1, 3, 4]), a.token_logprobs([1, 3, 4])))
    True
    """
    return Mixture(models, weights)


def em_weights(L: np.ndarray, init, max_iter: int = 200, tol: float = 1e-9):
    """EM for mixture weights from an (n, K) matrix of component log-probs.

    Returns (weights, history): history[j] = sum_t log sum_i lambda_i P_i(x_t) after iteration j
    (non-decreasing). Tokens that every component gives probability 0 are left out.

    Examples
    --------
    >>> L = np.log([[0.5, 0.1], [0.4, 0.2], [0.1, 0.1]])
    >>> w, hist = em_weights(L, [0.5, 0.5])
    >>> bool(w[0] > 0.9), bool(np.all(np.diff(hist) >= -1e-12))
    (True, True)
    """
    L = np.asarray(L, dtype=np.float64)
    w = check_weights(init, L.shape[1])
    L = L[np.isfinite(L).any(axis=1)]  # (n, K)
    if not len(L):
        raise InputError("every held-out token has probability 0 under every model")
    history = []
    prev = -np.inf
    for _ in range(int(max_iter)):
        with np.errstate(divide="ignore"):
            joint = np.log(w) + L  # (n, K)
        total = logsumexp(joint, axis=1)  # (n,)
        ll = float(total.sum())
        history.append(ll)
        w = np.exp(joint - total[:, None]).mean(axis=0)  # (K,)
        w /= w.sum()
        if ll - prev < tol * len(L):
            break
        prev = ll
    return w, history


def static_mixture(tables: list, weights: np.ndarray) -> BackoffTables:
    """Back-off tables of the union of n-grams with mixed probabilities and fresh back-offs."""
    V = tables[0].vocab_size
    union_keys, rows = _union_keys(tables, V)
    N = len(union_keys)
    out = BackoffTables(V, union_keys, [np.zeros(len(k)) for k in union_keys],
                        [np.zeros(len(k)) for k in union_keys[:-1]])
    scores = [[t.logp[0]] for t in tables]  # per component, per order: log P_t of union n-grams
    for m in range(2, N + 1):
        suf = suffix_rows(out, m)  # (U_m,) union row of each suffix, order m-1
        for i, t in enumerate(tables):
            scores[i].append(_component_order(out, t, m, rows[i], suf, scores[i][-1]))
    for m in range(1, N + 1):
        parts = [np.log(w) + scores[i][m - 1] for i, w in enumerate(weights) if w > 0]
        out.logp[m - 1] = np.minimum(logsumexp(np.stack(parts), axis=0), 0.0)  # (U_m,)
    return recompute_backoffs(out)


def _union_keys(tables: list, V: int):
    """Union of the components' prefix-linked keys, and each union n-gram's row per component."""
    keys = [np.arange(V, dtype=np.int64)]
    maps = [keys[0] for _ in tables]  # component row -> union row, at the previous order
    mapped_all = []
    for m in range(2, max(t.order for t in tables) + 1):
        mapped = [maps[i][t.keys[m - 1] // V] * V + t.keys[m - 1] % V if t.order >= m else None
                  for i, t in enumerate(tables)]  # component keys in union row space, still sorted
        keys.append(_sorted_unique(np.concatenate([k for k in mapped if k is not None])))
        maps = [np.searchsorted(keys[-1], k) if k is not None else None for k in mapped]
        mapped_all.append(mapped)
    rows = []
    for i in range(len(tables)):
        per = [keys[0]]  # unigram rows are the ids
        for m, mapped in enumerate(mapped_all, start=2):
            k = mapped[i]
            per.append(lookup_keys(k, keys[m - 1]) if k is not None else np.full(len(keys[m - 1]), -1))
        rows.append(per)
    return keys, rows


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    keys = np.sort(keys)  # (n,)
    return keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if len(keys) else keys


def _component_order(union: BackoffTables, t: BackoffTables, m: int, rows: list, suf: np.ndarray,
                     lower: np.ndarray) -> np.ndarray:
    """log P_t(w | h) of every order-m union n-gram: listed in t, else gamma_t(h) P_t(w | h')."""
    V = union.vocab_size
    row = rows[m - 1]  # (U_m,) row in t, -1 if t does not list it
    ctx_row = rows[m - 2][union.keys[m - 1] // V]  # (U_m,) row of h in t
    bow = np.zeros(len(row))
    if m <= t.order:  # h can be a context of t
        has = ctx_row >= 0
        bow[has] = t.logbow[m - 2][ctx_row[has]]
    backoff = np.empty(len(row))
    known = suf >= 0
    backoff[known] = lower[suf[known]]
    if not known.all():  # suffix listed by no component: score it in t directly
        backoff[~known] = last_logprob(t, union.words(m)[~known, 1:])
    out = bow + backoff
    listed = row >= 0
    if listed.any():
        out[listed] = t.logp[m - 1][row[listed]]
    return out


