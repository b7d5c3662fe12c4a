"""The ground truth P*: ProbabilisticGrammar (spec, forward algorithm, sampling, entropy) and toy_english."""
import itertools
import json
import math
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from budget import examples
from seqprob.errors import FileFormatError, GrammarError, InputError, SeqProbFileError, TokenIdError
from seqprob.functional import logsumexp
from seqprob.protocols import LanguageModel
from seqprob.truth import ProbabilisticGrammar, agreement_pairs, toy_english, toy_english_spec
from seqprob.truth import _spec

TINY = {"name": "tiny", "start": "S", "states": {
    "S": {"stop": 0.3, "arcs": [["a", 0.5, "S"], ["b", 0.2, "T"]]},
    "T": {"stop": 0.25, "arcs": [["a", 0.5, "S"], ["a", 0.25, "T"]]}}}  # non-deterministic: T -a-> S or T


@pytest.fixture(scope="module")
def toy():
    return toy_english()


# ---------------------------------------------------------------- random grammars (Hypothesis)
@st.composite
def grammar_specs(draw, deterministic=False, max_states=4, max_words=3):
    """Small random grammars: a chain 0 -> 1 -> ... -> S-1 (reachability) and a final stop
    (every state reaches the end), plus random extra arcs and stops."""
    n_states = draw(st.integers(1, max_states))
    words = ["a", "b", "c"][:draw(st.integers(1, max_words))]
    arcs = {}
    for i in range(n_states - 1):
        arcs[(i, draw(st.sampled_from(words)), i + 1)] = draw(st.floats(0.05, 1.0))
    for _ in range(draw(st.integers(0, 6))):
        i, j = draw(st.integers(0, n_states - 1)), draw(st.integers(0, n_states - 1))
        w = draw(st.sampled_from(words))
        if deterministic and any(a[:2] == (i, w) for a in arcs):
            continue
        arcs[(i, w, j)] = draw(st.floats(0.05, 1.0))
    stops = [draw(st.sampled_from([0.0, 0.2, 1.0])) for _ in range(n_states)]
    stops[-1] = draw(st.floats(0.1, 1.0))
    states = {}
    for i in range(n_states):
        mine = [(w, p, j) for (k, w, j), p in arcs.items() if k == i]
        total = stops[i] + sum(p for _, p, _ in mine)
        states[f"q{i}"] = {"stop": stops[i] / total, "arcs": [[w, p / total, f"q{j}"] for w, p, j in mine]}
    if not any(states[s]["arcs"] for s in states):  # the vocabulary must not be empty
        states["q0"] = {"stop": 0.5, "arcs": [["a", 0.5, "q0"]]}
    return {"name": "random", "start": "q0", "states": states}


def brute_force_logprob(spec, words, eos=True):
    """Sum over all hidden-state paths, straight from the spec (independent of the implementation)."""
    alpha = {spec["start"]: 1.0}
    for w in words:
        nxt = {}
        for state, mass in alpha.items():
            for word, p, target in spec["states"][state]["arcs"]:
                if word == w:
                    nxt[target] = nxt.get(target, 0.0) + mass * p
        alpha = nxt
    total = sum(m * (spec["states"][s]["stop"] if eos else 1.0) for s, m in alpha.items())
    return math.log(total) if total > 0 else -math.inf


def ids_of(g, words):
    return np.array([g.vocab.bos_id] + [g.vocab.id(w) for w in words], dtype=np.int64)


# ---------------------------------------------------------------- spec validation
def _bad(states, start="S"):
    return {"start": start, "states": states}


