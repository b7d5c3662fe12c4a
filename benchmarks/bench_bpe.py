"""Benchmark seqprob's BPE trainer and encoder.

1. Train 2,000 merges on ~4 MB of text (the Genesis fixture repeated with seeded line shuffles,
   and, as a harder case with many distinct pre-tokens, ~4 MB of Python standard-library source).
2. The same merges against ``tiktoken._educational.bpe_train`` on a small subset: speed ratio,
   and a check that both make identical merges.
3. Encode throughput of ``BPETokenizer`` against a ``tiktoken.Encoding`` built from the same
   ranks (seqprob's wrapper overhead).

Usage (from the repository root, seqprob installed or on PYTHONPATH)::

    PYTHONPATH=. python benchmarks/bench_bpe.py [--mb 4] [--merges 2000] [--repeats 5]
"""
from __future__ import annotations

import argparse
import glob
import os
import random
import statistics
import sysconfig
import time

from seqprob.tokenizers import BPETokenizer
from seqprob.tokenizers.tiktoken_io import ENDOFTEXT, GPT2_PATTERN

# a plain-text corpus file (one sentence a line); without it the Genesis rows are skipped
GENESIS = os.environ.get("SEQPROB_GENESIS")


def genesis_corpus(n_bytes: int, seed: int = 0) -> list[str]:
    with open(GENESIS, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    rng, texts, size = random.Random(seed), [], 0
    while size < n_bytes:
        rng.shuffle(lines)
        texts.append("\n".join(lines) + "\n")
        size += len(texts[-1].encode("utf-8"))
    return texts


def python_source_corpus(n_bytes: int) -> list[str]:
    texts, size = [], 0
    for path in sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "**", "*.py"), recursive=True)):
        with open(path, encoding="utf-8", errors="replace") as handle:
            texts.append(handle.read())
        size += len(texts[-1].encode("utf-8"))
        if size >= n_bytes:
            break
    return texts


def timed(fn, repeats: int):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return result, times


def fmt(times) -> str:
    return f"median {statistics.median(times):.3f} s (min {min(times):.3f}, max {max(times):.3f}, n={len(times)})"


def bench_train(name, texts, merges, repeats):
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    tok, times = timed(lambda: BPETokenizer.train(texts, vocab_size=256 + merges + 1), repeats)
    print(f"train {tok.n_merges} merges on {mb:.2f} MB ({name}): {fmt(times)}")
    return tok


def bench_vs_educational(texts, n_chars, merges):
    import tiktoken._educational as edu

    data = "".join(texts)[:n_chars]
    ours, t_ours = timed(lambda: BPETokenizer.train(data, vocab_size=256 + merges + 1), 3)
    ref, t_ref = timed(lambda: edu.bpe_train(data=data, vocab_size=256 + merges, pat_str=GPT2_PATTERN,
                                             visualise=None), 1)
    same = ours.mergeable_ranks_ == ref
    ratio = min(t_ref) / statistics.median(t_ours)
    print(f"vs tiktoken._educational.bpe_train, {merges} merges on {len(data.encode()) / 1e3:.0f} kB: "
          f"seqprob {statistics.median(t_ours):.3f} s, educational {min(t_ref):.2f} s "
          f"-> {ratio:.0f}x faster; identical merges: {same}")


def bench_encode(tok, texts, repeats):
    import tiktoken

    enc = tiktoken.Encoding(name="ref", pat_str=GPT2_PATTERN, mergeable_ranks=tok.mergeable_ranks_,
                            special_tokens={ENDOFTEXT: len(tok.mergeable_ranks_)})
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    rows = [("encode (per text)", lambda: [tok.encode(t) for t in texts],
             lambda: [enc.encode_ordinary(t) for t in texts]),
            ("encode_batch", lambda: tok.encode_batch(texts), lambda: enc.encode_ordinary_batch(texts))]
    for label, ours, theirs in rows:
        assert ours() == theirs(), "seqprob and tiktoken disagree"  # also the warm-up
        t_a, t_b = [], []
        for _ in range(repeats):  # interleaved, so drift hits both sides alike
            t_a += timed(ours, 1)[1]
            t_b += timed(theirs, 1)[1]
        ma, mb_ = statistics.median(t_a), statistics.median(t_b)
        print(f"{label} on {mb:.2f} MB: seqprob {mb / ma:.1f} MB/s, tiktoken {mb / mb_:.1f} MB/s "
              f"-> ratio {mb_ / ma:.2f} (1.0 = same speed)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=4.0, help="corpus size in MB (default 4)")
    parser.add_argument("--merges", type=int, default=2000, help="merges to learn (default 2000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per figure (default 5)")
    parser.add_argument("--edu-chars", type=int, default=50_000, help="subset size for the educational trainer")
    parser.add_argument("--edu-merges", type=int, default=100, help="merges for the educational comparison")
    args = parser.parse_args()
    n_bytes = int(args.mb * 1e6)
    source = python_source_corpus(n_bytes)
    genesis = genesis_corpus(n_bytes) if GENESIS else None
    if genesis is None:
        print("SEQPROB_GENESIS not set: the Genesis rows use the Python stdlib source instead")
    else:
        bench_train("Genesis, seeded shuffles", genesis, args.merges, args.repeats)
    tok = bench_train("Python stdlib source", source, args.merges, args.repeats)
    bench_vs_educational(genesis or source, args.edu_chars, args.edu_merges)
    bench_encode(tok, genesis or source, args.repeats)


if __name__ == "__main__":
    main()
