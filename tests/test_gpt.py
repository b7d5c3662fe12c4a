"""The numpy GPT: contract properties, hand-written gradients, KV cache, sliding window, errors."""
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from test_gpt_arch import arch_model, archs
import seqprob as sp
from seqprob.errors import ContextLengthError, InputError, SeqProbError, TokenIdError
from seqprob.gpt import GPT, GPTConfig
from seqprob.vocab import Vocab

FIXTURES = Path(__file__).parent / "fixtures"


def make(V=13, block=8, L=2, H=2, C=8, seed=0, dtype="float64", perturb=0.0, **kw):
    model = GPT(GPTConfig(vocab_size=V, block_size=block, n_layer=L, n_head=H, n_embd=C,
                          dtype=dtype, **kw), seed=seed)
    if perturb:  # larger weights than the 0.02 init so every path matters numerically
        rng = np.random.default_rng(seed + 1)
        for arr in model.params.values():
            arr += perturb * rng.standard_normal(arr.shape)
    return model


configs = st.fixed_dictionaries({
    "V": st.integers(2, 9), "block": st.integers(2, 7), "L": st.integers(1, 2), "H": st.integers(1, 2),
    "hd": st.integers(1, 3), "seed": st.integers(0, 1000), "bias": st.booleans(), "tie": st.booleans()})


def from_spec(s, **kw):
    return make(V=s["V"], block=s["block"], L=s["L"], H=s["H"], C=s["H"] * s["hd"], seed=s["seed"],
                bias=s["bias"], tie_weights=s["tie"], perturb=0.3, **kw)


# ----------------------------------------------------------------------------- config
def test_config_validation_names_the_value():
    with pytest.raises(InputError, match="n_embd=10 is not divisible by n_head=3"):
        GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=3, n_embd=10)
    with pytest.raises(InputError, match="float16"):
        GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4, dtype="float16")
    with pytest.raises(InputError, match="block_size must be >= 1, got 0"):
        GPTConfig(vocab_size=5, block_size=0, n_layer=1, n_head=1, n_embd=4)
    with pytest.raises(InputError, match="dropout"):
        GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4, dropout=1.0)
    with pytest.raises(InputError, match="integer"):
        GPTConfig(vocab_size=5.5, block_size=4, n_layer=1, n_head=1, n_embd=4)
    with pytest.raises(InputError, match="unknown preset"):
        GPTConfig.preset("gpt5")


def test_config_round_trip_and_frozen():
    cfg = GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=2, n_embd=4, dtype="float64", bias=False)
    assert GPTConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(AttributeError):
        cfg.n_layer = 3
    with pytest.raises(InputError, match="unknown GPTConfig field"):
        GPTConfig.from_dict({**cfg.to_dict(), "n_ctx": 3})


def test_param_counts_gpt3_reproduces_published_figures():
    df = GPTConfig.preset("gpt3").param_counts().set_index("category")
    assert df.loc["embedding W_E", "params"] == 50257 * 12288 == 617_558_016
    assert df.loc["query W_Q", "params"] == 96 * (12288 ** 2 + 12288)
    total = df.loc["total", "params"]
    assert 174e9 < total < 176e9  # "175B"
    assert df.loc["unembedding W_U", "params"] == 0  # tied


def test_param_counts_gpt2_small_is_124m():
    assert GPTConfig.preset("gpt2-small").n_params() == 124_439_808


@settings(max_examples=examples(20))
@given(spec=configs)
def test_param_counts_match_allocated_model(spec):
    model = from_spec(spec)
    df = model.config.param_counts()
    assert df["params"].iloc[-1] == model.n_params() == model.config.n_params()


# ----------------------------------------------------------------------------- parameters
def test_params_and_grads_are_views_into_one_flat_buffer():
    model = make(dtype="float32")
    for name, arr in model.params.items():
        assert np.shares_memory(arr, model.flat_params_), name
        assert arr.ctypes.data % 64 == 0, name
    _, grads = model.loss_and_grads(np.zeros((1, 4), dtype=int))
    assert list(grads) == list(model.params)
    for name, g in grads.items():
        assert np.shares_memory(g, model.flat_grads_) and g.shape == model.params[name].shape
    model.flat_params_[:] = 0.0
    assert all((a == 0).all() for a in model.params.values())


