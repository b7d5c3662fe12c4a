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
SUITE = {"order": 50, "group": "gpt2-124m", "about": "GPT-2-124M shape via from_hf vs GPT2LMHeadModel: forward 1x1024 "
         "and 4x1024, cached decode, load, peak RSS (the largest thread count only)"}


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
    res["matmul"] = H.numpy_matmul_peak(args.runs, args.warmups)  # for the rows' % of the peak
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


def suite_rows(opts: H.SuiteOptions) -> list:
    """The suite's rows at the largest thread count (the full method at both counts takes
    half an hour on 2 cores); --quick: forward 1x1024 and 16 decoded tokens."""
    from types import SimpleNamespace

    args = SimpleNamespace(runs=opts.runs, warmups=opts.warmups, batches=[1] if opts.quick else [1, 4],
                           new_tokens=16 if opts.quick else 128)
    works = [f"GPT-2-124M forward {b}x{T}" for b in args.batches]
    works += [f"GPT-2-124M cached decode {args.new_tokens} tokens", "GPT-2-124M load (from_hf)",
              f"GPT-2-124M peak RSS / (weights + ({max(args.batches)}*{T}, V) output)"]
    missing = opts.missing("torch", "transformers")
    if missing:  # the torch side writes the checkpoint
        return [H.make_row(opts, w, "GPT2LMHeadModel", max(opts.threads), missing=missing) for w in works]
    H.run_child(__file__, ["--side", "write", "--model", opts.folder / "gpt2"], 1,
                python=opts.reference_python)
    folder = opts.folder / "gpt2-run"
    folder.mkdir(exist_ok=True)
    (folder / "model").symlink_to(opts.folder / "gpt2")
    run = H.SuiteOptions(**{**vars(opts), "threads": [max(opts.threads)]})
    results = H.suite_pairs(__file__, run, lambda side, thr: child_args(args, side, thr, folder),
                            reference="transformers")
    for pairs in results.values():
        for pair in pairs:
            for side in pair:
                side["load_t"] = {"median": side["load"]}
    from bench_transformer import forward_flops

    shape = dict(n_embd=GPT2["n_embd"], n_layer=GPT2["n_layer"], vocab_size=GPT2["vocab_size"])
    rows = [row for b, w in zip(args.batches, works)
            for row in H.ratio_rows(run, results, w, "GPT2LMHeadModel", f"forward_{b}", f"forward_{b}", 1.0,
                                    forward_flops(shape, b, T))]
    rows += H.ratio_rows(run, results, works[-3], "GPT2LMHeadModel, its KV cache", "decode", "decode", 1.0)
    rows += H.ratio_rows(run, results, works[-2], "from_pretrained", "load_t", "load_t")
    budget = (N_PARAMS * 4 + max(args.batches) * T * GPT2["vocab_size"] * 4) / 2 ** 20
    for thr, pairs in results.items():
        ours, theirs = (max(p[i]["peak_rss_mib"] for p in pairs) for i in (0, 1))
        rows.append(H.make_row(run, works[-1], "GPT2LMHeadModel", thr, target="<= 1.5x", met=ours / budget <= 1.5,
                               peak_rss=f"{ours:,.0f} = {ours / budget:.2f}x / {theirs:,.0f} = {theirs / budget:.2f}x"))
    return rows


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
