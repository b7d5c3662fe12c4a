"""AdamW, cosine schedule and gradient clipping (seqprob.optim)."""
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from seqprob.errors import CheckpointError, InputError
from seqprob.optim import AdamW, FlatArrays, clip_grad_norm, cosine_schedule, default_decay

FIXTURE = Path(__file__).parent / "fixtures" / "adamw_torch.npz"


def reference_adamw(params, grads_seq, lrs, betas, eps, wd, decay):
    """Textbook AdamW (Loshchilov & Hutter, torch's formula), one array at a time."""
    p = {n: a.astype(np.float64).copy() for n, a in params.items()}
    m = {n: np.zeros_like(a) for n, a in p.items()}
    v = {n: np.zeros_like(a) for n, a in p.items()}
    b1, b2 = betas
    for t, (g, lr) in enumerate(zip(grads_seq, lrs), start=1):
        for n in p:
            if n in decay:
                p[n] = p[n] * (1 - lr * wd)
            m[n] = b1 * m[n] + (1 - b1) * g[n]
            v[n] = b2 * v[n] + (1 - b2) * g[n] ** 2
            mhat, vhat = m[n] / (1 - b1 ** t), v[n] / (1 - b2 ** t)
            p[n] = p[n] - lr * mhat / (np.sqrt(vhat) + eps)
    return p


def flat_params(shapes, rng, dtype=np.float64, column_major=()):
    """A FlatArrays of views into one flat buffer (the GPT's layout; the names in
    ``column_major`` stored column-major, as the GPT keeps W_U)."""
    sizes = [int(np.prod(s)) for s in shapes.values()]
    flat = rng.normal(size=sum(sizes)).astype(dtype)
    out, slices, lo = {}, {}, 0
    for (name, shape), size in zip(shapes.items(), sizes):
        slices[name] = slice(lo, lo + size)
        part = flat[lo:lo + size]
        out[name] = part.reshape(shape[::-1]).T if name in column_major else part.reshape(shape)
        lo += size
    return flat, FlatArrays(flat, slices, out)


SHAPES = {"wte": (11, 4), "h.0.attn.w": (4, 12), "h.0.attn.b": (12,), "ln_f.g": (4,),
          "h.0.mlp.w": (4, 16)}


def test_default_decay_rule():
    assert default_decay("h.3.mlp.c_fc.w", np.zeros((2, 2)))
    assert default_decay("lm_head", np.zeros((2, 2)))
    assert not default_decay("h.3.mlp.c_fc.b", np.zeros(2))
    assert not default_decay("ln_f.weight", np.zeros(2))
    for name in ("wte", "wpe", "W_E", "W_pos", "tok_emb", "transformer.wte.weight", "embedding"):
        assert not default_decay(name, np.zeros((3, 2))), name


