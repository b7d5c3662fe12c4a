"""The two reference models of the contract: the uniform model and the joint lookup table.

The joint table is the "giant lookup table" the chain rule replaces: it stores one row per
whole sequence seen in training, so every unseen sequence gets probability 0, and a table
over all sequences of length T would need V^T rows.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np

from .base import BaseLanguageModel
from .errors import InputError
from .tokenizers import Tokenizer, WhitespaceTokenizer
from .vocab import Vocab

__all__ = ["UniformModel", "JointTable", "lookup_table_size", "ATOMS_IN_UNIVERSE_LOG10"]

#: log10 of the number of atoms in the observable universe (about 10^80).
ATOMS_IN_UNIVERSE_LOG10 = 80.0


def lookup_table_size(vocab_size: int, length: int) -> float:
    """log10 of the number of rows of a joint table over all sequences: log10(V^T) = T log10 V.

    Examples
    --------
    >>> round(lookup_table_size(50_000, 100), 1)
    469.9
    >>> lookup_table_size(50_000, 100) > ATOMS_IN_UNIVERSE_LOG10  # more rows than atoms
    True
    """
    if int(vocab_size) != vocab_size or vocab_size < 1:
        raise InputError(f"vocab_size must be an integer >= 1, got {vocab_size!r}", value=vocab_size, limit=1)
    if int(length) != length or length < 0:
        raise InputError(f"length must be an integer >= 0, got {length!r}", value=length, limit=0)
    return float(length) * math.log10(vocab_size)


def _predictable(vocab: Vocab) -> np.ndarray:
    """Mask of tokens that can be a next token: all but BOS (unless BOS doubles as EOS)."""
    mask = np.ones(len(vocab), dtype=bool)
    if vocab.bos_id is not None and vocab.bos_id != vocab.eos_id:
        mask[vocab.bos_id] = False
    return mask


def _uniform_row(vocab: Vocab) -> np.ndarray:
    mask = _predictable(vocab)
    return np.where(mask, -math.log(mask.sum()), -np.inf)  # (V,)


class UniformModel(BaseLanguageModel):
    """Every next token equally likely: log P(v | anything) = -log V', V' = V minus ``<s>``.

    The maximum-entropy baseline: its perplexity is V' on any text.

    Examples
    --------
    >>> m = UniformModel(Vocab.build(["a", "b"]))
    >>> float(np.exp(m.logprobs([1])[0]).sum())
    1.0
    """

    def __init__(self, vocab: Vocab):
        if not isinstance(vocab, Vocab):
            raise InputError(f"UniformModel needs a Vocab, got {type(vocab).__name__}")
        self.vocab_ = vocab
        self._row = _uniform_row(vocab)

    def _logprobs(self, batch: np.ndarray) -> np.ndarray:
        return np.broadcast_to(self._row, batch.shape + self._row.shape).copy()  # (B, T, V)


class JointTable(BaseLanguageModel):
    """The joint lookup table: P(sequence) = count(sequence) / N, unseen sequences get 0.

    Conditionals are ratios of prefix counts, P(x_t | x_<t) = c(x_<t x_t) / c(x_<t), so the
    chain rule reproduces the table exactly. A prefix never seen in training has no
    conditional; its row is uniform (the joint is already 0 there, so this choice changes
    nothing).

    Examples
    --------
    >>> tab = JointTable().fit(["the cat sat", "the cat sat", "the dog sat"])
    >>> tok = tab.tokenizer
    >>> ids = [tok.vocab.bos_id] + tok.encode("the cat sat") + [tok.vocab.eos_id]
    >>> round(float(np.exp(tab.token_logprobs(ids).sum())), 4)
    0.6667
    """

    def __init__(self):
        pass

    def fit(self, lines, tokenizer: Tokenizer | None = None) -> "JointTable":
        """Count every whole sentence (``<s>`` words ``</s>``) of ``lines``."""
        lines = [lines] if isinstance(lines, str) else list(lines)
        if not any(line.strip() for line in lines):
            raise InputError("cannot fit a JointTable on an empty corpus")
        tok = tokenizer if tokenizer is not None else WhitespaceTokenizer.fit(lines)
        vocab = tok.vocab
        if vocab.bos_id is None or vocab.eos_id is None:
            raise InputError("JointTable needs a vocabulary with <s> and </s>")
        nexts: dict = defaultdict(Counter)
        for line in lines:
            seq = (vocab.bos_id, *tok.encode(line), vocab.eos_id)
            for t in range(1, len(seq)):
                nexts[seq[:t]][seq[t]] += 1
        self.tokenizer_, self.vocab_ = tok, vocab
        self.n_sequences_ = len(lines)
        self.table_ = {prefix: (np.fromiter(c.keys(), np.int64), np.fromiter(c.values(), np.float64))
                       for prefix, c in nexts.items()}
        self._uniform = _uniform_row(vocab)
        return self

    @property
    def tokenizer(self) -> Tokenizer:
        self._check_fitted()
        return self.tokenizer_

    def _row(self, prefix: tuple) -> np.ndarray:
        entry = self.table_.get(prefix)
        if entry is None:
            return self._uniform
        row = np.full(len(self.vocab_), -np.inf)  # (V,)
        ids, counts = entry
        row[ids] = np.log(counts / counts.sum())
        return row

    def _logprobs(self, batch: np.ndarray) -> np.ndarray:
        B, T = batch.shape
        out = np.empty((B, T, len(self.vocab_)))  # (B, T, V)
        for b in range(B):
            seq = tuple(batch[b].tolist())
            for t in range(T):
                out[b, t] = self._row(seq[: t + 1])
        return out
