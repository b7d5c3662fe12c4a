"""The n-gram estimator base class: settings, fitting pipeline, and the model contract."""
from __future__ import annotations

import contextlib
import inspect
import logging

import numpy as np

from .._progress import counted, progress_bar, wanted
from ..base import BaseLanguageModel
from .counts import NGramCounts, check_order, count_ngrams
from ..checks import check_int
from ..errors import InputError, fitted
from ..tokenizers import Tokenizer, WhitespaceTokenizer
from ..vocab import BOS, EOS, UNK, Vocab, check_ids
from ._corpus import build_whitespace_vocab, encode_chunks, line_chunks, spill_vocab
from ._external import SpillDir, chunk_plan, count_bounded
from .tables import BackoffTables, NGramState, segments_of_batch

__all__ = ["NGramModel", "BackoffLanguageModel", "BackoffTablesModel"]

log = logging.getLogger(__name__)


class BackoffLanguageModel(BaseLanguageModel):
    """A :class:`~seqprob.protocols.LanguageModel` scored from :class:`BackoffTables`
    (``self.tables_``). Never builds a (T, V) array in ``token_logprobs``."""

    #: True when every log-probability is the back-off tables' (``self._tables()``): corpus
    #: scoring (:meth:`corpus_sums`) then probes the tables directly instead of calling
    #: ``_score_stream``. A subclass that scores some other way sets it False (one that
    #: overrides ``_score_stream`` without saying gets False).
    scores_from_tables = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "_score_stream" in vars(cls) and "scores_from_tables" not in vars(cls):
            cls.scores_from_tables = False

    def _tables(self) -> BackoffTables:
        return fitted(self, "tables_")

    def _logprobs(self, batch: np.ndarray) -> np.ndarray:
        return self._tables().logprob_rows(batch)  # (B, T, V)

    def _token_logprobs(self, batch: np.ndarray) -> np.ndarray:
        stream, seg = segments_of_batch(batch)
        return self._score_stream(stream, seg).reshape(batch.shape)[:, 1:]  # (B, T)

    def _context_size(self) -> int:
        """How many of the last ids a state keeps: N - 1 (at least 1)."""
        return max(self._tables().order - 1, 1)

    def _start(self, ids: tuple) -> NGramState:
        history = ids[-self._context_size():]
        row = self._logprobs(np.asarray(history, dtype=np.int64)[None, :])[0, -1]  # (V,)
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
        if isinstance(sequences, (str, bytes)) or not hasattr(sequences, "__iter__"):
            raise InputError(f"sequences must be a list of 1-D id sequences, got {type(sequences).__name__}")
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

    def corpus_sums(self, lines, eos: bool = True):
        """Running sums for :func:`seqprob.evaluate` over stripped ``lines`` (or a
        :class:`~seqprob._io.CorpusFile`), scored a block of text at a time (None when the
        tokenizer is not the model's own whitespace one). See
        :func:`seqprob.ngram._query.corpus_sums`."""
        from ._query import corpus_sums

        self._check_fitted()
        return corpus_sums(self, lines, eos)

    def save(self, path, hash: bool = True):
        """Write the model as a memory-mapped binary file; :func:`seqprob.load_ngram` maps it
        back in O(1). See :func:`seqprob.ngram.binary.save_ngram`."""
        from ._sqlm import write_sqlm

        return write_sqlm(self._tables(), self.vocab, getattr(self, "tokenizer", None), path, hash,
                          normalized=getattr(self, "normalized", True))


