"""Probe: where a shard of the 2-thread forward spends its non-GEMM time, and whether a
fused kernel from numba or numexpr would beat seqprob's numpy passes on it.

Run on a quiet machine, one BLAS thread (~1 minute; numba and numexpr are optional, looked
for in the running interpreter and reported as missing otherwise; they are never seqprob
dependencies: install them in a venv of their own)::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/probe_fused_kernels.py

Shapes are those of one shard of the 2-thread forward of config "small" (4 sequences x 256
positions, d 256, 4 heads, vocab 4096): each thread runs such a shard alone. Median of 15
calls in milliseconds:

- ``shard forward``: ``GPT.logprobs`` of the shard, then the wall time of each ``nn`` kernel
  inside it (wrapped with a timer, median forward of 7 after 2 warm-ups), against the time
  its matmul FLOPs take at this process's float32 GEMM peak (4096 x 768 x 3072);
- ``attention q_block=..``: ``nn.causal_attention_inference`` of one layer at several query
  block sizes (the key blocks above the diagonal are skipped: smaller blocks compute fewer
  scores, but make more numpy calls), and its GEMMs alone at q_block 64;
- ``log-softmax 1,024 x V``: the unembedding's log-softmax in 512-row pieces against blocks
  of ``LSM_BLOCK`` logits, for V = 4,096, 32,000 and 50,257;
- ``log-softmax`` over V of the shard's 1,024 rows (in place, in 64-row chunks), ``GELU``
  (tanh) of the (1,024, 1,024) MLP activations,
  ``LayerNorm`` of the (1,024, 256) residual: seqprob's kernel, then a fused one-pass-per-row
  numba kernel (``fastmath``) and a numexpr expression where they apply.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from seqprob import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

B, T, H_, HD, C, F, V = 4, 256, 4, 64, 256, 1024, 4096


def median_ms(fn, calls: int = 15) -> float:
    return H.timeit(fn, runs=calls, warmups=2)["median"] * 1e3


KERNELS = ("linear_forward", "causal_attention_inference", "log_softmax_inplace", "gelu_forward",
           "layer_norm_forward", "embedding_forward")


def shard_profile(rng) -> None:
    """Where one shard's forward goes: the kernels' wall time and the GEMM floor."""
    import functools
    from unittest import mock

    from seqprob.gpt import GPT, GPTConfig

    model = GPT(GPTConfig(vocab_size=V, block_size=T, n_layer=4, n_head=H_, n_embd=C), seed=0)
    ids, spent = rng.integers(0, V, (B, T)), dict.fromkeys(KERNELS, 0.0)

    def timed(name, fn, *a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent[name] += time.perf_counter() - t0
    patches = [mock.patch.object(nn, name, functools.partial(timed, name, getattr(nn, name)))
               for name in KERNELS]
    for p in patches:
        p.start()
    try:
        total = H.timeit(lambda: model.logprobs(ids), runs=7, warmups=2)["median"] * 1e3
    finally:
        for p in patches:
            p.stop()
    M, K, N = H.MATMUL_SHAPE
    peak = H.numpy_matmul_peak(7, 2)["gflops"]
    flops = 4 * (2 * B * T * 12 * C * C + 4 * B * T * T * C) + 2 * B * T * C * V
    print(f"shard forward {total:7.1f} ms; its matmul FLOPs at the {M}x{K}x{N} peak "
          f"({peak:.0f} GFLOP/s) {flops / peak / 1e6:.1f} ms = {flops / peak / 1e6 / total:.0%}")
    for name in KERNELS:  # 9 calls were timed (2 warm-ups + 7 runs)
        ms = spent[name] / 9 * 1e3
        print(f"  {name:<28} {ms:7.1f} ms  {ms / total:5.1%}")


def attention_rows(rng) -> None:
    qkv = rng.standard_normal((B, T, 3 * C), dtype=np.float32)
    q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, H_, HD).transpose(0, 2, 1, 3) for i in range(3))
    out = np.empty((B, T, C), np.float32)
    for qb in (32, 64, 128, 256):
        ms = median_ms(lambda: nn.causal_attention_inference(q, k, v, out, q_block=qb))
        print(f"attention q_block={qb:<4d} {ms:7.3f} ms per layer")
    qs, ks, vs = (np.ascontiguousarray(a) for a in (q, k, v))
    s, y = np.empty((H_, 64, T), np.float32), np.empty((H_, 64, HD), np.float32)

    def gemms():
        for b in range(B):
            for q0 in range(0, T, 64):
                w = q0 + 64
                np.matmul(qs[b][:, q0:w], ks[b][:, :w].transpose(0, 2, 1), out=s[:, :, :w])
                np.matmul(s[:, :, :w], vs[b][:, :w], out=y)
    print(f"attention GEMMs alone, q_block=64 {median_ms(gemms):7.3f} ms per layer")


def log_softmax_blocks(rng) -> None:
    """The unembedding's log-softmax of 1,024 rows over V: in 512-row pieces (what
    token_logprobs did before) against blocks of ``LSM_BLOCK`` logits (what it does now)."""
    from seqprob.gpt.model import LSM_BLOCK

    for V in (4096, 32000, 50257):
        u0 = rng.standard_normal((1024, V), dtype=np.float32) * 3
        u = u0.copy()

        def pieces(rows):
            tmp = np.empty((rows, V), np.float32)
            for i in range(0, len(u), rows):
                nn.log_softmax_inplace(u[i:i + rows], tmp=tmp[:len(u[i:i + rows])])
        reset = median_ms(lambda: np.copyto(u, u0))
        old = median_ms(lambda: (np.copyto(u, u0), pieces(512))) - reset
        new = median_ms(lambda: (np.copyto(u, u0), pieces(max(1, LSM_BLOCK // V)))) - reset
        print(f"log-softmax 1,024 x {V:<6} 512-row pieces {old:7.2f} ms, {LSM_BLOCK}-logit blocks {new:7.2f} ms")


def try_import(name):
    try:
        return __import__(name)
    except ImportError:
        print(f"({name} is not installed in this interpreter: its rows are left out)")
        return None


def numba_kernels(numba):
    """Fused per-row kernels: each row read once per pass, kept in L1 between passes."""
    jit = numba.njit(fastmath=True, cache=False)

    @jit
    def log_softmax(u):
        for i in range(u.shape[0]):
            r = u[i]
            m = r.max()
            s = np.float32(0.0)
            for j in range(r.shape[0]):
                s += np.exp(r[j] - m)
            c = m + np.log(s)
            for j in range(r.shape[0]):
                r[j] -= c

    @jit
    def gelu(x):
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                v = x[i, j]
                x[i, j] = np.float32(0.5) * v * (np.float32(1.0) + np.tanh(
                    np.float32(0.7978845608) * (v + np.float32(0.044715) * v * v * v)))

    @jit
    def layer_norm(x, g, b, y, eps):
        n = x.shape[1]
        for i in range(x.shape[0]):
            mu = x[i].sum() / n
            var = np.float32(0.0)
            for j in range(n):
                d = x[i, j] - mu
                var += d * d
            r = np.float32(1.0) / np.sqrt(var / n + eps)
            for j in range(n):
                y[i, j] = (x[i, j] - mu) * r * g[j] + b[j]
    return log_softmax, gelu, layer_norm


def elementwise_rows(rng) -> None:
    u0 = rng.standard_normal((B * T, V), dtype=np.float32) * 3
    x0 = rng.standard_normal((B * T, F), dtype=np.float32)
    r, g, b = (rng.standard_normal(s, dtype=np.float32) for s in ((B * T, C), C, C))
    u, x, t, y = u0.copy(), x0.copy(), np.empty_like(x0), np.empty_like(r)
    reset_u, reset_x = (lambda: np.copyto(u, u0)), (lambda: np.copyto(x, x0))
    tmp = np.empty((64, V), np.float32)

    def seqprob_lsm():
        for i in range(0, len(u), 64):
            nn.log_softmax_inplace(u[i:i + 64], tmp=tmp)
    rows = {"log-softmax": [("numpy (seqprob)", lambda: (reset_u(), seqprob_lsm()), reset_u)],
            "GELU (tanh)": [("numpy (seqprob)", lambda: (reset_x(), nn.gelu_forward(x, out=x, tanh_out=t)), reset_x)],
            "LayerNorm": [("numpy (seqprob)", lambda: nn.layer_norm_forward(r, g, b, 1e-5, out=y, xhat_out=y), None)]}
    numba, numexpr = try_import("numba"), try_import("numexpr")
    if numba is not None:
        lsm, gelu, ln = numba_kernels(numba)
        rows["log-softmax"].append(("numba fused", lambda: (reset_u(), lsm(u)), reset_u))
        rows["GELU (tanh)"].append(("numba fused", lambda: (reset_x(), gelu(x)), reset_x))
        rows["LayerNorm"].append(("numba fused", lambda: ln(r, g, b, y, np.float32(1e-5)), None))
    if numexpr is not None:
        numexpr.set_num_threads(1)
        expr = "0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))"
        rows["GELU (tanh)"].append(("numexpr", lambda: (reset_x(), numexpr.evaluate(
            expr, out=x, casting="unsafe")), reset_x))
    for kernel, variants in rows.items():
        for label, fn, reset in variants:
            ms = median_ms(fn) - (median_ms(reset) if reset else 0.0)  # less the copy that resets
            print(f"{kernel:<12} {label:<16} {ms:7.3f} ms")


def main() -> None:
    info = H.limit_threads(1, torch_side=False)
    print(f"one shard of the 2-thread forward of config small: {B} x {T}, d {C}, V {V}; "
          f"BLAS {info['pools']}")
    rng = np.random.default_rng(0)
    shard_profile(rng)
    attention_rows(rng)
    log_softmax_blocks(rng)
    elementwise_rows(rng)


if __name__ == "__main__":
    main()
