"""Benchmark: one training step (forward + backward + clip + AdamW), seqprob vs PyTorch CPU.

Run (torch is a benchmark-only dependency)::

    PYTHONPATH=. python benchmarks/bench_train.py \
        [--threads 1 2] [--runs 7] [--warmups 2] [--repeats 3] [--cpus 0,1]

Config "small" (4 layers, 4 heads, d 256, context 256, vocab 4096), batch 8 x 256, float32,
the same weights (a file both sides read) and the same batches. Method as
``bench_transformer.py``: each side alone in a fresh process, one after the other, same
threads by environment and API, median [min-max] of ``--runs`` steps after ``--warmups``,
the pair repeated ``--repeats`` times with the spread of the ratios. PyTorch side: the same
GPT-2 block with manual attention, ``torch.optim.AdamW`` (decay 0.1 on the ``.w`` matrices,
as seqprob), ``clip_grad_norm_(1.0)``. A separate untimed step runs 3 steps on each side and
checks the losses agree to 1e-4 and the weights after them to 5e-4 (half a learning-rate
step: Adam moves a weight whose gradient is near 0 by up to lr = 1e-3 per step whatever
its sign, so float32 rounding can show there).
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

B, T, LR, N_BATCHES, CHECK_STEPS = 8, 256, 1e-3, 4, 3
SUITE = {"order": 30, "group": "train", "about": 'config "small": one training step 8x256 (fwd + bwd + clip + '
         "AdamW) vs torch"}


def train_flops(cfg: dict = H.SMALL, b: int = B, t: int = T) -> float:
    """Matmul FLOPs of one training step (backward = 2 x forward)."""
    C, L, V = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"]
    weights = L * 12 * C * C + C * V
    attention = L * 2 * 2 * t * t * C  # QK^T and PV per sequence (full square)
    return 3 * (2 * b * t * weights + b * attention)


def batches():
    import numpy as np

    rng = np.random.default_rng(0)
    return [rng.integers(0, H.SMALL["vocab_size"], size=(B, T + 1)) for _ in range(N_BATCHES)]


def time_steps(step, args) -> tuple:
    """Timing of ``step(i)`` plus the medians of its phases (``step`` returns them)."""
    parts, counter = [], iter(range(10 ** 9))
    res = H.timeit(lambda: parts.append(step(next(counter))), args.runs, args.warmups)
    phases = {k: statistics.median(p[k] for p in parts[args.warmups:]) for k in parts[0]}
    return res, phases


# ----------------------------------------------------------------------------- seqprob child
def seqprob_child(args) -> dict:
    import numpy as np

    from bench_transformer import seqprob_model
    from seqprob.optim import AdamW, clip_grad_norm

    info = H.limit_threads(args.threads[0], torch_side=False)
    model, data = seqprob_model(args.weights), batches()
    opt = AdamW(model.params, lr=LR, betas=(0.9, 0.99), weight_decay=0.1)

    def step(i):
        t0 = time.perf_counter()
        loss, grads = model.loss_and_grads(data[i % N_BATCHES])
        t1 = time.perf_counter()
        clip_grad_norm(grads, 1.0)
        t2 = time.perf_counter()
        opt.step(grads)
        t3 = time.perf_counter()
        return {"fwd_bwd": t1 - t0, "clip": t2 - t1, "opt": t3 - t2, "loss": float(loss)}

    if args.check:
        losses = [step(i)["loss"] for i in range(CHECK_STEPS)]
        np.savez(Path(args.out) / "seqprob_after.npz", **model.params)
        return {**info, "losses": losses}
    train, phases = time_steps(step, args)
    return {**info, "matmul": H.numpy_matmul_peak(args.runs, args.warmups), "train": train, "phases": phases}


# ----------------------------------------------------------------------------- torch child
def torch_child(args) -> dict:
    import numpy as np
    import torch

    import _torch_gpt as TG

    info = H.limit_threads(args.threads[0], torch_side=True)
    P, data = TG.load_params(args.weights, requires_grad=True), [torch.from_numpy(b) for b in batches()]
    decay = [p for k, p in P.items() if k.endswith(".w")]
    other = [p for k, p in P.items() if not k.endswith(".w")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}], lr=LR, betas=(0.9, 0.99))

    def step(i):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = TG.loss(P, data[i % N_BATCHES], H.SMALL)
        loss.backward()
        t1 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(list(P.values()), 1.0)
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        return {"fwd_bwd": t1 - t0, "clip": t2 - t1, "opt": t3 - t2, "loss": float(loss)}

    if args.check:
        losses = [step(i)["loss"] for i in range(CHECK_STEPS)]
        np.savez(Path(args.out) / "torch_after.npz", **{k: v.detach().numpy() for k, v in P.items()})
        return {**info, "losses": losses}
    train, phases = time_steps(step, args)
    return {**info, "matmul": H.torch_matmul_peak(args.runs, args.warmups), "train": train, "phases": phases}


# ----------------------------------------------------------------------------- parent
def child_args(args, side, threads, weights, folder, check) -> list:
    return ["--side", side, "--threads", threads, "--runs", args.runs, "--warmups", args.warmups,
            "--weights", weights, "--out", folder, *(["--check"] if check else [])]


def correctness(args, weights: str, folder: Path) -> None:
    import numpy as np

    res = {side: H.run_child(__file__, child_args(args, side, 1, weights, folder, True), 1,
                             args.keep_openblas_env, args.cpus) for side in ("seqprob", "torch")}
    loss_diff = max(abs(a - b) for a, b in zip(res["seqprob"]["losses"], res["torch"]["losses"]))
    with np.load(folder / "seqprob_after.npz") as s, np.load(folder / "torch_after.npz") as t:
        drift = max(float(np.abs(s[k] - t[k]).max()) for k in t.files)
    print(f"correctness (untimed, 1 thread, {CHECK_STEPS} steps): losses seqprob "
          f"{res['seqprob']['losses']} torch {res['torch']['losses']}; max |loss diff| "
          f"{loss_diff:.2e} (limit 1e-4), max |weight diff| after the steps {drift:.2e} (limit 5e-4)")
    if not (loss_diff <= 1e-4 and drift <= 5e-4):
        raise SystemExit("seqprob and torch training steps disagree")


def suite_rows(opts: H.SuiteOptions) -> list:
    """The suite's rows (no correctness step: run the script alone for it)."""
    from types import SimpleNamespace

    from bench_transformer import write_weights

    weights = write_weights(opts.folder)
    args = SimpleNamespace(runs=opts.runs, warmups=opts.warmups)
    results = H.suite_pairs(__file__, opts, lambda side, thr: child_args(args, side, thr, weights,
                                                                         opts.folder, False))
    return H.ratio_rows(opts, results, f"GPT small training step {B}x{T}", "torch eager + AdamW", "train",
                        "train", 1.0, train_flops())


