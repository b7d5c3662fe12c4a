"""seqprob's numpy GPT vs PyTorch on the CPU: forward, cached decode, matmul peak.

Run (torch is a benchmark-only dependency, never a seqprob one)::

    PYTHONPATH=. python benchmarks/bench_transformer.py \
        [--threads 1 2] [--runs 7] [--warmups 2] [--repeats 3] [--cpus 0,1] [--decode-only]

Method (see benchmarks/_harness.py and benchmarks/README.md): config "small" (4 layers,
4 heads, d 256, context 256, vocab 4096), float32 weights written once to a file that both
sides read; each side runs alone in its own fresh process, the two one after the other, with
the same thread count (environment + API); median [min-max] of ``--runs`` timed runs after
``--warmups``; the pair repeated ``--repeats`` times, the spread of the ratios printed.
A separate, untimed step first checks that both sides give the same log-probabilities
(max |diff| <= 1e-4) and the same greedy continuation.

Rows: forward 8 x 256 (log-probs, no grad) vs torch eager with manual attention, and vs
torch's fused ``scaled_dot_product_attention``; cached decode, batch 1, a 1-token prefix and
256 new greedy tokens, vs torch with a hand-written preallocated KV cache; float32 matmul
peak (4096 x 768 x 3072) measured the same way on each side, each seqprob forward as a
percentage of numpy's peak. ``--decode-only`` times the cached-decode row alone (same method,
a shorter run for decoding work).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

B, T, NEW = 8, 256, 256
SUITE = {"order": 20, "group": "gpt-small", "about": 'config "small": forward 8x256 vs torch eager and SDPA, '
         "cached decode +256 (batch 1), % of the GEMM peak"}


def forward_flops(cfg: dict = H.SMALL, b: int = B, t: int = T) -> float:
    """Matmul FLOPs of one forward (full T x T attention products, as torch computes)."""
    C, L, V, n = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"], b * t
    return L * (2 * n * 12 * C * C + 2 * 2 * b * t * t * C) + 2 * n * C * V


def decode_flops(cfg: dict = H.SMALL, new: int = NEW) -> float:
    C, L, V = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"]
    attn = sum(2 * 2 * (p + 1) * C for p in range(new))
    return new * (L * 2 * 12 * C * C + 2 * C * V) + L * attn


def inputs():
    import numpy as np

    return np.random.default_rng(0).integers(0, H.SMALL["vocab_size"], (B, T))


# ----------------------------------------------------------------------------- seqprob child
def seqprob_model(weights: str):
    import numpy as np

    from seqprob.gpt import GPT, GPTConfig

    model = GPT(GPTConfig(**H.SMALL), seed=0)
    with np.load(weights) as z:
        model.load_params({k: z[k] for k in z.files})
    return model


def seqprob_generate(model, prefix, new: int) -> list:
    import numpy as np

    state, out = model.start(np.asarray(prefix)), []
    for i in range(new):
        out.append(int(np.argmax(state.logprobs)))
        if i < new - 1:
            state = model.step(state, out[-1])
    return out


def seqprob_child(args) -> dict:
    import numpy as np

    info = H.limit_threads(args.threads[0], torch_side=False)
    model, ids = seqprob_model(args.weights), inputs()
    if args.check:  # untimed correctness step
        np.save(Path(args.out) / "seqprob_logprobs.npy", model.logprobs(ids))
        return {**info, "greedy": seqprob_generate(model, [0], NEW)}
    r, w = args.runs, args.warmups
    if args.decode_only:
        return {**info, "decode": H.timeit(lambda: seqprob_generate(model, [0], NEW), r, w)}
    return {**info, "matmul": H.numpy_matmul_peak(r, w),
            "forward": H.timeit(lambda: model.logprobs(ids), r, w),
            "decode": H.timeit(lambda: seqprob_generate(model, [0], NEW), r, w)}


# ----------------------------------------------------------------------------- torch child
def torch_child(args) -> dict:
    import numpy as np
    import torch

    import _torch_gpt as TG

    info = H.limit_threads(args.threads[0], torch_side=True)
    P, tids, cfg = TG.load_params(args.weights), torch.from_numpy(inputs()), H.SMALL
    with torch.inference_mode():
        if args.check:
            np.save(Path(args.out) / "torch_logprobs.npy", TG.logprobs(P, tids, cfg).numpy())
            return {**info, "greedy": TG.generate(P, [0], NEW, cfg)}
        r, w = args.runs, args.warmups
        if args.decode_only:
            return {**info, "decode": H.timeit(lambda: TG.generate(P, [0], NEW, cfg), r, w)}
        return {**info, "matmul": H.torch_matmul_peak(r, w),
                "forward": H.timeit(lambda: TG.logprobs(P, tids, cfg), r, w),
                "forward_sdpa": H.timeit(lambda: TG.logprobs(P, tids, cfg, sdpa=True), r, w),
                "decode": H.timeit(lambda: TG.generate(P, [0], NEW, cfg), r, w)}


# ----------------------------------------------------------------------------- parent
def write_weights(folder: Path) -> str:
    import numpy as np

    from seqprob.gpt import GPT, GPTConfig

    path = folder / "small.npz"
    np.savez(path, **GPT(GPTConfig(**H.SMALL), seed=0).params)
    return str(path)


def child_args(args, side: str, threads: int, weights: str, folder: Path, check: bool) -> list:
    return ["--side", side, "--threads", threads, "--runs", args.runs, "--warmups", args.warmups,
            "--weights", weights, "--out", folder, *(["--check"] if check else []),
            *(["--decode-only"] if args.decode_only else [])]


def correctness(args, weights: str, folder: Path) -> None:
    import numpy as np

    res = {side: H.run_child(__file__, child_args(args, side, 1, weights, folder, True), 1,
                             args.keep_openblas_env, args.cpus) for side in ("seqprob", "torch")}
    a, b = np.load(folder / "seqprob_logprobs.npy"), np.load(folder / "torch_logprobs.npy")
    diff = float(np.abs(a - b).max())
    agree = float(np.mean(np.array(res["seqprob"]["greedy"]) == np.array(res["torch"]["greedy"])))
    print(f"correctness (untimed, 1 thread): max |logprob diff| {diff:.2e} (limit 1e-4), "
          f"greedy {NEW}-token agreement {agree:.2f}")
    if not diff <= 1e-4:
        raise SystemExit(f"seqprob and torch disagree: max |diff| {diff:.2e} > 1e-4")


def suite_rows(opts: H.SuiteOptions) -> list:
    """The suite's rows (no correctness step: run the script alone for it)."""
    from types import SimpleNamespace

    weights = write_weights(opts.folder)
    args = SimpleNamespace(runs=opts.runs, warmups=opts.warmups, decode_only=False)
    results = H.suite_pairs(__file__, opts, lambda side, thr: child_args(args, side, thr, weights,
                                                                         opts.folder, False))
    fwd = forward_flops()
    return [*H.ratio_rows(opts, results, f"GPT small forward {B}x{T}", "torch eager", "forward", "forward",
                          1.0, fwd),
            *H.ratio_rows(opts, results, f"GPT small forward {B}x{T}", "torch SDPA", "forward",
                          "forward_sdpa", 0.85, fwd),
            *H.ratio_rows(opts, results, f"GPT small forward {B}x{T}, % of numpy GEMM peak", "-", "forward",
                          "forward", flops=fwd, min_peak=(85, {2})),
            *H.ratio_rows(opts, results, f"GPT small cached decode +{NEW}, batch 1", "torch, own KV cache",
                          "decode", "decode", 1.5, decode_flops())]


