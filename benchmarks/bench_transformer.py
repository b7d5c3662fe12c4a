"""seqprob's numpy GPT vs PyTorch on the CPU: forward, KV-cached sampling, matmul peak.

Run (torch is a benchmark-only dependency, never a seqprob one):

    PYTHONPATH=. /work/torchenv/bin/python benchmarks/bench_transformer.py [--threads 1 2] [--repeats 7]

Config "small": n_layer 4, n_head 4, n_embd 256, block 256, vocab 4096, float32, the same
weights on both sides (copied from ``GPT(config, seed=0)``), thread counts set identically
(``threadpoolctl`` for numpy's BLAS, ``torch.set_num_threads``). Each thread count runs in a
fresh process; every timing is the median of ``--repeats`` runs after 2 warm-ups (min/max
shown). Rows:

* ``forward``: log-probs of a batch 8 x 256, no grad (torch: manual attention; ``forward_sdpa``:
  torch's fused scaled_dot_product_attention, for reference);
* ``sample``: batch 1, a 1-token prefix and 256 new tokens, greedy, each side with its own
  preallocated KV cache (torch: the same simple cache a numpy user would write);
* ``matmul``: a 4096 x 768 x 3072 float32 matmul, the machine's peak for the fractions.

The training step (forward + backward + clipping + AdamW, 8 x 256) is measured by
``benchmarks/bench_train.py``, with the same config, threads and matmul-peak fraction.

Prints one table: median seconds, throughput, ratio seqprob / torch of the medians and of the
minima (>1 = seqprob faster; on a loaded machine the minima are the steadier estimate), and
GFLOP/s (from the median) as a fraction of the matmul peak.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SMALL = dict(vocab_size=4096, block_size=256, n_layer=4, n_head=4, n_embd=256)
B, T, NEW = 8, 256, 256


# ----------------------------------------------------------------------------- timing
def timeit(fn, repeats: int, warmup: int = 2) -> dict:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"median_s": float(np.median(times)), "min_s": float(min(times)), "max_s": float(max(times))}


def timeit_paired(fns: dict, repeats: int, warmup: int = 2) -> dict:
    """Time several callables alternately (A B A B ...), so that load from other processes
    hits every side alike; returns ``name -> timing`` as :func:`timeit`."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: {"median_s": float(np.median(v)), "min_s": float(min(v)), "max_s": float(max(v))}
            for name, v in times.items()}


def forward_flops(cfg: dict, b: int, t: int) -> float:
    """Matmul FLOPs of one forward (full T x T attention products, as both sides compute)."""
    C, L, V, n = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"], b * t
    per_layer = 2 * n * 12 * C * C + 2 * 2 * b * t * t * C
    return L * per_layer + 2 * n * C * V


def decode_flops(cfg: dict, new: int) -> float:
    C, L, V = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"]
    attn = sum(2 * 2 * (p + 1) * C for p in range(new))
    return new * (L * 2 * 12 * C * C + 2 * C * V) + L * attn


