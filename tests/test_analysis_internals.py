"""seqprob.analysis lens / embeddings / calibration / sparsity: invariants and bad input."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from seqprob.analysis.calibration import calibration, expected_calibration_error, reliability_table
from seqprob.analysis.embeddings import (analogy, default_pairs, direction, embedding_directions,
                                         embedding_pca, nearest_neighbors)
from seqprob.analysis.lens import attention_patterns, logit_lens
from seqprob.analysis.sparsity import ngram_windows, sparsity_curve, unseen_share
from seqprob.errors import InputError
from seqprob.gpt import GPT, GPTConfig
from seqprob.table import UniformModel

from small_models import LINES, gpt, tok  # noqa: E402,F401 - shared data and fixtures


# --------------------------------------------------------------------------- lens
@settings(max_examples=examples(10))
@given(st.lists(st.sampled_from(["the", "cat", "sat", "on", "mat", "dog", "zz"]), min_size=1, max_size=8))
def test_logit_lens_last_layer_is_the_model(gpt, tok, words):
    text = " ".join(words)
    df = logit_lens(gpt, text)
    L = gpt.config.n_layer
    T = len(words) + 1  # + </s>
    assert len(df) == (L + 1) * T
    ids = [tok.vocab.bos_id, *tok.encode(text), tok.vocab.eos_id]
    final = df[df["layer"] == L].sort_values("position")
    np.testing.assert_allclose(final["logprob"], gpt.token_logprobs(ids), atol=1e-9)
    assert (df["rank"] >= 1).all() and df["prob"].between(0, 1).all()
    top1 = (df["rank"] == 1).to_numpy()
    # the token column shows the surface word ("zz"); the prediction is its vocabulary entry (<unk>)
    as_vocab = np.array([tok.vocab.tokens[i] for i in ids[1:]] * (L + 1))
    assert (df["top_token"].to_numpy()[top1] == as_vocab[top1]).all()


def test_attention_patterns_are_causal_distributions(gpt):
    attn, tokens = attention_patterns(gpt, "the cat sat on the mat")
    assert attn.shape == (2, 2, 7, 7) and tokens[0] == "<s>" and tokens[1:] == "the cat sat on the mat".split()
    np.testing.assert_allclose(attn.sum(-1), 1.0, atol=1e-9)
    assert np.allclose(np.triu(attn, 1), 0.0)


def test_models_without_internals_are_refused(tok):
    with pytest.raises(InputError, match="no attention"):
        logit_lens(UniformModel(tok.vocab), "the cat")
    with pytest.raises(InputError, match="run_with_cache"):
        attention_patterns(UniformModel(tok.vocab), "the cat")
    with pytest.raises(InputError, match="no token embeddings"):
        embedding_pca(UniformModel(tok.vocab))


# --------------------------------------------------------------------------- embeddings
def test_pca_is_centered_and_ordered(gpt):
    df = embedding_pca(gpt)
    assert len(df) == len(gpt.vocab) - 3  # specials left out
    np.testing.assert_allclose(df[["pc1", "pc2"]].mean(), 0.0, atol=1e-9)
    ev = df.attrs["explained_variance_ratio"]
    assert ev[0] >= ev[1] > 0 and sum(ev) <= 1 + 1e-12
    assert df["pc1"].var() >= df["pc2"].var()


def _planted(tok):
    """A GPT whose embeddings hold an exact gender direction: queen = king - man + woman."""
    cfg = GPTConfig(vocab_size=len(tok.vocab), block_size=8, n_layer=1, n_head=1, n_embd=8, dtype="float64")
    m = GPT(cfg, seed=1, tokenizer=tok)
    E = m.params["wte"]
    v = tok.vocab
    E[v.id("queen")] = E[v.id("king")] - E[v.id("man")] + E[v.id("woman")]
    return m


def test_analogy_finds_the_planted_answer(tok):
    m = _planted(tok)
    a = analogy(m, "king", "man", "woman", k=5)
    assert a["token"].iloc[0] == "queen"
    assert a["cosine"].iloc[0] == pytest.approx(1.0)
    assert not {"king", "man", "woman", "<s>", "</s>", "<unk>"} & set(a["token"])
    assert (np.diff(a["cosine"]) <= 1e-12).all() and a["cosine"].between(-1 - 1e-9, 1 + 1e-9).all()
    assert a.attrs["query"] == "king - man + woman"


def test_analogy_unknown_word(gpt):
    with pytest.raises(InputError, match="'emperor' is not in the model's vocabulary"):
        analogy(gpt, "emperor", "man", "woman")


def test_nearest_neighbors_by_dot_product(gpt):
    nn = nearest_neighbors(gpt, ["cat", "king"], k=3)
    assert list(nn["query"]) == ["cat"] * 3 + ["king"] * 3
    E = gpt.params["wte"]
    v = gpt.vocab
    best = nn[nn["query"] == "cat"].iloc[0]
    assert best["score"] == pytest.approx(float(E[v.id("cat")] @ E[v.id(best["neighbor"])]))
    assert "cat" not in set(nn[nn["query"] == "cat"]["neighbor"])
    with pytest.raises(InputError, match="metric"):
        nearest_neighbors(gpt, "cat", metric="l1")


def test_pairs_and_directions(gpt):
    pairs = default_pairs(gpt.vocab)
    assert ("king", "queen") in pairs["gender"] and ("man", "woman") in pairs["gender"]
    assert ("cat", "cats") in pairs["number"] and ("sat", "sats") not in pairs["number"]
    d = direction(gpt, pairs["gender"])
    assert np.linalg.norm(d) == pytest.approx(1.0)
    df = embedding_directions(gpt)
    assert set(df["kind"]) == {"gender", "number"} and len(df) == 2 * (len(pairs["gender"]) + len(pairs["number"]))
    assert -1 <= df.attrs["cosine_between_directions"] <= 1
    with pytest.raises(InputError, match="at least one"):
        direction(gpt, [])


# --------------------------------------------------------------------------- calibration
@settings(max_examples=examples(30))
@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=1, max_size=60), st.integers(1, 12))
def test_ece_bounds_and_counts(pairs, n_bins):
    p, c = zip(*pairs)
    df = reliability_table(p, c, n_bins=n_bins)
    assert df["count"].sum() == len(p)
    assert 0.0 <= df.attrs["ece"] <= 1.0 + 1e-12
    perm = np.random.default_rng(0).permutation(len(p))
    assert expected_calibration_error(np.array(p)[perm], np.array(c)[perm], n_bins) == pytest.approx(df.attrs["ece"])


@given(st.lists(st.booleans(), min_size=1, max_size=40))
def test_ece_zero_for_certain_and_right(correct):
    assert expected_calibration_error(np.array(correct, dtype=float), correct) == 0.0


def test_calibration_of_a_model(gpt, tok):
    df = calibration(gpt, LINES, n_bins=5)
    n_tokens = sum(len(line.split()) + 1 for line in LINES)
    assert df.attrs["n"] == n_tokens and df.attrs["kind"] == "top1"
    all_df = calibration(gpt, LINES, n_bins=5, kind="all")
    assert all_df.attrs["n"] == n_tokens * len(tok.vocab)
    # over every (position, token) pair the mean probability is 1/V... and so is the frequency
    conf = (all_df["confidence"] * all_df["count"]).sum() / all_df["count"].sum()
    acc = (all_df["accuracy"] * all_df["count"]).sum() / all_df["count"].sum()
    assert conf == pytest.approx(acc)


def test_calibration_bad_input(gpt):
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        reliability_table([1.5], [True])
    with pytest.raises(InputError, match="differ in size"):
        reliability_table([0.5, 0.5], [True])
    with pytest.raises(InputError, match="n_bins"):
        reliability_table([0.5], [True], n_bins=0)
    with pytest.raises(InputError, match="kind"):
        calibration(gpt, "the cat", kind="best")
    with pytest.raises(InputError, match="at least one"):
        reliability_table([], [])


# --------------------------------------------------------------------------- sparsity
seqs = st.lists(st.lists(st.integers(3, 7), min_size=0, max_size=6), min_size=1, max_size=6)


@settings(max_examples=examples(30))
@given(seqs, seqs)
def test_unseen_share_is_monotone_in_order(train, held):
    shares = [unseen_share(train, held, n, bos_id=1, eos_id=2) for n in (1, 2, 3, 4)]
    assert all(0.0 <= s <= 1.0 for s in shares)
    assert all(a <= b + 1e-12 for a, b in zip(shares, shares[1:]))
    assert unseen_share(held, held, 3, bos_id=1, eos_id=2) == 0.0


def test_ngram_windows_count_scored_tokens():
    w = ngram_windows([[5, 6], [7]], 3, bos_id=1, eos_id=2)
    assert w.tolist() == [[1, 1, 5], [1, 5, 6], [5, 6, 2], [1, 1, 7], [1, 7, 2]]
    with pytest.raises(InputError, match="order"):
        ngram_windows([[5]], 0, 1, 2)


def test_sparsity_curve_with_an_estimator():
    from seqprob.ngram import AddK

    train = LINES * 3
    held = ["the cat saw the dog", "the queen sat on the mat"]
    df = sparsity_curve(train, held, orders=(1, 2, 3), estimator=lambda n: AddK(order=n, k=0.1))
    assert list(df["order"]) == [1, 2, 3]
    assert (np.diff(df["train_perplexity"]) < 0).all()  # longer contexts fit training text better
    assert (np.diff(df["unseen_share"]) >= 0).all() and df["unseen_share"].iloc[-1] > 0
    assert df["n_heldout"].iloc[0] == sum(len(h.split()) + 1 for h in held)
    assert all(math.isfinite(v) for v in df["heldout_perplexity"])
    with pytest.raises(InputError, match="held-out"):
        sparsity_curve(train, [], orders=(1,))
