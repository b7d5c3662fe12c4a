"""Probe: does keeping the parameters in normal pages (not huge pages) slow the GPT down?

Run on a quiet machine (numpy only, ~3 minutes)::

    PYTHONPATH=. python benchmarks/probe_param_pages.py [--rounds 5] [--threads 1 2]

A parameter buffer of ``SMALL_PAGES_MIN`` bytes or more is an anonymous map of normal 4 KiB
pages (``seqprob.gpt.params.allocate(..., small_pages=True)``) so that loading does not wait
for the kernel to compact memory into huge pages. A decoding step of config "small" reads all
17 MB of weights, which span more 4 KiB pages than a core's TLB holds, so this is where normal
pages could cost (and why the threshold keeps such a model in numpy's memory). Each mode runs
in its own fresh processes, the modes alternating, ``--rounds`` times per thread count:
``normal`` (the parameters in normal pages whatever their size) and ``huge`` (a plain numpy
array, which numpy advises Linux to back with huge pages). Each child times, as ``bench_transformer.py`` does (same weights, same ids, same
greedy +256 tokens from id 0), the forward 8 x 256 and the cached decode (median of
``--runs`` after ``--warmups``), and reports its ``AnonHugePages`` (how much of its memory the
kernel did back with huge pages). Printed: per mode and thread count, the median [min-max]
over the rounds of the children's medians.

``--folder DIR`` (an HF GPT-2 checkpoint folder, e.g. the GPT-2-124M shape that
``bench_gpt2_124m.py`` writes) times ``GPT.from_hf(DIR).logprobs`` of 1 x 1024 and 4 x 1024
ids at 2 threads instead, where the result (205 / 823 MB a call) is what changes: ``normal``
puts the parameters and every result in normal pages, ``huge`` neither, and ``out`` is
``normal`` with one result array passed as ``out=`` to every call. Each child times 5
(1 x 1024) or 3 (4 x 1024) calls after one warm-up; printed per mode and shape: the median
[min-max] over the rounds of the forward's median and of the kernel (system) CPU time per call.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import _harness as H
from bench_transformer import NEW, inputs, seqprob_generate
threads, mode, runs, warmups = int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
H.limit_threads(threads, torch_side=False)
from seqprob.gpt import GPT, GPTConfig, params
# normal: the parameters in normal pages whatever their size; huge: a plain numpy array
params.SMALL_PAGES_MIN = 0 if mode == "normal" else float("inf")
model, ids = GPT(GPTConfig(**H.SMALL), seed=0), inputs()
res = {"forward": H.timeit(lambda: model.logprobs(ids), runs, warmups)["median"],
       "decode": H.timeit(lambda: seqprob_generate(model, [0], NEW), runs, warmups)["median"]}
res["huge_kib"] = next(int(l.split()[1]) for l in open("/proc/self/smaps_rollup") if l.startswith("AnonHugePages:"))
print(json.dumps(res))
"""


CHILD_HF = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import _harness as H
folder, mode, batch, runs = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
H.limit_threads(2, torch_side=False)
import numpy as np
from seqprob.gpt import GPT, params
params.SMALL_PAGES_MIN = float("inf") if mode == "huge" else 0
model = GPT.from_hf(folder)
ids = np.random.default_rng(0).integers(0, model.config.vocab_size, (batch, 1024))
out = model.logprobs(ids) if mode == "out" else None  # warm-up (and, for "out", the array reused)
r0 = resource.getrusage(resource.RUSAGE_SELF)
res = H.timeit(lambda: model.logprobs(ids, out=out), runs, 0)
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"forward": res["median"], "sys": (r1.ru_stime - r0.ru_stime) / runs}))
"""


def one_child(threads: int, mode: str, runs: int, warmups: int, folder=None, batch=None) -> dict:
    here = str(Path(__file__).resolve().parent)
    if folder is None:
        cmd = [sys.executable, "-c", CHILD, here, str(threads), mode, str(runs), str(warmups)]
    else:
        cmd = [sys.executable, "-c", CHILD_HF, here, str(folder), mode, str(batch), str(runs)]
    proc = subprocess.run(cmd, env=H.child_env(threads), capture_output=True, text=True, cwd=H.ROOT)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise RuntimeError(f"child failed ({proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fig(xs, scale=1e3, fmt="{:.1f}") -> str:
    xs = [x * scale for x in xs]
    return f"{fmt.format(statistics.median(xs))} [{fmt.format(min(xs))}-{fmt.format(max(xs))}]"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--warmups", type=int, default=2)
    ap.add_argument("--folder", type=Path, help="an HF GPT-2 folder: time its forward 1 / 4 x 1024 instead")
    args = ap.parse_args(argv)
    if args.folder is not None:
        return hf_forward(args)
    modes = ("normal", "huge")
    results = {(t, m): [] for t in args.threads for m in modes}
    for _ in range(args.rounds):
        for t in args.threads:
            for m in modes:
                results[(t, m)].append(one_child(t, m, args.runs, args.warmups))
    print(f"config small, {args.rounds} alternating rounds of fresh processes, each the median of "
          f"{args.runs} runs after {args.warmups} warm-ups; median [min-max] over the rounds")
    for (t, m), rs in results.items():
        huge = [r["huge_kib"] / 1024 for r in rs]
        print(f"{t} thr {m:<6}: forward 8x256 {fig([r['forward'] for r in rs])} ms, decode +256 "
              f"{fig([r['decode'] for r in rs])} ms, AnonHugePages {fig(huge, 1, '{:.0f}')} MiB")



def hf_forward(args) -> None:
    results = {(b, m): [] for b in (1, 4) for m in ("normal", "huge", "out")}
    for _ in range(args.rounds):
        for b, m in results:
            results[(b, m)].append(one_child(2, m, min(args.runs, 5 if b == 1 else 3), 0, args.folder, b))
    print(f"GPT.from_hf({str(args.folder)!r}).logprobs, 2 threads, {args.rounds} alternating rounds of "
          "fresh processes; median [min-max] over the rounds")
    for (b, m), rs in results.items():
        print(f"{b} x 1024 {m:<6}: forward {fig([r['forward'] for r in rs], 1, '{:.3f}')} s, kernel time "
              f"per call {fig([r['sys'] for r in rs], 1, '{:.2f}')} s")


if __name__ == "__main__":
    main()
