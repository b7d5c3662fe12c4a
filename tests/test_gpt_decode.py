"""The one-row decoding step (seqprob.gpt.block.block_step, seqprob.gpt.decode): equal to
the batched block and the uncached forward for every architecture option, branch buffers
independent, weights read through views, token ids checked."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqprob import nn
from seqprob.errors import InputError, TokenIdError
from seqprob.gpt import GPT, GPTConfig
from seqprob.gpt import decode
from seqprob.gpt.block import RowParams, RowWorkspace, block_forward, block_step
from budget import examples
from test_gpt_arch import arch_model, archs


def decode_rows(model, ids, split=1):
    """Log-prob rows of ids read by start(ids[:split]) then one step per id."""
    state = model.start(ids[:split])
    rows = [state.logprobs]
    for tok in ids[split:]:
        state = model.step(state, int(tok))
        rows.append(state.logprobs)
    return np.array(rows), state


@settings(max_examples=examples(20), deadline=None)
@given(a=archs, n=st.integers(2, 12), data=st.data())
def test_step_by_step_equals_uncached_forward_for_every_option(a, n, data):
    model = arch_model(a, block=8)
    ids = np.random.default_rng(a["seed"]).integers(0, 11, n)
    split = data.draw(st.integers(1, n))
    rows, state = decode_rows(model, ids, split)
    expected = model.logprobs(ids, stride=1)  # past block_size: the sliding window
    np.testing.assert_allclose(rows, expected[split - 1:], atol=1e-9)
    assert state.n_seen == n and state.ids == tuple(ids[-8:].tolist())


@settings(max_examples=examples(15), deadline=None)
@given(a=archs, pos=st.integers(0, 5))
def test_block_step_equals_the_batched_block(a, pos):
    """block_step on the last row == block_forward over all rows (same weights, same cache)."""
    model = arch_model(a)
    cfg, p = model.config, model._block_params[1]
    x = np.random.default_rng(a["seed"]).standard_normal((1, pos + 1, cfg.n_embd))  # (1, T, C)
    shape = (cfg.kv_heads, cfg.block_size, cfg.head_dim)
    K, V = np.zeros(shape), np.zeros(shape)
    rope, window = model._ropes[1], cfg.layer_window(1)
    full, _ = block_forward(x.copy(), p, cfg, rope, kv=(K, V), window=window)
    K2, V2 = K.copy(), V.copy()
    K2[:, pos:], V2[:, pos:] = 7.0, 7.0  # the step must write slot pos and read 0 .. pos only
    ws = RowWorkspace(cfg, model.dtype)
    row = block_step(x[0, pos].copy(), RowParams.of(p, rope, window), K2, V2, pos, ws)
    np.testing.assert_allclose(row, full[0, pos], atol=1e-12)
    np.testing.assert_allclose(K2[:, :pos + 1], K[:, :pos + 1], atol=1e-12)
    np.testing.assert_allclose(V2[:, :pos + 1], V[:, :pos + 1], atol=1e-12)


@given(C=st.integers(1, 40), seed=st.integers(0, 99), bias=st.booleans())
def test_row_kernels_with_buffers_equal_the_batched_kernels(C, seed, bias):
    rng = np.random.default_rng(seed)
    x, g, b = rng.standard_normal(C), rng.standard_normal(C), rng.standard_normal(C) if bias else None
    out, tmp = np.empty(C), np.empty(C)
    want, _ = nn.layer_norm_forward(x[None], g, b, 1e-5)
    np.testing.assert_allclose(nn.layer_norm_row(x, g, b, 1e-5, out=out, tmp=tmp), want[0], atol=1e-12)
    np.testing.assert_allclose(nn.layer_norm_row(x, g, b, 1e-5, out=out, tmp=tmp, ones=np.ones(C)),
                               want[0], atol=1e-12)  # the mean as a dot product
    want, _ = nn.rms_norm_forward(x[None], g, 1e-6)
    np.testing.assert_allclose(nn.rms_norm_row(x, g, 1e-6, out=out, tmp=tmp), want[0], atol=1e-12)
    want, _ = nn.gelu_forward(x)
    u = x.copy()
    assert nn.gelu_row_inplace(u, tmp) is u
    np.testing.assert_allclose(u, want, atol=1e-15)


@given(V=st.integers(1, 300), seed=st.integers(0, 99), scale=st.sampled_from([1e-3, 1.0, 1e3]),
       dtype=st.sampled_from([np.float32, np.float64]), buffer=st.booleans())
def test_log_softmax_row_equals_the_batched_kernel_bit_for_bit(V, seed, scale, dtype, buffer):
    u = (np.random.default_rng(seed).standard_normal(V) * scale).astype(dtype)
    want = nn.log_softmax_inplace(u[None].copy())[0]
    got = nn.log_softmax_row(u.copy(), np.empty(V, dtype) if buffer else None)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


def test_log_softmax_row_propagates_nan_to_every_entry():
    assert np.isnan(nn.log_softmax_row(np.array([0.0, np.nan, 1.0]))).all()


def test_interleaved_branches_do_not_share_buffers():
    """Two starts and a fork, stepped alternately, give what each gives alone."""
    a = {"norm": "rmsnorm", "mlp": "swiglu", "positions": "rotary", "rotary_fraction": 0.5,
         "rope_scaling": None, "kv": 2, "bias": False, "qkv_bias": True, "mlp_bias": None,
         "parallel_residual": False, "tie_weights": False, "mlp_hidden": None, "seed": 3}
    model = arch_model(a, block=10)
    x, y = [1, 2, 3, 4, 5, 6], [7, 8, 9, 1, 2, 3]
    sx, sy = model.start(x[:1]), model.start(y[:1])
    fork = model.step(sx, 9)  # sx's next slot is free: fork takes it, sx's next step copies
    for t in range(1, 6):
        sx, sy, fork = model.step(sx, x[t]), model.step(sy, y[t]), model.step(fork, y[t])
        np.testing.assert_allclose(sx.logprobs, model.logprobs(x[:t + 1])[-1], atol=1e-12)
        np.testing.assert_allclose(sy.logprobs, model.logprobs(y[:t + 1])[-1], atol=1e-12)
        np.testing.assert_allclose(fork.logprobs, model.logprobs([1, 9, *y[1:t + 1]])[-1], atol=1e-12)


def test_weights_updated_in_place_after_start_are_used():
    """The per-layer fields are views: an in-place update between steps is seen by the next
    step (here the unembedding, which the cached keys/values do not depend on)."""
    cfg = GPTConfig(vocab_size=9, block_size=8, n_layer=2, n_head=2, n_embd=8, dtype="float64",
                    tie_weights=False)
    model = GPT(cfg, seed=0)
    state = model.start([1, 2])
    before = model.step(state, 3).logprobs
    model.load_params({"lm_head.w": GPT(cfg, seed=1).params["lm_head.w"]}, strict=False)
    after = model.step(state, 3).logprobs
    assert np.abs(after - before).max() > 1e-3
    np.testing.assert_allclose(after, model.step(model.start([1, 2]), 3).logprobs, atol=1e-12)
    assert all(np.shares_memory(w, model.params[f"h.{i}.attn.c_attn.w"])
               for i, w in enumerate(layer.w_qkv for layer in state._cache.plan.layers))


def test_float32_decode_matches_float64():
    cfg = dict(vocab_size=50, block_size=16, n_layer=2, n_head=4, n_embd=32)
    m32, m64 = GPT(GPTConfig(**cfg), seed=0), GPT(GPTConfig(**cfg, dtype="float64"), seed=0)
    ids = np.arange(12) % 50
    r32, s32 = decode_rows(m32, ids)
    r64, _ = decode_rows(m64, ids)
    assert r32.dtype == np.float32 and s32.logprobs.dtype == np.float32
    np.testing.assert_allclose(r32, r64, atol=1e-4)


@pytest.mark.parametrize("bad, error", [(13, TokenIdError), (-1, TokenIdError), (True, InputError),
                                        (2.0, InputError), ("3", InputError), ([1, 2], InputError)])
def test_bad_token_ids_are_named(bad, error):
    model = GPT(GPTConfig(vocab_size=13, block_size=4, n_layer=1, n_head=1, n_embd=4), seed=0)
    state = model.start([1])
    with pytest.raises(error, match=r"token[ _]id"):
        model.step(state, bad)


def test_numpy_integer_token_ids_are_accepted():
    model = GPT(GPTConfig(vocab_size=13, block_size=4, n_layer=1, n_head=1, n_embd=4), seed=0)
    state = model.start([1])
    a, b = model.step(state, np.int64(5)), model.step(state, 5)
    np.testing.assert_array_equal(a.logprobs, b.logprobs)
    assert a.ids == b.ids == (1, 5)


def blas_threads() -> list:
    from threadpoolctl import threadpool_info
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


@pytest.mark.parametrize("small", [True, False])
def test_small_models_step_on_one_blas_thread_and_restore_the_setting(monkeypatch, small):
    from threadpoolctl import threadpool_limits
    if not small:  # every model is "large": BLAS keeps its threads
        monkeypatch.setattr(decode, "SMALL_GEMV", 0)
    seen, real = [], decode.decode_one
    monkeypatch.setattr(decode, "decode_one", lambda *args: seen.append(blas_threads()) or real(*args))
    model = GPT(GPTConfig(vocab_size=13, block_size=4, n_layer=1, n_head=1, n_embd=4), seed=0)
    with threadpool_limits(limits=2, user_api="blas"):
        outside = blas_threads()
        model.step(model.start([1]), 2)
        assert blas_threads() == outside  # restored
        state = model.start([1])
        monkeypatch.setattr(decode, "decode_one", lambda *args: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            model.step(state, 2)
        assert blas_threads() == outside  # restored when the step fails too
    assert seen == [[1] * len(outside) if small else outside]


@settings(max_examples=examples(10), deadline=None)
@given(a=archs, data=st.data())
def test_decoding_to_the_full_block_equals_the_uncached_forward(a, data):
    """Every slot count 1 .. block_size (the score buffer at every length, then the window
    slide past it) gives the uncached forward's rows."""
    model = arch_model(a, block=6)
    ids = np.random.default_rng(a["seed"]).integers(0, 11, data.draw(st.integers(6, 9)))
    rows, _ = decode_rows(model, ids)
    np.testing.assert_allclose(rows, model.logprobs(ids, stride=1), atol=1e-9)