# ----------------------------------------------------------------------------- torch reference
def torch_model(params: dict, cfg: dict):
    """A nanoGPT-style torch GPT holding copies of seqprob's weights (Conv1D layout)."""
    import torch
    import torch.nn.functional as F

    P = {k: torch.from_numpy(np.ascontiguousarray(v).copy()) for k, v in params.items()}
    L, H, C = cfg["n_layer"], cfg["n_head"], cfg["n_embd"]
    hd, eps = C // H, 1e-5
    mask = torch.tril(torch.ones(cfg["block_size"], cfg["block_size"], dtype=torch.bool))

    def blk(l, k):
        return P[f"h.{l}.{k}"]

    def forward(idx, sdpa=False):
        b, t = idx.shape
        x = P["wte"][idx] + P["wpe"][:t]
        for l in range(L):
            h = F.layer_norm(x, (C,), blk(l, "ln_1.g"), blk(l, "ln_1.b"), eps)
            qkv = torch.addmm(blk(l, "attn.c_attn.b"), h.view(-1, C), blk(l, "attn.c_attn.w")).view(b, t, 3 * C)
            q, k, v = (z.view(b, t, H, hd).transpose(1, 2) for z in qkv.split(C, dim=2))
            if sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
                att = att.masked_fill(~mask[:t, :t], float("-inf")).softmax(dim=-1)
                y = att @ v
            y = y.transpose(1, 2).contiguous().view(-1, C)
            x = x + torch.addmm(blk(l, "attn.c_proj.b"), y, blk(l, "attn.c_proj.w")).view(b, t, C)
            h = F.layer_norm(x, (C,), blk(l, "ln_2.g"), blk(l, "ln_2.b"), eps)
            u = F.gelu(torch.addmm(blk(l, "mlp.c_fc.b"), h.view(-1, C), blk(l, "mlp.c_fc.w")), approximate="tanh")
            x = x + torch.addmm(blk(l, "mlp.c_proj.b"), u, blk(l, "mlp.c_proj.w")).view(b, t, C)
        h = F.layer_norm(x, (C,), P["ln_f.g"], P["ln_f.b"], eps)
        return torch.log_softmax(h @ P["wte"].T, dim=-1)

    def generate(prefix, new):
        """Greedy decoding with a preallocated KV cache; returns the new token ids."""
        K = torch.zeros(L, 1, H, cfg["block_size"], hd)
        Vc = torch.zeros_like(K)
        out, tokens = [], list(prefix)
        pos = 0
        for i in range(len(prefix) + new - 1):
            tok = tokens[i]
            x = P["wte"][tok] + P["wpe"][pos]  # (C,)
            x = x.view(1, C)
            for l in range(L):
                h = F.layer_norm(x, (C,), blk(l, "ln_1.g"), blk(l, "ln_1.b"), eps)
                qkv = torch.addmm(blk(l, "attn.c_attn.b"), h, blk(l, "attn.c_attn.w"))
                q, k, v = (z.view(1, H, 1, hd) for z in qkv.split(C, dim=1))
                K[l, :, :, pos:pos + 1] = k
                Vc[l, :, :, pos:pos + 1] = v
                att = (q @ K[l, :, :, :pos + 1].transpose(-2, -1)) * (1.0 / math.sqrt(hd))
                y = (att.softmax(dim=-1) @ Vc[l, :, :, :pos + 1]).view(1, C)
                x = x + torch.addmm(blk(l, "attn.c_proj.b"), y, blk(l, "attn.c_proj.w"))
                h = F.layer_norm(x, (C,), blk(l, "ln_2.g"), blk(l, "ln_2.b"), eps)
                u = F.gelu(torch.addmm(blk(l, "mlp.c_fc.b"), h, blk(l, "mlp.c_fc.w")), approximate="tanh")
                x = x + torch.addmm(blk(l, "mlp.c_proj.b"), u, blk(l, "mlp.c_proj.w"))
            pos += 1
            if i >= len(prefix) - 1:
                h = F.layer_norm(x, (C,), P["ln_f.g"], P["ln_f.b"], eps)
                nxt = int(torch.log_softmax(h @ P["wte"].T, dim=-1).argmax())
                out.append(nxt)
                tokens.append(nxt)
        return out

    return forward, generate


def seqprob_generate(model, prefix, new):
    state = model.start(np.asarray(prefix))
    out = []
    for i in range(new):
        nxt = int(np.argmax(state.logprobs))
        out.append(nxt)
        if i < new - 1:
            state = model.step(state, nxt)
    return out


