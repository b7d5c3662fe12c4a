"""The n-gram estimator base class: settings, fitting pipeline, and the model contract."""
from __future__ import annotations

import inspect
import logging
import sys

import numpy as np

from ..base import BaseLanguageModel
from ..counts import NGramCounts, check_order, count_ngrams
from ..errors import InputError, NotFittedError
from ..tokenizers import Tokenizer, WhitespaceTokenizer
from ..vocab import BOS, EOS, UNK, Vocab, check_ids
from ._corpus import build_whitespace_vocab, encode_chunks, line_chunks
from .tables import BackoffTables, NGramState, segments_of_batch

__all__ = ["NGramModel", "BackoffLanguageModel"]

log = logging.getLogger(__name__)


class BackoffLanguageModel(BaseLanguageModel):
    """A :class:`~seqprob.protocols.LanguageModel` scored from :class:`BackoffTables`
    (``self.tables_``). Never builds a (T, V) array in ``token_logprobs``."""

    def _tables(self) -> BackoffTables:
        tables = getattr(self, "tables_", None)
        if tables is None:
            raise NotFittedError(f"{type(self).__name__} is not fitted yet: call fit() first")
        return tables

    def _logprobs(self, batch: np.ndarray) -> np.ndarray:
        return self._tables().logprob_rows(batch)  # (B, T, V)

    def _token_logprobs(self, batch: np.ndarray) -> np.ndarray:
        return self._tables().token_logprobs(batch)  # (B, T)

    def _start(self, ids: tuple) -> NGramState:
        history = ids[-max(self._tables().order - 1, 1):]
        row = self._tables().state_row(history)  # (V,)
        row.flags.writeable = False
        return NGramState(ids=history, logprobs=row)

    def token_logprobs_many(self, sequences) -> list:
        """log P(x_t | x_<t) of many sequences of different lengths in one vectorized pass.

        Parameters
        ----------
        sequences : list of 1-D int arrays
            Each x_0 .. x_T (x_0 normally ``<s>``), T >= 1.

        Returns
        -------
        list of (T,) float arrays

        Examples
        --------
        >>> import seqprob as sp
        >>> from seqprob.ngram import WittenBell
        >>> m = WittenBell(order=2).fit(["a b", "b a"])
        >>> [x.shape for x in m.token_logprobs_many([[1, 3, 2], [1, 4, 3, 2]])]
        [(2,), (3,)]
        """
        self._check_fitted()
        seqs = [np.asarray(s) for s in sequences]
        if not seqs or any(s.ndim != 1 or len(s) < 2 for s in seqs):
            raise InputError("need 1-D sequences, each with x_0 and at least one token")
        lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        stream = check_ids(np.concatenate(seqs), len(self.vocab))
        out = self._score_stream(stream, np.repeat(starts, lengths))
        return [out[s + 1: s + n] for s, n in zip(starts.tolist(), lengths.tolist())]

    def _score_stream(self, stream, seg):
        return self._tables().score_stream(stream, seg)


