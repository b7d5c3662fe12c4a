"""Benchmark: text -> ARPA with a memory budget, ``seqprob ngram fit -S`` against ``lmplz -S``.

Corpus: the seeded synthetic Zipf-Markov text of ``_ngram_corpus.py`` (20k word types), written
to a file once. Each side runs alone in its own fresh process, one after the other, with the
same budget, the same thread settings (``OMP/OPENBLAS/MKL_NUM_THREADS``) and the same input
file; time is wall clock, memory the peak RSS of that process (its ``ru_maxrss``, read by
a small wrapper process that only runs it: see ``run_alone``).
Median (min-max) of ``--runs`` runs after one warm-up, the pair repeated ``--pairs`` times;
ratio = lmplz time / seqprob time (above 1: seqprob is faster).

Threads: lmplz always runs its pipeline of threads (it has no setting for it) on every core
the process may use. seqprob gets the same cores through ``SEQPROB_NUM_THREADS`` (default:
the cores of this process, ``--fit-threads`` to change): it counts a chunk while it reads the
next and formats ARPA blocks on that many threads. Neither side uses BLAS here.

Run (from the repository root):
    PYTHONPATH=. python benchmarks/bench_ngram_fit.py                  # order 5, 16M words, -S 1G
    PYTHONPATH=. python benchmarks/bench_ngram_fit.py --words 1000000 --runs 1 --pairs 1   # sanity
    PYTHONPATH=. python benchmarks/bench_ngram_fit.py --big            # order 5, 100M words, -S 4G, 1 run

    python -m benchmarks --only ngram-fit      # the suite's rows: 4M and 16M words (--quick: 200k)

Targets: order 5 on 4M and 16M words <= 1.0x lmplz's time, and seqprob's peak memory within
the -S budget (the budget is a promise, as lmplz's -S); order 5 on 100M words completes
under a 4 GB budget.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ngram_corpus import make_corpus  # noqa: E402  (after the path insert above)
import _harness as H  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
SUITE = {"order": 75, "group": "ngram-fit", "about": "order-5 modified Kneser-Ney text -> ARPA under -S 1G, 4M and "
         "16M words (--quick: 200k): seqprob ngram fit vs lmplz (KENLM_BIN), time and peak RSS against the budget"}
BUDGET = "1G"


def write_corpus(path: Path, words: int, block: int = 4_000_000) -> None:
    """Write about ``words`` words; above ``block`` words, seeded blocks one after the other
    (the generator holds its text in memory)."""
    with open(path, "w", encoding="utf-8") as out:
        done, seed = 0, 0
        while done < words:
            lines = make_corpus(min(block, words - done), seed=seed)
            out.write("".join(line + "\n" for line in lines))
            done += sum(len(line.split()) for line in lines)
            seed += 1


class SpillWatch(threading.Thread):
    """Polls the size of seqprob's spill folders (``seqprob-ngram-*``) under ``folder``."""

    def __init__(self, folder: Path):
        super().__init__(daemon=True)
        self.folder, self.peak, self.done = folder, 0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            size = 0
            for path in self.folder.glob("seqprob-ngram-*/*"):
                with contextlib.suppress(OSError):
                    size += path.stat().st_size
            self.peak = max(self.peak, size)