# ----------------------------------------------------------------------------- one process
def run_child(threads: int, repeats: int, which: list) -> dict:
    import torch
    from threadpoolctl import threadpool_limits

    from seqprob.gpt import GPT, GPTConfig

    torch.set_num_threads(threads)
    results = {"threads": threads}
    with threadpool_limits(limits=threads), torch.inference_mode():
        model = GPT(GPTConfig(**SMALL), seed=0)
        t_forward, t_generate = torch_model(model.params, SMALL)
        ids = np.random.default_rng(0).integers(0, SMALL["vocab_size"], (B, T))
        tids = torch.from_numpy(ids)
        if "matmul" in which:
            a = np.random.default_rng(1).standard_normal((4096, 768), dtype=np.float32)
            w = np.random.default_rng(2).standard_normal((768, 3072), dtype=np.float32)
            r = timeit(lambda: np.matmul(a, w), repeats)
            results["matmul"] = {**r, "gflops": 2 * 4096 * 768 * 3072 / r["median_s"] / 1e9}
        if "forward" in which:
            diff = float(np.abs(model.logprobs(ids) - t_forward(tids).numpy()).max())
            timings = timeit_paired({"seqprob": lambda: model.logprobs(ids), "torch": lambda: t_forward(tids),
                                     "torch_sdpa": lambda: t_forward(tids, sdpa=True)}, repeats)
            results["forward"] = {**timings, "max_abs_diff": diff, "flops": forward_flops(SMALL, B, T)}
        if "sample" in which:
            a_tokens, b_tokens = seqprob_generate(model, [0], NEW), t_generate([0], NEW)
            agree = float(np.mean(np.array(a_tokens) == np.array(b_tokens)))
            reps = max(3, repeats // 2)
            timings = timeit_paired({"seqprob": lambda: seqprob_generate(model, [0], NEW),
                                     "torch": lambda: t_generate([0], NEW)}, reps, 1)
            results["sample"] = {**timings, "token_agreement": agree, "flops": decode_flops(SMALL, NEW)}
    return results


def report(all_results: list) -> str:
    lines = [f"{'row':<14}{'thr':>4}{'seqprob s':>11}{'torch s':>10}{'ratio':>8}{'ratio(min)':>11}"
             f"{'seqprob GF/s':>14}{'% peak':>8}   notes"]
    for res in all_results:
        thr, peak = res["threads"], res.get("matmul", {}).get("gflops")
        if peak:
            r = res["matmul"]
            lines.append(f"{'matmul':<14}{thr:>4}{r['median_s']:>11.4f}{'':>10}{'':>8}{'':>11}{peak:>14.1f}{100:>7.0f}%"
                         f"   4096x768x3072 float32 (min {r['min_s']:.4f} max {r['max_s']:.4f})")
        for row, ref in (("forward", "torch"), ("forward_sdpa", "torch_sdpa"), ("sample", "torch")):
            key = "forward" if row == "forward_sdpa" else row
            if key not in res:
                continue
            r = res[key]
            s, t = r["seqprob"]["median_s"], r[ref]["median_s"]
            gf = r.get("flops", 0) / s / 1e9
            frac = f"{100 * gf / peak:>7.0f}%" if peak else f"{'':>8}"
            note = (f"tokens/s {B * T / s:,.0f} vs {B * T / t:,.0f}" if key == "forward" else
                    f"tokens/s {NEW / s:,.0f} vs {NEW / t:,.0f}" if key == "sample" else "")
            if key == "forward" and row == "forward":
                note += f"; max|diff| {r['max_abs_diff']:.1e}"
            if key == "sample":
                note += f"; greedy agreement {r['token_agreement']:.2f}"
            note += f"; seqprob min {r['seqprob']['min_s']:.4f} max {r['seqprob']['max_s']:.4f}"
            ratio_min = r[ref]["min_s"] / r["seqprob"]["min_s"]
            lines.append(f"{row:<14}{thr:>4}{s:>11.4f}{t:>10.4f}{t / s:>8.2f}{ratio_min:>11.2f}{gf:>14.1f}{frac}   {note}")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--which", nargs="+", default=["matmul", "forward", "sample"],
                    choices=["matmul", "forward", "sample"])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help="print the raw results as JSON too")
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(run_child(args.threads[0], args.repeats, args.which)))
        return
    results = []
    for threads in args.threads:  # a fresh process per thread count
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads),
               "MKL_NUM_THREADS": str(threads)}
        cmd = [sys.executable, __file__, "--child", "--threads", str(threads), "--repeats",
               str(args.repeats), "--which", *args.which]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(report(results))
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