@pytest.mark.parametrize("tie", [True, False])
def test_unembedding_is_column_major_and_grads_share_the_layout(tie):
    """W_U (``wte`` when tied, else ``lm_head.w``) is stored column-major, for the decoding
    GEMV; its gradient is laid out the same way; an untied ``wte`` (gathered rows) is not.
    Values do not depend on the layout: the seeded weights are those of a row-major draw."""
    model = make(tie_weights=tie)
    name = "wte" if tie else "lm_head.w"
    w_u = model.params[name]
    assert w_u.T.flags.c_contiguous and not w_u.flags.c_contiguous
    if not tie:
        assert model.params["wte"].flags.c_contiguous
    _, grads = model.loss_and_grads(np.arange(5)[None] % 11)
    assert grads[name].T.flags.c_contiguous and np.shares_memory(grads[name], model.flat_grads_)
    rng = np.random.default_rng(model.seed)  # init_params draws in parameter order
    draws = {n: rng.standard_normal(a.shape) for n, a in model.params.items()
             if not n.endswith((".g", ".b"))}
    np.testing.assert_allclose(model.params["wte"], draws["wte"] * 0.02, rtol=1e-6)


def test_down_projections_are_column_major_and_grads_share_the_layout():
    """Every block's MLP down projection (F, C) is stored column-major (its decoding GEMV
    threads better), its gradient likewise; the other block matrices stay row-major."""
    model = make(L=3, perturb=0.3)
    _, grads = model.loss_and_grads(np.arange(6)[None] % 13)
    for layer in range(3):
        w = model.params[f"h.{layer}.mlp.c_proj.w"]
        assert w.T.flags.c_contiguous and not w.flags.c_contiguous
        assert grads[f"h.{layer}.mlp.c_proj.w"].T.flags.c_contiguous
        assert model.params[f"h.{layer}.attn.c_attn.w"].flags.c_contiguous
        assert model.params[f"h.{layer}.mlp.c_fc.w"].flags.c_contiguous


def test_initialization_gpt2_style_and_seeded():
    model = make(V=500, block=64, L=4, H=4, C=64, dtype="float64")
    p = model.params
    assert abs(p["wte"].std() - 0.02) < 0.002
    assert abs(p["h.0.mlp.c_proj.w"].std() - 0.02 / np.sqrt(8)) < 0.001
    assert (p["h.1.ln_1.g"] == 1).all() and (p["h.1.attn.c_attn.b"] == 0).all()
    same = make(V=500, block=64, L=4, H=4, C=64, dtype="float32")
    np.testing.assert_allclose(same.flat_params_, model.flat_params_, atol=1e-8)
    other = make(V=500, block=64, L=4, H=4, C=64, seed=1)
    assert not np.allclose(other.params["wte"], p["wte"])
    assert "lm_head.w" in make(tie_weights=False).params
    assert not any(n.endswith(".b") for n in make(bias=False).params)


# ----------------------------------------------------------------------------- contract
@settings(max_examples=examples(20))
@given(spec=configs, data=st.data())
def test_rows_are_distributions_and_batched_equals_unbatched(spec, data):
    model = from_spec(spec)
    T = data.draw(st.integers(1, spec["block"]))
    ids = np.random.default_rng(spec["seed"]).integers(0, spec["V"], (3, T))
    batched = model.logprobs(ids)
    assert batched.shape == (3, T, spec["V"])
    np.testing.assert_allclose(np.exp(batched).sum(-1), 1.0, atol=1e-12)
    for b in range(3):
        np.testing.assert_allclose(model.logprobs(ids[b]), batched[b], atol=1e-12)
    tok = model.token_logprobs(np.concatenate([ids, ids[:, :1]], axis=1))
    full = model.logprobs(np.concatenate([ids, ids[:, :1]], axis=1)[:, :-1])
    picked = np.take_along_axis(full, np.concatenate([ids[:, 1:], ids[:, :1]], axis=1)[..., None], -1)[..., 0]
    np.testing.assert_allclose(tok, picked, atol=1e-12)


