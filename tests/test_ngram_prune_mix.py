"""Pruning (lmplz --prune, Stolcke entropy pruning) and mixtures (SRILM compute-best-mix / -mix-lm)."""
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import seqprob as sp
from seqprob.errors import InputError, NotFittedError, SeqProbError
from seqprob.functional import logsumexp
from seqprob.ngram import (Mixture, MixtureWeightError, ModifiedKneserNey, WittenBell, interpolate,
                           prune_entropy)
from seqprob.ngram.mixture import em_weights
from seqprob.ngram.prune import entropy_deltas, last_logprob, recompute_backoffs, subset_tables

from contract import (check_batched_equals_unbatched, check_incremental, check_rows_sum_to_one,
                      check_token_logprobs_gather, random_prefix, total_mass_fixed_length)
from small_models import LINES as SMALL_LINES, gpt, tok  # noqa: F401 - fixtures
from budget import examples

FIXTURES = Path(__file__).parent / "fixtures" / "kenlm"
LINES = (FIXTURES / "genesis.train.txt").read_text(encoding="utf-8").splitlines()[:400]


@pytest.fixture(scope="module")
def full():
    return ModifiedKneserNey(order=3).fit(LINES)


@pytest.fixture(scope="module")
def pruned():
    return ModifiedKneserNey(order=3, prune=(0, 1, 1)).fit(LINES)


@pytest.fixture(scope="module")
def mixture(full):
    wb = WittenBell(order=2).fit(LINES[::3], tokenizer=full.tokenizer)
    return Mixture([full, wb], [0.7, 0.3])


# ---------------------------------------------------------------------------- count pruning
def test_prune_zero_is_unpruned(full):
    m = ModifiedKneserNey(order=3, prune=(0,)).fit(LINES)
    for a, b in zip(m.tables_.logp + m.tables_.logbow, full.tables_.logp + full.tables_.logbow):
        np.testing.assert_array_equal(a, b)


def test_prune_removes_exactly_low_counts_and_keeps_discounts(full, pruned):
    assert pruned.discounts_ == full.discounts_  # discounts from the unpruned statistics
    for m, t in ((2, 1), (3, 1)):
        raw = full.counts_.counts[m - 1]
        want = full.counts_.words(m)[raw > t]
        np.testing.assert_array_equal(pruned.tables_.words(m), want)
    np.testing.assert_array_equal(pruned.tables_.logp[0], full.tables_.logp[0])


def test_prune_matches_kenlm_formula_on_bigrams():
    """Order 2 from dicts: p(w|h) = (a - D(a)) / S + gamma'(h) p(w), gamma' with pruned mass."""
    lm = ModifiedKneserNey(order=2, prune=(0, 1)).fit(LINES)
    a = lm.adjusted_counts_[1]
    words = lm.counts_.words(2)
    raw = lm.counts_.counts[1]
    D = lm.discounts_[1]
    S, gnum = defaultdict(float), defaultdict(float)
    for (h, w), ai, ci in zip(words.tolist(), a.tolist(), raw.tolist()):
        S[h] += ai
        gnum[h] += ai if ci <= 1 else D[min(int(ai), 3) - 1]
    uni = np.exp(lm.tables_.logp[0])
    got = np.exp(last_logprob(lm.tables_, lm.tables_.words(2)))
    want = []
    for h, w in lm.tables_.words(2).tolist():
        ai = a[lm.counts_.index(2, [[h, w]])[0]]
        want.append((ai - D[min(int(ai), 3) - 1]) / S[h] + gnum[h] / S[h] * uni[w])
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("order, prune", [(3, (0, 1, 1)), (4, (0, 1, 1, 2))])
def test_count_pruning_reproduces_lmplz(order, prune):
    """Every n-gram, probability and back-off of ``lmplz --prune`` (fixtures/kenlm/README.md)."""
    name = f"genesis.o{order}.prune{''.join(map(str, prune))}.arpa.gz"
    ref = sp.read_arpa(FIXTURES / name).tables_
    model = ModifiedKneserNey(order=order, prune=prune).fit(FIXTURES / "genesis.train.txt")
    ours = model.tables_
    assert ref.sizes() == ours.sizes()
    for m in range(1, order + 1):
        np.testing.assert_array_equal(ref.keys[m - 1], ours.keys[m - 1])  # the same n-grams survive
        a, b = ref.logp[m - 1] / np.log(10), ours.logp[m - 1] / np.log(10)
        np.testing.assert_array_equal(np.isfinite(a), np.isfinite(b))
        np.testing.assert_allclose(b[np.isfinite(b)], a[np.isfinite(a)], atol=1e-6, rtol=0)
        if m < order:
            np.testing.assert_allclose(ours.logbow[m - 1], ref.logbow[m - 1], atol=1e-6, rtol=0)