@pytest.mark.parametrize("spec, state, words", [
    (_bad({"S": {"stop": 0.5, "arcs": [["a", 0.4, "S"]]}}), "S", "sum to 0.9"),
    (_bad({"S": {"stop": 0.5, "arcs": [["a", 0.6, "S"], ["b", -0.1, "S"]]}}), "S", "-0.1"),
    (_bad({"S": {"stop": 0.5, "arcs": [["a", 0.5, "S"], ["b", 0.0, "X"]]}, "X": {"stop": 1.0}}), "X",
     "unreachable"),
    (_bad({"S": {"stop": 0.5, "arcs": [["a", 0.5, "D"]]}, "D": {"arcs": [["b", 1.0, "D"]]}}), "D", "dead end"),
    (_bad({"S": {"stop": 1.0, "arcs": []}}), "S", "empty vocabulary"),
    (_bad({"S": {"stop": 0.5, "arcs": [["a", 0.5, "Nowhere"]]}}), "S", "unknown state 'Nowhere'"),
    (_bad({"S": {"stop": 0.5, "arcs": [["</s>", 0.5, "S"]]}}), "S", "reserved"),
    (_bad({"S": {"stop": 0.5, "arcs": [["two words", 0.5, "S"]]}}), "S", "whitespace"),
    (_bad({"S": {"stop": 1.5, "arcs": []}}), "S", "not a probability"),
    (_bad({"S": {"stop": 0.5, "arcs": [["a", "0.5", "S"]]}}), "S", "must be a number"),
    (_bad({"S": {"stop": 0.5, "arcs": [["a", 0.5]]}}), "S", "[word, prob, target]"),
    (_bad({"S": {"stop": 0.5, "arcs": [{"word": "a", "prob": 0.5}]}}), "S", "lacks key"),
    (_bad({"S": {"stop": 0.5, "arc": []}}), "S", "unknown keys"),
    (_bad({"S": {"stop": 0.5, "arcs": [["a", 0.5, "S"]]}}, start="Q"), "Q", "start state"),
    (_bad({"S": {"stop": float("nan"), "arcs": [["a", 0.5, "S"]]}}), "S", "not a probability"),
])
def test_bad_spec_raises_grammar_error_naming_the_state(spec, state, words):
    with pytest.raises(GrammarError) as info:
        ProbabilisticGrammar(spec)
    assert info.value.state == state
    assert words in str(info.value) and repr(state) in str(info.value)


@pytest.mark.parametrize("spec", [None, [], {"states": {}}, {"states": []}, {"states": {"S": 3}},
                                  {"states": {1: {"stop": 1.0}}}, {"start": ["S"], "states": {"S": {"stop": 1.0}}},
                                  {"states": {"S": {"stop": 0.5, "arcs": [["a", 0.5, ["S"]]]}}}])
def test_malformed_spec_shape(spec):
    with pytest.raises(GrammarError):
        ProbabilisticGrammar(spec)


def test_dead_end_cycle_is_found():
    spec = _bad({"S": {"stop": 0.2, "arcs": [["a", 0.4, "S"], ["b", 0.4, "A"]]},
                 "A": {"arcs": [["c", 1.0, "B"]]}, "B": {"arcs": [["d", 1.0, "A"]]}})
    with pytest.raises(GrammarError, match="cannot reach the end") as info:
        ProbabilisticGrammar(spec)
    assert info.value.state in ("A", "B")


def test_tolerance_is_1e_9():
    ok = _bad({"S": {"stop": 0.5 + 5e-10, "arcs": [["a", 0.5, "S"]]}})
    ProbabilisticGrammar(ok)
    with pytest.raises(GrammarError, match="tolerance"):
        ProbabilisticGrammar(_bad({"S": {"stop": 0.5 + 5e-9, "arcs": [["a", 0.5, "S"]]}}))


def test_json_and_toml_loading_round_trip(tmp_path):
    g = ProbabilisticGrammar(TINY)
    path = g.to_json(tmp_path / "tiny.json")
    assert ProbabilisticGrammar.from_json(path).to_dict() == g.to_dict()
    toml = tmp_path / "tiny.toml"
    toml.write_text('name = "tiny"\nstart = "S"\n'
                    '[states.S]\nstop = 0.3\narcs = [["a", 0.5, "S"], {word = "b", prob = 0.2, target = "T"}]\n'
                    '[states.T]\nstop = 0.25\n[[states.T.arcs]]\nword = "a"\nprob = 0.5\ntarget = "S"\n'
                    '[[states.T.arcs]]\nword = "a"\nprob = 0.25\ntarget = "T"\n')
    t = ProbabilisticGrammar.from_toml(toml)
    assert t.vocab == g.vocab and t.sentence_logprob("b a a") == g.sentence_logprob("b a a")