@settings(max_examples=examples(20), deadline=None)
@given(spec=configs, block=st.integers(1, 40), budget=st.integers(1, 3000), data=st.data())
def test_streamed_vocabulary_gives_the_rows_numbers(spec, block, budget, data):
    """token_logprobs and token_stats stream the vocabulary in slices of any size (``budget``
    bytes) folded in row blocks of any size (LSM_BLOCK): the numbers of one whole-array
    log-softmax; the (T, V) path's blocks give that array's very bits."""
    from unittest import mock

    from seqprob import nn
    from seqprob.functional import target_stats
    from seqprob.gpt import model as gpt_model

    model = from_spec(spec)
    T = data.draw(st.integers(2, spec["block"]))
    ids = np.random.default_rng(spec["seed"]).integers(0, spec["V"], (2, T))
    targets = ids[:, 1:].reshape(-1)
    h2 = model._hidden(ids[:, :-1]).reshape(-1, model.config.n_embd).copy()
    whole = nn.log_softmax_inplace(h2 @ model._w_u.T)
    with mock.patch.object(gpt_model, "LSM_BLOCK", block):
        got = np.empty(len(h2), model.dtype)
        model._pick_logprobs(h2, targets, got, budget_bytes=budget)
        stats = np.empty((len(h2), 3))
        model._stream_stats(h2, targets, stats, budget)
        rows = model._unembed_logprobs(h2, np.empty_like(whole))
    want = target_stats(whole, targets)
    np.testing.assert_allclose(got, want.logprob, rtol=0, atol=1e-12)
    np.testing.assert_allclose(stats[:, 0], want.logprob, rtol=0, atol=1e-12)
    np.testing.assert_allclose(stats[:, 1], want.entropy, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(stats[:, 2], want.rank)
    np.testing.assert_array_equal(rows, whole)


@settings(max_examples=examples(20))
@given(spec=configs, data=st.data())
def test_causality(spec, data):
    model = from_spec(spec)
    T = spec["block"]
    t = data.draw(st.integers(0, T - 1))
    rng = np.random.default_rng(spec["seed"])
    ids = rng.integers(0, spec["V"], T)
    changed = ids.copy()
    changed[t:] = rng.integers(0, spec["V"], T - t)
    np.testing.assert_allclose(model.logprobs(ids)[:t], model.logprobs(changed)[:t], atol=1e-13)


@settings(max_examples=examples(15))
@given(spec=configs, data=st.data())
def test_right_padded_ragged_batch_equals_unpadded(spec, data):
    model = from_spec(spec)
    T = spec["block"]
    rng = np.random.default_rng(spec["seed"])
    lengths = data.draw(st.lists(st.integers(1, T), min_size=1, max_size=3))
    seqs = [rng.integers(0, spec["V"], n) for n in lengths]
    padded = np.zeros((len(seqs), max(lengths)), dtype=np.int64)
    for i, s in enumerate(seqs):
        padded[i, :len(s)] = s
    out = model.logprobs(padded)
    for i, s in enumerate(seqs):
        np.testing.assert_allclose(out[i, :len(s)], model.logprobs(s), atol=1e-12)


@settings(max_examples=examples(15))
@given(spec=configs, data=st.data())
def test_cached_equals_uncached_including_past_block_size(spec, data):
    model = from_spec(spec)
    block = spec["block"]
    n = data.draw(st.integers(1, 2 * block + 2))
    split = data.draw(st.integers(1, n))
    ids = np.random.default_rng(spec["seed"]).integers(0, spec["V"], n)
    full = model.logprobs(ids, stride=1)  # every row with as much context as fits
    state = model.start(ids[:split])
    np.testing.assert_allclose(state.logprobs, full[split - 1], atol=1e-12)
    for t in range(split, n):
        state = model.step(state, int(ids[t]))
        np.testing.assert_allclose(state.logprobs, full[t], atol=1e-12)
    assert state.n_seen == n and len(state.ids) == min(n, block)


def test_states_are_values():
    model = make(perturb=0.3)
    s0 = model.start([1, 2, 3])
    before = s0.logprobs.copy()
    a = model.step(s0, 4)
    b = model.step(s0, 5)  # the slot after s0 is taken by a: b must not disturb a
    a2 = model.step(a, 6)
    np.testing.assert_array_equal(s0.logprobs, before)
    np.testing.assert_allclose(a.logprobs, model.logprobs([1, 2, 3, 4])[-1], atol=1e-12)
    np.testing.assert_allclose(b.logprobs, model.logprobs([1, 2, 3, 5])[-1], atol=1e-12)
    np.testing.assert_allclose(a2.logprobs, model.logprobs([1, 2, 3, 4, 6])[-1], atol=1e-12)
    assert a.ids == (1, 2, 3, 4) and b.ids == (1, 2, 3, 5)
    with pytest.raises(ValueError):
        s0.logprobs[0] = 0.0


# ----------------------------------------------------------------------------- sliding window
@settings(max_examples=examples(15))
@given(spec=configs, data=st.data())
def test_sliding_window_scores_every_token_once(spec, data):
    model = from_spec(spec)
    block = spec["block"]
    n = data.draw(st.integers(block + 1, 3 * block + 1))
    stride = data.draw(st.integers(1, block))
    ids = np.random.default_rng(spec["seed"]).integers(0, spec["V"], n)
    got = model.logprobs(ids, stride=stride)
    expected, done = [model.logprobs(ids[:block])], block  # reference: windows spelled out
    while done < n:  # a window ends `stride` rows later (the last at row n) and holds `block` ids
        end = min(done + stride, n)
        start = end - block
        assert done - start + 1 >= block - stride + 1  # context of every new row
        expected.append(model.logprobs(ids[start:end])[done - start:])
        done = end
    np.testing.assert_allclose(got, np.concatenate(expected), atol=1e-12)
    tok = model.token_logprobs(ids, stride=stride)
    assert tok.shape == (n - 1,)
    rows = model.logprobs(ids[:-1], stride=stride)  # token_logprobs slides over the n-1 inputs
    np.testing.assert_allclose(tok, rows[np.arange(n - 1), ids[1:]], atol=1e-12)


@settings(max_examples=examples(15))
@given(spec=configs, data=st.data())
def test_one_meaning_of_stride_in_every_entry_point(spec, data):
    """model.logprobs / token_logprobs, windows.window_logprobs and sp.score (with and without
    the distribution columns) give the same log-probs for one stride."""
    from seqprob.scoring.windows import window_logprobs, window_token_logprobs

    model = from_spec(spec)
    block = spec["block"]
    n = data.draw(st.integers(2, 3 * block + 2))
    stride = data.draw(st.integers(1, block))
    ids = np.random.default_rng(spec["seed"] + 1).integers(0, spec["V"], n)
    rows = model.logprobs(ids[:-1], stride=stride)  # (n-1, V)
    np.testing.assert_allclose(window_logprobs(model, ids[:-1], stride=stride), rows, atol=1e-12)
    expected = rows[np.arange(n - 1), ids[1:]]
    np.testing.assert_allclose(model.token_logprobs(ids, stride=stride), expected, atol=1e-12)
    np.testing.assert_allclose(window_token_logprobs(model, ids, stride=stride), expected, atol=1e-12)
    for distribution in (True, False):
        df = sp.score(model, [ids], bos=False, eos=False, stride=stride, distribution=distribution)
        np.testing.assert_allclose(df["logprob"], expected, atol=1e-12)


@settings(max_examples=examples(10))
@given(spec=configs, data=st.data())
def test_sliding_window_batch_equals_each_sequence(spec, data):
    model = from_spec(spec)
    block = spec["block"]
    n = data.draw(st.integers(block + 1, 3 * block + 2))
    stride = data.draw(st.integers(1, block))
    batch = np.random.default_rng(spec["seed"]).integers(0, spec["V"], (3, n))
    out = model.logprobs(batch, stride=stride)
    tok = model.token_logprobs(batch, stride=stride)
    for i, s in enumerate(batch):
        np.testing.assert_allclose(out[i], model.logprobs(s, stride=stride), atol=1e-12)
        np.testing.assert_allclose(tok[i], model.token_logprobs(s, stride=stride), atol=1e-12)


@settings(max_examples=examples(10))
@given(spec=configs, data=st.data())
def test_scoring_ragged_long_texts_equals_each_alone(spec, data):
    """sp.score pads sequences into batches; one longer than the context is scored alone, so
    padding never moves the model's last window (the default stride included)."""
    model = from_spec(spec)
    block = spec["block"]
    lengths = data.draw(st.lists(st.integers(1, 3 * block + 2), min_size=2, max_size=3))
    stride = data.draw(st.sampled_from([None, 1, block]))
    rng = np.random.default_rng(spec["seed"])
    seqs = [rng.integers(0, spec["V"], n + 1) for n in lengths]
    together = sp.score(model, seqs, bos=False, eos=False, stride=stride)
    for i, s in enumerate(seqs):
        alone = sp.score(model, [s], bos=False, eos=False, stride=stride)
        np.testing.assert_allclose(together.loc[together["seq"] == i, "logprob"], alone["logprob"],
                                   atol=1e-12)
        np.testing.assert_allclose(alone["logprob"], model.token_logprobs(s, stride=stride), atol=1e-12)


def test_logits_refuse_too_long_and_bad_stride():
    model = make()
    with pytest.raises(ContextLengthError, match="9 positions exceed block_size=8"):
        model.logits(np.zeros(9, dtype=int))
    with pytest.raises(ContextLengthError):
        model.run_with_cache(np.zeros(9, dtype=int))
    with pytest.raises(ContextLengthError):
        model.loss_and_grads(np.zeros((1, 10), dtype=int))
    with pytest.raises(InputError, match="stride"):
        model.logprobs(np.zeros(20, dtype=int), stride=0)
    with pytest.raises(InputError, match="stride"):
        model.logprobs(np.zeros(20, dtype=int), stride=9)
    with pytest.raises(InputError, match=r"stride must be an integer in \[1, 8\] \(the model's context 8\), got 2.5"):
        model.token_logprobs(np.zeros(3, dtype=int), stride=2.5)  # checked for short input too


# ----------------------------------------------------------------------------- gradients
def _check_model_grads(model, batch, mask=None, rng_seed=None, per_param=4, tol=1e-6):
    rngf = (lambda: np.random.default_rng(rng_seed)) if rng_seed is not None else (lambda: None)
    loss, grads = model.loss_and_grads(batch, mask=mask, rng=rngf())
    grads = {k: v.copy() for k, v in grads.items()}
    pick = np.random.default_rng(0)
    for name, arr in model.params.items():
        # index by position, not through reshape(-1): W_U is column-major, its reshape a copy
        for i in pick.choice(arr.size, size=min(per_param, arr.size), replace=False):
            at = np.unravel_index(i, arr.shape)
            old = arr[at]
            arr[at] = old + 1e-6
            hi = model.loss_and_grads(batch, mask=mask, rng=rngf())[0]
            arr[at] = old - 1e-6
            lo = model.loss_and_grads(batch, mask=mask, rng=rngf())[0]
            arr[at] = old
            fd = (hi - lo) / 2e-6
            assert abs(fd - grads[name][at]) < tol * max(1.0, abs(fd)), (name, i)
    return loss


@settings(max_examples=examples(12))
@given(spec=configs, B=st.integers(1, 2), data=st.data())
def test_loss_and_grads_match_finite_differences(spec, B, data):
    model = from_spec(spec)
    T = data.draw(st.integers(1, spec["block"]))
    rng = np.random.default_rng(spec["seed"])
    batch = rng.integers(0, spec["V"], (B, T + 1))
    mask = rng.random((B, T)) > 0.3 if data.draw(st.booleans()) else None
    loss = _check_model_grads(model, batch, mask)
    nll = -model.token_logprobs(batch)
    w = np.ones_like(nll) if mask is None else mask.astype(float)
    assert loss == pytest.approx((nll * w).sum() / max(w.sum(), 1), abs=1e-12)


def test_loss_and_grads_with_dropout_match_finite_differences():
    model = make(perturb=0.3, dropout=0.2)
    batch = np.random.default_rng(3).integers(0, 13, (2, 7))
    with_drop = _check_model_grads(model, batch, rng_seed=7)
    assert with_drop != pytest.approx(model.loss_and_grads(batch)[0])  # rng=None: no dropout


def test_gradients_match_pytorch_autograd_fixture():
    z = np.load(FIXTURES / "torch_grads.npz")
    model = GPT(GPTConfig.from_dict(json.loads(str(z["config"]))))
    model.load_params({k[len("param/"):]: z[k] for k in z.files if k.startswith("param/")})
    loss, grads = model.loss_and_grads(z["batch"], mask=z["mask"])
    assert loss == pytest.approx(float(z["loss"]), abs=1e-12)
    names = [k[len("grad/"):] for k in z.files if k.startswith("grad/")]
    assert sorted(names) == sorted(model.params)
    for name in names:
        np.testing.assert_allclose(grads[name], z[f"grad/{name}"], atol=1e-12, err_msg=name)


def test_float32_loss_close_to_float64():
    batch = np.random.default_rng(0).integers(0, 13, (2, 9))
    l64, g64 = make(perturb=0.0).loss_and_grads(batch)
    l32, g32 = make(perturb=0.0, dtype="float32").loss_and_grads(batch)
    assert l32 == pytest.approx(l64, rel=1e-5)
    np.testing.assert_allclose(g32["wte"], g64["wte"], atol=1e-5)


# ----------------------------------------------------------------------------- analysis
def test_run_with_cache_shapes_and_logit_lens():
    model = make(perturb=0.3)
    ids = np.array([1, 4, 2, 7, 3])
    out = model.run_with_cache(ids)
    assert out.attn.shape == (2, 2, 5, 5) and out.resid.shape == (3, 5, 8)
    np.testing.assert_allclose(out.attn.sum(-1), 1.0, atol=1e-12)
    assert np.allclose(np.triu(out.attn, k=1), 0.0)
    np.testing.assert_allclose(out.logits, model.logits(ids), atol=1e-12)
    np.testing.assert_allclose(model.unembed(out.resid[-1]), out.logits, atol=1e-12)
    batched = model.run_with_cache(np.stack([ids, ids]))
    assert batched.attn.shape == (2, 2, 2, 5, 5)
    np.testing.assert_allclose(batched.resid[1], out.resid, atol=1e-12)


# ----------------------------------------------------------------------------- vocab, bad input
def test_vocab_defaults_and_tokenizer():
    model = make(V=5)
    assert len(model.vocab) == 5 and model.vocab.bos_id is None and model.tokenizer is None
    g = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4), bos_id=4, eos_id=4)
    assert g.vocab.bos_id == g.vocab.eos_id == 4
    from seqprob.tokenizers import CharTokenizer
    tok = CharTokenizer.fit(["abc"])
    g2 = GPT(GPTConfig(vocab_size=len(tok.vocab), block_size=4, n_layer=1, n_head=1, n_embd=4))
    g2.tokenizer = tok
    assert g2.vocab is tok.vocab
    with pytest.raises(InputError, match="vocabulary has"):
        make(V=5).tokenizer = tok
    with pytest.raises(InputError, match="vocabulary has"):
        GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4), vocab=Vocab.build(["a"]))