def run_alone(cmd: list, env: dict, watch: Path | None = None) -> tuple:
    """(wall seconds, peak RSS in MiB) of one command in its own process.

    The command runs under ``_harness.own_peak_command``'s small wrapper: spawned from this
    process directly, its ``ru_maxrss`` would carry this process's own peak (~420 MiB after
    writing a corpus in 4M-word blocks) as a floor."""
    proc = subprocess.Popen(H.own_peak_command(cmd), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    spill = SpillWatch(watch) if watch is not None else None
    if spill is not None:
        spill.start()
    _, err = proc.communicate()
    if spill is not None:
        spill.done.set()
        spill.join()
        print(f"  peak size of the spill folder: {spill.peak / 1e6:.0f} MB")
    err = err.decode(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}\n{err[-2000:]}")
    own = H.own_peak_result(err)
    return own["wall"], own["maxrss_kib"] / 1024


def seqprob_cmd(corpus: Path, out: Path, order: int, memory: str | None, tmp: Path) -> list:
    cmd = [sys.executable, "-m", "seqprob", "ngram", "fit", str(corpus), "-o", str(out),
           "--order", str(order)]
    return cmd + (["-S", memory, "-T", str(tmp)] if memory else [])


def lmplz_cmd(lmplz: str, corpus: Path, out: Path, order: int, memory: str, tmp: Path) -> list:
    return [lmplz, "-o", str(order), "-S", memory, "-T", str(tmp), "--discount_fallback",
            "--text", str(corpus), "--arpa", str(out)]


def find_lmplz(given: str | None) -> str | None:
    if given:
        return given
    folder = os.environ.get("KENLM_BIN")
    return os.path.join(folder, "lmplz") if folder else shutil.which("lmplz")


def measure(name: str, cmd: list, env: dict, runs: int, warm_up: bool = True,
            watch: Path | None = None) -> dict:
    if warm_up:
        run_alone(cmd, env)  # warm-up (page cache, imports)
    times, peaks = zip(*(run_alone(cmd, env, watch) for _ in range(runs)))
    return {"name": name, "times": times, "peak": max(peaks)}


def fmt(r: dict) -> str:
    t = r["times"]
    return (f"{r['name']:<22} {statistics.median(t):8.2f} s  (min {min(t):.2f}, max {max(t):.2f})"
            f"  peak RSS {r['peak']:7.0f} MB")


def ngram_header(path: Path) -> str:
    with open(path, encoding="utf-8") as f:
        return " ".join(line.strip().split("=")[1] for line in f.readlines(4096)
                        if line.startswith("ngram "))


def suite_rows(opts) -> list:
    """Per corpus size: the time row (lmplz time / seqprob time, target >= 1.0x) and the
    memory row (seqprob's peak RSS within -S). Both sides use every core: lmplz has no thread
    setting, so the thread column is the core count, whatever ``--threads`` says."""
    cores = len(os.sched_getaffinity(0))
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{v: "1" for v in THREAD_VARS}, SEQPROB_NUM_THREADS=str(cores))
    lmplz = find_lmplz(None)
    budget_mib = 1024
    rows = []
    for words in ([200_000] if opts.quick else [4_000_000, 16_000_000]):
        work = Path(tempfile.mkdtemp(prefix="ngram-fit-", dir=opts.folder))
        corpus = work / "corpus.txt"
        write_corpus(corpus, words)
        label = f"MKN order 5 text -> ARPA, {words / 1e6:g}M words, -S {BUDGET}"
        pairs = []
        for _ in range(opts.repeats):
            ours = measure("seqprob", seqprob_cmd(corpus, work / "s.arpa", 5, BUDGET, work), env, opts.runs)
            theirs = lmplz and measure("lmplz", lmplz_cmd(lmplz, corpus, work / "l.arpa", 5, BUDGET, work), env,
                                       opts.runs)
            pairs.append((ours, theirs))
        med = [statistics.median(o["times"]) for o, _ in pairs]
        peak = max(o["peak"] for o, _ in pairs)
        if lmplz:
            ref = [statistics.median(t["times"]) for _, t in pairs]
            ratios = [r / m for r, m in zip(ref, med)]
            rss = f"{peak:,.0f} / {max(t['peak'] for _, t in pairs):,.0f}"
            rows.append(H.make_row(opts, label, f"lmplz -S {BUDGET}", cores, statistics.median(med),
                                   statistics.median(ref), ratios, ">= 1.00x", statistics.median(ratios) >= 1.0,
                                   peak_rss=rss))
        else:
            rows.append(H.make_row(opts, label, f"lmplz -S {BUDGET}", cores, statistics.median(med),
                                   missing="lmplz (KENLM_BIN)"))
        rows.append(H.make_row(opts, f"{label}: seqprob's peak RSS within the budget", "-", cores,
                               statistics.median(med), target=f"<= {budget_mib:,} MiB", met=peak <= budget_mib,
                               peak_rss=f"{peak:,.0f}"))
        shutil.rmtree(work, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--words", type=int, default=16_000_000)
    ap.add_argument("--order", type=int, default=5)
    ap.add_argument("--memory", default="1G", help="the -S budget of both tools")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--big", action="store_true",
                    help="order 5, 100M words, -S 4G, one run without warm-up (completion, memory)")
    ap.add_argument("--in-memory", action="store_true", help="also time seqprob without -S")
    ap.add_argument("--lmplz", help="path of lmplz (default: $KENLM_BIN/lmplz, else lmplz on PATH)")
    ap.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads of both sides")
    ap.add_argument("--fit-threads", type=int, default=len(os.sched_getaffinity(0)),
                    help="SEQPROB_NUM_THREADS of the seqprob side (default: the cores lmplz's "
                         "threads may use)")
    ap.add_argument("--workdir", help="where the corpus and outputs go (default: a temp dir)")
    args = ap.parse_args()
    if args.big:
        args.words, args.order, args.memory, args.runs, args.pairs = 100_000_000, 5, "4G", 1, 1

    env = dict(os.environ, PYTHONPATH=str(ROOT), **{v: str(args.threads) for v in THREAD_VARS},
               SEQPROB_NUM_THREADS=str(args.fit_threads))
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-ngram-fit-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"zipf-markov-{args.words}.txt"
    if not corpus.exists():
        t = time.perf_counter()
        write_corpus(corpus, args.words)
        print(f"wrote {corpus} ({corpus.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.0f} s")
    lmplz = find_lmplz(args.lmplz)
    print(f"order {args.order}, {args.words} words, budget -S {args.memory}, {args.threads} BLAS "
          f"thread(s), SEQPROB_NUM_THREADS={args.fit_threads} (lmplz: its own threads, "
          f"{len(os.sched_getaffinity(0))} core(s)); {args.runs} run(s) "
          f"{'without' if args.big else 'after'} a warm-up, "
          f"{args.pairs} pair(s)")
    for pair in range(1, args.pairs + 1):
        sp = measure("seqprob -S " + args.memory,
                     seqprob_cmd(corpus, work / "seqprob.arpa", args.order, args.memory, work), env, args.runs,
                     warm_up=not args.big, watch=work if args.big else None)
        print(f"pair {pair}: {fmt(sp)}   n-grams {ngram_header(work / 'seqprob.arpa')}")
        if args.in_memory:
            mem = measure("seqprob (in memory)",
                          seqprob_cmd(corpus, work / "inmem.arpa", args.order, None, work), env, args.runs)
            print(f"pair {pair}: {fmt(mem)}")
        if lmplz is None:
            print("lmplz not found (build KenLM or pass --lmplz): seqprob side only")
            continue
        ref = measure("lmplz -S " + args.memory,
                      lmplz_cmd(lmplz, corpus, work / "lmplz.arpa", args.order, args.memory, work), env, args.runs,
                      warm_up=not args.big)
        print(f"pair {pair}: {fmt(ref)}   n-grams {ngram_header(work / 'lmplz.arpa')}")
        ratio = statistics.median(ref["times"]) / statistics.median(sp["times"])
        print(f"pair {pair}: time ratio lmplz/seqprob {ratio:.2f}x; peak memory seqprob/lmplz "
              f"{sp['peak'] / ref['peak']:.2f}x")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
