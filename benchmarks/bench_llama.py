"""seqprob vs PyTorch eager (transformers ``LlamaForCausalLM``) on Llama-style models, CPU.

Run (torch/transformers are benchmark-only dependencies, never seqprob ones)::

    PYTHONPATH=. python benchmarks/bench_llama.py [--threads 1 2] [--runs 7] [--pairs 3]
    PYTHONPATH=. python benchmarks/bench_llama.py --quick     # a sanity run, tiny sizes

Two parts, each side alone in its own fresh process (never numpy and torch timed in one
process, never both at once), one side after the other, the pair repeated ``--pairs`` times:

* ``small``: a Llama-style config (4 layers, d 256, 4 heads, 2 kv heads, SwiGLU F 688, RoPE,
  RMSNorm, vocabulary 4096, context 256, untied head), random weights made by the torch side and
  saved with ``save_pretrained`` to a temp folder, loaded by ``GPT.from_hf``. Rows: forward 8 x 256
  (log-probs, no grad; torch: eager attention) and a training step 8 x 256 (forward + backward +
  AdamW; seqprob: ``loss_and_grads`` + ``seqprob.optim.AdamW``).
* ``100m``: a random ~100M-parameter Llama (12 layers, d 768, 12 heads, 4 kv heads, F 2048,
  vocabulary 32000, tied), written by the torch side to a temp dir (never committed): load
  (``LlamaForCausalLM.from_pretrained`` vs ``GPT.from_hf``) and scoring 1 x 1024 tokens
  (log P of each token).
* ``135m``: the shape of SmolLM2-135M (30 layers, d 576, 9 heads, 3 kv heads, F 1536, vocabulary
  49,152, tied, RoPE theta 1e5), random weights: load and scoring 1 x 1024 tokens.

Threads: ``OMP/OPENBLAS/MKL_NUM_THREADS`` in each child's environment, plus
``torch.set_num_threads`` / ``threadpoolctl``. Timings: median [min, max] of ``--runs`` runs after
2 warm-ups; ratios = torch time / seqprob time (> 1: seqprob faster), per pair and their spread.
Peak memory = the child's own high-water mark (VmHWM, ``_harness.peak_rss_mib``); the checkpoint
is written by a child of its own first, so no timed child pays for building it. The seqprob side also reports max |log-prob difference| to
the torch side's output (saved by the torch child).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(vocab_size=4096, hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False,
             rope_theta=10000.0)
BIG = dict(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
           num_key_value_heads=4, max_position_embeddings=1024, rms_norm_eps=1e-6, tie_word_embeddings=True,
           rope_theta=10000.0)
SMOL = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
            num_key_value_heads=3, max_position_embeddings=2048, rms_norm_eps=1e-5, tie_word_embeddings=True,
            rope_theta=100000.0)
SPECS = {"small": SMALL, "100m": BIG, "135m": SMOL}
QUICK = {"small": dict(SMALL, vocab_size=512, hidden_size=64, intermediate_size=128, max_position_embeddings=32,
                       num_hidden_layers=2),
         "100m": dict(BIG, vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=64)}
QUICK["135m"] = QUICK["100m"]
SHAPES = {"small": {"B": 8, "T": 256}, "100m": {"B": 1, "T": 1024}, "135m": {"B": 1, "T": 1024}}
SUITE = {"order": 40, "group": "llama", "about": "Llama-style small (forward and training step 8x256), a ~100M HF "
         "Llama and the SmolLM2-135M shape (load, score 1x1024) vs transformers' LlamaForCausalLM"}


# ----------------------------------------------------------------------------- torch children
def write_side(part: str, folder: Path, spec: dict, shape: dict, threads: int, runs: int) -> dict:
    """Write the random-weight checkpoint both sides load (a child of its own, so that no
    timed child's peak RSS includes building and saving it)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(**spec)
    config._attn_implementation = "eager"
    LlamaForCausalLM(config).save_pretrained(folder)
    return {}


def torch_side(part: str, folder: Path, spec: dict, shape: dict, threads: int, runs: int) -> dict:
    import torch
    from transformers import LlamaForCausalLM

    torch.set_num_threads(threads)
    B, T = shape["B"], shape["T"]
    ids = np.random.default_rng(0).integers(0, spec["vocab_size"], (B, T + 1))
    out = {}
    t0 = time.perf_counter()
    model = LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
    out["load"] = time.perf_counter() - t0
    x, y = torch.from_numpy(ids[:, :-1]), torch.from_numpy(ids[:, 1:])

    def score():
        with torch.inference_mode():
            logp = torch.log_softmax(model(x).logits, dim=-1)
            return logp.gather(-1, y[..., None])[..., 0]
    np.save(folder / "torch_token_logprobs.npy", score().numpy())
    out["score"] = H.timeit(score, runs, 2)
    if part == "small":
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)

        def step():
            logits = model(x).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
        out["train_step"] = H.timeit(step, runs, 2)
    out["peak_rss_mib"] = H.peak_rss_mib()
    return out