@pytest.mark.parametrize("bad, error, text", [
    ([1, 13], TokenIdError, "token id 13 out of range"),
    ([-1, 2], TokenIdError, "token id -1"),
    ([], InputError, "empty"),
    ([1.5, 2.0], InputError, "integers"),
])
def test_bad_ids_raise_clear_errors(bad, error, text):
    model = make()
    for call in (model.logprobs, model.logits, model.start):
        with pytest.raises(error, match=text):
            call(np.asarray(bad))
    with pytest.raises(SeqProbError):
        model.loss_and_grads(np.asarray([bad, bad]))
    state = model.start([1])
    with pytest.raises(TokenIdError):
        model.step(state, 13)


def test_nan_weights_are_named():
    model = make()
    model.params["h.1.mlp.c_fc.w"][2, 3] = np.nan
    with pytest.raises(InputError, match=r"'h.1.mlp.c_fc.w'.*index \(2, 3\)"):
        model.logprobs([1, 2])
    with pytest.raises(InputError, match="h.1.mlp.c_fc.w"):
        model.start([1, 2])
    loss, _ = model.loss_and_grads([[1, 2, 3]])
    assert np.isnan(loss)  # returned as is: the training loop names the step


def test_inf_weights_and_bad_inputs_of_analysis_calls():
    model = make()
    model.params["wte"][5, 0] = np.inf  # id 5 is not read: only the unembedding sees it
    for call in (model.logits, model.run_with_cache, model.logprobs):
        with pytest.raises(InputError, match=r"'wte' holds a non-finite value inf at index \(5, 0\)"):
            call([1, 2])
    good = make()
    with pytest.raises(InputError, match="NaN or inf"):
        good.unembed(np.full(8, np.nan))
    with pytest.raises(InputError, match="n_embd=8"):
        good.unembed(np.zeros(7))


