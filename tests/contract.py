"""Checks of the LanguageModel contract that every model must pass (used by several test files)."""
from __future__ import annotations

import itertools

import numpy as np

from seqprob.functional import logsumexp


def predictable_ids(model) -> list:
    v = model.vocab
    return [i for i in range(len(v)) if not (i == v.bos_id and v.bos_id != v.eos_id)]


def random_prefix(model, rng, length: int) -> np.ndarray:
    ids = rng.choice(predictable_ids(model), size=length - 1)
    return np.concatenate([[model.vocab.bos_id], ids]).astype(np.int64)


def check_rows_sum_to_one(model, ids, atol=1e-9):
    rows = np.asarray(model.logprobs(ids), dtype=np.float64)
    assert rows.shape == np.shape(ids) + (len(model.vocab),)
    assert not np.isnan(rows).any()
    np.testing.assert_allclose(logsumexp(rows), 0.0, atol=atol)


def check_token_logprobs_gather(model, ids, atol=1e-9):
    rows = np.asarray(model.logprobs(ids[:-1]))
    expected = rows[np.arange(len(ids) - 1), ids[1:]]
    np.testing.assert_allclose(model.token_logprobs(ids), expected, atol=atol)


def check_batched_equals_unbatched(model, seqs, atol=1e-9):
    batch = np.stack(seqs)
    out = model.logprobs(batch)
    for b, s in enumerate(seqs):
        np.testing.assert_allclose(out[b], model.logprobs(s), atol=atol)


def check_causal(model, ids, t, new_token, atol=1e-9):
    changed = ids.copy()
    changed[t] = new_token
    a, b = model.logprobs(ids), model.logprobs(changed)
    np.testing.assert_allclose(a[:t], b[:t], atol=atol)


def check_incremental(model, ids, atol=1e-9):
    rows = model.logprobs(ids)
    state = model.start(ids[:1])
    for t in range(len(ids)):
        before = np.array(state.logprobs, copy=True)
        np.testing.assert_allclose(state.logprobs, rows[t], atol=atol)
        if t + 1 < len(ids):
            new = model.step(state, int(ids[t + 1]))
            np.testing.assert_array_equal(state.logprobs, before)  # the old state is a value
            state = new


def total_mass_fixed_length(model, length: int) -> float:
    """Sum of P(x_1..x_T | <s>) over all V^T sequences (tokens a model never predicts add 0)."""
    toks = list(range(len(model.vocab)))
    seqs = np.array([[model.vocab.bos_id, *s] for s in itertools.product(toks, repeat=length)])
    return float(np.exp(model.token_logprobs(seqs).sum(axis=1)).sum())


def total_mass_with_eos(model, max_len: int) -> float:
    """Sum over finished sentences up to max_len words of P(words </s>) plus the mass of the
    unfinished prefixes of max_len + 1 words: exactly 1 for a proper model."""
    v = model.vocab
    words = [i for i in range(len(v)) if i != v.eos_id]
    total = 0.0
    for n in range(max_len + 1):
        for s in itertools.product(words, repeat=n):
            total += float(np.exp(model.token_logprobs(np.array([v.bos_id, *s, v.eos_id])).sum()))
    for s in itertools.product(words, repeat=max_len + 1):
        total += float(np.exp(model.token_logprobs(np.array([v.bos_id, *s])).sum()))
    return total


def same_fields(a, b) -> None:
    """Every attribute of two result objects equal (floats to 1e-12, NaN equal to NaN)."""
    import math

    import pytest
    for name, x in vars(a).items():
        y = getattr(b, name)
        if isinstance(x, float) and not (math.isnan(x) and math.isnan(y)):
            assert x == pytest.approx(y, rel=1e-12, abs=1e-12), name
        elif not isinstance(x, float):
            assert x == y, name