# ----------------------------------------------------------------------------- seqprob child
def seqprob_side(part: str, folder: Path, spec: dict, shape: dict, threads: int, runs: int) -> dict:
    from threadpoolctl import threadpool_limits

    sys.path.insert(0, str(ROOT))
    from seqprob.gpt import GPT
    from seqprob.optim import AdamW

    B, T = shape["B"], shape["T"]
    ids = np.random.default_rng(0).integers(0, spec["vocab_size"], (B, T + 1))
    out = {}
    with threadpool_limits(limits=threads):
        t0 = time.perf_counter()
        model = GPT.from_hf(folder, dtype="float32")
        out["load"] = time.perf_counter() - t0
        ref = np.load(folder / "torch_token_logprobs.npy")
        out["max_abs_diff"] = float(np.abs(model.token_logprobs(ids) - ref).max())
        out["score"] = H.timeit(lambda: model.token_logprobs(ids), runs, 2)
        if part == "small":
            opt = AdamW(model.params, lr=1e-4, weight_decay=0.1)

            def step():
                _, grads = model.loss_and_grads(ids)
                opt.step(grads)
            out["train_step"] = H.timeit(step, runs, 2)
        out["matmul"] = H.numpy_matmul_peak(runs, 2)  # for the rows' % of the peak
    out["peak_rss_mib"] = H.peak_rss_mib()
    out["blas"] = H.describe_blas()
    return out


# ----------------------------------------------------------------------------- parent
def child(side: str, part: str, folder: Path, threads: int, runs: int, quick: bool,
          keep_openblas_env: bool = False, python: str | None = None) -> dict:
    # the same environment as the other GPT benchmarks: thread variables set, and the machine's
    # OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE dropped unless kept (benchmarks/README.md, Method)
    env = H.child_env(threads, keep_openblas_env)
    cmd = [python or sys.executable, __file__, "--child", side, part, str(folder), str(threads), str(runs)]
    cmd += ["--quick"] if quick else []
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"{side} child failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def fmt(t: dict) -> str:
    return f"{t['median']:.4f} [{t['min']:.4f}, {t['max']:.4f}]"


def run_part(part: str, threads: list, runs: int, pairs: int, quick: bool, tmp: Path,
             keep_openblas_env: bool = False) -> None:
    folder = tmp / part
    folder.mkdir(exist_ok=True)
    shape = {"B": 2, "T": 16} if quick else SHAPES[part]
    print(f"\n== {part}: {(QUICK if quick else SPECS)[part]}, shape {shape}")
    rows = ["score", "train_step"] if part == "small" else ["load", "score"]
    child("write", part, folder, 1, runs, quick, keep_openblas_env)
    for thr in threads:
        ratios = {row: [] for row in rows}
        for pair in range(pairs):
            t = child("torch", part, folder, thr, runs, quick, keep_openblas_env)  # first: its log-probs are the reference
            s = child("seqprob", part, folder, thr, runs, quick, keep_openblas_env)
            if pair == 0:
                print(f"  thr {thr} seqprob BLAS: {s['blas']}")
            for row in rows:
                ts, ss = (t[row], s[row]) if row != "load" else ({"median": t[row]}, {"median": s[row]})
                ratios[row].append(ts["median"] / ss["median"])
                detail = fmt(ss) + " vs " + fmt(ts) if row != "load" else f"{ss['median']:.3f} vs {ts['median']:.3f}"
                print(f"  thr {thr} pair {pair}: {row:<10} seqprob vs torch s: {detail}  ratio {ratios[row][-1]:.2f}")
            print(f"  thr {thr} pair {pair}: peak RSS MiB seqprob {s['peak_rss_mib']:.0f} "
                  f"torch {t['peak_rss_mib']:.0f};"
                  f" max |token logprob diff| {s['max_abs_diff']:.1e}")
        for row, r in ratios.items():
            print(f"  thr {thr}: {row:<10} ratio torch/seqprob median of pairs {np.median(r):.2f} "
                  f"(spread {min(r):.2f} - {max(r):.2f})")


