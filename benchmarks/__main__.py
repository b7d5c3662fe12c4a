"""Rerun seqprob's benchmark suite on this machine and print it under a machine header.

Run from the repository root::

    python -m benchmarks                       # every group whose reference is installed
    python -m benchmarks --quick               # reduced sizes and runs: a smoke check
    python -m benchmarks --only load score-memory --out results.md
    python -m benchmarks --list                # the groups, their references and targets

Each group is one ``benchmarks/bench_*.py`` script, run in a fresh process with the method of
the suite (each side alone in its own process, same threads, median [min-max] of >= 7 runs,
the pair repeated >= 3 times with the spread printed; see benchmarks/README.md); its output is
printed under the command that produced it, so that every figure comes with its command.
The header says where the figures come from: CPU model, cores, BLAS and its version, numpy,
Python, date, commit and the load average before and after (a figure taken with a load above
0.5 per core is marked as such). A group whose reference side is not installed (torch,
transformers, kenlm, lmplz, NLTK, Dask, Starlette) is listed as "not run (missing ...)",
never as a failure: install what benchmarks/requirements.txt names, in the interpreter that
runs this command.

A new benchmark joins the suite by a row in :data:`GROUPS`: its script (run as
``python benchmarks/SCRIPT ARGS``), the arguments of a full and of a ``--quick`` run, what it
needs, what it measures against what, and the target.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "benchmarks"


@dataclass(frozen=True)
class Group:
    """One benchmark script of the suite."""

    name: str
    script: str
    what: str
    target: str
    full: tuple = ()
    quick: tuple = ()
    modules: tuple = ()  # Python modules the reference side imports
    programs: tuple = ()  # executables it runs (found on PATH or by an environment variable)
    env: dict = field(default_factory=dict)


GROUPS = [
    Group("gpt-small", "bench_transformer.py",
          "GPT config 'small': forward 8 x 256 and cached decode +256 against torch eager; "
          "% of numpy's float32 GEMM peak", "forward >= 1.0x, decode >= 1.5x, at 1 and 2 threads",
          quick=("--threads", "2", "--runs", "2", "--warmups", "1", "--repeats", "1"), modules=("torch",)),
    Group("train", "bench_train.py", "one training step (forward, backward, clip, AdamW) against torch",
          ">= 1.0x at 1 and 2 threads",
          quick=("--threads", "2", "--runs", "2", "--warmups", "1", "--repeats", "1"), modules=("torch",)),
    Group("gpt2-124m", "bench_gpt2_124m.py", "GPT-2-124M shape: scoring 1 x 1024 and 4 x 1024, greedy "
          "decode, against transformers' GPT2LMHeadModel", ">= 1.2x scoring",
          full=("--threads", "2"), quick=("--threads", "2", "--runs", "2", "--warmups", "1", "--repeats", "1",
                                          "--batches", "1", "--new-tokens", "8"),
          modules=("torch", "transformers")),
    Group("llama", "bench_llama.py", "Llama architecture (small and ~100M) against transformers' "
          "LlamaForCausalLM", ">= 1.2x at 1 and 2 threads",
          quick=("--quick", "--runs", "2", "--pairs", "1"), modules=("torch", "transformers")),
    Group("load", "bench_load.py", "GPT.from_hf at real sizes: peak RSS over the weights, load time",
          "0.5B: (peak - import) <= 1.5 W; 124M loads in < 1 s", full=("--runs", "7"), quick=("--quick",)),
    Group("score-memory", "bench_score_memory.py", "peak RSS scoring 1,024 tokens with a 262k vocabulary, "
          "streamed against the (T, V) rows; GPT-2-small scoring time", "(peak - before) <= 0.15 W",
          full=("--speed",), quick=("--quick",)),
    Group("ngram", "bench_ngram.py", "n-gram fitting and scoring on ~1M tokens against NLTK", "faster than NLTK",
          quick=("--tokens", "50000", "--nltk-tokens", "5000", "--nltk-test-tokens", "500"), modules=("nltk",)),
    Group("ngram-io", "bench_ngram_io.py", "ARPA read/write, binary load, queries against KenLM",
          "query >= 1.0x the kenlm module", quick=("--tokens", "50000", "--runs", "2", "--pairs", "1"),
          modules=("kenlm",), programs=("lmplz", "build_binary")),
    Group("ngram-fit", "bench_ngram_fit.py", "text -> ARPA, order 5, 16M words, against lmplz -S 1G",
          "<= 1.0x lmplz's time; peak RSS <= the budget",
          quick=("--words", "200000", "--runs", "1", "--pairs", "1"), programs=("lmplz",)),
    Group("ngram-dask", "bench_ngram_dask.py", "fit_dask on a local 2-worker cluster against fit",
          "same ARPA bytes", quick=("--words", "200000", "--runs", "1", "--pairs", "1"),
          modules=("dask", "distributed")),
    Group("bpe", "bench_bpe.py", "BPE training and encoding against tiktoken's educational trainer",
          "faster than the educational trainer", quick=("--mb", "0.2", "--merges", "200", "--repeats", "1")),
    Group("explore", "bench_explore.py", "seqprob explore's JSON API on the default model",
          "every call well under 100 ms", quick=("--runs", "2", "--warmups", "1"),
          modules=("starlette", "uvicorn", "httpx")),
]


def missing(group: Group) -> list:
    """What the group's reference side needs and this interpreter or machine lacks."""
    gone = [m for m in group.modules if importlib.util.find_spec(m) is None]
    kenlm_bin = os.environ.get("KENLM_BIN")
    for prog in group.programs:
        if not (shutil.which(prog) or (kenlm_bin and Path(kenlm_bin, prog).exists())):
            gone.append(prog)
    return gone