def test_file_errors(tmp_path, monkeypatch):
    with pytest.raises(SeqProbFileError, match="missing.json"):
        ProbabilisticGrammar.from_json(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(FileFormatError, match="bad.json"):
        ProbabilisticGrammar.from_json(bad)
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("states = [")
    with pytest.raises(FileFormatError, match="TOML"):
        ProbabilisticGrammar.from_toml(bad_toml)
    monkeypatch.setattr(_spec, "sys", types.SimpleNamespace(version_info=(3, 10, 0)))
    with pytest.raises(InputError, match="Python 3.11"):
        ProbabilisticGrammar.from_toml(bad_toml)


# ---------------------------------------------------------------- the model contract
def test_is_a_language_model_with_kenlm_vocab_order():
    g = ProbabilisticGrammar(TINY)
    assert isinstance(g, LanguageModel)
    assert (g.vocab.unk_id, g.vocab.bos_id, g.vocab.eos_id) == (0, 1, 2)
    assert g.vocab.tokens[3:] == ("a", "b") and not g.deterministic
    assert g.tokenizer.vocab is g.vocab


def test_logprobs_by_hand():
    g = ProbabilisticGrammar(TINY)
    rows = np.exp(g.logprobs(ids_of(g, ["b"])))  # (2, V)
    np.testing.assert_allclose(rows[0], [0, 0, 0.3, 0.5, 0.2], atol=1e-15)
    np.testing.assert_allclose(rows[1], [0, 0, 0.25, 0.75, 0.0], atol=1e-15)  # after b: surely in T
    # after "b a": P(S) = 0.5/0.75, P(T) = 0.25/0.75
    b = np.array([2 / 3, 1 / 3])
    expected = [0, 0, b @ [0.3, 0.25], b @ [0.5, 0.75], b @ [0.2, 0.0]]
    np.testing.assert_allclose(np.exp(g.logprobs(ids_of(g, ["b", "a"])))[2], expected, atol=1e-15)


@given(grammar_specs(), st.lists(st.sampled_from(["a", "b", "c"]), max_size=5))
def test_forward_algorithm_equals_sum_over_paths(spec, words):
    g = ProbabilisticGrammar(spec)
    words = [w for w in words if w in g.vocab]
    expected = brute_force_logprob(spec, words)
    got = g.sentence_logprob(" ".join(words))
    if expected == -math.inf:
        assert got == -math.inf
    else:
        assert got == pytest.approx(expected, rel=1e-10, abs=1e-10)


@given(grammar_specs(), st.lists(st.integers(0, 5), min_size=1, max_size=7))
def test_every_row_is_a_distribution(spec, raw):
    g = ProbabilisticGrammar(spec)
    ids = np.array([g.vocab.bos_id] + [r % len(g.vocab) for r in raw], dtype=np.int64)
    rows = g.logprobs(ids)  # (T, V)
    np.testing.assert_allclose(logsumexp(rows), 0.0, atol=1e-12)
    assert np.isneginf(rows[:, [g.vocab.unk_id, g.vocab.bos_id]]).all()


@given(grammar_specs(), st.lists(st.sampled_from(["a", "b", "c"]), max_size=6))
def test_chain_rule_batched_cached_and_causal(spec, words):
    g = ProbabilisticGrammar(spec)
    ids = ids_of(g, [w for w in words if w in g.vocab] + [])
    ids = np.append(ids, g.vocab.eos_id)
    rows = g.logprobs(ids[:-1])
    gathered = rows[np.arange(len(ids) - 1), ids[1:]]
    np.testing.assert_allclose(g.token_logprobs(ids), gathered, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(g.logprobs(np.stack([ids[:-1], ids[:-1]]))[1], rows, rtol=1e-13, atol=1e-13)
    state = g.start(ids[:1])
    for t in range(1, len(ids) - 1):
        np.testing.assert_allclose(state.logprobs, rows[t - 1], atol=1e-12)
        state = g.step(state, ids[t])
    np.testing.assert_allclose(state.logprobs, rows[-1], atol=1e-12)
    if len(ids) > 3:  # causality: changing a later token leaves earlier rows unchanged
        other = ids[:-1].copy()
        other[-1] = g.vocab.eos_id
        np.testing.assert_allclose(g.logprobs(other)[:-1], rows[:-1], rtol=1e-13, atol=1e-13)


@settings(max_examples=examples(25))
@given(grammar_specs(), st.integers(1, 4))
def test_total_probability_up_to_length_plus_unfinished_is_one(spec, max_len):
    g = ProbabilisticGrammar(spec)
    words = list(g.vocab.tokens[3:])
    bos, eos = g.vocab.bos_id, g.vocab.eos_id
    finished = 0.0
    for k in range(max_len):
        seqs = np.array([[bos, *map(g.vocab.id, s), eos] for s in itertools.product(words, repeat=k)])
        finished += np.exp(g.token_logprobs(seqs).sum(axis=1)).sum()
    prefixes = np.array([[bos, *map(g.vocab.id, s)] for s in itertools.product(words, repeat=max_len)])
    unfinished = np.exp(g.token_logprobs(prefixes).sum(axis=1)).sum()
    assert finished + unfinished == pytest.approx(1.0, abs=1e-12)


def test_impossible_prefixes_give_minus_inf_then_uniform_rows():
    g = ProbabilisticGrammar(TINY)
    assert g.sentence_logprob("b b") == -math.inf
    assert g.sentence_logprob("a zx") == -math.inf  # unknown word -> <unk> -> probability 0, no crash
    rows = g.logprobs(ids_of(g, ["b", "b"]))
    assert np.isneginf(rows[1, g.vocab.id("b")])
    uniform = np.array([-np.inf, -np.inf] + [-math.log(3)] * 3)
    np.testing.assert_array_equal(rows[2], uniform)
    after_end = g.logprobs(np.array([1, 3, 2, 3]))  # <s> a </s> a: nothing follows </s>
    np.testing.assert_array_equal(after_end[2:], [uniform, uniform])
    not_bos = g.logprobs(np.array([3, 3]))  # x_0 must be <s>
    np.testing.assert_array_equal(not_bos, [uniform, uniform])
    assert not g.start(np.array([1, 4, 4])).possible and g.start(np.array([1, 4])).possible


def test_bad_ids_raise():
    g = ProbabilisticGrammar(TINY)
    with pytest.raises(TokenIdError):
        g.logprobs([1, 99])
    with pytest.raises(TokenIdError):
        g.step(g.start([1]), 99)
    with pytest.raises(InputError):
        g.sample(0)
    with pytest.raises(GrammarError, match="deterministic"):
        g.entropy(method="exact")
    with pytest.raises(InputError):
        g.entropy(method="magic")


# ---------------------------------------------------------------- sampling matches P*
def _all_sentences_logprobs(g, max_len):
    """Every word sequence up to ``max_len`` words and log P*(sequence </s>), batched by length."""
    words, bos, eos = g.vocab.tokens[3:], g.vocab.bos_id, g.vocab.eos_id
    sents, logps = [], []
    for k in range(max_len + 1):
        seqs = list(itertools.product(words, repeat=k))
        batch = np.array([[bos, *map(g.vocab.id, s), eos] for s in seqs])
        sents += [" ".join(s) for s in seqs]
        logps.append(g.token_logprobs(batch).sum(axis=1))
    return sents, np.concatenate(logps)


def _chi_square(observed: dict, expected: dict, n: int):
    """Chi-square of counts against expectations; bins with expectation < 5 are pooled into the rest."""
    cats = [c for c, e in expected.items() if e >= 5]
    obs = np.array([observed.get(c, 0) for c in cats] + [0])
    exp = np.array([expected[c] for c in cats] + [0.0])
    obs[-1], exp[-1] = n - obs[:-1].sum(), n - exp[:-1].sum()
    if exp[-1] < 5:  # pool a tiny remainder into the last bin
        assert obs[-1] == 0 or exp[-1] > 1e-9, "samples outside the support of P*"
        obs, exp = np.append(obs[:-2], obs[-2:].sum()), np.append(exp[:-2], exp[-2:].sum())
    if len(obs) < 2:
        return types.SimpleNamespace(pvalue=1.0 if obs[0] == n else 0.0), 1
    return chisquare(obs, exp), len(obs)


def _sentence_chi_square(g, samples, max_len):
    counts = {}
    for s in samples:
        counts[s] = counts.get(s, 0) + 1
    sents, logps = _all_sentences_logprobs(g, max_len)
    return _chi_square(counts, dict(zip(sents, len(samples) * np.exp(logps))), len(samples))


def test_sampling_matches_p_star_chi_square():
    g = ProbabilisticGrammar(TINY)  # non-deterministic: the forward algorithm sums over paths
    samples = g.sample(20_000, seed=0)
    result, k = _sentence_chi_square(g, samples, max_len=6)
    assert k > 20 and result.pvalue > 1e-3, result


@settings(max_examples=examples(15))
@given(grammar_specs(max_words=2), st.integers(0, 10**6))
def test_sampling_matches_p_star_on_random_grammars(spec, seed):
    g = ProbabilisticGrammar(spec)
    result, _ = _sentence_chi_square(g, g.sample(5_000, seed=seed), max_len=5)
    assert result.pvalue > 1e-6, result  # many examples: a loose level keeps false alarms away


def test_sample_is_seeded_and_words_only():
    g = ProbabilisticGrammar(TINY)
    assert g.sample(50, seed=3) == g.sample(50, seed=3)
    assert g.sample(50, seed=3) != g.sample(50, seed=4)
    for ids in g.sample_ids(200, seed=0):
        assert ids.dtype == np.int64 and (ids >= 3).all()


# ---------------------------------------------------------------- entropy
@settings(max_examples=examples(20))
@given(grammar_specs(deterministic=True))
def test_exact_entropy_agrees_with_monte_carlo(spec):
    g = ProbabilisticGrammar(spec)
    assert g.deterministic
    exact = g.entropy()
    mc = g.entropy(method="monte_carlo", n=4000, seed=1)
    assert exact.exact and not mc.exact
    assert abs(exact.per_sentence - mc.per_sentence) <= 5 * mc.per_sentence_stderr + 1e-9
    assert abs(exact.per_token - mc.per_token) <= 5 * mc.per_token_stderr + 1e-9
    assert abs(exact.expected_tokens - mc.expected_tokens) <= 0.2 * exact.expected_tokens


def test_entropy_of_geometric_language():
    p = 0.25  # S -a-> S with 1 - p, stop p: length ~ geometric
    g = ProbabilisticGrammar({"states": {"S": {"stop": p, "arcs": [["a", 1 - p, "S"]]}}})
    h_step = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    e = g.entropy()
    assert e.expected_tokens == pytest.approx(1 / p)
    assert e.per_sentence == pytest.approx(h_step / p) and e.per_token == pytest.approx(h_step)
    assert e.ci_per_token == (e.per_token, e.per_token)


def test_non_deterministic_entropy_is_monte_carlo_with_ci():
    g = ProbabilisticGrammar(TINY)
    e = g.entropy(n=5000, seed=0)
    assert not e.exact and e.n_samples == 5000 and e.per_token_stderr > 0
    lo, hi = e.ci_per_token
    assert lo < e.per_token < hi


# ---------------------------------------------------------------- toy_english
def test_toy_english_is_written_as_promised(toy):
    assert toy.deterministic and 100 <= len(toy.vocab) - 3 <= 300 and len(toy.states) < 250
    lp = toy.sentence_logprob
    assert lp("the cat sat on the mat") > math.log(1e-4)
    assert lp("the cat sat zx oj squid") == -math.inf
    assert lp("paris is the capital of france") > math.log(1e-3)
    assert lp("the capital of france is paris") > -math.inf
    assert lp("paris is the capital of spain") == -math.inf
    assert lp("the cat that the dogs chase sleeps") > -math.inf
    assert lp("the cat that the dogs chase sleep") == -math.inf
    assert lp("the king said that he sleeps") > -math.inf and lp("the king said that she sleeps") == -math.inf
    assert lp("the queen said that she sleeps") > -math.inf and lp("the queen said that he sleeps") == -math.inf
    assert lp("the queen saw herself") > -math.inf and lp("the queen saw himself") == -math.inf
    assert lp("the cats sleep") > -math.inf and lp("the cats sleeps") == -math.inf
    assert lp("the king is a man") > -math.inf and lp("the queen is a man") == -math.inf


def test_toy_english_gender_pairs_are_symmetric(toy):
    """king/queen differ only by gender agreement: swapping them (and he/she) keeps P*."""
    pairs = [("the king said that he sleeps", "the queen said that she sleeps"),
             ("the men that the cat sees are happy", "the women that the cat sees are happy"),
             ("a boy saw himself on the mat", "a girl saw herself on the mat")]
    for m, f in pairs:
        assert toy.sentence_logprob(m) == pytest.approx(toy.sentence_logprob(f), abs=1e-12)


def test_shipped_json_equals_the_builder(toy):
    from importlib import resources
    text = (resources.files("seqprob") / "data" / "toy_english.json").read_text(encoding="utf-8")
    assert json.loads(text) == toy_english_spec()
    assert toy.to_dict()["states"].keys() == toy_english_spec()["states"].keys()


def test_toy_english_sentence_lengths(toy):
    lengths = np.array([len(s.split()) for s in toy.sample(5000, seed=0)])
    assert 5 <= lengths.mean() <= 9 and np.median(lengths) >= 5 and lengths.min() >= 2


@given(st.integers(0, 10**6), st.integers(0, 30))
def test_toy_english_rows_sum_to_one_on_possible_prefixes(seed, cut):
    g = toy_english()
    words = g.sample(1, seed=seed)[0].split()
    ids = ids_of(g, words[:cut])
    rows = g.logprobs(ids)  # (T, V)
    np.testing.assert_allclose(logsumexp(rows), 0.0, atol=1e-12)
    assert np.isfinite(g.token_logprobs(np.append(ids_of(g, words), g.vocab.eos_id))).all()


def test_toy_english_total_probability_by_belief_recursion(toy):
    """sum_k P(length = k) for k < L plus the mass still unfinished after L words is 1."""
    S, V = len(toy.states), len(toy.vocab)
    alpha = np.zeros((1, S))
    alpha[0, toy.states.index(toy.start_state)] = 1.0
    finished, lengths = 0.0, []
    for _ in range(12):
        lengths.append(float(alpha[0] @ toy._stop))
        finished += lengths[-1]
        alpha = toy._advance(np.repeat(alpha, V, axis=0), np.arange(V)).sum(axis=0, keepdims=True)
    assert finished + alpha.sum() == pytest.approx(1.0, abs=1e-12)
    assert alpha.sum() < 0.06  # most mass has ended by 12 words
    # the sampled length distribution matches P(length = k)
    sampled = np.bincount([len(s) for s in toy.sample_ids(20_000, seed=2)], minlength=60)
    expected = 20_000 * np.array(lengths)
    keep = expected >= 5
    obs = np.append(sampled[:12][keep], 20_000 - sampled[:12][keep].sum())
    exp = np.append(expected[keep], 20_000 - expected[keep].sum())
    assert chisquare(obs, exp).pvalue > 1e-3


def test_toy_english_first_word_frequencies_match_p_star(toy):
    n = 20_000
    first = np.bincount([s[0] for s in toy.sample_ids(n, seed=5)], minlength=len(toy.vocab))
    expected = n * np.exp(toy.logprobs(np.array([toy.vocab.bos_id]))[0])
    keep = expected >= 5
    obs = np.append(first[keep], n - first[keep].sum())
    exp = np.append(expected[keep], n - expected[keep].sum())
    assert chisquare(obs, exp).pvalue > 1e-3


def test_toy_english_sentence_frequencies_match_p_star(toy):
    """Chi-square of whole sampled sentences against n * exp(log P*(sentence </s>))."""
    from collections import Counter

    from seqprob.analysis.truth import sentence_logprobs

    n = 20_000
    counts = Counter(toy.sample(n, seed=11))
    distinct = list(counts)
    logp, _ = sentence_logprobs(toy, distinct)
    assert np.isfinite(logp).all()  # every sample is in the language
    result, k = _chi_square(counts, dict(zip(distinct, n * np.exp(logp))), n)
    assert k > 20 and result.pvalue > 1e-3, (k, result)


def test_toy_english_exact_entropy_agrees_with_monte_carlo(toy):
    exact, mc = toy.entropy(), toy.entropy(method="monte_carlo", n=20_000, seed=0)
    assert exact.exact
    assert abs(exact.per_token - mc.per_token) < 4 * mc.per_token_stderr
    assert abs(exact.per_sentence - mc.per_sentence) < 4 * mc.per_sentence_stderr


def test_agreement_pairs_are_minimal_pairs_of_the_grammar(toy):
    pairs = agreement_pairs(300, seed=0)
    assert {p.kind for p in pairs} == {"object_relative", "subject_relative", "pp"}
    assert sum(p.attractor == "mismatch" for p in pairs) > 100
    for p in pairs:
        row = toy.start(toy.encode(p.prefix)).logprobs
        assert np.isfinite(row[toy.vocab.id(p.correct)]) and np.isneginf(row[toy.vocab.id(p.wrong)]), p
    mism = agreement_pairs(50, seed=1, attractor="mismatch")
    assert all(p.attractor == "mismatch" for p in mism)
    with pytest.raises(InputError):
        agreement_pairs(5, attractor="sometimes")
    with pytest.raises(InputError):
        agreement_pairs(0)
