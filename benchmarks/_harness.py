"""Shared machinery of the seqprob-vs-reference benchmarks: one side per fresh process.

The method (benchmarks/README.md): every side (seqprob numpy, torch) runs alone in its own
fresh subprocess, the two sides one after the other and never at the same time; both get the
same thread count, set by environment (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``,
``MKL_NUM_THREADS``) before the process starts *and* by API inside it
(``threadpoolctl.threadpool_limits``, ``torch.set_num_threads``); each timing is the median
with min/max of ``runs`` (>= 7) timed calls after ``warmups`` (>= 2) untimed ones; the whole
pair is repeated ``repeats`` (>= 3) times and the spread of the per-repeat ratios is printed.
Ratios are reference time / seqprob time (> 1: seqprob faster). Peak memory is the child's
own high-water mark (``VmHWM``, see :func:`peak_rss_mib`; ``ru_maxrss`` would carry the
parent's peak into the child).

``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` (set on some machines to work around old
OpenBLAS bugs) slow a current numpy; the children run without them unless
``--keep-openblas-env`` is given, and each child reports the BLAS kernel it actually runs.
"""
from __future__ import annotations

import atexit
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
OPENBLAS_TUNING_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
SMALL = dict(vocab_size=4096, block_size=256, n_layer=4, n_head=4, n_embd=256)
MATMUL_SHAPE = (4096, 768, 3072)  # (M, K, N): the float32 GEMM whose rate is "peak"