class NGramModel(BackoffLanguageModel):
    """Base of the n-gram estimators (scikit-learn style).

    Parameters
    ----------
    order : int
        N in 1 .. 10: P(x_t | x_{t-N+1} .. x_{t-1}).
    min_count : int
        Words seen fewer times map to ``<unk>`` (only when ``fit`` builds the tokenizer).
    chunk_chars : int
        Lines are counted in chunks of about this many characters, then merged.
    progress : bool or None
        Show a progress bar (None: only on an interactive terminal).

    Notes
    -----
    Training text is padded the KenLM way: each line is one sentence, ``<s>`` is its context
    and ``</s>`` is predicted at its end. ``<s>`` itself is never predicted (log P = -inf).
    """

    def __init__(self, order: int = 3, min_count: int = 1, chunk_chars: int = 1 << 23,
                 progress: bool | None = None):
        self.order = order
        self.min_count = min_count
        self.chunk_chars = chunk_chars
        self.progress = progress

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer the model was fitted with (built by ``fit`` when none was given)."""
        tok = getattr(self, "tokenizer_", None)
        if tok is None:
            raise NotFittedError(f"{type(self).__name__} is not fitted yet: call fit() first")
        return tok

    def get_params(self) -> dict:
        """Settings passed to ``__init__`` (scikit-learn convention)."""
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {n: getattr(self, n) for n in names}

    def __repr__(self) -> str:
        sig = inspect.signature(type(self).__init__).parameters
        shown = [f"{n}={v!r}" for n, v in self.get_params().items()
                 if n == "order" or sig[n].default is inspect.Parameter.empty or v != sig[n].default]
        return f"{type(self).__name__}({', '.join(shown)})"

    # ------------------------------------------------------------------ fitting
    def _check_params(self) -> None:
        check_order(self.order)
        mc = self.min_count
        if isinstance(mc, bool) or not isinstance(mc, (int, np.integer)) or mc < 1:
            raise InputError(f"min_count must be an integer >= 1, got {mc!r}", value=mc, limit=1)
        if not isinstance(self.chunk_chars, (int, np.integer)) or self.chunk_chars < 1:
            raise InputError(f"chunk_chars must be an integer >= 1, got {self.chunk_chars!r}",
                             value=self.chunk_chars, limit=1)

    def _reset(self) -> None:
        for name in ("vocab_", "tokenizer_", "counts_", "tables_"):
            self.__dict__.pop(name, None)

    def fit(self, lines, tokenizer: Tokenizer | None = None):
        """Count the n-grams of ``lines`` (one sentence per line) and estimate the model.

        Parameters
        ----------
        lines : iterable of str
            Training sentences (a list, or ``seqprob._io.read_lines(path)``).
        tokenizer : Tokenizer, optional
            Defines the vocabulary and the ids. Default: a :class:`WhitespaceTokenizer` fitted on
            ``lines`` with ``min_count`` (KenLM's ids: ``<unk>`` 0, ``<s>`` 1, ``</s>`` 2).

        Returns
        -------
        self
        """
        self._check_params()
        self._reset()
        counts, tok = self._count(lines, tokenizer)
        if counts.n_tokens == counts.n_sentences:
            raise InputError("the corpus has no words: only <s> and </s> would be counted "
                             f"({counts.n_sentences} empty line(s))", n_sentences=counts.n_sentences)
        self.counts_, self.tokenizer_ = counts, tok
        self._estimate(counts, tok.vocab)
        self.vocab_ = tok.vocab
        log.info("%s: %s n-grams per order from %d sentences, %d tokens", type(self).__name__,
                 counts.sizes(), counts.n_sentences, counts.n_tokens)
        return self

    def _count(self, lines, tokenizer):
        chunks = line_chunks(lines, int(self.chunk_chars))
        chunks = _progress(chunks, self.progress)
        index = None
        if tokenizer is None:
            if self.min_count > 1:
                tokenizer, kept = build_whitespace_vocab(chunks, int(self.min_count))
                chunks = iter(kept)
            else:
                index = {UNK: 0, BOS: 1, EOS: 2}
        else:
            if not isinstance(tokenizer, Tokenizer) and not hasattr(tokenizer, "encode"):
                raise InputError(f"tokenizer must be a seqprob Tokenizer, got {type(tokenizer).__name__}")
            if self.min_count != 1:
                raise InputError(f"min_count={self.min_count} only applies when fit() builds the "
                                 "tokenizer; the given tokenizer already fixes the vocabulary",
                                 value=self.min_count)
            _check_specials(tokenizer.vocab)
        vocab = tokenizer.vocab if tokenizer is not None else None
        bos, eos = (vocab.bos_id, vocab.eos_id) if vocab is not None else (1, 2)
        size = (lambda: len(index)) if index is not None else len(vocab)
        try:
            counts = count_ngrams(encode_chunks(chunks, tokenizer, index), int(self.order), size, bos, eos)
        except InputError as exc:
            if "empty corpus" in str(exc):
                raise InputError("cannot fit an n-gram model on an empty corpus (no lines)") from None
            raise
        if index is not None:
            tokenizer = WhitespaceTokenizer(Vocab(list(index)))
        return counts, tokenizer

    def _estimate(self, counts: NGramCounts, vocab: Vocab) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers for estimators
    @staticmethod
    def _n_predictable(vocab: Vocab) -> int:
        """V' = size of the support of every row: the vocabulary without ``<s>``."""
        return len(vocab) - (1 if vocab.bos_id != vocab.eos_id else 0)


def _check_specials(vocab: Vocab) -> None:
    if vocab.bos_id is None or vocab.eos_id is None:
        raise InputError(f"an n-gram model needs a vocabulary with BOS and EOS tokens "
                         f"(got bos={vocab.bos!r}, eos={vocab.eos!r})")


def _progress(chunks, progress):
    if progress is False:
        return chunks
    from tqdm.auto import tqdm

    disable = None if progress is None else not progress
    if progress is None and not sys.stderr.isatty():
        disable = True
    bar = tqdm(desc="counting n-grams", unit=" lines", disable=disable, leave=False)

    def gen():
        try:
            for first, chunk in chunks:
                yield first, chunk
                bar.update(len(chunk))
        finally:
            bar.close()
    return gen()