class BackoffTablesModel(BackoffLanguageModel):
    """A back-off n-gram model given by its tables: what :func:`~seqprob.ngram.arpa.read_arpa`
    and :func:`~seqprob.ngram.binary.load_ngram` return, and what
    :func:`~seqprob.ngram.prune.prune_entropy` and :meth:`Mixture.to_backoff` build.
    ``seqprob.ArpaModel`` is another name of this class.

    Parameters
    ----------
    tables : BackoffTables
    vocab : Vocab
    tokenizer : Tokenizer, optional
        The tokenizer that turns text into this vocabulary's ids (an ARPA file's is a
        :class:`WhitespaceTokenizer`); None: pass one to the scoring functions.
    path : str, optional
        The file the tables were read from.

    Examples
    --------
    >>> from seqprob.ngram import WittenBell
    >>> lm = WittenBell(order=2).fit(["a b", "b a"])
    >>> BackoffTablesModel(lm.tables_, lm.vocab, lm.tokenizer)
    BackoffTablesModel(order=2, ngrams=[5, 6], path=None)
    """

    def __init__(self, tables: BackoffTables, vocab: Vocab, tokenizer: Tokenizer | None = None,
                 path: str | None = None):
        if tokenizer is not None and not (hasattr(tokenizer, "encode") and hasattr(tokenizer, "vocab")):
            raise InputError(f"tokenizer must be a seqprob Tokenizer or None, got "
                             f"{type(tokenizer).__name__} {tokenizer!r:.60} (the file name is the "
                             "keyword argument path=)", value=type(tokenizer).__name__)
        self.tables_ = tables
        self.vocab_ = vocab
        self.tokenizer_ = tokenizer
        self.path = path

    @property
    def order(self) -> int:
        """N, the highest order listed."""
        return self.tables_.order

    @property
    def tokenizer(self) -> Tokenizer | None:
        return self.tokenizer_

    def __repr__(self) -> str:
        return f"{type(self).__name__}(order={self.order}, ngrams={self.tables_.sizes()}, path={self.path!r})"


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

    Lines are read once, in chunks of ``chunk_chars`` characters; each chunk is counted with
    sorted integer keys and the chunk tables are merged, so memory grows with the number of
    distinct n-grams, not with the corpus. ``min_count > 1`` needs two passes (the vocabulary
    first): the lines are then kept in memory between the passes.
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
        return fitted(self, "tokenizer_")

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
        check_int("min_count", self.min_count, low=1)
        check_int("chunk_chars", self.chunk_chars, low=1)

    def _reset(self) -> None:
        """Forget everything a previous ``fit`` learned (the attributes ending in ``_``)."""
        for name in [n for n in self.__dict__ if n.endswith("_") and not n.startswith("_")]:
            del self.__dict__[name]

    def fit(self, lines, tokenizer: Tokenizer | None = None, *, memory=None, temp_dir=None):
        """Count the n-grams of ``lines`` (one sentence per line) and estimate the model.

        Parameters
        ----------
        lines : iterable of str, or file name
            Training sentences, one per line: a list, any iterable (read once, lazily), or a
            text file named by a ``str`` or ``pathlib.Path`` (``.gz`` is decompressed): where
            seqprob reads a corpus, a ``str`` names a file.
        tokenizer : Tokenizer, optional
            Defines the vocabulary and the ids. Default: a :class:`WhitespaceTokenizer` fitted on
            ``lines`` with ``min_count`` (KenLM's ids: ``<unk>`` 0, ``<s>`` 1, ``</s>`` 2).
        memory : int or str, optional
            A memory budget (``"1G"``, ``"512M"``, bytes) for counting: chunks sized to it are
            counted one at a time, spilled to ``temp_dir`` as sorted runs and k-way merged
            (lmplz ``-S``). The result is bit for bit the in-memory one. Default: in memory.
        temp_dir : str or path, optional
            Folder for the spill files (a fresh ``seqprob-ngram-*`` folder inside it, removed
            afterwards, also on failure). Default: the system temp folder. Needs ``memory``.

        Returns
        -------
        self

        Raises
        ------
        InputError
            Bad settings, an empty corpus or one without words, a reserved symbol (``<s>``,
            ``</s>``, ``<unk>``) inside the text, bytes that are not UTF-8. A failed fit leaves
            the model unfitted (nothing of an earlier fit survives).
        MemoryBudgetError
            ``memory`` malformed or below what one chunk needs.
        SeqProbFileError
            ``temp_dir`` missing, read-only or full.

        Examples
        --------
        >>> from seqprob.ngram import KneserNey
        >>> lm = KneserNey(order=2, discount=0.5).fit(["a b", "b a b"])
        >>> lm.counts_.n_sentences, lm.counts_.n_tokens, len(lm.vocab)
        (2, 7, 5)
        """
        self._check_params()
        plan = _bounded_plan(memory, temp_dir, int(self.order))
        self._reset()
        try:
            with SpillDir(temp_dir) if plan else contextlib.nullcontext() as spill:
                self._fit_counts(*self._count(lines, tokenizer, plan, spill))
        except BaseException:
            self._reset()
            raise
        return self

    def fit_dask(self, paths_or_bag, tokenizer: Tokenizer | None = None, split_every: int = 8,
                 buckets: int | None = None):
        """Fit on a partitioned corpus with Dask: the same model as :meth:`fit` on its lines.

        Needs the ``seqprob[distributed]`` extra. Runs on the active Dask scheduler: create a
        ``dask.distributed.Client("tcp://scheduler:8786")`` first to use a cluster.

        Parameters
        ----------
        paths_or_bag : dask.bag.Bag of str, or list of paths
            The sentences, one per line: a bag (its partitions in order), or text files (one
            partition each, ``.gz`` decompressed, readable by every worker), in corpus order.
        tokenizer : Tokenizer, optional
            As in :meth:`fit` (it must pickle, to travel to the workers).
        split_every : int
            Partition tables merged per task of the tree reduction (>= 2; estimators counted
            on Dask and estimated on the driver, see Notes).
        buckets : int, optional
            Reduce tasks per order and step of the map/reduce estimation (modified Kneser-Ney);
            default: the number of partitions.

        Returns
        -------
        self

        Raises
        ------
        PartitionError
            A partition failed (unreadable file, reserved symbol ...); ``err.partition`` is its
            index and the message names the cause.

        Notes
        -----
        Map: every partition lists its words (vocabulary in first-appearance order over the
        partitions in order), then counts its n-grams. :class:`ModifiedKneserNey` (without
        ``prune`` or ``kenlm_quirk``) is then estimated as map/reduce over hash buckets of
        n-grams (:mod:`seqprob.ngram._dask_mkn`): raw counts and continuation counts
        N1+(. g) = #{v : c(v g) > 0} per bucket of suffixes g, count-of-counts t_1..t_4 as
        summed per-bucket histograms, then per bucket of contexts h the sums S(h) = sum_w a(h w),
        gamma(h) and u(w | h) = (a(h w) - D(a(h w))) / S(h); the driver computes the discounts
        and assembles P(w | h) = u(w | h) + gamma(h) P(w | h') order by order. Other
        estimators: partition tables merged in a tree of ``split_every`` tables per task,
        then estimated on the driver by the code of :meth:`fit`. Either way the model is bit
        for bit the one :meth:`fit` gives on the concatenated partitions.

        Examples
        --------
        >>> import dask.bag as db
        >>> from seqprob.ngram import ModifiedKneserNey
        >>> bag = db.from_sequence(["a b c", "b c a", "c a b a"], npartitions=2)
        >>> m = ModifiedKneserNey(order=2, discounts=[(0.5, 1, 1.5)] * 2).fit_dask(bag)
        >>> m.counts_.n_tokens
        13
        """
        self._check_params()
        check_int("split_every", split_every, low=2)
        if buckets is not None:
            check_int("buckets", buckets, low=1)
        if tokenizer is not None:
            self._check_tokenizer(tokenizer)
        self._reset()
        try:
            self._fit_partitions(paths_or_bag, tokenizer, split_every, buckets)
        except BaseException:
            self._reset()
            raise
        return self

    def _fit_counts(self, counts: NGramCounts, tok: Tokenizer) -> None:
        """Estimate from finished counts; sets ``counts_``, ``tokenizer_``, ``vocab_``."""
        self._check_has_words(counts.n_sentences, counts.n_tokens)
        self.counts_, self.tokenizer_ = counts, tok
        self._estimate(counts, tok.vocab)
        self.vocab_ = tok.vocab
        log.info("%s: %s n-grams per order from %d sentences, %d tokens", type(self).__name__,
                 counts.sizes(), counts.n_sentences, counts.n_tokens)

    @staticmethod
    def _check_has_words(n_sentences: int, n_tokens: int) -> None:
        if n_tokens == n_sentences:
            raise InputError("the corpus has no words: only <s> and </s> would be counted "
                             f"({n_sentences} empty line(s))", n_sentences=n_sentences)

    def _fit_partitions(self, source, tokenizer, split_every: int, buckets) -> None:
        """Count on Dask (map + tree merge), then estimate on the driver from the merged counts
        (estimators that :mod:`seqprob.ngram._dask_mkn` does not distribute)."""
        from ._dask import fit_counts_dask

        self._fit_counts(*fit_counts_dask(source, int(self.order), tokenizer, int(self.min_count),
                                          int(self.chunk_chars), split_every))

    def _count(self, lines, tokenizer, plan=None, spill=None):
        chunk_chars = plan.chunk_chars if plan else int(self.chunk_chars)
        batch = min(4096, max(1, chunk_chars // 200)) if plan else 4096  # lines read at a time
        chunks = _progress(line_chunks(lines, chunk_chars, batch), self.progress,
                           total=None if isinstance(lines, str) or not hasattr(lines, "__len__") else len(lines))
        index = None
        if tokenizer is None:
            if self.min_count > 1 and plan:
                tokenizer, chunks = spill_vocab(chunks, int(self.min_count), spill, chunk_chars, batch)
            elif self.min_count > 1:
                tokenizer, kept = build_whitespace_vocab(chunks, int(self.min_count))
                chunks = iter(kept)
            else:
                index = {UNK: 0, BOS: 1, EOS: 2}
        else:
            self._check_tokenizer(tokenizer)
        vocab = tokenizer.vocab if tokenizer is not None else None
        bos, eos = (vocab.bos_id, vocab.eos_id) if vocab is not None else (1, 2)
        size = (lambda: len(index)) if index is not None else len(vocab)
        encoded = encode_chunks(chunks, tokenizer, index)
        if plan:
            counts = count_bounded(encoded, int(self.order), size, bos, eos, plan.budget, spill, plan.in_flight)
        else:
            counts = count_ngrams(encoded, int(self.order), size, bos, eos)
        if index is not None:
            tokenizer = WhitespaceTokenizer(Vocab(list(index)))
        return counts, tokenizer

    def _check_tokenizer(self, tokenizer) -> None:
        if not (hasattr(tokenizer, "encode") and isinstance(getattr(tokenizer, "vocab", None), Vocab)):
            raise InputError("tokenizer must be a seqprob Tokenizer (with .encode and a Vocab "
                             f"as .vocab), got {type(tokenizer).__name__}")
        if self.min_count != 1:
            raise InputError(f"min_count={self.min_count} only applies when fit() builds the "
                             "tokenizer; the given tokenizer already fixes the vocabulary",
                             value=self.min_count)
        _check_specials(tokenizer.vocab)

    def _estimate(self, counts: NGramCounts, vocab: Vocab) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


def _bounded_plan(memory, temp_dir, order: int):
    """The chunk plan of a memory budget (None: the in-memory path)."""
    if memory is None:
        if temp_dir is not None:
            raise InputError(f"temp_dir={str(temp_dir)!r} only applies with a memory budget "
                             "(memory='1G'): the in-memory fit writes no temporary files",
                             value=str(temp_dir))
        return None
    return chunk_plan(memory, order)


def _check_specials(vocab: Vocab) -> None:
    if vocab.bos_id is None or vocab.eos_id is None:
        raise InputError(f"an n-gram model needs a vocabulary with BOS and EOS tokens "
                         f"(got bos={vocab.bos!r}, eos={vocab.eos!r})")


def _progress(chunks, progress, total=None):
    """Count the lines of ``chunks`` on a bar (``progress=None``: only on a terminal)."""
    if not wanted(progress):
        return chunks
    bar = progress_bar(total, "counting n-grams", True, unit=" lines", leave=False)
    return counted(chunks, bar, size=lambda item: len(item[1]))