# ----------------------------------------------------------------------------- parent side
def child_env(threads: int, keep_openblas_env: bool = False) -> dict:
    """The environment of a benchmark child: thread variables set, seqprob importable."""
    env = {**os.environ, **{v: str(threads) for v in THREAD_VARS}, "SEQPROB_NUM_THREADS": str(threads)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if not keep_openblas_env:
        for var in OPENBLAS_TUNING_VARS:
            env.pop(var, None)
    return env


def run_child(script: str, args: list, threads: int, keep_openblas_env: bool = False,
              cpus: str | None = None, python: str | None = None) -> dict:
    """Run ``script --child ARGS`` in a fresh process and return the JSON it prints last.

    ``cpus`` (e.g. "0,1") pins the child with ``taskset`` when given; ``python`` is the
    interpreter (default: this one; the reference side may live in a venv of its own).
    """
    cmd = [python or sys.executable, script, "--child", *map(str, args)]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    proc = subprocess.run(cmd, env=child_env(threads, keep_openblas_env), capture_output=True,
                          text=True, cwd=ROOT)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise RuntimeError(f"benchmark child failed ({proc.returncode}): {' '.join(cmd)}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def workdir() -> Path:
    """A temporary folder for weights and outputs shared by the children (never committed),
    removed when the parent exits (weights of the 124M shape take ~0.5 GB)."""
    folder = Path(tempfile.mkdtemp(prefix="seqprob-bench-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def add_common_args(ap) -> None:
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--runs", type=int, default=7, help="timed runs per row (>= 7 for figures)")
    ap.add_argument("--warmups", type=int, default=2, help="untimed runs first (>= 2)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats of the whole pair (>= 3)")
    ap.add_argument("--cpus", default=None, help="pin children with taskset -c CPUS (e.g. 0,1)")
    ap.add_argument("--keep-openblas-env", action="store_true",
                    help="keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in the children")
    ap.add_argument("--json", default=None, help="also write every raw result to this file")
    ap.add_argument("--child", action="store_true", help="internal: run one side")


def paired_args(description: str, argv, children: dict, extra=None):
    """Parse the options of a seqprob/torch paired script (the common ones, the hidden child
    ones, and those ``extra(ap)`` adds). In a child (``--child``), run ``children[args.side]``,
    print its JSON and return None; in the parent, return the options."""
    import argparse

    ap = argparse.ArgumentParser(description=description)
    add_common_args(ap)
    ap.add_argument("--side", choices=list(children), help=argparse.SUPPRESS)
    ap.add_argument("--weights", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    if extra is not None:
        extra(ap)
    args = ap.parse_args(argv)
    if args.child:
        emit(children[args.side](args))
        return None
    warn_if_short(args)
    return args


def warn_if_short(args) -> None:
    if args.runs < 7 or args.warmups < 2 or args.repeats < 3:
        print(f"NOTE: runs {args.runs}, warm-ups {args.warmups}, repeats {args.repeats} is a smoke "
              "test; published figures need >= 7 runs, >= 2 warm-ups, >= 3 repeats.")


# ----------------------------------------------------------------------------- child side
def limit_threads(threads: int, torch_side: bool) -> dict:
    """Set the thread count by API (the environment was set by the parent) and describe the
    BLAS / OpenMP pools this process really uses (library, kernel, threads)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    if torch_side:
        import torch

        torch.set_num_threads(threads)
    limit_threads.keep = threadpool_limits(limits=threads)  # held for the process' lifetime
    pools = [{"api": p["internal_api"], "lib": Path(p["filepath"]).name, "threads": p["num_threads"],
              "kernel": p.get("architecture")} for p in threadpool_info()]
    if torch_side:
        import torch

        pools.append({"api": "torch", "threads": torch.get_num_threads(),
                      "kernel": torch.backends.cpu.get_cpu_capability()})
    return {"threads": threads, "pools": pools,
            "openblas_env": {v: os.environ.get(v) for v in OPENBLAS_TUNING_VARS}}


def timeit(fn, runs: int, warmups: int) -> dict:
    """Median, min and max seconds of ``runs`` calls of ``fn`` after ``warmups`` calls."""
    for _ in range(warmups):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"median": statistics.median(times), "min": min(times), "max": max(times)}


def describe_blas() -> str:
    """This process's BLAS pools as "library threads kernel" (threadpoolctl)."""
    from threadpoolctl import threadpool_info

    return "; ".join(f"{Path(p['filepath']).name} {p['num_threads']} thr {p.get('architecture')}"
                     for p in threadpool_info() if p["user_api"] == "blas")


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB: ``VmHWM`` of /proc/self/status.

    Not ``ru_maxrss``: Linux carries the parent's peak into a child's ``ru_maxrss`` across
    fork + exec (a child of a 1.2 GB parent that touches 11 MiB reports 1,170 MiB), so a
    benchmark parent that had loaded weights or a corpus would set a floor under every
    child's figure. ``VmHWM`` is the high-water mark of the process's own address space, new
    at exec. ``ru_maxrss`` is the fallback where /proc is missing (it is KiB on Linux).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# Runs a command and reports its own peak RSS (KiB) and wall seconds as the last stderr line:
# a fresh, small parent, so that the command's ru_maxrss is not floored by the benchmark's.
_OWN_PEAK_WRAPPER = """import json, resource, subprocess, sys, time
t0 = time.perf_counter()
rc = subprocess.call(sys.argv[1:])
wall = time.perf_counter() - t0
sys.stderr.write(chr(10) + json.dumps({"rc": rc, "wall": wall,  # on a line of its own
                                      "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}) + chr(10))
sys.exit(rc)
"""


def own_peak_command(cmd: list) -> list:
    """``cmd`` run under a small wrapper process that prints, as its last stderr line, JSON
    with the command's exit code, wall seconds and own peak RSS (``maxrss_kib``, floored at the
    wrapper's own ~12 MiB): for commands that are not Python children of this harness (lmplz,
    the seqprob CLI)."""
    return [sys.executable, "-c", _OWN_PEAK_WRAPPER, *map(str, cmd)]


def own_peak_result(stderr: str) -> dict:
    """The wrapper's JSON line from the end of the captured stderr."""
    return json.loads(stderr.strip().splitlines()[-1])


def numpy_matmul_peak(runs: int, warmups: int) -> dict:
    """Time the float32 GEMM (M, K) @ (K, N) with numpy; GFLOP/s from the median."""
    import numpy as np

    M, K, N = MATMUL_SHAPE
    a = np.random.default_rng(1).standard_normal((M, K), dtype=np.float32)
    w = np.random.default_rng(2).standard_normal((K, N), dtype=np.float32)
    out = np.empty((M, N), np.float32)
    r = timeit(lambda: np.matmul(a, w, out=out), runs, warmups)
    return {**r, "gflops": 2 * M * K * N / r["median"] / 1e9}


def torch_matmul_peak(runs: int, warmups: int) -> dict:
    import torch

    M, K, N = MATMUL_SHAPE
    g = torch.Generator().manual_seed(1)
    a, w = torch.randn(M, K, generator=g), torch.randn(K, N, generator=g)
    out = torch.empty(M, N)
    r = timeit(lambda: torch.mm(a, w, out=out), runs, warmups)
    return {**r, "gflops": 2 * M * K * N / r["median"] / 1e9}


def emit(result: dict) -> None:
    """The child's last stdout line: its results as JSON, with its peak RSS."""
    print(json.dumps({**result, "peak_rss_mib": peak_rss_mib()}))


# ----------------------------------------------------------------------------- reporting
def spread(values: list) -> str:
    """'median [min-max]' of a list of per-repeat figures."""
    return f"{statistics.median(values):.2f}x [{min(values):.2f}-{max(values):.2f}]"


def fmt_timing(r: dict) -> str:
    return f"{r['median']:.4f} s [{r['min']:.4f}-{r['max']:.4f}]"


def print_pools(label: str, info: dict) -> None:
    pools = "; ".join(f"{p['api']} {p.get('lib', '')} {p['threads']} thr kernel {p['kernel']}"
                      for p in info["pools"])
    env = ", ".join(f"{k}={v}" for k, v in info["openblas_env"].items() if v) or "unset"
    print(f"  {label}: {pools} (OPENBLAS_CORETYPE/L2_SIZE: {env})")


def ratio_table(rows: list, results: dict, threads: list, peak_key: str | None = "matmul") -> None:
    """Print per (row, threads): each repeat's medians and ratio, then the ratio spread.

    ``rows``: (label, seqprob key, reference key, flops or None); ``results[threads]`` is a list
    of (seqprob result, reference result) pairs, one per repeat.
    """
    print(f"{'row':<34}{'thr':>4}  {'seqprob median s':>17}  {'reference median s':>19}  "
          f"{'ratio ref/seqprob: median [min-max] over repeats':<50}{'% of numpy matmul peak'}")
    for label, skey, rkey, flops in rows:
        for thr in threads:
            pairs = [(s, r) for s, r in results[thr] if skey in s and rkey in r]
            if not pairs:
                continue
            ratios = [r[rkey]["median"] / s[skey]["median"] for s, r in pairs]
            smed = statistics.median(s[skey]["median"] for s, _ in pairs)
            rmed = statistics.median(r[rkey]["median"] for _, r in pairs)
            peak = ""
            if flops and peak_key:
                fr = [flops / s[skey]["median"] / 1e9 / s[peak_key]["gflops"] for s, _ in pairs]
                peak = f"{100 * statistics.median(fr):.0f}% [{100 * min(fr):.0f}-{100 * max(fr):.0f}]"
            print(f"{label:<34}{thr:>4}  {smed:>17.4f}  {rmed:>19.4f}  {spread(ratios):<50}{peak}")


def run_pairs(script, args, child_args, describe, show_pools: bool = True) -> dict:
    """The whole seqprob / torch pair, ``args.repeats`` times per thread count: each side alone
    in its own fresh process, one after the other. ``child_args(side, threads)`` builds a
    child's arguments; ``describe(rep, threads, pair)`` prints one line per pair.

    Returns {threads: [(seqprob result, torch result), ...]}.
    """
    results = {thr: [] for thr in args.threads}
    for rep in range(args.repeats):
        for thr in args.threads:
            pair = tuple(run_child(script, child_args(side, thr), thr, args.keep_openblas_env, args.cpus)
                         for side in ("seqprob", "torch"))
            results[thr].append(pair)
            if rep == 0 and show_pools:
                print_pools(f"{thr} thr seqprob", pair[0])
                print_pools(f"{thr} thr torch  ", pair[1])
            describe(rep, thr, pair)
    return results


def save_json(path, results: dict) -> None:
    """Every raw result (``--json FILE``), keyed by thread count."""
    if path:
        Path(path).write_text(json.dumps({str(k): v for k, v in results.items()}, indent=1))


# ----------------------------------------------------------------------------- the suite
# `python -m benchmarks` (benchmarks/__main__.py) imports every bench_*.py that defines
# SUITE = {"group": NAME, "about": "one line"} and suite_rows(opts) -> list of row dicts
# (made with ratio_rows / make_row); the interface is described in benchmarks/README.md.
@dataclass
class SuiteOptions:
    """What a ``suite_rows(opts)`` gets: the method's settings and where to write."""

    quick: bool
    threads: list
    runs: int
    warmups: int
    repeats: int
    reference_python: str
    folder: Path
    keep_openblas_env: bool = False
    cpus: str | None = None
    group: str = ""
    _missing: dict = field(default_factory=dict)

    def command(self) -> str:
        """The command that reruns this group's rows."""
        thr = " ".join(map(str, self.threads))
        ref = "" if self.reference_python == sys.executable else " --reference-python PY"
        kenlm = "KENLM_BIN=DIR " if os.environ.get("KENLM_BIN") else ""
        return (f"{kenlm}python -m benchmarks --only {self.group}{' --quick' if self.quick else ''}"
                f" --threads {thr}{ref}")

    def missing(self, *modules: str) -> str | None:
        """The first of ``modules`` the reference Python cannot import, or None."""
        for mod in modules:
            if mod not in self._missing:
                probe = subprocess.run([self.reference_python, "-c", f"import {mod}"],
                                       capture_output=True, env=child_env(1))
                self._missing[mod] = probe.returncode != 0
            if self._missing[mod]:
                return mod
        return None


def suite_pairs(script: str, opts: SuiteOptions, child_args, reference: str = "torch",
                sides=("seqprob", "torch")) -> dict:
    """Like :func:`run_pairs`, for the suite: each side alone in a fresh process, one after the
    other, ``opts.repeats`` times per thread count; the reference child runs on
    ``opts.reference_python`` and is skipped (None) when it lacks ``reference``.

    Returns {threads: [(seqprob result, reference result or None), ...]}.
    """
    missing = opts.missing(reference)
    results = {thr: [] for thr in opts.threads}
    for _ in range(opts.repeats):
        for thr in opts.threads:
            ours = run_child(script, child_args(sides[0], thr), thr, opts.keep_openblas_env, opts.cpus)
            theirs = None if missing else run_child(script, child_args(sides[1], thr), thr,
                                                    opts.keep_openblas_env, opts.cpus,
                                                    python=opts.reference_python)
            results[thr].append((ours, theirs))
    return results


def make_row(opts: SuiteOptions, work: str, reference: str, threads, seqprob_s=None,
             reference_s=None, ratios=(), target: str = "-", met=None, peak_pct=None,
             peak_rss: str = "", missing: str | None = None) -> dict:
    """One row of the suite's table. ``met``: True / False / None (no target, or not run)."""
    if missing:
        status = f"not run (missing {missing})"
    else:
        status = "-" if met is None else ("met" if met else "MISSED")
    return {"group": opts.group, "work": work, "reference": reference, "threads": threads,
            "seqprob_s": seqprob_s, "reference_s": reference_s, "ratios": list(ratios),
            "target": target, "status": status, "peak_pct": peak_pct, "peak_rss": peak_rss,
            "command": opts.command()}


def ratio_rows(opts: SuiteOptions, results: dict, work: str, reference: str, skey: str, rkey: str,
               min_ratio: float | None = None, flops: float | None = None,
               min_peak: tuple | None = None, reference_module: str = "torch") -> list:
    """One row per thread count from :func:`suite_pairs` results: medians over the repeats of
    each side's median, the per-repeat ratios (reference / seqprob), % of the child's own numpy
    GEMM peak when ``flops`` is given, peak RSS of both children. Targets: ``min_ratio`` on the
    median ratio, ``min_peak`` = (percent, thread counts it applies to)."""
    rows = []
    for thr, pairs in results.items():
        ours = [s[skey]["median"] for s, _ in pairs]
        theirs = [r[rkey]["median"] for _, r in pairs if r is not None and rkey in r]
        ratios = [r[rkey]["median"] / s[skey]["median"] for s, r in pairs if r is not None and rkey in r]
        pct = None
        if flops and "matmul" in pairs[0][0]:
            pct = [100 * flops / s[skey]["median"] / 1e9 / s["matmul"]["gflops"] for s, _ in pairs]
        rss = f"{max(s['peak_rss_mib'] for s, _ in pairs):,.0f}"
        if theirs and not min_peak:
            rss += f" / {max(r['peak_rss_mib'] for _, r in pairs if r is not None):,.0f}"
        target, met, missing = "-", None, None
        if min_peak:  # a row about seqprob's own rate: no reference figures
            ratios, theirs = [], []
            if thr in min_peak[1] and pct:
                target, met = f">= {min_peak[0]}% of GEMM peak", statistics.median(pct) >= min_peak[0]
        elif min_ratio is not None:
            target = f">= {min_ratio:.2f}x"
            met = statistics.median(ratios) >= min_ratio if ratios else None
            missing = None if ratios else reference_module
        elif not ratios:
            missing = reference_module
        rows.append(make_row(opts, work, reference, thr, statistics.median(ours),
                             statistics.median(theirs) if theirs else None, ratios, target, met,
                             pct, rss, missing))
    return rows


_BLAS_PROBE = """import numpy, threadpoolctl
print(numpy.__version__)
print("; ".join(f"{p['internal_api']} {p.get('version')} ({p.get('architecture')} kernels, "
                f"{p['num_threads']} threads)" for p in threadpoolctl.threadpool_info()
                if p["user_api"] == "blas"))
"""
_REFERENCE_PROBE = """import importlib.metadata as m
for name in ("torch", "transformers", "kenlm"):
    try:
        print(f"{name} {m.version(name)}")
    except m.PackageNotFoundError:
        print(f"{name} missing")
"""


def reference_versions(python: str) -> str:
    """The reference side's packages as the reference Python sees them."""
    probe = subprocess.run([python, "-c", _REFERENCE_PROBE], capture_output=True, text=True)
    return ", ".join(probe.stdout.split("\n")).strip(", ") if probe.returncode == 0 else f"{python} does not run"


def machine_header(root: Path = ROOT) -> dict:
    """CPU model, cores, BLAS (threadpoolctl), numpy, Python, date, commit of this machine."""
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    # numpy and its BLAS as a benchmark child sees them (the children drop OPENBLAS_CORETYPE)
    probe = subprocess.run([sys.executable, "-c", _BLAS_PROBE], capture_output=True, text=True,
                           env=child_env(len(os.sched_getaffinity(0))), cwd=root)
    numpy_version, blas = (probe.stdout.strip().split("\n", 1) + ["", ""])[:2] if probe.returncode == 0 \
        else ("not importable", "")
    commit = subprocess.run(["git", "describe", "--always", "--dirty", "--tags"], cwd=root,
                            capture_output=True, text=True)
    return {"cpu": cpu, "cores": os.cpu_count(), "usable cores": len(os.sched_getaffinity(0)),
            "blas": blas or "none found", "numpy": numpy_version,
            "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "commit": commit.stdout.strip() if commit.returncode == 0 else "not a git checkout"}