@pytest.mark.parametrize("seed", [-1, 1.5, "0", None, True])
def test_bad_seed_is_named(seed):
    with pytest.raises(InputError, match=f"seed must be an integer >= 0, got {seed!r}"):
        GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4), seed=seed)


def test_bad_mask_and_state():
    model = make()
    with pytest.raises(InputError, match="mask"):
        model.loss_and_grads(np.zeros((2, 5), dtype=int), mask=np.ones((2, 5), bool))
    with pytest.raises(InputError, match="state"):
        model.step(object(), 1)


def test_allocations_the_machine_cannot_make_are_named_errors(monkeypatch):
    """numpy's bare MemoryError becomes a MemoryBudgetError naming what was asked for and its
    size: the parameters of a model, a layer's KV cache of start() (sized for block_size)."""
    import math

    from seqprob.errors import MemoryBudgetError
    real = np.zeros

    def zeros(shape, dtype=float, **kw):  # a machine with 1 GiB for one array
        if math.prod(np.atleast_1d(shape).tolist()) * np.dtype(dtype).itemsize > 2 ** 30:
            raise MemoryError
        return real(shape, dtype=dtype, **kw)

    def anonymous_map(size):  # the parameters' own allocation (normal pages): ENOMEM
        if size > 2 ** 30:
            raise OSError(12, "Cannot allocate memory")
        return real_map(size)

    from seqprob.gpt import params
    real_map = params._anonymous_map
    monkeypatch.setattr(np, "zeros", zeros)
    monkeypatch.setattr(params, "_anonymous_map", anonymous_map)
    with pytest.raises(MemoryBudgetError, match=r"the model's parameters need 2\.0 GiB"):
        GPT(GPTConfig(vocab_size=2 ** 20, block_size=8, n_layer=1, n_head=1, n_embd=2 ** 9))
    long = GPT(GPTConfig(vocab_size=16, block_size=2 ** 16, n_layer=2, n_head=1, n_embd=64, head_size=2 ** 13,
                         mlp_hidden=64))  # each layer's cache: 2 GiB
    assert np.isfinite(long.logprobs([1, 2])).all()  # the forward needs no cache
    with pytest.raises(MemoryBudgetError, match=r"the key cache .* need 2\.0 GiB"):
        long.start([1])