@settings(max_examples=examples(15), deadline=None)
@given(seed=st.integers(0, 10**6), length=st.integers(2, 6))
def test_pruned_rows_sum_to_one(pruned, seed, length):
    rng = np.random.default_rng(seed)
    ids = random_prefix(pruned, rng, length)  # mostly contexts never seen in training
    check_rows_sum_to_one(pruned, ids)
    check_token_logprobs_gather(pruned, ids)


@pytest.mark.parametrize("prune", [(1, 1), (0, 2, 1), (0, -1), (0, 1, 1, 1), (0, 1.5), "x"])
def test_prune_bad_thresholds(prune):
    with pytest.raises(InputError):
        ModifiedKneserNey(order=3, prune=prune).fit(LINES)


def test_cli_prune(tmp_path):
    from seqprob.app.cli import main
    out = tmp_path / "p.arpa"
    assert main(["ngram", "fit", str(FIXTURES / "genesis.train.txt"), "-o", str(out), "--order", "3",
                 "--prune", "0", "1", "1"]) == 0
    model = sp.read_arpa(out)
    ref = ModifiedKneserNey(order=3, prune=(0, 1, 1)).fit(FIXTURES / "genesis.train.txt")
    assert model.tables_.sizes() == ref.tables_.sizes()
    assert main(["ngram", "fit", str(FIXTURES / "genesis.train.txt"), "-o", str(tmp_path / "w.arpa"),
                 "--smoothing", "wb", "--prune", "0", "1"]) != 0
    assert not (tmp_path / "w.arpa").exists()


# ---------------------------------------------------------------------------- entropy pruning
def test_entropy_delta_equals_brute_force_kl(full):
    """dH of removing one n-gram = P(h) KL(P(.|h) || P'(.|h)) with P' renormalized."""
    t = full.tables_
    delta, is_ctx = entropy_deltas(t, 3, full.vocab.bos_id, full.vocab.eos_id)
    rng = np.random.default_rng(0)
    for i in rng.choice(np.flatnonzero(~is_ctx), size=5, replace=False):
        keep = [np.ones(n, dtype=bool) for n in t.sizes()]
        keep[2][i] = False
        smaller = recompute_backoffs(subset_tables(t, keep))
        h = t.words(3)[i, :2]
        before = t.logprob_rows(h[None, :])[0, -1]  # (V,)
        after = smaller.logprob_rows(h[None, :])[0, -1]
        p = np.exp(before)
        with np.errstate(invalid="ignore"):  # -inf - -inf at <s>, masked out
            kl = np.sum(np.where(p > 0, p * (before - after), 0.0))
        first = full.vocab.eos_id if h[0] == full.vocab.bos_id else h[0]  # SRILM: <s> counts as </s>
        ph = np.exp(t.logp[0][first])
        ph *= np.exp(t.token_logprobs(h[None, :])[0, 0])
        np.testing.assert_allclose(delta[i], ph * kl, rtol=1e-6, atol=1e-15)


def test_prune_entropy_shrinks_monotonically_and_stays_normalized(full):
    sizes = []
    for th in (1e-7, 1e-5, 1e-3):
        small = prune_entropy(full, th)
        sizes.append(sum(small.tables_.sizes()))
        check_rows_sum_to_one(small, random_prefix(small, np.random.default_rng(1), 8))
        check_incremental(small, random_prefix(small, np.random.default_rng(2), 5))
    assert sizes[0] >= sizes[1] >= sizes[2]
    assert sizes[2] < sum(full.tables_.sizes())
    assert full.tables_.sizes() == ModifiedKneserNey(order=3).fit(LINES).tables_.sizes()  # input untouched


def test_prune_entropy_keeps_listed_probabilities(full):
    small = prune_entropy(full, 1e-5)
    for m in (2, 3):
        rows = full.tables_.index(m, small.tables_.words(m))
        assert (rows >= 0).all()
        np.testing.assert_array_equal(small.tables_.logp[m - 1], full.tables_.logp[m - 1][rows])


@settings(max_examples=examples(10), deadline=None)
@given(seed=st.integers(0, 10**6), th=st.floats(1e-8, 1e-2))
def test_prune_entropy_rows_sum_to_one(full, seed, th):
    small = prune_entropy(full, th)
    check_rows_sum_to_one(small, random_prefix(small, np.random.default_rng(seed), 6))


@pytest.mark.parametrize("th", [0, -1e-5, float("nan"), "x"])
def test_prune_entropy_bad_threshold(full, th):
    with pytest.raises(InputError):
        prune_entropy(full, th)