def test_one_and_two_blas_threads_decode_the_same_bits():
    """A small model steps on one BLAS thread whatever the setting: same bits at 1 and 2."""
    from threadpoolctl import threadpool_limits
    model = GPT(GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=4, n_embd=32), seed=0)
    ids = np.arange(14) * 5 % 64
    rows = []
    for threads in (1, 2):
        with threadpool_limits(limits=threads, user_api="blas"):
            rows.append(decode_rows(model, ids)[0])
    np.testing.assert_array_equal(rows[0], rows[1])


def _sliding_model(seed=1):
    cfg = GPTConfig(vocab_size=11, block_size=10, n_layer=3, n_head=4, n_embd=16, dtype="float64",
                    sliding_window=3, layer_types=("sliding", "full", "sliding"), norm="rmsnorm",
                    mlp="geglu_tanh", positions="rotary", rope_local_theta=50.0, head_size=8, qk_norm="head",
                    block_norms="sandwich", embed_scale=4.0, attn_scale=0.3, attn_softcap=1.5,
                    final_softcap=2.0, n_kv_head=2)
    model = GPT(cfg, seed=seed)
    rng = np.random.default_rng(seed)
    for arr in model.params.values():
        arr += 0.3 * rng.standard_normal(arr.shape)
    return model


def test_a_sliding_layer_keeps_only_its_window():
    """The KV cache of a sliding layer is a ring of W slots; a full layer keeps block_size."""
    model = _sliding_model()
    state = model.start([1, 2, 3, 4, 5])
    assert [k.shape for k in state._cache.k] == [(2, 3, 8), (2, 10, 8), (2, 3, 8)]


