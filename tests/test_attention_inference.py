"""nn.causal_attention_inference (the inference forward's attention, one query block and a
few heads at a time, no probabilities array): against the definition of causal attention,
against the training kernel nn.grouped_attention_forward, invariant under the head and
query-row splits of seqprob/gpt/stages.py, thread-safe scratch buffers."""
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqprob import nn
from seqprob.gpt import GPT, GPTConfig
from budget import examples

shapes = st.fixed_dictionaries({
    "seed": st.integers(0, 10_000), "B": st.integers(1, 2), "Hkv": st.integers(1, 3),
    "G": st.integers(1, 3), "Tq": st.integers(1, 20), "extra": st.integers(0, 6),
    "hd": st.sampled_from([1, 2, 3, 4, 5, 8, 16]), "q_block": st.integers(1, 9)})


def inputs(s, dtype=np.float64):
    """q (B, H, Tq, hd), k, v (B, Hkv, Tq + extra, hd) as strided views of fused arrays."""
    rng = np.random.default_rng(s["seed"])
    B, Hkv, G, Tq, hd = s["B"], s["Hkv"], s["G"], s["Tq"], s["hd"]
    Tk, H = Tq + s["extra"], Hkv * G
    q = rng.standard_normal((B, Tq, H, hd)).astype(dtype).transpose(0, 2, 1, 3)
    kv = (rng.standard_normal((B, Tk, 2, Hkv, hd)) * 2).astype(dtype)
    return q, kv[:, :, 0].transpose(0, 2, 1, 3), kv[:, :, 1].transpose(0, 2, 1, 3)


def attention_by_definition(q, k, v):
    """softmax(q kᵀ / sqrt(hd) + causal mask) v per query head, query i seeing keys
    j <= i + Tk - Tq, one row at a time in float64."""
    B, H, Tq, hd = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    y = np.zeros((B, Tq, H, hd))
    for b in range(B):
        for h in range(H):
            g = h // (H // Hkv)
            for i in range(Tq):
                n = Tk - Tq + i + 1
                s = k[b, g, :n].astype(np.float64) @ q[b, h, i] / np.sqrt(hd)
                p = np.exp(s - s.max())
                y[b, i, h] = p @ v[b, g, :n] / p.sum()
    return y.reshape(B, Tq, H * hd)


def run(q, k, v, q_block):
    B, H, Tq, hd = q.shape
    return nn.causal_attention_inference(q, k, v, out=np.empty((B, Tq, H * hd), q.dtype), q_block=q_block)


@settings(max_examples=examples(40), deadline=None)
@given(s=shapes)
def test_equals_causal_attention_by_definition_and_the_training_kernel(s):
    q, k, v = inputs(s)
    got = run(q, k, v, s["q_block"])
    np.testing.assert_allclose(got, attention_by_definition(q, k, v), rtol=1e-12, atol=1e-12)
    ref, _ = nn.grouped_attention_forward(q, k, v, q_block=s["q_block"])
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


@settings(max_examples=examples(30), deadline=None)
@given(s=shapes, data=st.data())
def test_head_and_query_block_splits_give_the_same_bits(s, data):
    """The stage split computes key/value head groups, or query rows cut at multiples of
    q_block (with the keys up to the last row), in separate calls: same bits as one call."""
    q, k, v = inputs(s, np.float32)
    qb, Tq, Hkv, G = s["q_block"], s["Tq"], s["Hkv"], s["G"]
    whole = run(q, k, v, qb)
    g = data.draw(st.integers(0, Hkv), label="kv head cut")
    heads = np.concatenate([run(q[:, :g * G], k[:, :g], v[:, :g], qb),
                            run(q[:, g * G:], k[:, g:], v[:, g:], qb)], axis=-1)
    np.testing.assert_array_equal(heads, whole)
    cut = qb * data.draw(st.integers(0, -(-Tq // qb)), label="query block cut")
    cut, off = min(cut, Tq), s["extra"]
    rows = np.concatenate([run(q[:, :, :cut], k[:, :, :off + cut], v[:, :, :off + cut], qb),
                           run(q[:, :, cut:], k, v, qb)], axis=1)
    np.testing.assert_array_equal(rows, whole)


@pytest.mark.parametrize("hd", [64, 48])
def test_same_bits_as_the_training_kernel_on_a_gpt2_shape(hd):
    """hd = 64: the scale 1/8 is folded into q exactly, hd = 48: the scores are scaled as in
    grouped_attention_forward; every row then goes through that kernel's operations
    (run_with_cache's logits equal logits())."""
    rng = np.random.default_rng(0)
    qkv = rng.standard_normal((2, 300, 3 * 4 * hd)).astype(np.float32)
    q, k, v = (qkv[..., i * 4 * hd:(i + 1) * 4 * hd].reshape(2, 300, 4, hd).transpose(0, 2, 1, 3)
               for i in range(3))
    np.testing.assert_array_equal(run(q, k, v, 128), nn.grouped_attention_forward(q, k, v)[0])
    model = GPT(GPTConfig(vocab_size=50, block_size=160, n_layer=2, n_head=2, n_embd=128), seed=1)
    ids = rng.integers(0, 50, size=(2, 150))
    np.testing.assert_array_equal(model.run_with_cache(ids).logits, model.logits(ids))


def test_scratch_buffers_are_per_thread():
    """Two threads at once, each with its own shapes, then smaller shapes after larger ones
    (the per-thread buffers are reused and regrown): every result as computed alone."""
    cases = [dict(seed=i, B=1 + i % 2, Hkv=1 + i % 3, G=1 + i % 2, Tq=3 + 5 * i, extra=i % 4,
                  hd=4 + i, q_block=2 + i % 5) for i in range(6)]
    cases += cases[::-1]
    alone = [run(*inputs(c), c["q_block"]) for c in cases]
    results = [[None] * len(cases) for _ in range(2)]
    start = threading.Barrier(2)

    def worker(t):
        start.wait()
        for i, c in enumerate(cases[::1 - 2 * t]):  # the two threads walk the list in opposite orders
            results[t][i] = run(*inputs(c), c["q_block"])

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for i, expected in enumerate(alone):
        np.testing.assert_array_equal(results[0][i], expected)
        np.testing.assert_array_equal(results[1][len(cases) - 1 - i], expected)


def test_the_inference_workspace_holds_no_attention_matrix():
    """No (B, H, T, T) buffer: the workspace grows linearly with T."""
    model = GPT(GPTConfig(vocab_size=20, block_size=512, n_layer=1, n_head=4, n_embd=16), seed=0)
    sizes = [sum(a.nbytes for a in model._workspace(1, T).values()) for T in (128, 512)]
    assert sizes[1] == 4 * sizes[0]
