"""Probabilistic finite-state grammars over words: a language whose P* is known exactly.

A grammar has hidden states; from a state it emits a word and moves along an arc (word,
probability, target), or ends the sentence with the state's stop probability. P*(x_t | x_<t)
is computed exactly by the forward algorithm over the hidden states.
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sparse
from scipy.sparse.linalg import spsolve

from .._io import as_path, atomic_write
from ..base import BaseLanguageModel
from ..checks import check_int
from ..errors import GrammarError, InputError
from ..registry import register_model_format
from ..tokenizers import WhitespaceTokenizer
from ..vocab import BOS, EOS, UNK, Vocab, check_token_id
from ._spec import ParsedSpec, parse_spec, read_spec_file

__all__ = ["ProbabilisticGrammar", "GrammarState", "GrammarEntropy"]

log = logging.getLogger(__name__)
_MAX_SAMPLE_STEPS = 100_000


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True)
class GrammarState:
    """Incremental state of a :class:`ProbabilisticGrammar` (a value, never mutated).

    ``belief`` (S,) = P(hidden state | prefix), all zeros once the prefix is impossible;
    ``logprobs`` (V,) = log P*(next token | prefix).
    """

    belief: np.ndarray = field(repr=False)
    logprobs: np.ndarray = field(repr=False)

    @property
    def possible(self) -> bool:
        """False when the prefix has probability 0 under the grammar."""
        return bool(self.belief.any())


@dataclass(frozen=True)
class GrammarEntropy:
    """Entropy of a grammar's sentence distribution, in nats.

    ``per_sentence`` = H(P*) = -E[log P*(x)] over whole sentences; ``per_token`` =
    per_sentence / expected_tokens (tokens = words + ``</s>``), the entropy rate that a
    token-weighted cross-entropy is compared with. ``exact`` is True when solved by a linear
    system; otherwise the values are Monte Carlo estimates with standard errors.
    """

    per_sentence: float
    per_token: float
    expected_tokens: float
    exact: bool
    per_sentence_stderr: float = 0.0
    per_token_stderr: float = 0.0
    n_samples: int | None = None
    confidence: float = 0.95

    def _ci(self, value: float, stderr: float) -> tuple:
        from scipy.stats import norm  # slow to import: only when a CI is asked for

        z = float(norm.ppf(0.5 + self.confidence / 2))
        return (value - z * stderr, value + z * stderr)

    @property
    def ci_per_sentence(self) -> tuple:
        """Normal-approximation confidence interval of ``per_sentence`` (a point when exact)."""
        return self._ci(self.per_sentence, self.per_sentence_stderr)

    @property
    def ci_per_token(self) -> tuple:
        """Confidence interval of ``per_token`` (delta method for the ratio; a point when exact)."""
        return self._ci(self.per_token, self.per_token_stderr)

    @property
    def per_token_bits(self) -> float:
        return self.per_token / math.log(2)

    @property
    def per_sentence_bits(self) -> float:
        return self.per_sentence / math.log(2)


class ProbabilisticGrammar(BaseLanguageModel):
    """A probabilistic finite-state language with exact probabilities P*.

    Parameters
    ----------
    spec : mapping
        ``{"name": ..., "start": state, "states": {name: {"stop": p, "arcs": [[word, p, target], ...]}}}``.
        Validated: probabilities in [0, 1], each state's arcs plus stop sum to 1 (within 1e-9),
        targets exist, every state is reachable from the start and can reach the end, and the
        vocabulary is not empty; otherwise :class:`~seqprob.errors.GrammarError` naming the state.

    Attributes
    ----------
    vocab : Vocab
        ``<unk>`` = 0, ``<s>`` = 1, ``</s>`` = 2, then the words in order of first appearance.
        P*(``<unk>``) = P*(``<s>``) = 0 always.
    tokenizer : WhitespaceTokenizer
        Word tokenizer over ``vocab``; unknown words map to ``<unk>`` (probability 0).
    states : tuple of str
        Hidden state names; ``deterministic`` is True when each state has at most one target per word.

    Notes
    -----
    Forward algorithm: with belief b_t(i) = P(state_t = i | x_<t) and per-word transition
    matrices A_w[i, j] = P(emit w, go to j | i),

        P*(x_t = w | x_<t) = sum_i b_t(i) sum_j A_w[i, j],   P*(</s> | x_<t) = sum_i b_t(i) stop(i),
        b_{t+1} = b_t A_{x_t} / P*(x_t | x_<t).

    Once a prefix is impossible (probability 0: an unknown word, ``<s>`` inside, anything after
    ``</s>``, or x_0 other than ``<s>``) its joint log-probability is already -inf; the rows after
    it are defined as uniform over the words and ``</s>`` so every row stays a distribution.

    Examples
    --------
    >>> g = ProbabilisticGrammar({"start": "S", "states": {
    ...     "S": {"arcs": [["a", 0.5, "S"]], "stop": 0.5}}})
    >>> round(float(np.exp(g.sentence_logprob("a a"))), 12)
    0.125
    """

    def __init__(self, spec):
        parsed = parse_spec(spec)
        self.spec_ = parsed
        self.name = parsed.name
        self.states = parsed.states
        self.start_state = parsed.states[parsed.start]
        self._build(parsed)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, data) -> "ProbabilisticGrammar":
        """Build from a spec mapping (same as the constructor)."""
        return cls(data)

    @classmethod
    def from_json(cls, path) -> "ProbabilisticGrammar":
        """Load a spec from a JSON file."""
        return cls(read_spec_file(path, "json"))

    @classmethod
    def from_toml(cls, path) -> "ProbabilisticGrammar":
        """Load a spec from a TOML file (Python 3.11+: ``tomllib``)."""
        return cls(read_spec_file(path, "toml"))

    def _build(self, parsed: ParsedSpec) -> None:
        words = list(dict.fromkeys(a[1] for a in parsed.arcs))
        self.vocab_ = Vocab([UNK, BOS, EOS] + words)
        self.tokenizer = WhitespaceTokenizer(self.vocab_)
        S, V = len(parsed.states), len(self.vocab_)
        merged: dict = {}
        for src, word, prob, dst in parsed.arcs:
            if prob > 0:
                key = (src, self.vocab_.id(word), dst)
                merged[key] = merged.get(key, 0.0) + prob
        keys = np.array(list(merged), dtype=np.int64).reshape(-1, 3)
        src, wid, dst = keys[:, 0], keys[:, 1], keys[:, 2]
        prob = np.array(list(merged.values()), dtype=np.float64)
        stop = np.array(parsed.stops, dtype=np.float64)
        total = np.bincount(src, weights=prob, minlength=S) + stop  # (S,) each 1 +- 1e-9
        prob, stop = prob / total[src], stop / total  # exact normalization
        self._arcs = (src, wid, dst, prob)
        self._stop = _readonly(stop)
        emission = np.zeros((S, V))  # (S, V) P(next token = v | state)
        np.add.at(emission, (src, wid), prob)
        emission[:, self.vocab_.eos_id] = stop
        self._emission = _readonly(emission)
        self._trans = sparse.csr_matrix((prob, (wid * S + src, dst)), shape=(V * S, S))  # rows (w, i)
        self._trans.sum_duplicates()
        self._trans.indptr = self._trans.indptr.astype(np.int64)
        self.deterministic = len(np.unique(wid * S + src)) == len(src)
        self._build_sampler(S)
        self._uniform = np.full(V, -np.inf)
        self._uniform[self._real_tokens()] = -math.log(V - 2)

    def _real_tokens(self) -> np.ndarray:
        mask = self.vocab_.predictable_mask()  # (V,)
        mask[self.vocab_.unk_id] = False
        return mask

    def _build_sampler(self, S: int) -> None:
        """Per-state option tables: arcs sorted by source, then the stop option."""
        src, wid, dst, prob = self._arcs
        order = np.argsort(src, kind="stable")
        degree = np.bincount(src, minlength=S)  # (S,) arcs per state
        slot = np.arange(len(src)) - (np.cumsum(degree) - degree)[src[order]]
        width = int(degree.max()) + 1
        words = np.full((S, width), self.vocab_.eos_id, dtype=np.int64)  # (S, W)
        targets = np.full((S, width), -1, dtype=np.int64)  # (S, W); -1 = sentence ends
        probs = np.zeros((S, width))  # (S, W)
        words[src[order], slot], targets[src[order], slot] = wid[order], dst[order]
        probs[src[order], slot] = prob[order]
        probs[np.arange(S), degree] = self._stop
        last = width - 1 - np.argmax(probs[:, ::-1] > 0, axis=1)  # (S,) last option with p > 0
        self._sampler = (words, targets, np.cumsum(probs, axis=1), last)

    # ------------------------------------------------------------------ forward algorithm
    def _initial_belief(self, first: np.ndarray) -> np.ndarray:
        belief = np.zeros((len(first), len(self.states)))  # (B, S)
        belief[first == self.vocab_.bos_id, self.spec_.start] = 1.0
        return belief

    def _advance(self, belief: np.ndarray, words: np.ndarray) -> np.ndarray:
        """Unnormalized b A_w for each row: (B, S), (B,) -> (B, S).

        Gathers, for every non-zero belief entry (r, i), the arcs of row (w_r, i) of the CSR
        transition table, and scatters their mass onto (r, target) with one bincount.
        """
        B, S = belief.shape
        trans = self._trans
        rows, cols = np.divmod(np.flatnonzero(belief.ravel() != 0), S)  # (N,) 1-D nonzero is fast
        key = words[rows] * S + cols  # (N,) row of the (w, i) table
        lo, counts = trans.indptr[key], trans.indptr[key + 1] - trans.indptr[key]  # (N,)
        owner = np.repeat(np.arange(len(key)), counts)  # (M,) which entry each arc belongs to
        pos = lo[owner] + np.arange(len(owner)) - np.repeat(np.cumsum(counts) - counts, counts)  # (M,)
        mass = belief[rows[owner], cols[owner]] * trans.data[pos]  # (M,)
        flat = rows[owner] * S + trans.indices[pos]  # (M,)
        out = np.bincount(flat, weights=mass, minlength=B * S)  # int64 when nothing is left
        return out.astype(np.float64, copy=False).reshape(B, S)

    @staticmethod
    def _normalize(belief: np.ndarray) -> np.ndarray:
        """Rows divided by their mass, in place; rows of zero mass (impossible prefixes) stay 0."""
        mass = belief.sum(axis=1, keepdims=True)  # (B, 1)
        np.divide(belief, mass, out=belief, where=mass > 0)
        return belief

    def _rows(self, belief: np.ndarray) -> np.ndarray:
        """Log next-token distributions (B, V) from normalized beliefs (B, S)."""
        probs = belief @ self._emission  # (B, V)
        with np.errstate(divide="ignore"):
            out = np.log(probs)
        dead = ~belief.any(axis=1)
        out[dead] = self._uniform
        return out

    def _beliefs(self, batch: np.ndarray):
        """Yield the normalized belief before predicting each position t = 1 .. T-1 (and T)."""
        belief = self._initial_belief(batch[:, 0])
        yield belief
        for t in range(1, batch.shape[1]):
            belief = self._normalize(self._advance(belief, batch[:, t]))
            yield belief

    def _logprobs(self, batch: np.ndarray) -> np.ndarray:
        out = np.empty(batch.shape + (len(self.vocab_),))  # (B, T, V)
        for t, belief in enumerate(self._beliefs(batch)):
            out[:, t] = self._rows(belief)
        return out

    def _token_logprobs(self, batch: np.ndarray) -> np.ndarray:
        B, S = batch.shape[0], len(self.states)
        out = np.empty((B, batch.shape[1] - 1))  # (B, T)
        for t, belief in enumerate(self._beliefs(batch[:, :-1])):
            nxt = batch[:, t + 1]
            rows, cols = np.divmod(np.flatnonzero(belief.ravel() != 0), S)  # (N,)
            p = np.bincount(rows, weights=belief[rows, cols] * self._emission[cols, nxt[rows]], minlength=B)
            alive = np.bincount(rows, minlength=B) > 0  # (B,)
            with np.errstate(divide="ignore"):
                out[:, t] = np.where(alive, np.log(p), self._uniform[nxt])
        return out

    def _start(self, ids: tuple) -> GrammarState:
        belief = None
        for belief in self._beliefs(np.asarray(ids, dtype=np.int64)[None, :]):
            pass
        return self._state(belief)

    def _state(self, belief: np.ndarray) -> GrammarState:
        return GrammarState(belief=_readonly(belief[0].copy()), logprobs=_readonly(self._rows(belief)[0]))

    def step(self, state: GrammarState, token_id: int) -> GrammarState:
        """State after appending ``token_id``; O(arcs of the active states), ``state`` unchanged."""
        if not isinstance(state, GrammarState):
            raise InputError(f"step() needs a state from {type(self).__name__}.start(), got "
                             f"{type(state).__name__}", value=type(state).__name__)
        token = np.asarray([check_token_id(token_id, len(self.vocab_))])
        belief = self._normalize(self._advance(np.asarray(state.belief)[None, :], token))
        return self._state(belief)

    # ------------------------------------------------------------------ convenience scoring
    def encode(self, text: str) -> np.ndarray:
        """``<s>`` followed by the word ids of ``text`` (unknown words -> ``<unk>``)."""
        return np.asarray([self.vocab_.bos_id] + self.tokenizer.encode(text), dtype=np.int64)

    def sentence_logprob(self, text: str, eos: bool = True) -> float:
        """log P*(words of ``text``) (natural log); with ``eos`` also P*(``</s>`` | text).

        An unknown word (``<unk>``) gives -inf, never an error.
        """
        ids = self.encode(text)
        if eos:
            ids = np.append(ids, self.vocab_.eos_id)
        if len(ids) < 2:
            return 0.0
        return float(self.token_logprobs(ids).sum())

    def _joint_logprobs(self, sentences: list) -> np.ndarray:
        """log P*(x, </s>) of word-id arrays (no BOS/EOS), batched by length."""
        out = np.empty(len(sentences))
        lengths = np.array([len(s) for s in sentences])
        bos, eos = self.vocab_.bos_id, self.vocab_.eos_id
        for length in np.unique(lengths):
            idx = np.flatnonzero(lengths == length)
            for chunk in np.array_split(idx, max(1, len(idx) // 4096)):
                batch = np.full((len(chunk), length + 2), eos, dtype=np.int64)  # (B, L+2)
                batch[:, 0] = bos
                if length:
                    batch[:, 1:-1] = np.stack([sentences[i] for i in chunk])
                out[chunk] = self._token_logprobs(batch).sum(axis=1)
        return out

    # ------------------------------------------------------------------ sampling
    def sample_ids(self, n: int, seed=None) -> list:
        """Draw ``n`` sentences as arrays of word ids (no ``<s>``/``</s>``)."""
        n = check_int("n", n, low=1)
        rng = np.random.default_rng(seed)
        words, targets, cum, last = self._sampler
        state = np.full(n, self.spec_.start, dtype=np.int64)
        active = np.arange(n)
        columns = []
        while active.size:
            if len(columns) >= _MAX_SAMPLE_STEPS:
                raise InputError(f"sampling did not finish within {_MAX_SAMPLE_STEPS} tokens", limit=_MAX_SAMPLE_STEPS)
            here = state[active]
            u = rng.random(active.size) * cum[here, -1]  # (A,) uniform on [0, total mass)
            choice = np.minimum((cum[here] <= u[:, None]).sum(axis=1), last[here])  # (A,)
            col = np.full(n, -1, dtype=np.int64)
            col[active] = words[here, choice]
            columns.append(col)
            state[active] = targets[here, choice]
            active = active[state[active] >= 0]
        grid = np.stack(columns, axis=1)  # (n, L_max); -1 / eos past the end
        lengths = (grid >= 0).sum(axis=1) - 1
        return [grid[i, :lengths[i]] for i in range(n)]

    def sample(self, n: int, seed=None) -> list:
        """Draw ``n`` sentences from P* as strings (words joined by spaces).

        Examples
        --------
        >>> g = ProbabilisticGrammar({"states": {"S": {"arcs": [["hi", 1.0, "E"]]}, "E": {"stop": 1.0}}})
        >>> g.sample(2, seed=0)
        ['hi', 'hi']
        """
        tokens = np.array(self.vocab_.tokens, dtype=object)
        return [" ".join(tokens[s]) for s in self.sample_ids(n, seed=seed)]

    # ------------------------------------------------------------------ entropy
    def entropy(self, method: str = "auto", n: int = 20_000, seed=0, confidence: float = 0.95) -> GrammarEntropy:
        """Expected entropy of P* per sentence and per token (nats).

        Parameters
        ----------
        method : {"auto", "exact", "monte_carlo"}
            "auto" is exact for deterministic grammars and Monte Carlo otherwise; "exact" on a
            non-deterministic grammar raises :class:`GrammarError`.
        n, seed : sample size and seed of the Monte Carlo estimate.

        Notes
        -----
        Deterministic grammar (one target per state and word): a sentence is one path, so
        H = sum_i N_i h_i with expected visits N = e_start (I - Q)^{-1}, Q[i, j] = sum_w A_w[i, j],
        and h_i the entropy of state i's next-token distribution; expected tokens = sum_i N_i.
        Monte Carlo: H ≈ mean(-log P*(x_k)); per token = sum(-log P*) / sum(tokens), its
        standard error from the delta method for a ratio.

        Examples
        --------
        >>> g = ProbabilisticGrammar({"states": {"S": {"arcs": [["a", 0.5, "S"]], "stop": 0.5}}})
        >>> h = g.entropy()  # each token (a or </s>) is a fair coin: log 2 nats
        >>> round(h.per_token, 6), round(h.expected_tokens, 6), h.exact
        (0.693147, 2.0, True)
        >>> mc = g.entropy(method="monte_carlo", n=2000, seed=0)
        >>> round(mc.per_token, 6), mc.exact  # here every token carries exactly log 2 nats
        (0.693147, False)
        """
        if method not in ("auto", "exact", "monte_carlo"):
            raise InputError(f"method must be 'auto', 'exact' or 'monte_carlo', got {method!r}", value=method)
        if method == "exact" and not self.deterministic:
            raise GrammarError(f"exact entropy needs a deterministic grammar; {self.name!r} has a state with "
                               f"two targets for one word: use method='monte_carlo'", state=self.name)
        if method == "monte_carlo" or not self.deterministic:
            return self._entropy_monte_carlo(check_int("n", n, low=1), seed, confidence)
        return self._entropy_exact(confidence)

    def expected_visits(self) -> np.ndarray:
        """Expected number of visits of each hidden state per sentence, (S,)."""
        S = len(self.states)
        src, _, dst, prob = self._arcs
        q = sparse.csr_matrix((prob, (src, dst)), shape=(S, S))
        system = (sparse.identity(S, format="csc") - q).T.tocsc()
        rhs = np.zeros(S)
        rhs[self.spec_.start] = 1.0
        return np.atleast_1d(spsolve(system, rhs))

    def _entropy_exact(self, confidence: float) -> GrammarEntropy:
        visits = self.expected_visits()
        e = self._emission
        with np.errstate(divide="ignore"):
            local = -np.where(e > 0, e * np.log(np.where(e > 0, e, 1.0)), 0.0).sum(axis=1)  # (S,)
        h, tokens = float(visits @ local), float(visits.sum())
        return GrammarEntropy(per_sentence=h, per_token=h / tokens, expected_tokens=tokens, exact=True,
                              confidence=confidence)

    def _entropy_monte_carlo(self, n: int, seed, confidence: float) -> GrammarEntropy:
        sentences = self.sample_ids(n, seed=seed)
        nll = -self._joint_logprobs(sentences)  # (n,)
        tokens = np.array([len(s) + 1 for s in sentences], dtype=np.float64)
        per_token = nll.sum() / tokens.sum()
        stderr_sent = nll.std(ddof=1) / math.sqrt(n) if n > 1 else math.inf
        stderr_tok = (nll - per_token * tokens).std(ddof=1) / (math.sqrt(n) * tokens.mean()) if n > 1 else math.inf
        return GrammarEntropy(per_sentence=float(nll.mean()), per_token=float(per_token),
                              expected_tokens=float(tokens.mean()), exact=False,
                              per_sentence_stderr=float(stderr_sent), per_token_stderr=float(stderr_tok),
                              n_samples=n, confidence=confidence)

    # ------------------------------------------------------------------ export
    def to_dict(self) -> dict:
        """The spec as a plain mapping (round-trips through :meth:`from_dict`)."""
        states = {name: {"stop": stop, "arcs": []} for name, stop in zip(self.states, self.spec_.stops)}
        for src, word, prob, dst in self.spec_.arcs:
            states[self.states[src]]["arcs"].append([word, prob, self.states[dst]])
        return {"name": self.name, "start": self.start_state, "states": states}

    def to_json(self, path) -> Path:
        """Write the spec as JSON (atomically); returns the path."""
        path = as_path(path)
        with atomic_write(path) as handle:
            json.dump(self.to_dict(), handle, ensure_ascii=False, indent=1)
        return path

    def __repr__(self) -> str:
        kind = "deterministic" if self.deterministic else "non-deterministic"
        return (f"ProbabilisticGrammar(name={self.name!r}, states={len(self.states)}, "
                f"words={len(self.vocab_) - 3}, {kind})")


# ------------------------------------------------ this family joins the model registry
def _load_grammar(path):
    return ProbabilisticGrammar.from_toml(path) if path.suffix == ".toml" else ProbabilisticGrammar.from_json(path)


register_model_format("grammar", lambda path: path.is_file() and path.suffix in (".json", ".toml"),
                      _load_grammar, "probabilistic grammar spec (.json, .toml)")
