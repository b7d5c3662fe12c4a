"""Benchmark: seqprob's n-gram I/O and queries against KenLM, each side alone in its own process.

Rows (order-5 modified Kneser-Ney on the Zipf-Markov corpus of _ngram_corpus.py):
  1. text -> ARPA: ``lmplz -o 5 -S 2G --discount_fallback`` (its time includes writing the
     ARPA) vs seqprob read + fit + write_arpa (write_arpa also timed alone);
  2. ARPA read: ``sp.read_arpa`` (time, MB/s) vs ``kenlm.Model(arpa)``;
  3. binary load: ``sp.load_ngram`` (.sqlm) vs ``kenlm.Model`` of build_binary's probing and
     trie files; bytes per n-gram of the three;
  4. query: ``sp.evaluate`` of the test file (reading and tokenizing included) vs the kenlm
     module scoring every sentence of the same file (read, split into lines, then
     ``sum(model.score(line))``; both sides read the file inside the timed region):
     tokens/s; 1 thread each, then an extra row with seqprob's blocks on 2 threads
     (``set_num_threads(2)``).

Every child process runs one side: a warm-up, then ``--runs`` timed runs (median, min, max),
with 1 thread (OMP/OPENBLAS/MKL env vars); the seqprob/KenLM pair is repeated ``--pairs``
times and the spread of the medians printed; ratio = KenLM time / seqprob time. Peak memory =
the child's own high-water mark (VmHWM; for lmplz: ru_maxrss of the children of a small
wrapper that only runs it).

Run:  PYTHONPATH=. python benchmarks/bench_ngram_io.py [--tokens 1000000] [--runs 7] [--pairs 3]
(or ``benchmarks/bench_ngram.py --io ...``, which hands over to this script)
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# KenLM's lmplz and build_binary: the folder in $KENLM_BIN, else the one lmplz is found in on PATH;
# the kenlm Python module: the Python in $KENLM_PYTHON, else this one (benchmarks/README.md)
KENLM_BIN = os.environ.get("KENLM_BIN") or os.path.dirname(shutil.which("lmplz") or "")
KENLM_PY = os.environ.get("KENLM_PYTHON") or sys.executable
SUITE = {"order": 60, "group": "ngram", "about": "order-5 modified Kneser-Ney, 1M words: query, ARPA read, .sqlm load, "
         "text -> ARPA vs KenLM (the kenlm module, lmplz, build_binary)"}
THREADS = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


# ---------------------------------------------------------------------------- children


def _timed(fn, runs: int) -> dict:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return {"times": times}


def child(task: str, work: str, runs: int) -> dict:
    """Run one side of one row in this process; the result goes to stdout as JSON."""
    arpa, sqlm = os.path.join(work, "m.arpa"), os.path.join(work, "m.sqlm")
    train, test = os.path.join(work, "train.txt"), os.path.join(work, "test.txt")
    if task.startswith("kenlm"):
        import kenlm  # only in the benchmark venv; never imported with seqprob

        path = {"kenlm_arpa": arpa, "kenlm_probing": arpa + ".probing", "kenlm_trie": arpa + ".trie",
                "kenlm_query": arpa + ".probing"}[task]
        if task != "kenlm_query":
            return _timed(lambda: kenlm.Model(path), runs)
        model = kenlm.Model(path)

        def score_file():  # from the file, like sp.evaluate(model, path): both read the text
            with open(test, encoding="utf-8") as f:
                return sum(model.score(line, bos=True, eos=True) for line in f.read().splitlines())
        out = _timed(score_file, runs)
        out["tokens"] = sum(len(line.split()) + 1 for line in open(test, encoding="utf-8").read().splitlines())
        return out
    if task == "lmplz":
        def run():
            with open(train, "rb") as src, open(os.path.join(work, "lmplz.arpa"), "wb") as dst:
                subprocess.run([os.path.join(KENLM_BIN, "lmplz"), "-o", "5", "-S", "2G", "-T", work,
                                "--discount_fallback"], stdin=src, stdout=dst, stderr=subprocess.DEVNULL,
                               check=True)
        out = _timed(run, runs)
        out["rss_children_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        return out
    import seqprob as sp
    from seqprob._io import read_lines
    from seqprob.ngram import ModifiedKneserNey

    if task == "sp_fit_write":
        parts = {"read": [], "fit": [], "write": []}

        def run():
            t0 = time.perf_counter()
            lines = list(read_lines(train))
            t1 = time.perf_counter()
            model = ModifiedKneserNey(order=5).fit(lines)
            t2 = time.perf_counter()
            sp.write_arpa(model, os.path.join(work, "sp.arpa"))
            t3 = time.perf_counter()
            for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2)):
                parts[k].append(v)
        out = _timed(run, runs)
        out["parts"] = {k: statistics.median(v[1:]) for k, v in parts.items()}
        return out
    if task == "sp_read":
        out = _timed(lambda: sp.read_arpa(arpa), runs)
        out["mb"] = os.path.getsize(arpa) / 1e6
        return out
    if task == "sp_load":
        return _timed(lambda: sp.load_ngram(sqlm), runs)
    if task in ("sp_query", "sp_query2"):
        from seqprob._parallel import set_num_threads

        set_num_threads(2 if task == "sp_query2" else 1)  # blocks of the text scored on 2 threads
        model = sp.load_ngram(sqlm)
        out = _timed(lambda: sp.evaluate(model, test), runs)
        out["tokens"] = sp.evaluate(model, test).n_tokens
        return out
    raise SystemExit(f"unknown task {task}")


# ---------------------------------------------------------------------------- parent


def run_child(task: str, work: str, runs: int, kenlm_python: str | None = None) -> dict:
    python = (kenlm_python or KENLM_PY) if task.startswith("kenlm") else sys.executable
    env = {**os.environ, **THREADS}
    cmd = [python, os.path.join(HERE, "bench_ngram_io.py"), "--child", task, "--work", work,
           "--runs", str(runs)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def prepare(work: str, tokens: int) -> None:
    """Corpus, the seqprob ARPA and .sqlm, KenLM's probing and trie binaries."""
    sys.path.insert(0, HERE)
    from _ngram_corpus import make_corpus

    import seqprob as sp
    from seqprob.ngram import ModifiedKneserNey

    lines = make_corpus(tokens, seed=0)
    with open(os.path.join(work, "train.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(work, "test.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(make_corpus(max(tokens // 10, 1000), seed=1)) + "\n")
    model = ModifiedKneserNey(order=5).fit(lines)
    arpa = sp.write_arpa(model, os.path.join(work, "m.arpa"))
    model.save(os.path.join(work, "m.sqlm"))
    for kind in ("probing", "trie") if KENLM_BIN else ():
        subprocess.run([os.path.join(KENLM_BIN, "build_binary"), "-s", kind, str(arpa),
                        f"{arpa}.{kind}"], check=True, capture_output=True)
    return sum(model.tables_.sizes())


def _stats(times: list) -> tuple:
    return statistics.median(times), min(times), max(times)


def compare(label: str, ours: str, theirs: str, work: str, runs: int, pairs: int, per=None) -> None:
    """Run the pair ``pairs`` times, one side after the other; print medians and the ratio."""
    ratios, lines = [], []
    for _ in range(pairs):
        a, b = run_child(ours, work, runs), run_child(theirs, work, runs)
        (ma, lo_a, hi_a), (mb, lo_b, hi_b) = _stats(a["times"]), _stats(b["times"])
        ratios.append(mb / ma)
        extra = per(a, b) if per else ""
        lines.append(f"    seqprob {ma:.4f} s [{lo_a:.4f}-{hi_a:.4f}]  KenLM {mb:.4f} s "
                     f"[{lo_b:.4f}-{hi_b:.4f}]  ratio {mb / ma:.2f}x{extra}")
    print(f"{label}: ratio KenLM/seqprob median {statistics.median(ratios):.2f}x "
          f"(spread {min(ratios):.2f}-{max(ratios):.2f} over {pairs} pairs)")
    print("\n".join(lines))


def _suite_pair(ours: str, theirs: str | None, work: str, opts, key: str) -> tuple:
    """One pair in the suite's result format ({key: median/min/max, peak_rss_mib})."""
    def form(r):
        (median, lo, hi), rss = _stats(r["times"]), r.get("rss_children_mib", r["rss_mib"])
        return {key: {"median": median, "min": lo, "max": hi}, "peak_rss_mib": rss}
    a = run_child(ours, work, opts.runs, opts.reference_python)
    return form(a), (form(run_child(theirs, work, opts.runs, opts.reference_python)) if theirs else None)


def suite_rows(opts) -> list:
    """The suite's rows, 1 thread (--quick: 100k words); KenLM's side needs the kenlm module in
    the reference Python and lmplz / build_binary (KENLM_BIN or PATH)."""
    import tempfile as tf

    sys.path.insert(0, HERE)
    import _harness as H

    tokens = 100_000 if opts.quick else 1_000_000
    missing = opts.missing("kenlm") or (None if KENLM_BIN else "lmplz/build_binary")
    work = tf.mkdtemp(prefix="ngram-", dir=opts.folder)
    prepare(work, tokens)
    one = H.SuiteOptions(**{**vars(opts), "threads": [1]})
    cases = [(f"query: sp.evaluate of a file, {tokens // 10:,} words", "kenlm Model.score per line", "sp_query",
              "kenlm_query", 1.0), (f"ARPA read ({os.path.getsize(os.path.join(work, 'm.arpa')) / 1e6:.1f} MB)",
              "kenlm.Model(arpa)", "sp_read", "kenlm_arpa", None),
             (f"text -> ARPA, {tokens:,} words", "lmplz -S 2G", "sp_fit_write", "lmplz", None)]
    rows = []
    for work_label, ref, ours, theirs, target in cases:
        results = {1: [_suite_pair(ours, None if missing else theirs, work, opts, "t") for _ in range(opts.repeats)]}
        rows += H.ratio_rows(one, results, work_label, ref, "t", "t", target, reference_module=missing or "kenlm")
    load = {1: [_suite_pair("sp_load", None, work, opts, "t") for _ in range(opts.repeats)]}
    row = H.ratio_rows(one, load, ".sqlm load (sp.load_ngram)", "-", "t", "t")[0]
    row.update(target="< 0.1 s", status="met" if row["seqprob_s"] < 0.1 else "MISSED")
    return rows + [row]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--io", action="store_true")
    ap.add_argument("--child")
    ap.add_argument("--work")
    ap.add_argument("--tokens", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args(argv)
    if args.child:
        out = child(args.child, args.work, args.runs)
        sys.path.insert(0, HERE)
        import _harness as H

        out["rss_mib"] = H.peak_rss_mib()  # VmHWM: ru_maxrss would carry the parent's peak
        print(json.dumps(out))
        return
    if not KENLM_BIN:
        raise SystemExit("KenLM's lmplz not found: put it on PATH or name its folder in $KENLM_BIN")
    with tempfile.TemporaryDirectory(prefix="bench-ngram-io.") as work:
        n = prepare(work, args.tokens)
        arpa = os.path.join(work, "m.arpa")
        print(f"order-5 MKN on {args.tokens} words: {n} n-grams; ARPA {os.path.getsize(arpa) / 1e6:.1f} MB; "
              f"{args.runs} runs per child, {args.pairs} pairs, 1 thread")
        compare("text -> ARPA (lmplz incl. its ARPA write vs seqprob read+fit+write_arpa)", "sp_fit_write",
                "lmplz", work, args.runs, args.pairs,
                per=lambda a, b: (f"; seqprob parts {', '.join(f'{k} {v:.3f}' for k, v in a['parts'].items())}"
                                  f"; peak RSS seqprob {a['rss_mib']:.0f} MiB, lmplz {b['rss_children_mib']:.0f} MiB"))
        compare("ARPA read (sp.read_arpa vs kenlm.Model(arpa))", "sp_read", "kenlm_arpa", work, args.runs,
                args.pairs, per=lambda a, b: f"; seqprob {a['mb'] / statistics.median(a['times']):.0f} MB/s")
        compare("binary load (sp.load_ngram vs kenlm.Model(probing))", "sp_load", "kenlm_probing", work,
                args.runs, args.pairs)
        compare("binary load (sp.load_ngram vs kenlm.Model(trie))", "sp_load", "kenlm_trie", work,
                args.runs, args.pairs)
        sizes = {k: os.path.getsize(p) for k, p in (("seqprob .sqlm", os.path.join(work, "m.sqlm")),
                                                     ("KenLM probing", arpa + ".probing"),
                                                     ("KenLM trie", arpa + ".trie"))}
        print("bytes per n-gram: " + ", ".join(f"{k} {v / n:.1f}" for k, v in sizes.items()))
        rate = lambda a, b: (f"; seqprob {a['tokens'] / statistics.median(a['times']) / 1e6:.2f}M tok/s, "  # noqa: E731
                             f"KenLM {b['tokens'] / statistics.median(b['times']) / 1e6:.2f}M tok/s")
        compare("query (sp.evaluate incl. tokenizing vs kenlm Model.score per sentence)", "sp_query",
                "kenlm_query", work, args.runs, args.pairs, per=rate)
        compare("query, seqprob on 2 threads (extra row; KenLM's module has 1)", "sp_query2",
                "kenlm_query", work, args.runs, args.pairs, per=rate)


if __name__ == "__main__":
    main()