def test_matches_torch_fixture():
    data = np.load(FIXTURE)
    names = [k[len("init."):] for k in data.files if k.startswith("init.")]
    params = {n: data[f"init.{n}"].copy() for n in names}
    opt = AdamW(params, lr=1.0, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    assert opt.decay_names == {"h.0.mlp.w"}
    for step, lr in enumerate(data["lrs"]):
        opt.step({n: data[f"grad{step}.{n}"] for n in names}, lr=float(lr))
        for n in names:
            np.testing.assert_allclose(params[n], data[f"after{step}.{n}"], rtol=0, atol=1e-12)


@given(seed=st.integers(0, 2**16), steps=st.integers(1, 5), wd=st.sampled_from([0.0, 0.1, 1.0]),
       flat=st.booleans(), beta2=st.sampled_from([0.95, 0.999]))
def test_matches_reference_formula(seed, steps, wd, flat, beta2):
    rng = np.random.default_rng(seed)
    if flat:
        _, params = flat_params(SHAPES, rng)
    else:
        params = {n: rng.normal(size=s) for n, s in SHAPES.items()}
    init = {n: a.copy() for n, a in params.items()}
    grads_seq = [{n: rng.normal(size=s) * 10.0 ** rng.uniform(-4, 2) for n, s in SHAPES.items()}
                 for _ in range(steps)]
    lrs = list(rng.uniform(1e-4, 1e-1, size=steps))
    opt = AdamW(params, lr=lrs[0], betas=(0.9, beta2), eps=1e-8, weight_decay=wd)
    assert (opt._root is not None) == flat
    for g, lr in zip(grads_seq, lrs):
        opt.step(g, lr=lr)
    ref = reference_adamw(init, grads_seq, lrs, (0.9, beta2), 1e-8, wd, opt.decay_names)
    for n in params:
        np.testing.assert_allclose(params[n], ref[n], rtol=1e-12, atol=1e-13)


@given(seed=st.integers(0, 2**16), column_major=st.sampled_from([(), ("wte",), ("wte", "h.0.mlp.w")]))
def test_flat_and_loop_paths_agree_float32(seed, column_major):
    """One flat update and one update per array agree, whatever each array's layout (the
    loop path gets row-major copies): every element meets its own gradient and moments."""
    rng = np.random.default_rng(seed)
    flat, p1 = flat_params(SHAPES, rng, np.float32, column_major)
    p2 = {n: a.copy() for n, a in p1.items()}
    gflat, g1 = flat_params(SHAPES, rng, np.float32, column_major)
    g2 = {n: a.copy() for n, a in g1.items()}
    o1, o2 = AdamW(p1, lr=1e-2, weight_decay=0.1), AdamW(p2, lr=1e-2, weight_decay=0.1)
    assert o1._root.size == flat.size and np.shares_memory(o1._root, flat) and o2._root is None
    for _ in range(3):
        o1.step(g1)
        o2.step(g2)
    for n in p1:
        assert p1[n].dtype == np.float32
        np.testing.assert_array_equal(p1[n], p2[n])
        np.testing.assert_array_equal(o1.m[n], o2.m[n])
        np.testing.assert_array_equal(o1.v[n], o2.v[n])
        assert np.shares_memory(o1.m[n], o1.m_flat_)


@given(seed=st.integers(0, 2**16))
def test_loop_path_updates_column_major_params_in_place(seed):
    """Gradients that are not the parameters' flat buffer (a plain dict) still update a
    column-major parameter in place, with moments kept in the parameter's layout."""
    rng = np.random.default_rng(seed)
    _, params = flat_params(SHAPES, rng, np.float64, ("wte",))
    ref = {n: a.copy() for n, a in params.items()}
    grads = {n: rng.normal(size=a.shape) for n, a in params.items()}
    wte = params["wte"]
    opt = AdamW(params, lr=1e-2, weight_decay=0.1)
    opt.step(dict(grads))
    want = reference_adamw(ref, [grads], [1e-2], (0.9, 0.999), 1e-8, 0.1, opt.decay_names)
    assert params["wte"] is wte and opt.m["wte"].flags.f_contiguous
    for n in params:
        np.testing.assert_allclose(params[n], want[n], rtol=1e-12, atol=1e-13)


def test_gradients_in_another_layout_are_paired_by_index():
    """A gradient buffer with the parameters' offsets but a row-major W_U (where the
    parameters keep it column-major) updates each element with its own gradient."""
    rng = np.random.default_rng(3)
    _, params = flat_params(SHAPES, rng, np.float64, ("wte",))
    _, grads = flat_params(SHAPES, rng, np.float64)  # same offsets, every array row-major
    ref = {n: a.copy() for n, a in params.items()}
    opt = AdamW(params, lr=1e-2, weight_decay=0.0)
    opt.step(grads)
    want = reference_adamw(ref, [grads], [1e-2], (0.9, 0.999), 1e-8, 0.0, opt.decay_names)
    for n in params:
        np.testing.assert_allclose(params[n], want[n], rtol=1e-12, atol=1e-13)


def test_large_flat_buffer_crosses_chunks():
    rng = np.random.default_rng(0)
    shapes = {"a.w": (400, 300), "b": (7,), "wte": (500, 200), "c.w": (300, 300)}  # > 3 chunks
    _, params = flat_params(shapes, rng)
    init = {n: a.copy() for n, a in params.items()}
    grads = [{n: rng.normal(size=s) for n, s in shapes.items()} for _ in range(3)]
    opt = AdamW(params, lr=3e-3, weight_decay=0.1)
    for g in grads:
        opt.step(g)
    ref = reference_adamw(init, grads, [3e-3] * 3, opt.betas, opt.eps, 0.1, opt.decay_names)
    for n in params:
        np.testing.assert_allclose(params[n], ref[n], rtol=1e-12, atol=1e-14)


def padded_params(shapes, rng, dtype=np.float64, align=16, garbage=0.0):
    """Views into one buffer with alignment gaps between them (seqprob.gpt's FlatParams)."""
    offsets, lo = {}, 3  # an unaligned start, like a shifted view
    for name, shape in shapes.items():
        offsets[name] = lo
        lo += -(-int(np.prod(shape)) // align) * align
    raw = np.full(lo + 5, garbage, dtype=dtype)
    out, slices = {}, {}
    for name, shape in shapes.items():
        size = int(np.prod(shape))
        slices[name] = slice(offsets[name], offsets[name] + size)
        out[name] = raw[slices[name]].reshape(shape)
        out[name][...] = rng.normal(size=shape)
    return raw, FlatArrays(raw, slices, out)


@given(seed=st.integers(0, 2**16), garbage=st.sampled_from([0.0, 7.0, np.nan]))
def test_padded_flat_buffers_use_fast_path(seed, garbage):
    rng = np.random.default_rng(seed)
    _, params = padded_params(SHAPES, rng)
    _, grads = padded_params(SHAPES, rng, garbage=garbage)  # padding is never read as a gradient
    init = {n: a.copy() for n, a in params.items()}
    opt = AdamW(params, lr=1e-2, weight_decay=0.1)
    assert opt._root is not None and opt._grad_flat(grads) is not None
    opt.step(grads)
    ref = reference_adamw(init, [grads], [1e-2], opt.betas, opt.eps, 0.1, opt.decay_names)
    for n in params:
        np.testing.assert_allclose(params[n], ref[n], rtol=1e-12, atol=1e-14)
    expected = np.sqrt(sum(float((g ** 2).sum()) for g in grads.values()))
    assert clip_grad_norm(grads, 1e-3) == pytest.approx(expected, rel=1e-12)


def test_non_contiguous_params_are_updated():
    base = np.ones((4, 6))
    params = {"w": base[:, ::2]}
    AdamW(params, lr=0.5, weight_decay=0.0).step({"w": np.ones((4, 3))})
    np.testing.assert_allclose(base[:, ::2], 0.5)
    np.testing.assert_allclose(base[:, 1::2], 1.0)


def test_updates_arrays_in_place_and_keeps_views():
    rng = np.random.default_rng(0)
    flat, params = flat_params(SHAPES, rng)
    ids = {n: id(a) for n, a in params.items()}
    opt = AdamW(params, lr=0.1)
    before = flat.copy()
    opt.step({n: np.ones(s) for n, s in SHAPES.items()})
    assert {n: id(a) for n, a in params.items()} == ids
    assert not np.array_equal(before, flat)
    assert np.shares_memory(params["wte"], flat)


def test_state_dict_round_trip_continues_exactly():
    rng = np.random.default_rng(3)
    params = {n: rng.normal(size=s) for n, s in SHAPES.items()}
    grads = [{n: rng.normal(size=s) for n, s in SHAPES.items()} for _ in range(4)]
    p_a = {n: a.copy() for n, a in params.items()}
    opt_a = AdamW(p_a, lr=1e-2, weight_decay=0.1)
    for g in grads:
        opt_a.step(g)
    p_b = {n: a.copy() for n, a in params.items()}
    opt_b = AdamW(p_b, lr=1e-2, weight_decay=0.1)
    for g in grads[:2]:
        opt_b.step(g)
    state = opt_b.state_dict()
    opt_c = AdamW(p_b, lr=123.0).load_state_dict(state)
    assert opt_c.t == 2 and opt_c.lr == 1e-2 and opt_c.weight_decay == 0.1
    for g in grads[2:]:
        opt_c.step(g)
    for n in params:
        np.testing.assert_array_equal(p_a[n], p_b[n])


def test_load_state_dict_rejects_mismatch():
    params = {"w": np.zeros((2, 3)), "b": np.zeros(3)}
    state = AdamW(params).state_dict()
    bad = dict(state, m={"w": np.zeros((3, 2)), "b": np.zeros(3)})
    with pytest.raises(CheckpointError, match=r"m\.w"):
        AdamW(params).load_state_dict(bad)
    with pytest.raises(CheckpointError, match="'b'"):
        AdamW(params).load_state_dict(dict(state, v={"w": np.zeros((2, 3))}))
    with pytest.raises(CheckpointError, match="step"):
        AdamW(params).load_state_dict({k: v for k, v in state.items() if k != "step"})


def test_bad_input():
    params = {"w": np.zeros((2, 3))}
    with pytest.raises(InputError, match="lr"):
        AdamW(params, lr=-1.0)
    with pytest.raises(InputError, match="beta"):
        AdamW(params, betas=(0.9, 1.0))
    with pytest.raises(InputError):
        AdamW({})
    with pytest.raises(InputError, match="'w'"):
        AdamW({"w": np.zeros(3, dtype=np.int64)})
    opt = AdamW(params)
    with pytest.raises(InputError, match="'w'"):
        opt.step({})
    with pytest.raises(InputError, match=r"\(3, 2\)"):
        opt.step({"w": np.zeros((3, 2))})
    g = np.zeros((2, 3))
    g[1, 1] = np.nan
    with pytest.raises(InputError, match="NaN"):
        opt.step({"w": g})
    assert opt.t == 0 and np.all(params["w"] == 0)
    with pytest.raises(InputError, match="unknown"):
        AdamW(params, decay=["nope"])


def test_decay_option():
    params = {"wte": np.ones((2, 2)), "b": np.ones(2)}
    AdamW(params, lr=0.5, weight_decay=1.0, decay=lambda n, a: True).step(
        {"wte": np.zeros((2, 2)), "b": np.zeros(2)})
    assert np.allclose(params["wte"], 0.5) and np.allclose(params["b"], 0.5)


# -- schedule ---------------------------------------------------------------------------------
@given(lr=st.floats(1e-5, 1.0), warmup=st.integers(0, 20), extra=st.integers(1, 50),
       frac=st.floats(0.0, 1.0))
def test_cosine_schedule_shape(lr, warmup, extra, frac):
    total, min_lr = warmup + extra, lr * frac
    steps = np.arange(total + 5)
    sched = cosine_schedule(steps, lr, warmup, total, min_lr)
    assert np.all(sched <= lr * (1 + 1e-12)) and np.all(sched >= min(min_lr, lr / max(warmup, 1)) - 1e-15)
    assert np.all(np.diff(sched[:warmup]) > 0)           # warmup rises
    assert np.all(np.diff(sched[warmup:]) <= 1e-15)      # then never rises
    assert sched[warmup] == pytest.approx(lr)
    assert sched[total] == pytest.approx(min_lr) and sched[-1] == pytest.approx(min_lr)
    assert cosine_schedule(int(steps[3]), lr, warmup, total, min_lr) == sched[3]


def test_cosine_schedule_values_and_errors():
    assert cosine_schedule(0, 1.0, 0, 10) == 1.0
    assert cosine_schedule(5, 1.0, 0, 10, 0.0) == pytest.approx(0.5)
    assert cosine_schedule(0, 1.0, 4, 10) == pytest.approx(0.25)
    with pytest.raises(InputError, match="warmup"):
        cosine_schedule(0, 1.0, 11, 10)
    with pytest.raises(InputError, match="min_lr"):
        cosine_schedule(0, 1.0, 1, 10, min_lr=2.0)
    with pytest.raises(InputError, match="step"):
        cosine_schedule(-1, 1.0, 1, 10)
    with pytest.raises(InputError, match="total"):
        cosine_schedule(0, 1.0, 0, 0)


# -- clipping ---------------------------------------------------------------------------------
@given(seed=st.integers(0, 2**16), max_norm=st.floats(1e-3, 1e3), scale=st.floats(1e-4, 1e4),
       flat=st.booleans())
def test_clip_grad_norm(seed, max_norm, scale, flat):
    rng = np.random.default_rng(seed)
    if flat:
        _, grads = flat_params(SHAPES, rng)
    else:
        grads = {n: rng.normal(size=s) for n, s in SHAPES.items()}
    for g in grads.values():
        g *= scale
    before = {n: g.copy() for n, g in grads.items()}
    expected = np.sqrt(sum((g ** 2).sum() for g in before.values()))
    norm = clip_grad_norm(grads, max_norm)
    assert norm == pytest.approx(expected, rel=1e-12)
    after = np.sqrt(sum((g ** 2).sum() for g in grads.values()))
    if expected > max_norm:
        assert after == pytest.approx(max_norm * expected / (expected + 1e-6), rel=1e-9)
        coef = max_norm / (expected + 1e-6)
        for n in grads:
            np.testing.assert_allclose(grads[n], before[n] * coef, rtol=1e-12)
    else:
        for n in grads:
            np.testing.assert_array_equal(grads[n], before[n])


def test_clip_grad_norm_nonfinite_and_errors():
    grads = [np.array([1.0, np.inf]), np.array([2.0])]
    assert clip_grad_norm(grads, 1.0) == np.inf
    assert grads[1][0] == 2.0  # untouched
    big = [np.full(4, 3e20, dtype=np.float32)]  # the float32 sum of squares overflows
    assert clip_grad_norm(big, 1.0) == pytest.approx(6e20, rel=1e-6)
    assert np.all(np.isfinite(big[0])) and big[0].dtype == np.float32
    with pytest.raises(InputError, match="max_norm"):
        clip_grad_norm(grads, 0.0)
