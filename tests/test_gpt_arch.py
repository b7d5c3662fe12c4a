"""Architecture options of the GPT (norm, MLP, rotary, GQA, biases, parallel residual):
hand-written gradients, KV cache, batching, analysis, checkpoints, config validation."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import seqprob as sp
from seqprob.analysis.lens import attention_patterns, logit_lens
from seqprob.errors import InputError
from seqprob.gpt import GPT, GPTConfig
from budget import examples

SCALINGS = [None, {"rope_type": "linear", "factor": 2.0},
            {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
             "original_max_position_embeddings": 4}]

archs = st.fixed_dictionaries({
    "norm": st.sampled_from(["layernorm", "rmsnorm"]),
    "mlp": st.sampled_from(["gelu_tanh", "gelu", "swiglu", "geglu_tanh"]),
    "positions": st.sampled_from(["learned", "rotary"]), "rotary_fraction": st.sampled_from([1.0, 0.5]),
    "rope_scaling": st.sampled_from(SCALINGS), "kv": st.sampled_from([1, 2, 4]),
    "bias": st.booleans(), "qkv_bias": st.sampled_from([None, True, False]),
    "mlp_bias": st.sampled_from([None, True, False]), "parallel_residual": st.booleans(),
    "tie_weights": st.booleans(), "mlp_hidden": st.sampled_from([None, 6]), "seed": st.integers(0, 99),
    # the options of the newer families (Qwen3, Gemma 2/3, OLMo 2, Mistral, SmolLM3)
    "head_size": st.sampled_from([None, 8, 12]), "qk_norm": st.sampled_from([None, "head", "all"]),
    "block_norms": st.sampled_from(["pre", "sandwich", "post"]), "embed_scale": st.sampled_from([1.0, 4.0]),
    "attn_scale": st.sampled_from([None, 0.3]), "attn_softcap": st.sampled_from([None, 1.5]),
    "final_softcap": st.sampled_from([None, 2.0]), "sliding_window": st.sampled_from([None, 1, 2, 3]),
    "layer_types": st.sampled_from([None, ("sliding", "full"), ("full", "sliding")]),
    "rope_local_theta": st.sampled_from([None, 50.0]), "nope_layers": st.sampled_from([None, (0,), (1,)])})
MODERN = ("head_size", "qk_norm", "block_norms", "embed_scale", "attn_scale", "attn_softcap", "final_softcap",
          "sliding_window", "layer_types", "rope_local_theta", "nope_layers")


def arch_model(a, V=11, block=6, L=2, H=4, hd=4, dtype="float64", perturb=0.3, **kw):
    modern = {k: a[k] for k in MODERN if a.get(k) is not None}
    if modern.get("layer_types") and "sliding_window" not in modern:
        del modern["layer_types"]
    kw = {**modern, **kw}
    cfg = GPTConfig(vocab_size=V, block_size=block, n_layer=L, n_head=H, n_embd=H * hd, dtype=dtype,
                    norm=a["norm"], mlp=a["mlp"], positions=a["positions"],
                    rotary_fraction=a["rotary_fraction"], rope_scaling=a["rope_scaling"],
                    n_kv_head=a["kv"], bias=a["bias"], qkv_bias=a["qkv_bias"], mlp_bias=a["mlp_bias"],
                    parallel_residual=a["parallel_residual"], tie_weights=a["tie_weights"],
                    mlp_hidden=a["mlp_hidden"], layer_norm_epsilon=1e-5, **kw)
    model = GPT(cfg, seed=a["seed"], bos_id=0, eos_id=V - 1)
    rng = np.random.default_rng(a["seed"] + 1)
    for arr in model.params.values():  # larger weights than the init so every path matters
        arr += perturb * rng.standard_normal(arr.shape)
    return model


def check_grads(model, batch, per_param=3, tol=1e-6):
    loss, grads = model.loss_and_grads(batch)
    grads = {k: v.copy() for k, v in grads.items()}
    pick = np.random.default_rng(0)
    for name, arr in model.params.items():
        for i in pick.choice(arr.size, size=min(per_param, arr.size), replace=False):
            at = np.unravel_index(i, arr.shape)  # W_U is column-major: no reshape(-1) view
            old = arr[at]
            arr[at] = old + 1e-6
            hi = model.loss_and_grads(batch)[0]
            arr[at] = old - 1e-6
            lo = model.loss_and_grads(batch)[0]
            arr[at] = old
            fd = (hi - lo) / 2e-6
            assert abs(fd - grads[name][at]) < tol * max(1.0, abs(fd)), (name, i, fd)
    return loss


@settings(max_examples=examples(15), deadline=None)
@given(a=archs, B=st.integers(1, 2), T=st.integers(1, 6))
def test_gradients_match_finite_differences_for_every_option(a, B, T):
    model = arch_model(a)
    batch = np.random.default_rng(a["seed"]).integers(0, 11, (B, T + 1))
    loss = check_grads(model, batch)
    assert loss == pytest.approx(-model.token_logprobs(batch).mean(), abs=1e-12)


@settings(max_examples=examples(15), deadline=None)
@given(a=archs, n=st.integers(1, 9))
def test_cached_decode_equals_uncached_forward(a, n):
    model = arch_model(a)
    ids = np.random.default_rng(a["seed"]).integers(0, 11, n)
    state = model.start(ids[:1])
    rows = [state.logprobs]
    for tok in ids[1:]:
        state = model.step(state, int(tok))
        rows.append(state.logprobs)
    expected = model.logprobs(ids, stride=1)  # stride 1: every row with the full window
    np.testing.assert_allclose(np.array(rows), expected, atol=1e-10)


@settings(max_examples=examples(10), deadline=None)
@given(a=archs)
def test_batched_equals_unbatched_and_rows_are_distributions(a):
    model = arch_model(a)
    ids = np.random.default_rng(a["seed"]).integers(0, 11, (3, 6))
    batched = model.logprobs(ids)
    for row, seq in zip(batched, ids):
        np.testing.assert_allclose(row, model.logprobs(seq), atol=1e-12)
    np.testing.assert_allclose(np.exp(batched).sum(-1), 1.0, atol=1e-12)


@settings(max_examples=examples(10), deadline=None)
@given(a=archs)
def test_run_with_cache_lens_and_attention_for_every_option(a):
    model = arch_model(a)
    ids = [1, 2, 3, 4, 5]
    cache = model.run_with_cache(ids)
    np.testing.assert_allclose(cache.logits, model.logits(ids), atol=1e-12)
    np.testing.assert_allclose(model.unembed(cache.resid[-1]), cache.logits, atol=1e-10)
    np.testing.assert_allclose(cache.attn.sum(-1), 1.0, atol=1e-12)
    assert np.all(np.triu(cache.attn, k=1) == 0.0)
    attn, tokens = attention_patterns(model, ids)  # with <s> first
    assert attn.shape == (2, 4, 6, 6) and np.allclose(attn.sum(-1), 1.0)
    lens = logit_lens(model, ids)
    assert len(lens) == (model.config.n_layer + 1) * (len(ids) + 1) and np.isfinite(lens["logprob"]).all()


@settings(max_examples=examples(15), deadline=None)
@given(a=archs)
def test_param_counts_cover_every_option(a):
    model = arch_model(a, perturb=0.0)
    df = model.config.param_counts()
    assert df["params"].iloc[-1] == model.n_params() == model.config.n_params()


@settings(max_examples=examples(6), deadline=None)
@given(a=archs)
def test_checkpoint_round_trips_every_option(tmp_path_factory, a):
    model = arch_model(a, dtype="float32")
    folder = model.save(tmp_path_factory.mktemp("ckpt") / "m")
    loaded = GPT.load(folder)
    assert loaded.config == model.config
    np.testing.assert_array_equal(loaded.logits([1, 2, 3]), model.logits([1, 2, 3]))


def test_gqa_with_one_group_equals_multi_head_attention():
    a = dict(norm="rmsnorm", mlp="swiglu", positions="rotary", rotary_fraction=1.0, rope_scaling=None,
             kv=4, bias=False, qkv_bias=None, mlp_bias=None, parallel_residual=False, tie_weights=False,
             mlp_hidden=None, seed=3)
    mha = arch_model(a)
    gqa = arch_model({**a, "kv": 2})
    # copy MHA weights where GQA's kv heads 0, 1 are MHA's heads 0 and 2 repeated
    hd, C = 4, 16
    for name, arr in gqa.params.items():
        src = mha.params[name]
        if name.endswith("attn.c_attn.w"):
            q, k, v = src[:, :C], src[:, C:2 * C], src[:, 2 * C:]
            k = np.concatenate([k[:, 0:hd], k[:, 0:hd], k[:, 2 * hd:3 * hd], k[:, 2 * hd:3 * hd]], axis=1)
            v = np.concatenate([v[:, 0:hd], v[:, 0:hd], v[:, 2 * hd:3 * hd], v[:, 2 * hd:3 * hd]], axis=1)
            mha.params[name][...] = np.concatenate([q, k, v], axis=1)
            arr[...] = np.concatenate([q, k[:, 0:hd], k[:, 2 * hd:3 * hd], v[:, 0:hd], v[:, 2 * hd:3 * hd]], axis=1)
        else:
            arr[...] = src
    ids = [1, 5, 2, 7, 3]
    np.testing.assert_allclose(gqa.logprobs(ids), mha.logprobs(ids), atol=1e-12)


def test_rotary_positions_are_relative():
    """RoPE scores depend on the offset between query and key only: a 1-layer model without
    position table sees the same attention pattern for a shifted repeated sequence."""
    a = dict(norm="rmsnorm", mlp="swiglu", positions="rotary", rotary_fraction=1.0, rope_scaling=None,
             kv=4, bias=False, qkv_bias=None, mlp_bias=None, parallel_residual=False, tie_weights=True,
             mlp_hidden=None, seed=1)
    model = arch_model(a, block=12, L=1)
    attn = model.run_with_cache([3] * 12).attn[0]  # (H, T, T), same token everywhere
    # rows i and i+1 restricted to the last 4 keys behind the query: same unnormalized
    # scores, so ratios of probabilities agree
    for i in range(5, 11):
        r1 = attn[:, i, i - 3:i + 1] / attn[:, i, i][:, None]
        r2 = attn[:, i + 1, i - 2:i + 2] / attn[:, i + 1, i + 1][:, None]
        np.testing.assert_allclose(r1, r2, rtol=1e-9)


def test_train_llama_style_config_lowers_the_loss():
    cfg = GPTConfig.preset("llama-small", vocab_size=16, block_size=16, n_layer=1, n_head=2, n_kv_head=1,
                           n_embd=16, mlp_hidden=32)
    model = GPT(cfg, seed=0)
    ids = np.tile(np.arange(16), 40)
    history = sp.train(model, ids, steps=30, batch_size=4, lr=1e-2, seed=0, progress=False)
    assert history["train_loss"].iloc[-1] < 0.5 * history["train_loss"].iloc[0]


@pytest.mark.parametrize("change, message", [
    (dict(bias="no"), "bias must be True or False"),
    (dict(vocab_size=10 ** 12), "exceeds the limit 16777216.*GiB"),
    (dict(n_kv_head=3), "not divisible by n_kv_head=3"),
    (dict(positions="rotary", rotary_fraction=0.3), "even integer"),
    (dict(positions="rotary", rotary_fraction=0.0), r"rotary_fraction must be in \(0, 1\]"),
    (dict(rope_scaling={"rope_type": "yarn", "factor": 2.0}), "unsupported rope_scaling type 'yarn'"),
    (dict(rope_scaling={"rope_type": "linear"}), "needs a number factor"),
    (dict(rope_scaling=[1, 2]), "rope_scaling must be a dict"),
    (dict(norm="batchnorm"), "unknown norm"),
    (dict(mlp="relu"), "unknown mlp"),
    (dict(positions="alibi"), "unknown positions"),
    (dict(mlp_hidden=0), "mlp_hidden must be >= 1"),
    (dict(mlp_hidden=2.5), "mlp_hidden must be an integer"),
    (dict(rope_theta=-1.0), "rope_theta must be a finite number > 0"),
    (dict(layer_norm_epsilon=float("nan")), "layer_norm_epsilon"),
    (dict(qkv_bias="yes"), "qkv_bias must be True or False"),
    (dict(parallel_residual=None), "parallel_residual must be True or False"),
    (dict(n_embd=2 ** 18), "n_embd=262144 exceeds the limit"),
    (dict(head_size=0), "head_size must be >= 1"),
    (dict(qk_norm="layer"), "unknown qk_norm 'layer'"),
    (dict(block_norms="both"), "unknown block_norms 'both'"),
    (dict(embed_scale=0.0), "embed_scale must be a finite number > 0"),
    (dict(attn_softcap=-1.0), "attn_softcap must be None or a finite number > 0"),
    (dict(final_softcap=float("inf")), "final_softcap must be None or a finite number > 0"),
    (dict(sliding_window=0), "sliding_window must be >= 1"),
    (dict(layer_types=("sliding",)), "layer_types must list one of"),
    (dict(layer_types=("full", "chunked")), "layer_types must list one of"),
    (dict(layer_types=("sliding", "full", "full", "full")), "sliding layers but sliding_window is None"),
    (dict(nope_layers=(5,)), "nope_layers must list layer indices"),
])
def test_config_rejects_bad_options(change, message):
    with pytest.raises(InputError, match=message):
        GPTConfig.preset("small", **change)


def test_from_dict_rejects_a_list():
    with pytest.raises(InputError, match="needs a dict"):
        GPTConfig.from_dict([1, 2])


def test_llama_preset_round_trips_through_dict():
    import json
    cfg = GPTConfig.preset("llama-small", rope_scaling=SCALINGS[2])
    assert GPTConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert cfg.rope_scaling_dict["rope_type"] == "llama3" and cfg.norm_eps == 1e-6
