"""Loading Hugging Face checkpoints at real sizes: peak memory and wall time of ``GPT.from_hf``.

Run (numpy only: no reference library is needed, the targets are absolute)::

    PYTHONPATH=. python benchmarks/bench_load.py [--runs 7] [--only 0.5b-f32 0.5b-bf16 124m]
    PYTHONPATH=. python benchmarks/bench_load.py --quick      # tiny shapes, a smoke run
    python -m benchmarks --only load                          # the suite's rows (largest --threads)

Checkpoints (random weights, written once per run into a temporary folder by a child process of
their own, streamed tensor by tensor so the writer never holds the model):

* ``0.5b-f32`` / ``0.5b-bf16``: the shape of Qwen2.5-0.5B (Llama architecture: 24 layers,
  d 896, 14 heads, 2 kv heads, SwiGLU F 4864, vocabulary 151,936, tied embeddings; 494M
  parameters, 1.98 GB as float32), stored as F32 and as BF16 (converted once at load).
* ``124m``: a GPT-2-124M-shaped Llama (12 layers, d 768, 12 heads, F 3072, vocabulary 50,257,
  tied; 124M parameters, 497 MB float32) stored as F32.

Each load runs in a fresh process (``import seqprob`` first, then ``GPT.from_hf`` alone, float32
weights). Printed per checkpoint: the float32 weight bytes W, the child's RSS after the import
(the interpreter, numpy and seqprob: paid whatever is loaded), its peak RSS (VmHWM) after the
load, and (peak - import) / W, which is the load's own memory in units of the weights it
produces; and the load's wall time, median [min-max] of ``--runs`` fresh processes.

Targets: (peak - import) / W <= 1.5 for the 0.5B checkpoints; the 124M checkpoint loads in
under 1 s (median, 2 threads).
"""
from __future__ import annotations

import argparse
import json
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402  (after the path insert above)

SUITE = {"order": 70, "group": "load", "about": "GPT.from_hf at real sizes (Qwen2.5-0.5B shape F32 and BF16, "
         "GPT-2-124M-shape Llama): the load's own peak RSS / W and its wall time (no reference: absolute targets)"}
SHAPES = {
    "0.5b": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                 num_attention_heads=14, num_key_value_heads=2),
    "124m": dict(vocab_size=50257, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                 num_attention_heads=12, num_key_value_heads=12),
}
QUICK = {name: dict(spec, vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2) for name, spec in SHAPES.items()}
CASES = {"0.5b-f32": ("0.5b", "F32"), "0.5b-bf16": ("0.5b", "BF16"), "124m": ("124m", "F32")}
TARGET_RSS_RATIO, TARGET_124M_S = 1.5, 1.0

WRITER = r"""
import json, struct, sys
import numpy as np
folder, spec, dtype = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
C, F, V, L = spec["hidden_size"], spec["intermediate_size"], spec["vocab_size"], spec["num_hidden_layers"]
hd = C // spec["num_attention_heads"]
nq, nk = spec["num_attention_heads"] * hd, spec["num_key_value_heads"] * hd
shapes = {"model.embed_tokens.weight": (V, C), "model.norm.weight": (C,)}
for i in range(L):
    p = f"model.layers.{i}."
    shapes.update({p + "input_layernorm.weight": (C,), p + "post_attention_layernorm.weight": (C,),
                   p + "self_attn.q_proj.weight": (nq, C), p + "self_attn.k_proj.weight": (nk, C),
                   p + "self_attn.v_proj.weight": (nk, C), p + "self_attn.o_proj.weight": (C, nq),
                   p + "mlp.gate_proj.weight": (F, C), p + "mlp.up_proj.weight": (F, C),
                   p + "mlp.down_proj.weight": (C, F)})
size = 2 if dtype == "BF16" else 4
header, offset = {}, 0
for name, shape in shapes.items():
    n = int(np.prod(shape)) * size
    header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
    offset += n
raw = json.dumps(header).encode()
raw += b" " * (-len(raw) % 8)
rng = np.random.default_rng(0)
with open(folder + "/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(raw)) + raw)
    for name, shape in shapes.items():  # one tensor in memory at a time
        w = np.ones(shape, np.float32) if "norm" in name else rng.standard_normal(shape, np.float32) * 0.02
        f.write((w.view(np.uint32) >> 16).astype("<u2").tobytes() if dtype == "BF16" else w.astype("<f4").tobytes())
config = dict(spec, architectures=["LlamaForCausalLM"], model_type="llama", max_position_embeddings=1024,
              rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=True, hidden_act="silu",
              bos_token_id=0, eos_token_id=1, torch_dtype="bfloat16" if dtype == "BF16" else "float32")
json.dump(config, open(folder + "/config.json", "w"))
"""

