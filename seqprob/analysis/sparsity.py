"""Why counting stops working: the longer the context, the emptier the table.

For each n-gram order, the perplexity of an n-gram model on its training text and on held-out
text, and the share of held-out n-grams never seen in training.
"""
from __future__ import annotations

import logging

import numpy as np

from ..checks import check_int
from ..errors import InputError

__all__ = ["ngram_windows", "unseen_share", "sparsity_curve"]

log = logging.getLogger(__name__)


def ngram_windows(sequences, n: int, bos_id: int, eos_id: int | None) -> np.ndarray:
    """Every n-gram x_{t-n+1} .. x_t that predicts a token, shape (N, n).

    Each sentence of ids (without BOS/EOS) is padded with n - 1 ``<s>`` on the left and one
    ``</s>`` on the right (when ``eos_id`` is given), so the count of windows equals the count
    of scored tokens and the windows at a sentence start hold the ``<s>`` context.
    """
    n = check_int("n-gram order", n, low=1, whole_floats=True)
    rows = []
    for seq in sequences:
        ids = np.asarray(seq, dtype=np.int64)
        tail = [eos_id] if eos_id is not None else []
        padded = np.concatenate([np.full(n - 1, bos_id, dtype=np.int64), ids, np.asarray(tail, dtype=np.int64)])
        if len(padded) >= n:
            rows.append(np.lib.stride_tricks.sliding_window_view(padded, n))  # (T, n)
    if not rows:
        return np.empty((0, n), dtype=np.int64)
    return np.concatenate(rows, axis=0)


def unseen_share(train_sequences, heldout_sequences, n: int, bos_id: int, eos_id: int | None) -> float:
    """Share of held-out n-gram tokens (with multiplicity) whose n-gram never occurs in training.

    Notes
    -----
    share = #{t in held-out : c_train(x_{t-n+1} .. x_t) = 0} / #{t in held-out}.

    Examples
    --------
    >>> round(unseen_share([[5, 6]], [[5, 7]], n=2, bos_id=1, eos_id=2), 4)  # (<s> 5) seen only
    0.6667
    """
    return _unseen(ngram_windows(train_sequences, n, bos_id, eos_id),
                   ngram_windows(heldout_sequences, n, bos_id, eos_id))


def _unseen(train: np.ndarray, held: np.ndarray) -> float:
    """Share of rows of ``held`` (N, n) that are not rows of ``train`` (M, n)."""
    if len(held) == 0:
        raise InputError("unseen_share() got no held-out tokens")
    if len(train) == 0:
        return 1.0
    _, inverse = np.unique(np.concatenate([train, held]), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    seen = np.isin(inverse[len(train):], inverse[: len(train)])
    return float(1.0 - seen.mean())


def _default_estimator(order: int):
    from ..ngram import ModifiedKneserNey

    return ModifiedKneserNey(order=order)


def sparsity_curve(train_lines, heldout_lines, orders=(1, 2, 3, 4, 5), tokenizer=None, estimator=None):
    """Perplexity on train and held-out text, and the unseen share, for each n-gram order.

    Parameters
    ----------
    train_lines, heldout_lines : list of str
        Sentences, one per item.
    orders : sequence of int
    tokenizer : Tokenizer, optional
        Default: a :class:`~seqprob.tokenizers.WhitespaceTokenizer` fit on ``train_lines``
        (held-out words it has not seen become ``<unk>``).
    estimator : callable order -> unfitted model, optional
        Each model is ``estimator(order).fit(train_lines, tokenizer=tokenizer)``. Default:
        ``seqprob.ngram.ModifiedKneserNey(order=order)``.

    Returns
    -------
    pandas.DataFrame
        order, train_perplexity, heldout_perplexity, unseen_share (0..1), n_distinct_train
        (distinct training n-grams), n_heldout (held-out n-gram tokens).

    Notes
    -----
    perplexity = exp(-(1/N) sum_t log P(x_t | x_{t-n+1} .. x_{t-1})), ``</s>`` included; see
    :func:`unseen_share`.
    """
    import pandas as pd

    from ..scoring import perplexity
    from ..tokenizers import WhitespaceTokenizer

    train = [t for t in train_lines if t.strip()]
    held = [t for t in heldout_lines if t.strip()]
    orders = list(orders)
    if not train or not held or not orders:
        raise InputError(f"sparsity_curve() needs train text, held-out text and orders; got "
                         f"{len(train)} train lines, {len(held)} held-out lines, {len(orders)} orders")
    tok = tokenizer if tokenizer is not None else WhitespaceTokenizer.fit(train)
    make = estimator or _default_estimator
    vocab = tok.vocab
    train_ids, held_ids = tok.encode_batch(train), tok.encode_batch(held)
    rows = []
    for n in orders:
        model = make(n).fit(train, tokenizer=tok)
        train_w = ngram_windows(train_ids, n, vocab.bos_id, vocab.eos_id)  # (M, n)
        held_w = ngram_windows(held_ids, n, vocab.bos_id, vocab.eos_id)  # (N, n)
        rows.append({"order": n, "train_perplexity": perplexity(model, train, tokenizer=tok),
                     "heldout_perplexity": perplexity(model, held, tokenizer=tok),
                     "unseen_share": _unseen(train_w, held_w),
                     "n_distinct_train": int(len(np.unique(train_w, axis=0))), "n_heldout": len(held_w)})
        log.info("order %d: %s", n, rows[-1])
    return pd.DataFrame(rows)