def test_large_parameters_live_in_private_normal_pages(monkeypatch):
    """The parameter buffer of a large model is an anonymous map (no huge-page advice: see
    params.allocate), zeroed, writable, and private: a forked child's writes stay in the
    child, as with any numpy array."""
    import mmap
    import os

    from seqprob.gpt import params
    arr = params.allocate((17, 2 ** 20), np.float32, "test", small_pages=True)  # 68 MiB
    assert isinstance(owner(arr), mmap.mmap)
    assert arr.shape == (17, 2 ** 20) and arr.dtype == np.float32 and arr.flags.writeable
    assert not arr.any()
    small = params.allocate((4, 4), np.float32, "test", small_pages=True)
    assert isinstance(owner(small), np.ndarray)  # small ones stay plain numpy arrays
    assert isinstance(owner(model_flat := GPT(GPTConfig.preset("tiny"))._flat.flat), np.ndarray)
    assert model_flat.nbytes < params.SMALL_PAGES_MIN
    monkeypatch.setattr(params, "SMALL_PAGES_MIN", 1 << 20)  # a 5 MB model in normal pages
    model = GPT(GPTConfig(vocab_size=4096, block_size=16, n_layer=1, n_head=2, n_embd=256), seed=0)
    assert isinstance(owner(model._flat.flat), mmap.mmap)
    before = model.params["wte"].copy()
    if not hasattr(os, "fork"):
        return
    pid = os.fork()
    if pid == 0:  # the child: overwrite the weights, then leave at once
        model.params["wte"][...] = 7.0
        os._exit(0)
    os.waitpid(pid, 0)
    np.testing.assert_array_equal(model.params["wte"], before)


