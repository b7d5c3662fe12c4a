"""The exact token-level language a word-level grammar induces through a tokenizer.

``tokenized(language, tokenizer)`` spells each sentence of P* the way a GPT-2-style byte-level
BPE sees it: the first word as ``w``, every later word as ``" " + w`` (the leading-space
convention), each tokenized on its own. Two tries over the words' token spellings (one for the
first word, one for the later words) turn P*'s next-word distribution into the exact next-token
distribution.

Assumption (checked by :func:`check_word_separable`): the tokenizer's pre-tokenizer splits a
sentence ``w_1 w_2 ... w_n`` into the pieces ``w_1``, ``" w_2"``, ..., ``" w_n"`` (true for the
GPT-2 pattern and words of letters or digits only), so ``encode(sentence)`` is the concatenation
of the words' spellings and a token never crosses a word boundary.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..base import BaseLanguageModel
from ..errors import InputError, TokenizerError
from ..vocab import check_ids

__all__ = ["tokenized", "TokenizedLanguage", "TokenizedState", "check_word_separable"]

_ROOT_FIRST, _ROOT_LATER = 0, 1


@dataclass(frozen=True)
class TokenizedState:
    """Incremental state: the grammar state after the completed words, the trie node of the word
    being spelled, and ``logprobs`` (V,) of the next token. ``node`` = -1: impossible or ended."""

    word_state: object = field(repr=False)
    node: int
    logprobs: np.ndarray = field(repr=False)


def check_word_separable(tokenizer, words) -> None:
    """:class:`TokenizerError` naming the first word whose pre-tokenization is not one piece
    (``w`` and ``" " + w``): then a sentence's tokens would not be its words' tokens."""
    import regex

    pattern = getattr(tokenizer, "pattern_", None)
    if pattern is None or getattr(tokenizer, "decode_bytes", None) is None:
        raise TokenizerError(f"tokenized() needs a byte-level BPE / tiktoken tokenizer, got "
                             f"{type(tokenizer).__name__}", value=type(tokenizer).__name__)
    compiled = regex.compile(pattern)
    for word in words:
        for piece in (word, " " + word):
            if compiled.findall(piece) != [piece]:
                raise TokenizerError(f"the pre-tokenizer splits {piece!r} into {compiled.findall(piece)}: "
                                     "the sentence's tokens would not be its words' tokens", word=word)


class _Trie:
    """Nodes 0 (first-word root) and 1 (later-word root); per node: children {token: node},
    the word ending there (or -1), and the words below it (for the subtree mass)."""

    def __init__(self, spellings_first: dict, spellings_later: dict, n_words: int):
        self.children: list = [{}, {}]
        self.word: list = [-1, -1]
        rows, cols = [], []
        for root, spellings in ((_ROOT_FIRST, spellings_first), (_ROOT_LATER, spellings_later)):
            for word, tokens in spellings.items():
                node = root
                rows.append(node), cols.append(word)
                for tok in tokens:
                    node = self._child(node, tok)
                    rows.append(node), cols.append(word)
                if self.word[node] != -1:
                    raise TokenizerError(f"two words share the token spelling {tokens}", tokens=tokens)
                self.word[node] = word
        import scipy.sparse as sparse

        self.below = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(self.word), n_words))

    def _child(self, node: int, token: int) -> int:
        nxt = self.children[node].get(token)
        if nxt is None:
            nxt = len(self.word)
            self.children[node][token] = nxt
            self.children.append({})
            self.word.append(-1)
        return nxt


class TokenizedLanguage(BaseLanguageModel):
    """P* over a tokenizer's tokens, induced exactly by a word-level grammar (see the module).

    Parameters
    ----------
    language : ProbabilisticGrammar
        The word-level truth (its words are spelled with the tokenizer).
    tokenizer : EncodingTokenizer
        Byte-level BPE or tiktoken encoding with ``<|endoftext|>`` (BOS and EOS); its
        ``word_boundary`` is ``"leading_space"``.

    Notes
    -----
    With p(w) = P*(w | words so far), M(n) = sum of p(w) over the words whose spelling passes
    through trie node n, and node n reached inside the current word:
    P(next = a | n) = M(child(n, a)) / M(n) for a continuing token, and, when the word u ends at
    n, P(next = a) = p(u) / M(n) * M'(child(root, a)) and P(``</s>``) = p(u) / M(n) * P*(``</s>`` | .., u)
    with M' under the grammar state after u. The product over a sentence's tokens telescopes to
    P*(sentence).

    Examples
    --------
    >>> import seqprob as sp
    >>> truth = sp.toy_english()
    >>> bpe = sp.BPETokenizer.train(truth.sample(300, seed=0), vocab_size=300)
    >>> model = sp.truth.tokenized(truth, bpe)
    >>> text = "the cat sat on the mat"
    >>> bool(abs(sp.joint_logprob(model, text) - truth.sentence_logprob(text)) < 1e-9)
    True
    """

    def __init__(self, language, tokenizer):
        self.language, self.tokenizer = language, tokenizer
        vocab = tokenizer.vocab
        if vocab.bos_id is None or vocab.eos_id is None:
            raise TokenizerError("tokenized() needs a tokenizer with <|endoftext|> as BOS/EOS")
        words = self._words(language)
        check_word_separable(tokenizer, words.values())
        first = {w: tuple(tokenizer.encode(s)) for w, s in words.items()}
        later = {w: tuple(tokenizer.encode(" " + s)) for w, s in words.items()}
        self._trie = _Trie(first, later, len(language.vocab))
        self.vocab_ = vocab
        V = len(vocab)
        allowed = V if vocab.bos_id == vocab.eos_id else V - 1  # every token but a separate <s>
        self._uniform = np.full(V, -math.log(allowed))
        if vocab.bos_id != vocab.eos_id:
            self._uniform[vocab.bos_id] = -np.inf
        self._uniform.flags.writeable = False

    @staticmethod
    def _words(language) -> dict:
        gv = language.vocab
        special = {gv.bos_id, gv.eos_id, gv.unk_id}
        return {i: w for i, w in enumerate(gv.tokens) if i not in special}

    @property
    def word_boundary(self) -> str:
        return "leading_space"

    # --------------------------------------------------------------- rows
    def _row(self, word_state, node: int) -> np.ndarray:
        """(V,) next-token probabilities at ``node`` given the completed words' grammar state."""
        trie, V = self._trie, len(self.vocab_)
        p_words = np.exp(np.asarray(word_state.logprobs, dtype=np.float64))  # (V_words,)
        mass = trie.below @ p_words  # (N,) subtree mass per node
        row = np.zeros(V)
        if node == _ROOT_FIRST:
            self._add_children(row, node, mass, 1.0)
            row[self.vocab_.eos_id] += p_words[self.language.vocab.eos_id]
            return row
        total = mass[node]
        if total <= 0:
            return None
        self._add_children(row, node, mass, 1.0 / total)
        word = trie.word[node]
        if word >= 0 and p_words[word] > 0:
            after = self.language.step(word_state, word)
            p_after = np.exp(np.asarray(after.logprobs, dtype=np.float64))
            share = p_words[word] / total
            self._add_children(row, _ROOT_LATER, trie.below @ p_after, share)
            row[self.vocab_.eos_id] += share * p_after[self.language.vocab.eos_id]
        return row

    def _add_children(self, row: np.ndarray, node: int, mass: np.ndarray, scale: float) -> None:
        children = self._trie.children[node]
        if children:
            tokens = np.fromiter(children.keys(), dtype=np.int64)
            nodes = np.fromiter(children.values(), dtype=np.int64)
            row[tokens] += scale * mass[nodes]

    def _state(self, word_state, node: int) -> TokenizedState:
        row = None if node < 0 or not word_state.possible else self._row(word_state, node)
        if row is None:
            return TokenizedState(word_state, -1, self._uniform)
        with np.errstate(divide="ignore"):
            logrow = np.log(row)
        logrow.flags.writeable = False
        return TokenizedState(word_state, node, logrow)

    # --------------------------------------------------------------- contract
    def _start(self, ids: tuple) -> TokenizedState:
        if ids[0] != self.vocab_.bos_id:
            return TokenizedState(None, -1, self._uniform)
        state = self._state(self.language.start([self.language.vocab.bos_id]), _ROOT_FIRST)
        for token in ids[1:]:
            state = self._advance(state, int(token))
        return state

    def step(self, state: TokenizedState, token_id: int) -> TokenizedState:
        """State after appending ``token_id``; ``state`` unchanged."""
        token = int(check_ids(np.asarray([token_id]), len(self.vocab_), name="token_id")[0])
        return self._advance(state, token)

    def _advance(self, state: TokenizedState, token: int) -> TokenizedState:
        if state.node < 0 or not np.isfinite(state.logprobs[token]):
            return TokenizedState(state.word_state, -1, self._uniform)
        trie = self._trie
        child = trie.children[state.node].get(token)
        if child is not None:
            return self._state(state.word_state, child)
        word = trie.word[state.node]
        child = trie.children[_ROOT_LATER].get(token)
        if word < 0 or child is None:  # </s> (or impossible): nothing follows
            return TokenizedState(state.word_state, -1, self._uniform)
        return self._state(self.language.step(state.word_state, word), child)

    def _logprobs(self, batch: np.ndarray) -> np.ndarray:
        out = np.empty(batch.shape + (len(self.vocab_),))  # (B, T, V)
        for b, seq in enumerate(batch.tolist()):
            state = self._start((seq[0],))
            out[b, 0] = state.logprobs
            for t, token in enumerate(seq[1:], start=1):
                state = self._advance(state, token)
                out[b, t] = state.logprobs
        return out

    def __repr__(self) -> str:
        return f"TokenizedLanguage({self.language!r}, {self.tokenizer!r})"


def tokenized(language, tokenizer) -> TokenizedLanguage:
    """The exact distribution over ``tokenizer``'s tokens induced by ``language`` (a word-level
    :class:`~seqprob.truth.ProbabilisticGrammar`); see :class:`TokenizedLanguage`."""
    if not hasattr(language, "sample_ids") or not hasattr(language, "step"):
        raise InputError(f"tokenized() needs a ProbabilisticGrammar, got {type(language).__name__}",
                         value=type(language).__name__)
    return TokenizedLanguage(language, tokenizer)