@settings(max_examples=examples(10), deadline=None)
@given(prompt=st.integers(1, 9), n=st.integers(1, 25), seed=st.integers(0, 50))
def test_decoding_past_every_window_and_the_block_equals_the_forward(prompt, n, seed):
    model = _sliding_model(seed)
    ids = np.random.default_rng(seed).integers(0, 11, prompt + n)
    state, rows = model.start(ids[:prompt]), []
    rows.append(state.logprobs)
    for tok in ids[prompt:]:
        state = model.step(state, int(tok))
        rows.append(state.logprobs)
    np.testing.assert_allclose(np.array(rows), model.logprobs(ids, stride=1)[prompt - 1:], atol=1e-10)


@given(back=st.integers(2, 6), seed=st.integers(0, 50))
@settings(max_examples=examples(10), deadline=None)
def test_a_branch_whose_ring_slots_were_overwritten_is_read_again(back, seed):
    """Stepping from an older state after its cache moved on (another branch overwrote ring
    slots it reads) gives the same log-probabilities as a fresh forward."""
    model = _sliding_model(seed)
    ids = list(np.random.default_rng(seed).integers(0, 11, 6))
    root = model.start(ids)
    state = root
    for tok in range(back):
        state = model.step(state, tok)
    branch = model.step(root, 7)
    np.testing.assert_allclose(branch.logprobs, model.logprobs(ids + [7])[-1], atol=1e-12)
