"""Scale check: a GPT-2-124M-shaped model, seqprob ``GPT.from_hf`` vs HF ``GPT2LMHeadModel``.

Run (torch/transformers are benchmark-only dependencies)::

    PYTHONPATH=. python benchmarks/bench_gpt2_124m.py \
        [--threads 2] [--runs 7] [--warmups 2] [--repeats 3] [--new-tokens 128] [--batches 1 4]

Shape of GPT-2 small (12 layers, 12 heads, d 768, vocab 50,257, context 1,024) with random
weights: a torch-side child builds ``GPT2LMHeadModel(GPT2Config(...))`` with a fixed seed and
writes it with ``save_pretrained`` (safetensors) into a temporary folder (never committed);
both sides then load that folder, each alone in its own fresh process, one after the other
(same method as ``bench_transformer.py``). Rows: load time (one per process), forward
log-probabilities of 1 x 1024 and 4 x 1024 ids, cached greedy decode of ``--new-tokens``
tokens after a 1-token prefix (tokens/s; HF: the model called with ``past_key_values``, as a
user writes a cached loop), peak RSS of each process against the bound
1.5 x (float32 weights + the (T, V) float32 output of the largest forward). An untimed step
first checks the log-probabilities of 1 x 128 ids agree to 1e-4.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

GPT2 = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
T = 1024
N_PARAMS = 124_439_808  # GPT-2 small with tied embeddings


def ids(batch: int, length: int = T):
    import numpy as np

    return np.random.default_rng(batch).integers(0, GPT2["vocab_size"], (batch, length))


# ----------------------------------------------------------------------------- torch children
def write_model(folder: str) -> dict:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**GPT2, activation_function="gelu_new")).eval()
    model.save_pretrained(folder, safe_serialization=True)
    return {"params": sum(p.numel() for p in model.parameters())}


def torch_child(args) -> dict:
    import numpy as np
    import torch
    from transformers import GPT2LMHeadModel

    info = H.limit_threads(args.threads[0], torch_side=True)
    t0 = time.perf_counter()
    model = GPT2LMHeadModel.from_pretrained(args.model, dtype=torch.float32).eval()
    load = time.perf_counter() - t0

    def forward(x):
        return torch.log_softmax(model(torch.from_numpy(x)).logits, dim=-1)

    def decode():
        out = model(torch.tensor([[0]]), use_cache=True)
        for _ in range(args.new_tokens - 1):
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            out = model(nxt, past_key_values=out.past_key_values, use_cache=True)

    with torch.inference_mode():
        if args.check:
            np.save(Path(args.out) / "torch_logprobs.npy", forward(ids(1, 128)).numpy()[0])
            return info
        res = {**info, "load": load}
        for b in args.batches:
            x = ids(b)
            res[f"forward_{b}"] = H.timeit(lambda: forward(x), args.runs, args.warmups)
        res["decode"] = H.timeit(decode, args.runs, args.warmups)
    return res


# ----------------------------------------------------------------------------- seqprob child
def seqprob_child(args) -> dict:
    import numpy as np

    from seqprob.gpt import GPT

    info = H.limit_threads(args.threads[0], torch_side=False)
    t0 = time.perf_counter()
    model = GPT.from_hf(args.model, dtype="float32")
    load = time.perf_counter() - t0

    def decode():
        state = model.start(np.array([0]))
        for _ in range(args.new_tokens - 1):
            state = model.step(state, int(np.argmax(state.logprobs)))

    if args.check:
        np.save(Path(args.out) / "seqprob_logprobs.npy", model.logprobs(ids(1, 128)[0]))
        return info
    res = {**info, "load": load}
    for b in args.batches:
        x = ids(b)
        res[f"forward_{b}"] = H.timeit(lambda: model.logprobs(x), args.runs, args.warmups)
    res["decode"] = H.timeit(decode, args.runs, args.warmups)
    return res


# ----------------------------------------------------------------------------- parent
def child_args(args, side, threads, folder, check=False) -> list:
    return ["--side", side, "--threads", threads, "--runs", args.runs, "--warmups", args.warmups,
            "--model", folder / "model", "--out", folder, "--new-tokens", args.new_tokens,
            "--batches", *args.batches, *(["--check"] if check else [])]


def correctness(args, folder: Path) -> None:
    import numpy as np

    for side in ("seqprob", "torch"):
        H.run_child(__file__, child_args(args, side, 1, folder, True), 1, args.keep_openblas_env, args.cpus)
    a, b = np.load(folder / "seqprob_logprobs.npy"), np.load(folder / "torch_logprobs.npy")
    diff = float(np.abs(a - b).max())
    print(f"correctness (untimed): max |logprob diff| on 1 x 128 ids {diff:.2e} (limit 1e-4)")
    if not diff <= 1e-4:
        raise SystemExit(f"seqprob and HF disagree: {diff:.2e}")


def report(args, results: dict) -> None:
    rows = [(f"forward {b}x{T}", f"forward_{b}", f"forward_{b}", None) for b in args.batches]
    rows.append((f"cached decode {args.new_tokens} tokens", "decode", "decode", None))
    H.ratio_table(rows, results, args.threads, peak_key=None)
    weights_mib = N_PARAMS * 4 / 2 ** 20
    out_mib = max(args.batches) * T * GPT2["vocab_size"] * 4 / 2 ** 20
    for thr in args.threads:
        pairs = results[thr]
        for i, side in enumerate(("seqprob", "torch")):
            load = [p[i]["load"] for p in pairs]
            rss = [p[i]["peak_rss_mib"] for p in pairs]
            dec = [args.new_tokens / p[i]["decode"]["median"] for p in pairs]
            print(f"{side:<8}{thr} thr: load {statistics.median(load):.2f} s [{min(load):.2f}-{max(load):.2f}], "
                  f"decode {statistics.median(dec):.1f} tokens/s, peak RSS {max(rss):.0f} MiB = "
                  f"{max(rss) / (weights_mib + out_mib):.2f}x (float32 weights {weights_mib:.0f} MiB + "
                  f"(B*T, V) output {out_mib:.0f} MiB; target <= 1.5x)")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    H.add_common_args(ap)
    ap.set_defaults(threads=[2])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--side", choices=["seqprob", "torch", "write"], help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child = {"seqprob": seqprob_child, "torch": torch_child}.get(args.side)
        H.emit(child(args) if child else write_model(args.model))
        return
    H.warn_if_short(args)
    folder = H.workdir()
    made = H.run_child(__file__, ["--side", "write", "--model", folder / "model"], 1)
    print(f"GPT-2-124M shape {GPT2}, {made['params']:,} parameters, random weights in {folder / 'model'}; "
          f"{args.warmups} warm-ups, {args.runs} runs, {args.repeats} repeats")
    correctness(args, folder)
    def describe(rep, thr, pair):
        print(f"  repeat {rep + 1} {thr} thr: " + "; ".join(
            f"{side} forward {H.fmt_timing(p['forward_' + str(args.batches[0])])} decode {H.fmt_timing(p['decode'])}"
            for side, p in zip(("seqprob", "torch"), pair)))

    results = H.run_pairs(__file__, args, lambda side, thr: child_args(args, side, thr, folder), describe,
                          show_pools=False)
    print()
    report(args, results)
    H.save_json(args.json, results)


if __name__ == "__main__":
    main()