def test_prune_entropy_refuses_unnormalized():
    with pytest.raises(InputError):
        prune_entropy(sp.ngram.StupidBackoff(order=2).fit(LINES), 1e-5)


# ---------------------------------------------------------------------------- mixtures
@settings(max_examples=examples(15), deadline=None)
@given(seed=st.integers(0, 10**6), length=st.integers(2, 7))
def test_mixture_contract(mixture, seed, length):
    ids = random_prefix(mixture, np.random.default_rng(seed), length)
    check_rows_sum_to_one(mixture, ids)
    check_token_logprobs_gather(mixture, ids)
    check_incremental(mixture, ids)


def test_mixture_of_gpt_and_ngram(gpt, tok):  # noqa: F811 - fixtures
    kn = ModifiedKneserNey(order=2, discounts=[(0.5, 1.0, 1.5)] * 2).fit(SMALL_LINES, tokenizer=tok)
    mix = Mixture([gpt, kn], [0.25, 0.75])
    rng = np.random.default_rng(0)
    seqs = [random_prefix(mix, rng, 6) for _ in range(3)]
    for ids in seqs:
        check_rows_sum_to_one(mix, ids)
        check_token_logprobs_gather(mix, ids)
        check_incremental(mix, ids)  # the GPT's KV cache and the n-gram state, stepped together
    check_batched_equals_unbatched(mix, seqs)
    assert abs(total_mass_fixed_length(mix, 2) - 1.0) < 1e-9  # chain rule over all V^2 sequences
    with pytest.raises(InputError, match="back-off"):
        sp.write_arpa(mix, "never-written.arpa")
    assert not Path("never-written.arpa").exists()


def test_mixture_equals_weighted_sum(mixture):
    ids = random_prefix(mixture, np.random.default_rng(0), 9)
    a, b = mixture.models
    want = np.log(0.7 * np.exp(a.token_logprobs(ids)) + 0.3 * np.exp(b.token_logprobs(ids)))
    np.testing.assert_allclose(mixture.token_logprobs(ids), want, rtol=1e-12)


def test_mixture_weight_one_zero_is_first_model(mixture):
    a, b = mixture.models
    mix = interpolate([a, b], [1.0, 0.0])
    ids = random_prefix(mix, np.random.default_rng(3), 10)
    np.testing.assert_array_equal(mix.token_logprobs(ids), a.token_logprobs(ids))
    np.testing.assert_array_equal(mix.logprobs(ids), a.logprobs(ids))


@pytest.mark.parametrize("weights", [[0.5, 0.6], [1.2, -0.2], [1.0], [np.nan, 1.0], [[0.5, 0.5]], "ab"])
def test_mixture_bad_weights(mixture, weights):
    with pytest.raises(MixtureWeightError) as info:
        Mixture(mixture.models, weights)
    assert isinstance(info.value, SeqProbError)


def test_mixture_names_an_unfitted_model(full):
    """An unfitted member is named as unfitted, not as 'not a LanguageModel' (its vocab
    raises NotFittedError, an AttributeError that hasattr would swallow)."""
    with pytest.raises(NotFittedError, match="WittenBell is not fitted yet"):
        Mixture([full, WittenBell(order=2)])
    with pytest.raises(InputError, match=r"models\[1\] \(int\) is not a LanguageModel"):
        Mixture([full, 3])


def test_mixture_needs_one_vocabulary(full):
    other = WittenBell(order=2).fit(["x y", "y x"])
    with pytest.raises(InputError, match="vocabulary"):
        Mixture([full, other])


@settings(max_examples=examples(30), deadline=None)
@given(seed=st.integers(0, 10**6), k=st.integers(1, 4), n=st.integers(1, 40))
def test_em_never_lowers_likelihood(seed, k, n):
    rng = np.random.default_rng(seed)
    L = np.log(rng.dirichlet(np.ones(5), size=(n, k))[..., 0])  # (n, K) log-probs
    w0 = rng.dirichlet(np.ones(k))
    w, hist = em_weights(L, w0, max_iter=50, tol=0.0)
    assert np.all(np.diff(hist) >= -1e-9 * max(1.0, abs(hist[0])))
    assert abs(w.sum() - 1) < 1e-12 and (w >= 0).all()