def machine_header() -> list:
    """Markdown lines naming the machine, the libraries and the code the figures come from."""
    import numpy as np
    from threadpoolctl import threadpool_info

    cpu = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines()
                if line.startswith("model name")), platform.processor() or "unknown")
    blas = ", ".join(f"{p.get('internal_api')} {p.get('version')} ({p.get('architecture')}, "
                     f"{p.get('num_threads')} threads)" for p in threadpool_info() if p.get("user_api") == "blas")
    return [f"- CPU: {cpu}; {os.cpu_count()} logical cores",
            f"- BLAS: {blas or 'not found'}; numpy {np.__version__}; Python {platform.python_version()}",
            f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; commit: {_commit()}"]


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _commit() -> str:
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or "not a checkout"
    except (OSError, subprocess.SubprocessError):
        return "not a checkout"


def _load() -> float:
    return os.getloadavg()[0] / (os.cpu_count() or 1)


def run_group(group: Group, quick: bool) -> list:
    """Markdown lines of one group: its command, then its output (or why it did not run)."""
    args = group.quick if quick else group.full
    command = " ".join(["PYTHONPATH=. python", f"benchmarks/{group.script}", *args])
    lines = [f"### {group.name}: {group.what}", "", f"Target: {group.target}.", ""]
    gone = missing(group)
    if gone:
        return lines + [f"not run (missing {', '.join(gone)})", ""]
    before = _load()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(HERE / group.script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    took, after = time.perf_counter() - start, _load()
    status = "" if proc.returncode == 0 else f" — FAILED (exit {proc.returncode})"
    busy = " — the machine was busy (load > 0.5 per core): indicative only" if max(before, after) > 0.5 else ""
    out = proc.stdout.rstrip() + ("\n" + proc.stderr.rstrip()[-2000:] if proc.returncode else "")
    return lines + [f"`{command}` ({took:.0f} s, load per core {before:.2f} -> {after:.2f}){status}{busy}",
                    "", "```", out, "```", ""]


def write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="reduced sizes and runs: a smoke check, not figures")
    ap.add_argument("--only", nargs="+", metavar="NAME", choices=[g.name for g in GROUPS],
                    help="run only these groups")
    ap.add_argument("--out", type=Path, help="also write the Markdown report to this file (atomically)")
    ap.add_argument("--list", action="store_true", help="list the groups and exit")
    args = ap.parse_args(argv)
    groups = [g for g in GROUPS if not args.only or g.name in args.only]
    if args.list:
        for g in groups:
            needs = ", ".join(g.modules + g.programs) or "numpy only"
            print(f"{g.name:<13} {g.script:<24} {needs:<28} {g.what}")
        return 0
    lines = ["## " + ("Quick check (not figures)" if args.quick else "Benchmarks"), "", *machine_header(), ""]
    print("\n".join(lines), flush=True)
    for group in groups:
        part = run_group(group, args.quick)
        print("\n".join(part), flush=True)
        lines += part
    if args.out:
        write_atomically(args.out, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