def forward_flops(spec: dict, b: int, t: int) -> float:
    """Matmul FLOPs of one forward: the projections (grouped k/v), the SwiGLU MLP, the full
    T x T attention products and the unembedding."""
    C, F, L, V = spec["hidden_size"], spec["intermediate_size"], spec["num_hidden_layers"], spec["vocab_size"]
    kv = C * spec["num_key_value_heads"] // spec["num_attention_heads"]
    per_token = L * (2 * C * C + 2 * C * kv + 3 * C * F) + C * V
    return 2 * b * t * per_token + L * 2 * 2 * b * t * t * C


def suite_part(opts: H.SuiteOptions, part: str) -> dict:
    """{threads: [(seqprob result, torch result), ...]} of one part; the torch child runs first
    (the seqprob child checks its log-probs against the torch side's)."""
    folder = opts.folder / f"llama-{part}"
    folder.mkdir(exist_ok=True)
    ref = opts.reference_python
    child("write", part, folder, 1, opts.runs, opts.quick, opts.keep_openblas_env, ref)
    results = {thr: [] for thr in opts.threads}
    for _ in range(opts.repeats):
        for thr in opts.threads:
            t = child("torch", part, folder, thr, opts.runs, opts.quick, opts.keep_openblas_env, ref)
            s = child("seqprob", part, folder, thr, opts.runs, opts.quick, opts.keep_openblas_env)
            for side in (s, t):
                side["load"] = {"median": side["load"]}
            results[thr].append((s, t))
    return results


def suite_rows(opts: H.SuiteOptions) -> list:
    """The suite's rows: small (score, training step), 100m (score, load); nothing runs without
    torch and transformers (the torch side writes the checkpoint both sides load)."""
    size, (sb, st), (bb, bt) = "", (8, 256), (1, 1024)
    if opts.quick:
        size, (sb, st), (bb, bt) = "tiny (--quick) ", (2, 16), (2, 16)
    labels = {"small": (f"Llama {size}small forward (score) {sb}x{st}", f"Llama {size}small training step {sb}x{st}"),
              "100m": (f"~100M HF Llama {size}score {bb}x{bt}", f"~100M HF Llama {size}load (from_hf)"),
              "135m": (f"SmolLM2-135M shape {size}score {bb}x{bt}", f"SmolLM2-135M shape {size}load (from_hf)")}
    missing = opts.missing("torch", "transformers")
    if missing:
        return [H.make_row(opts, work, "LlamaForCausalLM", " ".join(map(str, opts.threads)), missing=missing)
                for part in labels for work in labels[part]]
    small, big, smol = suite_part(opts, "small"), suite_part(opts, "100m"), suite_part(opts, "135m")
    specs = QUICK if opts.quick else SPECS
    fs, fb = forward_flops(specs["small"], sb, st), forward_flops(specs["100m"], bb, bt)
    f135 = forward_flops(specs["135m"], bb, bt)
    return [*H.ratio_rows(opts, small, labels["small"][0], "LlamaForCausalLM eager", "score", "score", 1.0, fs),
            *H.ratio_rows(opts, small, labels["small"][1], "LlamaForCausalLM + torch AdamW", "train_step",
                          "train_step", 1.0, 3 * fs),
            *H.ratio_rows(opts, big, labels["100m"][0], "LlamaForCausalLM eager", "score", "score", 1.0, fb),
            *H.ratio_rows(opts, big, labels["100m"][1], "from_pretrained (maps the file)", "load", "load"),
            *H.ratio_rows(opts, smol, labels["135m"][0], "LlamaForCausalLM eager", "score", "score", 1.2, f135),
            *H.ratio_rows(opts, smol, labels["135m"][1], "from_pretrained (maps the file)", "load", "load")]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--parts", nargs="+", default=["small", "100m"], choices=["small", "100m", "135m"])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, for a sanity run")
    ap.add_argument("--keep-openblas-env", action="store_true",
                    help="keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in the children")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        side, part, folder, threads, runs = args.child
        spec = (QUICK if args.quick else SPECS)[part]
        shape = {"B": 2, "T": 16} if args.quick else SHAPES[part]
        fn = {"write": write_side, "torch": torch_side, "seqprob": seqprob_side}[side]
        print(json.dumps(fn(part, Path(folder), spec, shape, int(threads), int(runs))))
        return
    with tempfile.TemporaryDirectory(prefix="bench_llama_") as tmp:
        for part in args.parts:
            run_part(part, args.threads, args.runs, args.pairs, args.quick, Path(tmp), args.keep_openblas_env)


if __name__ == "__main__":
    main()