def test_fit_weights_improves_heldout(full):
    wb = WittenBell(order=2).fit(LINES[::3], tokenizer=full.tokenizer)
    mix = Mixture([full, wb], [0.5, 0.5])
    heldout = (FIXTURES / "genesis.train.txt").read_text(encoding="utf-8").splitlines()[400:500]
    before = mix.component_logprobs(heldout)
    mix.fit_weights(heldout)
    ll = lambda w: logsumexp(np.log(w) + before, axis=1).sum()  # noqa: E731
    assert ll(mix.weights_) >= ll(np.array([0.5, 0.5]))
    assert np.all(np.diff(mix.history_) >= -1e-9)


# ---------------------------------------------------------------------------- static mixture
def test_static_mixture_exact_on_union_and_normalized(mixture, tmp_path):
    path = sp.write_arpa(mixture, tmp_path / "mix.arpa")
    arpa = sp.read_arpa(path)
    static = mixture.to_backoff()
    assert arpa.tables_.sizes() == static.tables_.sizes()
    for m in (2, 3):
        words = static.tables_.words(m)
        exact = np.concatenate([mixture.token_logprobs(np.asarray(w))[-1:] for w in words[:400]])
        np.testing.assert_allclose(last_logprob(static.tables_, words[:400]), exact, rtol=1e-12)
        ids = np.array([arpa.vocab.id(t) for t in static.vocab.tokens])  # ARPA ids: file order
        np.testing.assert_allclose(last_logprob(arpa.tables_, ids[words[:400]]), exact, rtol=1e-8)
    for seed in range(5):
        check_rows_sum_to_one(static, random_prefix(static, np.random.default_rng(seed), 6))


def test_static_mixture_exact_for_unlisted_contexts(mixture):
    static = mixture.to_backoff()
    v = mixture.vocab
    unk = v.unk_id
    ids = np.array([v.bos_id, unk, unk, unk])  # <unk> <unk> is listed in no component
    np.testing.assert_allclose(static.logprobs(ids)[-1], mixture.logprobs(ids)[-1], rtol=1e-10)


def test_static_mixture_refuses_non_backoff(full):
    from seqprob.table import UniformModel
    mix = Mixture([full, UniformModel(full.vocab)], [0.5, 0.5])
    with pytest.raises(InputError, match="back-off"):
        mix.to_backoff()


def test_docstring_examples():
    import doctest

    from seqprob.ngram import mixture, prune

    for module in (mixture, prune):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_pruned_models_round_trip_through_arpa(full, pruned, tmp_path):
    small = prune_entropy(full, 1e-5)
    ids = random_prefix(full, np.random.default_rng(7), 12)
    for i, model in enumerate((pruned, small)):
        back = sp.read_arpa(sp.write_arpa(model, tmp_path / f"m{i}.arpa"))
        remap = np.array([back.vocab.id(t) for t in model.vocab.tokens])
        assert back.tables_.sizes() == model.tables_.sizes()
        np.testing.assert_allclose(back.token_logprobs(remap[ids]), model.token_logprobs(ids), rtol=1e-8)


def test_row_shortcuts_equal_backoff_scoring():
    """lower_logprobs / context_logprobs (row arithmetic) == scoring the n-grams as text, also
    where pruning removed the suffix of a kept n-gram."""
    from seqprob.ngram.prune import context_logprobs, lower_logprobs, suffix_rows

    lm = ModifiedKneserNey(order=4).fit(LINES)
    small = prune_entropy(lm, 1e-4).tables_
    v = lm.vocab
    for m in (2, 3, 4):
        words = small.words(m)
        want = last_logprob(small, words[:, 1:]) if m > 2 else small.logp[0][words[:, 1]]
        np.testing.assert_allclose(lower_logprobs(small, m), want, rtol=1e-12)
        ctx = small.words(m - 1)
        first = np.where(ctx[:, 0] == v.bos_id, v.eos_id, ctx[:, 0])
        chain = small.logp[0][first] + (np.nansum(small.score_stream(
            ctx.ravel(), np.repeat(np.arange(len(ctx)) * (m - 1), m - 1)).reshape(len(ctx), m - 1)[:, 1:], axis=1)
            if m > 2 else 0.0)
        np.testing.assert_allclose(context_logprobs(small, m - 1, v.bos_id, v.eos_id), chain, rtol=1e-12)
    assert (suffix_rows(small, 4) < 0).any()  # the fallback path was exercised


def test_static_mixture_with_a_pruned_component(full):
    small = prune_entropy(full, 1e-4)
    mix = Mixture([small, full], [0.4, 0.6])
    static = mix.to_backoff()
    for m in (2, 3):
        words = static.tables_.words(m)[::7]
        exact = np.array([mix.token_logprobs(w)[-1] for w in words])
        np.testing.assert_allclose(last_logprob(static.tables_, words), exact, rtol=1e-12)
    check_rows_sum_to_one(static, random_prefix(static, np.random.default_rng(5), 8))
