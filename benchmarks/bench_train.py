"""Benchmark: one training step (forward + backward + clip + AdamW), seqprob vs PyTorch CPU.

Config "small" (n_layer 4, n_head 4, n_embd 256, block 256, vocab 4096), batch 8 x 256,
float32, the same weights and batches on both sides, at 1 and 2 threads (each thread count in
a fresh process; ``threadpoolctl`` for numpy's BLAS, ``torch.set_num_threads`` for torch);
the two sides' steps are interleaved so that load from other processes hits both alike.
PyTorch side: the same GPT-2 block written with manual attention, ``torch.optim.AdamW``
(decay on the ``.w`` matrices, as seqprob), ``clip_grad_norm_(1.0)``.

Run (torch is a benchmark-only dependency)::

    PYTHONPATH=. /work/torchenv/bin/python benchmarks/bench_train.py [--runs 7] [--threads 1 2]

Prints per thread count: median [min, max] seconds per step, tokens/s, the throughput ratio
seqprob / torch (>= 1.0: seqprob is at least as fast), each side's split into forward+backward,
clipping and optimizer, and the step's GFLOP/s as a fraction of a 4096x768x3072 float32
``np.matmul`` measured in the same process.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CONFIG = dict(vocab_size=4096, block_size=256, n_layer=4, n_head=4, n_embd=256)
B, T = 8, 256


def train_flops(cfg=CONFIG, b=B, t=T) -> float:
    """Matmul FLOPs of one training step (backward = 2 x forward)."""
    C, L, V = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"]
    weights = L * 12 * C * C + C * V
    attention = L * 2 * 2 * t * t * C  # QK^T and PV per sequence (full square)
    return 3 * (2 * b * t * weights + b * attention)


def stats(times):
    return {"median": statistics.median(times), "min": min(times), "max": max(times)}


def timed(fn, warmups: int, runs: int):
    for _ in range(warmups):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def matmul_peak(np, runs: int = 5) -> float:
    a = np.random.default_rng(0).standard_normal((4096, 768), dtype=np.float32)
    w = np.random.default_rng(1).standard_normal((768, 3072), dtype=np.float32)
    out = np.empty((4096, 3072), np.float32)
    times = timed(lambda: np.matmul(a, w, out=out), 2, runs)
    return 2 * 4096 * 768 * 3072 / min(times) / 1e9


# --------------------------------------------------------------------------------- torch side
def torch_model(params: dict, cfg: dict):
    import torch
    import torch.nn.functional as F

    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    H, C = cfg["n_head"], cfg["n_embd"]
    eps = 1e-5

    def loss_fn(batch):
        idx, tgt = batch[:, :-1], batch[:, 1:]
        b, t = idx.shape
        x = tp["wte"][idx] + tp["wpe"][:t]
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        for layer in range(cfg["n_layer"]):
            p = lambda k: tp[f"h.{layer}.{k}"]  # noqa: E731
            h = F.layer_norm(x, (C,), p("ln_1.g"), p("ln_1.b"), eps)
            qkv = torch.addmm(p("attn.c_attn.b"), h.view(b * t, C), p("attn.c_attn.w")).view(b, t, 3, H, C // H)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)  # (b, H, t, hd) each
            att = (q @ k.transpose(-2, -1)) * (1.0 / (C // H) ** 0.5)
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b * t, C)
            x = x + torch.addmm(p("attn.c_proj.b"), y, p("attn.c_proj.w")).view(b, t, C)
            h = F.layer_norm(x, (C,), p("ln_2.g"), p("ln_2.b"), eps).view(b * t, C)
            u = F.gelu(torch.addmm(p("mlp.c_fc.b"), h, p("mlp.c_fc.w")), approximate="tanh")
            x = x + torch.addmm(p("mlp.c_proj.b"), u, p("mlp.c_proj.w")).view(b, t, C)
        xf = F.layer_norm(x, (C,), tp["ln_f.g"], tp["ln_f.b"], eps)
        logits = xf.view(b * t, C) @ tp["wte"].t()
        return F.cross_entropy(logits, tgt.reshape(-1))

    return tp, loss_fn


def torch_stepper(params, batches, cfg, lr, threads):
    import torch

    torch.set_num_threads(threads)
    tp, loss_fn = torch_model(params, cfg)
    decay = [p for k, p in tp.items() if k.endswith(".w")]
    other = [p for k, p in tp.items() if not k.endswith(".w")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.99))
    tbatches = [torch.from_numpy(b) for b in batches]
    parts = {"fwd_bwd": [], "clip": [], "opt": []}
    losses = []

    def step(i=[0]):  # noqa: B006 - a counter over the batches
        batch = tbatches[i[0] % len(tbatches)]
        i[0] += 1
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(batch)
        loss.backward()
        t1 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(list(tp.values()), 1.0)
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2)):
            parts[k].append(v)
        losses.append(float(loss))

    return step, parts, losses, lambda: {k: v.detach().numpy().copy() for k, v in tp.items()}


# ------------------------------------------------------------------------------- seqprob side
def seqprob_stepper(model, batches, lr):
    from seqprob.optim import AdamW, clip_grad_norm

    opt = AdamW(model.params, lr=lr, betas=(0.9, 0.99), weight_decay=0.1)
    parts = {"fwd_bwd": [], "clip": [], "opt": []}
    losses = []

    def step(i=[0]):  # noqa: B006
        batch = batches[i[0] % len(batches)]
        i[0] += 1
        t0 = time.perf_counter()
        loss, grads = model.loss_and_grads(batch)
        t1 = time.perf_counter()
        clip_grad_norm(grads, 1.0)
        t2 = time.perf_counter()
        opt.step(grads)
        t3 = time.perf_counter()
        for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2)):
            parts[k].append(v)
        losses.append(float(loss))

    return step, parts, losses


def worker(threads: int, warmups: int, runs: int) -> dict:
    import numpy as np
    from threadpoolctl import threadpool_limits

    from seqprob.gpt import GPT, GPTConfig

    with threadpool_limits(limits=threads):
        peak = matmul_peak(np)
        model = GPT(GPTConfig(**CONFIG), seed=0)
        params = {k: v.copy() for k, v in model.params.items()}
        rng = np.random.default_rng(0)
        batches = [rng.integers(0, CONFIG["vocab_size"], size=(B, T + 1)) for _ in range(4)]
        lr = 1e-3
        t_step, t_parts, t_losses, t_weights = torch_stepper(params, batches, CONFIG, lr, threads)
        s_step, s_parts, s_losses = seqprob_stepper(model, batches, lr)
        # interleaved (s, t, t, s, ...) so that load from other processes hits both sides alike
        s_times, t_times = [], []
        for r in range(warmups + runs):
            order = ((s_step, s_times), (t_step, t_times))
            for fn, times in (order if r % 2 == 0 else order[::-1]):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        s_times, t_times = s_times[warmups:], t_times[warmups:]
        t_parts = {k: statistics.median(v[warmups:]) for k, v in t_parts.items()}
        s_parts = {k: statistics.median(v[warmups:]) for k, v in s_parts.items()}
        t_after = t_weights()  # same batches, same steps: the weights must still agree
        drift = max(float(np.max(np.abs(model.params[k] - t_after[k]))) for k in t_after)
    flops = train_flops()
    return {"threads": threads, "peak_gflops": peak, "torch": stats(t_times), "seqprob": stats(s_times),
            "torch_parts": t_parts, "seqprob_parts": s_parts,
            "loss0": [s_losses[0], t_losses[0]], "param_drift": drift,
            "seqprob_gflops": flops / statistics.median(s_times) / 1e9,
            "torch_gflops": flops / statistics.median(t_times) / 1e9}


def report(r: dict) -> None:
    tok = B * T
    s, t = r["seqprob"], r["torch"]
    print(f"\n== {r['threads']} thread(s); float32 matmul peak {r['peak_gflops']:.1f} GFLOP/s")
    for name, st, gf, parts in (("seqprob", s, r["seqprob_gflops"], r["seqprob_parts"]),
                                ("torch", t, r["torch_gflops"], r["torch_parts"])):
        split = ", ".join(f"{k} {1e3 * v:.1f} ms" for k, v in parts.items())
        print(f"  {name:8s} {st['median']:.4f} s/step [min {st['min']:.4f}, max {st['max']:.4f}]  "
              f"{tok / st['median']:8.0f} tok/s  {gf:6.1f} GFLOP/s = {gf / r['peak_gflops']:.0%} of peak"
              f"  ({split})")
    print(f"  throughput ratio seqprob / torch: {t['median'] / s['median']:.3f}x "
          f"(min-based {t['min'] / s['min']:.3f}x)")
    print(f"  first-step loss seqprob {r['loss0'][0]:.6f} torch {r['loss0'][1]:.6f}; "
          f"max |param diff| after all steps {r['param_drift']:.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--warmups", type=int, default=2)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.warmups, args.runs)))
        return
    print(f"training step, config {CONFIG}, batch {B} x {T}, float32, "
          f"{args.warmups} warm-ups, {args.runs} runs; {train_flops() / 1e9:.1f} GFLOP per step")
    for threads in args.threads:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads))
        out = subprocess.run([sys.executable, __file__, "--worker", str(threads), "--runs", str(args.runs),
                              "--warmups", str(args.warmups)], env=env, check=True,
                             capture_output=True, text=True)
        report(json.loads(out.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    main()