def main(argv=None) -> None:
    from bench_transformer import write_weights

    args = H.paired_args(__doc__.splitlines()[0], argv, {"seqprob": seqprob_child, "torch": torch_child})
    if args is None:
        return
    folder = H.workdir()
    weights = write_weights(folder)
    print(f"training step, config small {H.SMALL}, batch {B}x{T}, float32, lr {LR}; {args.warmups} "
          f"warm-ups, {args.runs} runs, {args.repeats} repeats; {train_flops() / 1e9:.1f} GFLOP per step")
    correctness(args, weights, folder)
    def describe(rep, thr, pair):
        split = lambda r: ", ".join(f"{k} {1e3 * v:.0f} ms" for k, v in r["phases"].items()  # noqa: E731
                                    if k != "loss")
        print(f"  repeat {rep + 1} {thr} thr: seqprob {H.fmt_timing(pair[0]['train'])} ({split(pair[0])}); "
              f"torch {H.fmt_timing(pair[1]['train'])} ({split(pair[1])})")

    results = H.run_pairs(__file__, args, lambda side, thr: child_args(args, side, thr, weights, folder, False),
                          describe)
    print()
    H.ratio_table([(f"training step {B}x{T}", "train", "train", train_flops())], results, args.threads)
    H.save_json(args.json, results)


if __name__ == "__main__":
    main()