def test_large_outputs_live_in_normal_pages_and_are_named_when_too_large(monkeypatch):
    """logprobs / logits of 64 MiB or more come in normal pages (params.allocate), with the
    same values as numpy's memory gives; an output the machine cannot hold is a
    MemoryBudgetError naming it."""
    import mmap

    from seqprob.errors import MemoryBudgetError
    from seqprob.gpt import params
    model = GPT(GPTConfig(vocab_size=2 ** 16, block_size=256, n_layer=1, n_head=1, n_embd=8), seed=0)
    ids = np.random.default_rng(0).integers(0, 2 ** 16, (1, 256))
    lp = model.logprobs(ids)  # (256, 65536) float32: 64 MiB
    assert isinstance(owner(lp), mmap.mmap)
    np.testing.assert_allclose(np.exp(lp.astype(np.float64)).sum(-1), 1.0, atol=1e-5)
    monkeypatch.setattr(params, "SMALL_PAGES_MIN", float("inf"))  # numpy's own memory
    np.testing.assert_array_equal(model.logprobs(ids), lp)
    assert isinstance(owner(model.logits(ids)), np.ndarray)

    def refuse(size):
        raise OSError(12, "Cannot allocate memory")
    monkeypatch.setattr(params, "SMALL_PAGES_MIN", 1 << 26)
    monkeypatch.setattr(params, "_anonymous_map", refuse)
    for call, what in ((model.logprobs, "log-probabilities"), (model.logits, "logits")):
        with pytest.raises(MemoryBudgetError, match=f"{what} need"):
            call(ids)


def owner(arr):
    """The object that owns ``arr``'s memory (following views)."""
    while isinstance(arr, np.ndarray) and arr.base is not None:
        arr = arr.base
    return arr.obj if isinstance(arr, memoryview) else arr


def test_a_state_steps_only_with_the_model_that_started_it():
    """A state's cache holds its model's weights and keys: stepping it with another model
    (same config, other weights; or another shape) is refused, not answered with the first
    model's numbers or an IndexError."""
    cfg = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8)
    a, b = GPT(cfg, seed=0), GPT(cfg, seed=1)
    state = a.start([1, 2])
    with pytest.raises(InputError, match="another GPT"):
        b.step(state, 3)
    bigger = GPT(cfg.replace(vocab_size=20, block_size=16), seed=0)
    with pytest.raises(InputError, match="another GPT"):
        bigger.step(state, 15)
    np.testing.assert_allclose(a.step(state, 3).logprobs, a.logprobs([1, 2, 3])[-1], atol=1e-6)


def test_logprobs_into_out_fills_and_returns_it():
    """logprobs(..., out=a) writes the same values into a and returns a itself, for one
    window, a batch and a sliding window; a wrong out is an InputError naming what it needs."""
    model = GPT(GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=8), seed=0)
    rng = np.random.default_rng(0)
    for ids in (rng.integers(0, 13, 6), rng.integers(0, 13, (3, 8)), rng.integers(0, 13, (2, 21))):
        want = model.logprobs(ids, stride=3)
        out = np.full(want.shape, np.nan, dtype=np.float32)
        got = model.logprobs(ids, stride=3, out=out)
        assert got is out
        np.testing.assert_array_equal(out, want)
    ids = rng.integers(0, 13, (2, 5))
    good = np.empty((2, 5, 13), np.float32)
    for bad, match in ((np.empty((2, 5, 12), np.float32), r"shape \(2, 5, 13\)"),
                       (np.empty((2, 5, 13), np.float64), "dtype float32"),
                       (np.empty((5, 13), np.float32), r"shape \(2, 5, 13\)"),
                       (np.empty((2, 13, 5), np.float32).transpose(0, 2, 1), "C-contiguous"),
                       (good.tolist(), "numpy array")):
        with pytest.raises(InputError, match=match):
            model.logprobs(ids, out=bad)
    good.flags.writeable = False
    with pytest.raises(InputError, match="writable"):
        model.logprobs(ids, out=good)


