"""Rerun the benchmark suite on this machine and print one table with the machine's header.

Run from the repository root::

    python -m benchmarks                       # every row group, the full method
    python -m benchmarks --quick               # fewer runs and repeats: a smoke check
    python -m benchmarks --only gpt-small --out table.md
    python -m benchmarks --reference-python /path/to/venv/bin/python   # torch etc. live there
    python -m benchmarks --list                # the row groups and the standalone scripts

A row group is a ``benchmarks/bench_*.py`` file that defines ``SUITE`` and ``suite_rows``
(benchmarks/README.md, "Adding a row group"). Each side of a row runs alone in its own fresh
process (``_harness``); a reference the reference Python cannot import is reported as
"not run (missing X)", never as a failure.
"""
from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _harness as H  # noqa: E402

log = logging.getLogger("benchmarks")
SHARED_LOAD_PER_CORE = 0.5  # above this, other work shared the cores: the header says so


def discover(folder: Path = HERE) -> tuple[dict, list]:
    """The row groups ({group: module}) and the names of the scripts that run only alone."""
    groups, alone = {}, []
    for path in sorted(folder.glob("bench_*.py")):
        spec = importlib.util.spec_from_file_location(f"_suite_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # one broken script must not hide the other rows
            log.warning("%s does not import (%s): left out", path.name, exc)
            alone.append(f"{path.name} (does not import)")
            continue
        suite = getattr(module, "SUITE", None)
        if suite and callable(getattr(module, "suite_rows", None)):
            groups[suite["group"]] = module
        else:
            alone.append(path.name)
    order = sorted(groups, key=lambda name: (groups[name].SUITE.get("order", 100), name))
    return {name: groups[name] for name in order}, alone


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="3 runs, 1 warm-up, 1 repeat, 1 thread: a smoke check, not a figure")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these row groups (--list)")
    ap.add_argument("--out", help="also write the Markdown table to this file (atomically)")
    ap.add_argument("--list", action="store_true", help="list the row groups and exit")
    ap.add_argument("--threads", type=int, nargs="+", help="thread counts (default 1 2; --quick: 1)")
    ap.add_argument("--runs", type=int, help="timed runs per side (default 7; --quick: 3)")
    ap.add_argument("--warmups", type=int, help="untimed runs first (default 2; --quick: 1)")
    ap.add_argument("--repeats", type=int, help="repeats of each pair (default 3; --quick: 1)")
    ap.add_argument("--reference-python", default=sys.executable,
                    help="the Python that has the reference side (benchmarks/requirements.txt)")
    ap.add_argument("--cpus", help="pin every child with taskset -c CPUS (e.g. 0,1)")
    ap.add_argument("--keep-openblas-env", action="store_true",
                    help="keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in the children")
    return ap.parse_args(argv)


def options(args, group: str, folder: Path) -> H.SuiteOptions:
    quick = args.quick
    return H.SuiteOptions(
        quick=quick, threads=args.threads or ([1] if quick else [1, 2]),
        runs=args.runs or (3 if quick else 7), warmups=args.warmups or (1 if quick else 2),
        repeats=args.repeats or (1 if quick else 3), reference_python=args.reference_python,
        folder=folder, keep_openblas_env=args.keep_openblas_env, cpus=args.cpus, group=group)


def _seconds(value) -> str:
    return "-" if value is None else (f"{value:.4f}" if value < 10 else f"{value:.2f}")


def _ratio(ratios: list) -> str:
    if not ratios:
        return "-"
    return f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]"


def _pct(values) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.0f}% [{min(values):.0f}-{max(values):.0f}]"


COLUMNS = ("group", "work", "thr", "reference", "seqprob s", "reference s",
           "ratio ref/seqprob median [min-max]", "% GEMM peak", "peak RSS MiB seqprob / ref",
           "target", "status", "rerun")


def table(rows: list) -> list:
    """The rows as Markdown lines (MISSED in bold)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    for r in rows:
        status = "**MISSED**" if r["status"] == "MISSED" else r["status"]
        cells = (r["group"], r["work"], str(r["threads"]), r["reference"], _seconds(r["seqprob_s"]),
                 _seconds(r["reference_s"]), _ratio(r["ratios"]), _pct(r["peak_pct"]),
                 r["peak_rss"] or "-", r["target"], status, f"`{r['command']}`")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def header(machine: dict, load_before: tuple, load_after: tuple, args, runs: H.SuiteOptions) -> list:
    cores = machine["usable cores"]
    shared = max(load_before[0], load_after[0]) > SHARED_LOAD_PER_CORE * cores
    method = (f"{runs.runs} runs after {runs.warmups} warm-ups, each pair repeated {runs.repeats}x, "
              f"threads {' '.join(map(str, runs.threads))}")
    lines = [f"- **{k}**: {v}" for k, v in machine.items()]
    lines += [f"- **method**: {method}" + (" (**--quick: a smoke check, not a figure**)" if args.quick else ""),
              f"- **reference side**: {H.reference_versions(args.reference_python)} "
              f"({'this Python' if args.reference_python == sys.executable else 'a separate venv'})",
              f"- **load average** (1/5/15 min) before: {'/'.join(f'{x:.2f}' for x in load_before)}, "
              f"after: {'/'.join(f'{x:.2f}' for x in load_after)}"
              + (f" -- **shared machine: load above {SHARED_LOAD_PER_CORE} per core**" if shared else "")]
    return lines


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parse(argv)
    groups, alone = discover()
    if args.list:
        for name, module in groups.items():
            print(f"{name:<14} {module.SUITE['about']}")
        print("standalone only (run the script itself): " + ", ".join(alone))
        return 0
    unknown = sorted(set(args.only or ()) - set(groups))
    if unknown:
        raise SystemExit(f"--only: no row group {', '.join(unknown)}; the groups are {', '.join(groups)}")
    folder, load_before, machine, rows = H.workdir(), os.getloadavg(), H.machine_header(), []
    for name in args.only or groups:
        opts = options(args, name, folder)
        log.info("%s: %s (%s)", time.strftime("%H:%M:%S"), name, groups[name].SUITE["about"])
        rows += groups[name].suite_rows(opts)
    lines = header(machine, load_before, os.getloadavg(), args, opts) + [""] + table(rows)
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        write_atomic(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