LOADER = r"""
import json, sys, time
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
from seqprob.gpt import GPT  # import seqprob is lazy: the GPT's modules, before the first reading
after_import = rss("VmRSS:")
t0 = time.perf_counter()
model = GPT.from_hf(sys.argv[1])
seconds = time.perf_counter() - t0
weights = sum(a.nbytes for a in model.params.values())
print(json.dumps({"seconds": seconds, "import_rss": after_import, "peak_rss": rss("VmHWM:"),
                  "weights": weights}))
"""


def _env(threads: int) -> dict:
    import os

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.update({k: str(threads) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    return env


def write_checkpoint(folder: Path, spec: dict, dtype: str) -> None:
    """Write a random Llama checkpoint in a child of its own (it never shares this process's peak)."""
    folder.mkdir(parents=True)
    subprocess.run([sys.executable, "-c", WRITER, str(folder), json.dumps(spec), dtype], check=True)


def load_once(folder: Path, threads: int) -> dict:
    out = subprocess.run([sys.executable, "-c", LOADER, str(folder)], env=_env(threads), check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(case: str, shapes: dict, runs: int, threads: int, tmp: Path) -> dict:
    shape, dtype = CASES[case]
    folder = tmp / case
    write_checkpoint(folder, shapes[shape], dtype)
    loads = [load_once(folder, threads) for _ in range(runs)]
    times = [r["seconds"] for r in loads]
    worst = max(loads, key=lambda r: r["peak_rss"] - r["import_rss"])
    ratio = (worst["peak_rss"] - worst["import_rss"]) / worst["weights"]
    return {"case": case, "file_dtype": dtype, "weights_mb": worst["weights"] / 1e6,
            "import_rss_mb": worst["import_rss"] / 1e6, "peak_rss_mb": worst["peak_rss"] / 1e6,
            "load_ratio": ratio, "median_s": statistics.median(times), "min_s": min(times),
            "max_s": max(times), "runs": runs, "threads": threads}


def verdict(row: dict) -> str:
    checks = []
    if row["case"].startswith("0.5b"):
        checks.append(("RSS", row["load_ratio"] <= TARGET_RSS_RATIO, f"<= {TARGET_RSS_RATIO}x W"))
    if row["case"] == "124m":
        checks.append(("time", row["median_s"] < TARGET_124M_S, f"< {TARGET_124M_S} s"))
    return "; ".join(f"{what} {target}: {'met' if ok else 'MISSED'}" for what, ok, target in checks)


def suite_rows(opts) -> list:
    """One row per checkpoint at the largest ``--threads``: the load's median wall time and
    its own memory, (peak - import) / W, against the targets of the module docstring."""
    threads = max(opts.threads)
    shapes, runs = (QUICK, 2) if opts.quick else (SHAPES, opts.runs)
    rows = []
    with tempfile.TemporaryDirectory(prefix="seqprob-bench-load-", dir=opts.folder) as tmp:
        for case in sorted(CASES):
            r = measure(case, shapes, runs, threads, Path(tmp))
            big = case.startswith("0.5b")
            target = f"(peak - import) <= {TARGET_RSS_RATIO}x W" if big else f"< {TARGET_124M_S} s"
            met = r["load_ratio"] <= TARGET_RSS_RATIO if big else r["median_s"] < TARGET_124M_S
            rows.append(H.make_row(
                opts, f"GPT.from_hf {case} (file {r['file_dtype']}, W {r['weights_mb']:,.0f} MB): load, "
                f"(peak - import) / W = {r['load_ratio']:.3f}", "-", threads, r["median_s"], target=target,
                met=met, peak_rss=f"{r['peak_rss_mb'] / 1.048576:,.0f}"))
    return rows


def main(argv=None) -> list:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", nargs="+", choices=sorted(CASES), default=sorted(CASES))
    ap.add_argument("--quick", action="store_true", help="tiny shapes, 2 runs: a smoke run")
    args = ap.parse_args(argv)
    shapes, runs = (QUICK, 2) if args.quick else (SHAPES, args.runs)
    rows = []
    with tempfile.TemporaryDirectory(prefix="seqprob-bench-load-") as tmp:
        for case in args.only:
            row = measure(case, shapes, runs, args.threads, Path(tmp))
            rows.append(row)
            print(f"{case:10s} file {row['file_dtype']:4s}  W {row['weights_mb']:8.1f} MB  import "
                  f"{row['import_rss_mb']:6.1f} MB  peak {row['peak_rss_mb']:8.1f} MB  "
                  f"(peak-import)/W {row['load_ratio']:.3f}  load {row['median_s']:.3f} s "
                  f"[{row['min_s']:.3f}-{row['max_s']:.3f}] x{runs}, {args.threads} thr  {verdict(row)}",
                  flush=True)
    return rows


if __name__ == "__main__":
    main()
