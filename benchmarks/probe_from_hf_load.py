"""Probe: ``GPT.from_hf`` reading the safetensors file into fresh memory, or mapping it.

Run with the benchmark venv (transformers writes the checkpoint once, ~1 minute in all)::

    PYTHONPATH=. python benchmarks/probe_from_hf_load.py [--runs 8] [--folder DIR]

Without ``--folder`` it writes the ~100M Llama of ``bench_llama.py`` (random weights, tied
embeddings, 400 MB float32) into a temporary folder. Each run is a fresh process that imports
seqprob, then times ``GPT.from_hf`` alone, with ``safetensors.load_file`` reading every tensor
into a new array (``read``, what from_hf did before) or returning views on a memory map
(``mapped``, what it does now); the modes alternate. ``--modes mapped huge-pages`` compares
the parameters' allocation instead: normal pages (an anonymous map, what from_hf does now)
against numpy's memory with its huge-page advice (``huge-pages``, what it did before).
Printed: median [min-max] of the wall time, the user and system CPU time and the minor page
faults of the load, and the process's peak RSS (VmHWM, the process's own: its ``ru_maxrss``
would start from this parent's peak, ~850 MiB after writing the checkpoint; mapped file pages
count in it while they are mapped).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

CHILD = """
import json, resource, sys, time
from seqprob.gpt import GPT, safetensors as st
if sys.argv[2] == "read":  # every tensor read into a new array, whatever from_hf asks
    real = st.load_file
    st.load_file = lambda path, skip=None, mapped=False, bf16=None: real(path, skip=skip, mapped=False, bf16=bf16)
if sys.argv[2] == "huge-pages":  # the parameters as a plain numpy array (huge-page advice)
    from seqprob.gpt import params
    params.SMALL_PAGES_MIN = float("inf")
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
GPT.from_hf(sys.argv[1])
wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"wall": wall, "user": r1.ru_utime - r0.ru_utime, "sys": r1.ru_stime - r0.ru_stime,
                  "faults": r1.ru_minflt - r0.ru_minflt, "peak_rss_mib": hwm / 1024}))
"""


def write_llama(folder: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from bench_llama import BIG

    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(**BIG)).save_pretrained(folder)


def one_load(folder: Path, mode: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(folder), mode], env=H.child_env(1),
                          capture_output=True, text=True, check=True, cwd=H.ROOT)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--folder", type=Path, help="an HF checkpoint folder (default: write the 100M Llama)")
    ap.add_argument("--modes", nargs="+", default=["read", "mapped"], choices=["read", "mapped", "huge-pages"],
                    help="huge-pages: mapped, with the parameters in numpy's huge-page-advised memory "
                         "(before the normal-pages change); mapped is the library as it is")
    args = ap.parse_args(argv)
    folder = args.folder
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="seqprob-probe-", dir=H.workdir()))
        write_llama(folder)
    results = {mode: [] for mode in args.modes}
    for _ in range(args.runs):
        for mode in results:
            results[mode].append(one_load(folder, mode))
    for mode, runs in results.items():
        line = []
        for key in ("wall", "user", "sys", "faults", "peak_rss_mib"):
            xs = [r[key] for r in runs]
            fmt = "{:.3f}" if key in ("wall", "user", "sys") else "{:.0f}"
            line.append(f"{key} {fmt.format(statistics.median(xs))} [{fmt.format(min(xs))}-{fmt.format(max(xs))}]")
        print(f"{mode:<7} " + ", ".join(line))


if __name__ == "__main__":
    main()
