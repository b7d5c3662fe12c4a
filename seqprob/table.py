"""The two reference models of the contract: the uniform model and the joint lookup table.

The joint table is the "giant lookup table" the chain rule replaces: it stores one row per
whole sequence seen in training, so every unseen sequence gets probability 0, and a table
over all sequences of length T would need V^T rows.
"""
from __future__ import annotations

import math
import os
from collections import Counter, defaultdict

import numpy as np

from ._io import read_lines
from .base import BaseLanguageModel
from .checks import check_int
from .errors import InputError, fitted
from .tokenizers import Tokenizer, WhitespaceTokenizer
from .tokenizers.base import iter_texts
from .vocab import Vocab

__all__ = ["UniformModel", "JointTable", "lookup_table_size", "ATOMS_IN_UNIVERSE_LOG10"]

#: log10 of the number of atoms in the observable universe (about 10^80).
ATOMS_IN_UNIVERSE_LOG10 = 80.0


def lookup_table_size(vocab_size: int, length: int) -> float:
    """log10 of the number of rows of a joint table over all sequences of a length.

    Parameters
    ----------
    vocab_size : int
        V >= 1, the number of token types.
    length : int
        T >= 0, the sequence length.

    Returns
    -------
    float
        log10(V^T) = T log10 V (the count itself overflows any float for realistic V, T).

    Notes
    -----
    A table of P(x_1 .. x_T) needs one row per sequence: V^T rows. The chain rule replaces
    it by T conditionals of V entries each.

    Examples
    --------
    >>> round(lookup_table_size(50_000, 100), 1)
    469.9
    >>> lookup_table_size(50_000, 100) > ATOMS_IN_UNIVERSE_LOG10  # more rows than atoms
    True
    """
    check_int("vocab_size", vocab_size, low=1, whole_floats=True)
    check_int("length", length, low=0, whole_floats=True)
    return float(length) * math.log10(vocab_size)


def _uniform_row(vocab: Vocab) -> np.ndarray:
    mask = vocab.predictable_mask()  # all but <s> (unless it doubles as </s>)
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

    def _token_logprobs(self, batch: np.ndarray) -> np.ndarray:
        return self._row[batch[:, 1:]]  # (B, T): nothing of size V per position


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
        """Count every whole sentence (``<s>`` words ``</s>``) of ``lines``.

        Parameters
        ----------
        lines : iterable of str, or file name
            One sentence per item, or a text file named by a ``str`` or ``pathlib.Path`` (one
            sentence per line); an empty line counts as the empty sentence.
        tokenizer : Tokenizer, optional
            Needs ``<s>`` and ``</s>``; default: a :class:`WhitespaceTokenizer` fitted on ``lines``.

        Returns
        -------
        JointTable
            ``self``, with ``tokenizer_``, ``vocab_``, ``n_sequences_`` and ``table_``
            (prefix -> next ids and their counts).
        """
        lines = list(read_lines(lines) if isinstance(lines, (str, os.PathLike)) else iter_texts(lines, "lines"))
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
        """The tokenizer the table was fitted with."""
        return fitted(self, "tokenizer_")

    def _token_logprobs(self, batch: np.ndarray) -> np.ndarray:
        out = np.empty((batch.shape[0], batch.shape[1] - 1))  # (B, T)
        for b, seq in enumerate(batch.tolist()):
            for t in range(1, len(seq)):
                out[b, t - 1] = self._logprob(tuple(seq[:t]), seq[t])
        return out

    def _logprob(self, prefix: tuple, token: int) -> float:
        """log c(prefix token) / c(prefix) without building the (V,) row."""
        entry = self.table_.get(prefix)
        if entry is None:
            return float(self._uniform[token])
        ids, counts = entry
        hit = counts[ids == token].sum()
        return math.log(hit / counts.sum()) if hit else -math.inf

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
