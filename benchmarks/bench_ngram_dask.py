"""Benchmark: text -> ARPA with ``fit_dask`` on a local 2-worker cluster against ``fit`` on one machine.

Corpus: the seeded synthetic Zipf-Markov text of ``bench_ngram.py`` (20k word types), written
once and cut into ``--partitions`` files (one Dask partition each). Each side runs alone in its
own fresh process, one after the other, with the same thread settings and the same text:
``seqprob ngram fit`` (in memory) and a child that starts a ``LocalCluster`` of ``--workers``
worker processes (one thread each), runs ``ModifiedKneserNey.fit_dask`` on the files and writes
the ARPA file. Time is wall clock including the cluster's start; memory is the peak RSS of the
side's own process (for Dask: the driver; the workers are separate processes, reported by the
child as the largest worker peak). The two ARPA files are compared byte for byte.
Median (min-max) of ``--runs`` runs after one warm-up, the pair repeated ``--pairs`` times;
ratio = single-machine time / Dask time (above 1: Dask is faster).

On one 2-core machine Dask cannot win: its map/reduce sorts and ships every n-gram twice and
starts processes; the point of the path is corpora beyond one machine. This measures its cost.

Run (from the repository root):
    PYTHONPATH=. python benchmarks/bench_ngram_dask.py                      # order 5, 4M words
    PYTHONPATH=. python benchmarks/bench_ngram_dask.py --words 200000 --runs 1 --pairs 1   # smoke
"""
from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ngram_fit import fmt, measure, write_corpus  # noqa: E402  (same corpus, same timing)

ROOT = Path(__file__).resolve().parents[1]
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def split_corpus(corpus: Path, parts: int, folder: Path) -> list:
    """Cut ``corpus`` into ``parts`` files of consecutive lines (the corpus order kept)."""
    lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    size = -(-len(lines) // parts)
    paths = []
    for i in range(parts):
        path = folder / f"part-{i:03d}.txt"
        path.write_text("".join(lines[i * size:(i + 1) * size]), encoding="utf-8")
        paths.append(path)
    return paths


def dask_child(files: list, out: str, order: int, workers: int) -> None:
    """The Dask side: a LocalCluster of worker processes, fit_dask, write_arpa."""
    import logging

    from dask.distributed import Client, LocalCluster

    import seqprob as sp

    logging.getLogger("distributed").setLevel(logging.ERROR)
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        lm = sp.ngram.ModifiedKneserNey(order=order).fit_dask(files)
        sp.write_arpa(lm, out)
        peaks = client.run(_worker_peak_mib)
    Path(out + ".workers").write_text(f"{max(peaks.values()):.0f}")  # largest worker peak, MB


def _worker_peak_mib() -> float:
    """The worker's own peak RSS (VmHWM; ru_maxrss would carry its parent's peak)."""
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--words", type=int, default=4_000_000)
    ap.add_argument("--order", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads of both sides")
    ap.add_argument("--workdir", help="where the corpus and outputs go (default: a temp dir)")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)  # OUT ORDER WORKERS FILE...
    args = ap.parse_args()
    if args.child:
        out, order, workers, *files = args.child
        return dask_child(files, out, int(order), int(workers))

    env = dict(os.environ, PYTHONPATH=str(ROOT), **{v: str(args.threads) for v in THREAD_VARS})
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-ngram-dask-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"zipf-markov-{args.words}.txt"
    if not corpus.exists():
        write_corpus(corpus, args.words)
    files = split_corpus(corpus, args.partitions, work)
    single = [sys.executable, "-m", "seqprob", "ngram", "fit", str(corpus), "-o",
              str(work / "single.arpa"), "--order", str(args.order)]
    dask_cmd = [sys.executable, __file__, "--child", str(work / "dask.arpa"), str(args.order),
                str(args.workers)] + [str(f) for f in files]
    print(f"order {args.order}, {args.words} words in {args.partitions} partitions, "
          f"{args.workers} Dask workers x 1 thread; {args.runs} run(s) after a warm-up, "
          f"{args.pairs} pair(s)")
    for pair in range(1, args.pairs + 1):
        one = measure("fit (one process)", single, env, args.runs)
        print(f"pair {pair}: {fmt(one)}")
        dsk = measure(f"fit_dask ({args.workers} workers)", dask_cmd, env, args.runs)
        workers = (work / "dask.arpa.workers").read_text()
        print(f"pair {pair}: {fmt(dsk)}   (driver; largest worker {workers} MB)")
        same = filecmp.cmp(work / "single.arpa", work / "dask.arpa", shallow=False)
        ratio = statistics.median(one["times"]) / statistics.median(dsk["times"])
        print(f"pair {pair}: time ratio single/Dask {ratio:.2f}x; ARPA files identical: {same}")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
