"""Where a GPT's resident memory goes: after the imports, while loading, while scoring.

One process; the high-water mark (VmHWM) is reset between the stages by writing 5 to
``/proc/self/clear_refs`` (Linux), so each stage's peak is its own:

    PYTHONPATH=. OMP_NUM_THREADS=2 python benchmarks/probe_score_rss.py HF_FOLDER [--tokens 1024]

HF_FOLDER is a Hugging Face checkpoint folder (``bench_llamacpp.py`` writes the random-weight
GPT-2-124M and SmolLM2-135M shapes). Printed: VmRSS / VmHWM in MiB after the imports, after
``GPT.from_hf``, after one and two ``token_logprobs`` calls of ``--tokens`` ids, and W (the
float32 weights) with each peak as a multiple of W. In-process figures: a memory check, not a
timing.
"""
from __future__ import annotations

import argparse


def status() -> dict:
    """VmRSS, VmHWM, RssAnon, RssFile of this process in MiB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1]) // 1024
    return out


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--calls", type=int, default=2)
    args = ap.parse_args()
    import numpy as np

    from seqprob.gpt import GPT

    print("imports", status())
    reset_peak()
    model = GPT.from_hf(args.folder, dtype="float32")
    w = sum(a.nbytes for a in model.params.values()) / 2 ** 20
    load = status()
    print("load   ", load, f"W {w:.0f} MiB, peak {load['VmHWM'] / w:.3f} W")
    reset_peak()
    ids = np.random.default_rng(0).integers(0, model.config.vocab_size, args.tokens + 1)
    for call in range(1, args.calls + 1):
        model.token_logprobs(ids)
        s = status()
        print(f"score {call}", s, f"peak {s['VmHWM'] / w:.3f} W")


if __name__ == "__main__":
    main()