def test_gelu_inference_forward_holds_no_second_mlp_sized_array():
    """A GELU block's inference MLP activates u in place with a chunk-sized scratch per
    thread: its workspace has no (T, 4C) tanh buffer (it had one), and a forward's own
    allocations stay under one such array."""
    import tracemalloc

    from seqprob import _parallel
    from seqprob.gpt.block import make_workspace

    model = make(V=50, block=512, L=2, H=4, C=64, dtype="float32")  # GPT-2 style: gelu_tanh
    assert "t" not in make_workspace(model.config, 1, 512, np.float32)
    ids = np.arange(512)[None] % 50
    _parallel.set_num_threads(2)  # the pass goes chunk by chunk on any machine
    try:
        model._hidden(ids)  # the workspace, allocated once
        tracemalloc.start()
        model._hidden(ids)
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    finally:
        _parallel.set_num_threads(None)
    assert top < 0.75 * 512 * 4 * 64 * 4, top  # (T, 4C) float32: 524,288 bytes


def test_inference_forward_holds_one_layers_temporaries_not_all():
    """The inference forward keeps no per-layer caches: its transient memory does not grow
    with the number of layers (it once held every layer's temporaries until the end)."""
    import tracemalloc

    def peak(L):
        model = make(V=50, block=128, L=L, H=4, C=64, dtype="float32", norm="rmsnorm", mlp="swiglu",
                     positions="rotary", bias=False)  # Llama-style: its caches held the most
        ids = np.arange(128)[None] % 50
        model._hidden(ids)  # the workspace, allocated once
        tracemalloc.start()
        model._hidden(ids)
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return top

    one, twelve = peak(1), peak(12)
    assert twelve < 2 * one + 200_000, (one, twelve)


def _buffer_pairs_live_together(config):
    """The workspace buffers one inference block holds at the same moment (see
    block.make_workspace): each pair must not share a byte."""
    pairs = [("qkv", "y"), ("y", "a"), ("h", "u"), ("h", "a")]  # attention; projection; MLP input
    if config.mlp in ("swiglu", "geglu_tanh"):
        pairs += [("u", "t"), ("h", "t")]
    if config.parallel_residual:  # a is added to the residual after the MLP
        pairs += [("a", "u")] + ([("a", "t")] if config.mlp in ("swiglu", "geglu_tanh") else [])
    return pairs


@settings(max_examples=examples(40), deadline=None)
@given(a=archs)
def test_workspace_buffers_alive_at_once_never_share_memory(a):
    """The inference workspace lays buffers whose lifetimes do not overlap over one another
    (make_workspace, Notes); any two alive at the same moment must be disjoint, whatever the
    architecture (parallel residual, H hd != C, gated MLPs)."""
    from seqprob.gpt.block import make_workspace

    config = arch_model(a, dtype="float32").config
    ws = make_workspace(config, 2, 5, np.float32)
    for one, other in _buffer_pairs_live_together(config):
        assert not np.shares_memory(ws[one], ws[other], max_work=None), (one, other)
    for name, arr in ws.items():  # each buffer has the rows of every position
        assert arr.shape[:2] == (2, 5) or arr.shape[:3:2] == (2, 5), name


def test_gpt2_workspace_is_one_row_norm_buffer_and_one_arena():
    """GPT-2-124M at 1,024 positions: the buffers are h (3 MiB) and the arena (12 MiB, the
    MLP's hidden rows, the widest use, each row padded by a cache line), 15 MiB; one array
    per buffer held 33 MiB."""
    from seqprob.gpt.block import make_workspace

    config = GPTConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768, dtype="float32")
    ws = make_workspace(config, 1, 1024, np.float32)
    bases = {id(arr if arr.base is None else arr.base): arr if arr.base is None else arr.base for arr in ws.values()}
    assert sum(b.nbytes for b in bases.values()) == 1024 * (768 + 3072 + 16) * 4  # rows padded off 4 KiB
    assert ws["y"] is ws["h"] and ws["u"].shape == (1, 1024, 3072)


def test_scoring_streams_its_logits_through_the_free_arena():
    """token_logprobs' vocabulary slices are written into the arena (free once the blocks are
    done) when it is large enough, else into a buffer of their own: the same numbers."""
    model = make(V=50, block=16, L=2, H=2, C=16, dtype="float64")
    ids = np.random.default_rng(0).integers(0, 50, (1, 12))
    h2 = model._hidden(ids).reshape(12, -1).copy()
    targets = np.random.default_rng(1).integers(0, 50, 12)
    want = np.empty(12)
    model._pick_logprobs(h2, targets, want)
    free = np.full(12 * 50, np.nan)
    got = np.empty(12)
    model._pick_logprobs(h2, targets, got, free=free)
    np.testing.assert_array_equal(got, want)
    assert not np.isnan(free).any()  # the logits went there
    small = np.full(12 * 50 - 1, np.nan)
    model._pick_logprobs(h2, targets, got, free=small)
    np.testing.assert_array_equal(got, want)
    assert np.isnan(small).all()  # too small: untouched