def main(argv=None) -> None:
    args = H.paired_args(__doc__.splitlines()[0], argv, {"seqprob": seqprob_child, "torch": torch_child},
                         lambda ap: ap.add_argument("--decode-only", action="store_true", help="time only "
                                                    "the cached-decode row (no forward, no matmul peak)"))
    if args is None:
        return
    folder = H.workdir()
    weights = write_weights(folder)
    print(f"config small {H.SMALL}, forward {B}x{T}, decode +{NEW} tokens (batch 1), float32; "
          f"{args.warmups} warm-ups, {args.runs} runs, {args.repeats} repeats; weights {weights}")
    correctness(args, weights, folder)
    def describe(rep, thr, pair):
        for key in [k for k in ("forward", "decode") if k in pair[0]]:
            print(f"  repeat {rep + 1} {thr} thr {key:<8} seqprob {H.fmt_timing(pair[0][key])}  "
                  f"torch {H.fmt_timing(pair[1][key])}")

    results = H.run_pairs(__file__, args, lambda side, thr: child_args(args, side, thr, weights, folder, False),
                          describe)
    print()
    if args.decode_only:
        H.ratio_table([(f"cached decode +{NEW} (batch 1)", "decode", "decode", None)], results,
                      args.threads, peak_key=None)
        H.save_json(args.json, results)
        return
    fwd = forward_flops()
    H.ratio_table([(f"forward {B}x{T} vs torch eager", "forward", "forward", fwd),
                   (f"forward {B}x{T} vs torch SDPA", "forward", "forward_sdpa", fwd),
                   (f"cached decode +{NEW} (batch 1)", "decode", "decode", decode_flops()),
                   ("float32 matmul 4096x768x3072", "matmul", "matmul", None)], results, args.threads)
    for thr in args.threads:
        peaks = [s["matmul"]["gflops"] for s, _ in results[thr]]
        tpeaks = [t["matmul"]["gflops"] for _, t in results[thr]]
        print(f"matmul peak {thr} thr: numpy {min(peaks):.1f}-{max(peaks):.1f} GFLOP/s, "
              f"torch {min(tpeaks):.1f}-{max(tpeaks):.1f} GFLOP/s")
    H.save_json(args.json, results)


if __name__ == "__main__":
    main()
