"""Benchmark: seqprob n-gram fitting and scoring on ~1M tokens, against NLTK (same run).

Corpus: the seeded synthetic Zipf-Markov text of ``_ngram_corpus.py`` (20,000 word types,
long-tailed n-gram statistics, no download).

Run (NLTK: benchmarks/requirements.txt):
    PYTHONPATH=. python benchmarks/bench_ngram.py [--tokens 1000000] [--nltk-tokens 20000]
ARPA write/read, binary load, bytes per n-gram and query throughput against KenLM (lmplz,
build_binary, the kenlm module), each side alone in its own process (benchmarks/bench_ngram_io.py):
    PYTHONPATH=. python benchmarks/bench_ngram.py --io [--tokens 1000000] [--runs 7] [--pairs 3]

Targets: 3-gram MKN fit on ~830k tokens <= KenLM lmplz -o 3 -S 1G (~0.5 s, 2 cores,
quoted: KenLM is not installable here); 5-gram MKN fit < 3 s; scoring 1M tokens with the
5-gram < 1 s (KenLM's Python module: 85k tokens in ~12 ms, i.e. ~7M tokens/s); >= 100x faster
than NLTK KneserNeyInterpolated(3) at fit + score (NLTK on a subset: it is too slow for more).
"""
from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from _ngram_corpus import make_corpus

KENLM_LMPLZ_3GRAM_S = 0.55  # lmplz -o 3 -S 1G on 830k tokens measured on a 2-core machine
KENLM_QUERY_TOKENS_PER_S = 85_000 / 0.012


def n_words(lines: list) -> int:
    return sum(len(line.split()) for line in lines)


def best_of(fn, repeat: int = 3):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def peak_mib(fn) -> float:
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def encode(model, lines: list) -> list:
    tok, v = model.tokenizer, model.vocab
    return [np.array([v.bos_id, *tok.encode(line), v.eos_id]) for line in lines]


def bench_seqprob(lines: list, test: list) -> dict:
    from seqprob.ngram import ModifiedKneserNey

    sub = lines[: int(len(lines) * 0.83)]
    res = {"words_3gram": n_words(sub), "words_5gram": n_words(lines)}
    ModifiedKneserNey(order=2).fit(lines[:1000])  # warm-up (imports)
    res["fit3_s"], m3 = best_of(lambda: ModifiedKneserNey(order=3).fit(sub))
    res["fit5_s"], m5 = best_of(lambda: ModifiedKneserNey(order=5).fit(lines))
    seqs = encode(m5, test)
    res["score_tokens"] = sum(len(s) - 1 for s in seqs)
    t = time.perf_counter()
    m5.token_logprobs_many(seqs)  # first call also builds the hash index of each order
    res["score5_first_s"] = time.perf_counter() - t
    res["score5_s"], _ = best_of(lambda: m5.token_logprobs_many(seqs))
    res["peak_fit5_mib"] = peak_mib(lambda: ModifiedKneserNey(order=5).fit(lines))
    res["peak_score5_mib"] = peak_mib(lambda: m5.token_logprobs_many(seqs))
    res["ngrams5"] = m5.tables_.sizes()
    return res


def bench_nltk(lines: list, test: list) -> dict | None:
    try:
        from nltk.lm import KneserNeyInterpolated
        from nltk.lm.preprocessing import padded_everygram_pipeline
    except ImportError:
        return None
    train = [line.split() for line in lines]
    t = time.perf_counter()
    lm = KneserNeyInterpolated(3)
    data, vocab = padded_everygram_pipeline(3, train)
    lm.fit(data, vocab)
    fit_s = time.perf_counter() - t
    words = [w for line in test for w in line.split()]
    t = time.perf_counter()
    for i in range(2, len(words)):
        lm.logscore(words[i], words[i - 2: i])
    score_s = time.perf_counter() - t
    return {"fit_s": fit_s, "score_s": score_s, "score_tokens": len(words) - 2}


def bench_seqprob_small(lines: list, test: list) -> dict:
    from seqprob.ngram import ModifiedKneserNey

    fit_s, m = best_of(lambda: ModifiedKneserNey(order=3).fit(lines))
    seqs = encode(m, test)
    score_s, _ = best_of(lambda: m.token_logprobs_many(seqs))
    return {"fit_s": fit_s, "score_s": score_s, "score_tokens": sum(len(s) - 1 for s in seqs)}


def main() -> None:
    import sys

    if "--io" in sys.argv[1:] or "--child" in sys.argv[1:]:
        from bench_ngram_io import main as io_main  # ARPA/binary/query rows against KenLM

        io_main(sys.argv[1:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=1_000_000)
    ap.add_argument("--nltk-tokens", type=int, default=20_000, help="NLTK training subset")
    ap.add_argument("--nltk-test-tokens", type=int, default=2_000, help="NLTK scoring subset")
    args = ap.parse_args()

    lines = make_corpus(args.tokens, seed=0)
    test = make_corpus(args.tokens, seed=1)
    r = bench_seqprob(lines, test)
    print(f"corpus: {len(lines)} sentences, {r['words_5gram']} words (synthetic Zipf-Markov)")
    print(f"fit 3-gram MKN on {r['words_3gram']} words: {r['fit3_s']:.3f} s "
          f"(KenLM lmplz ~{KENLM_LMPLZ_3GRAM_S} s quoted: ratio {r['fit3_s'] / KENLM_LMPLZ_3GRAM_S:.2f}x)")
    print(f"fit 5-gram MKN on {r['words_5gram']} words: {r['fit5_s']:.3f} s (target < 3 s); "
          f"n-grams per order {r['ngrams5']}")
    tps = r["score_tokens"] / r["score5_s"]
    print(f"score {r['score_tokens']} tokens with the 5-gram: {r['score5_s']:.3f} s = {tps / 1e6:.2f}M tokens/s "
          f"(first call incl. hash index build {r['score5_first_s']:.3f} s; "
          f"KenLM python ~{KENLM_QUERY_TOKENS_PER_S / 1e6:.1f}M tokens/s quoted)")
    print(f"peak traced memory: fit 5-gram {r['peak_fit5_mib']:.0f} MiB, score {r['peak_score5_mib']:.0f} MiB")

    small_train = make_corpus(args.nltk_tokens, seed=2)
    small_test = make_corpus(args.nltk_test_tokens, seed=3)
    nl = bench_nltk(small_train, small_test)
    if nl is None:
        print("NLTK not installed (benchmarks/requirements.txt): no comparison")
        return
    sp = bench_seqprob_small(small_train, small_test)
    nl_total, sp_total = nl["fit_s"] + nl["score_s"], sp["fit_s"] + sp["score_s"]
    print(f"NLTK KneserNeyInterpolated(3) on a subset ({n_words(small_train)} training words, "
          f"{nl['score_tokens']} scored): fit {nl['fit_s']:.3f} s + score {nl['score_s']:.3f} s "
          f"({nl['score_s'] / nl['score_tokens'] * 1e3:.2f} ms/token)")
    print(f"seqprob MKN(3) on the same subset: fit {sp['fit_s']:.4f} s + score {sp['score_s']:.4f} s")
    print(f"speed-up fit+score: {nl_total / sp_total:.0f}x (target >= 100x); "
          f"scoring per token: {(nl['score_s'] / nl['score_tokens']) / (sp['score_s'] / sp['score_tokens']):.0f}x")


if __name__ == "__main__":
    main()
