"""``seqprob ppl``: corpus perplexity with KenLM's and SRILM's conventions."""
from __future__ import annotations

import math
import os
import sys

from ...errors import InputError
from ._common import (add_format_option, add_model_options, add_window_options, check_input_file, load_model,
                      load_tokenizer_arg, print_document, print_frame, progress_wanted, seed_int, stdin_is_piped,
                      warn_unknown)
from ._loading import stage

CI_COLUMNS = ("ci95_low", "ci95_high")
#: Test corpora at least this large get a "scoring" line on a terminal.
BIG_TEST_BYTES = 4 << 20


def register(sub) -> None:
    p = sub.add_parser(
        "ppl", help="perplexity of a test corpus (KenLM / SRILM conventions)",
        description="Score TEST (one sentence per line, '-' = stdin, .gz accepted; without TEST, "
                    "standard input when it is not a terminal) with <s> as context and </s> "
                    "predicted at the end of each line, and print: sentences, words, OOVs, the "
                    "log10 total, KenLM's perplexity including and excluding OOVs, SRILM's ppl / "
                    "ppl1, bits per token, per character and per byte. Blank lines are skipped (and "
                    "counted). The table rounds the figures; csv and json keep every digit.")
    p.add_argument("test", metavar="TEST", nargs="?", help="test corpus (default: standard input)")
    add_model_options(p)
    p.add_argument("--per-sentence", action="store_true",
                   help="also one row per sentence (json: one object {sentences, corpus}; csv: the "
                        "per-sentence table only)")
    p.add_argument("--ci", action="store_true",
                   help="add 95%% bootstrap intervals (resampling sentences) of perplexity and bits: "
                        "columns ci95_low and ci95_high")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates for --ci (>= 100)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the bootstrap for --ci")
    add_window_options(p)
    add_format_option(p)
    p.set_defaults(func=run)


def _test_corpus(test) -> str:
    """TEST, or '-' when it is left out and standard input is a pipe or a file."""
    if test is None:
        if not stdin_is_piped():
            raise InputError("no test corpus given: pass TEST (a file of sentences, one per line; "
                             "'-' = stdin) or pipe the sentences on standard input")
        return "-"
    check_input_file(test, "TEST", "; TEST is a file of sentences, one per line ('-' = stdin); to "
                                   "score a text itself, use 'seqprob score TEXT'")
    return test


def run(args) -> int:
    """Print the corpus figures of :func:`seqprob.scoring.evaluate` (and per sentence)."""
    import pandas as pd

    from ..._io import read_lines
    from ...scoring import evaluate, score, summarize

    test = _test_corpus(args.test)
    progress = progress_wanted(args)
    model = load_model(args.model, progress, "ppl", args.revision)
    tok = load_tokenizer_arg(args.tokenizer, model)
    # evaluate streams a path (n-gram models: a few MB at a time); the per-sentence table and
    # the bootstrap need the lines themselves
    lines = list(read_lines(test)) if (args.per_sentence or args.ci) else test
    big = test != "-" and os.path.getsize(test) >= BIG_TEST_BYTES
    with stage("ppl", f"scoring {test!r}", progress and big):
        ev = evaluate(model, lines, tokenizer=tok, stride=args.stride, bos_per_window=args.bos_per_window)
    warn_unknown(ev.n_oov, ev.n_tokens, model, default=args.model is None)
    corpus = pd.DataFrame(_rows(ev), columns=["figure", "value"], dtype=object)
    if args.ci:
        corpus = _add_intervals(corpus, model, [t for t in lines if t], tok, args, ev)
    if not args.per_sentence:
        print_frame(corpus, args.format)
        return 0
    per = summarize(score({"model": model}, [t for t in lines if t], tokenizer=tok, distribution=False))
    per = per.rename(columns={"seq": "sentence", "n_tokens": "tokens", "n_oov": "oovs"})
    per = per[["sentence", "tokens", "oovs", "log10prob", "perplexity", "text"]]
    print_document({"sentences": per, "corpus": corpus}, args.format, csv_key="sentences")
    return 0


def _rows(ev) -> list:
    """(figure, value) rows: the same with and without --ci."""
    rows = [("sentences", ev.n_sentences), ("words", ev.n_words), ("OOVs", ev.n_oov),
            ("zero-probability words", ev.n_zeros), ("tokens scored", ev.n_tokens),
            ("log10 total", ev.log10prob), ("perplexity including OOVs (KenLM)", ev.perplexity),
            ("perplexity excluding OOVs (KenLM)", ev.perplexity_excl_oov),
            ("ppl (SRILM)", ev.ppl), ("ppl1 (SRILM)", ev.ppl1), ("bits per token", ev.bits_per_token),
            ("bits per character", ev.bits_per_char), ("bits per byte", ev.bits_per_byte)]
    if ev.n_skipped_empty:  # KenLM's query would score each as a sentence of just </s>
        rows.append(("blank lines skipped", ev.n_skipped_empty))
    return rows


def _add_intervals(corpus, model, texts, tok, args, ev):
    """Columns ci95_low / ci95_high: bootstrap intervals of perplexity and bits
    (:func:`seqprob.compare`); empty, with a warning, when none exists (P = 0)."""
    corpus = corpus.assign(**{c: None for c in CI_COLUMNS})
    if not math.isfinite(ev.log10prob):  # compare() refuses: no interval exists
        print("seqprob ppl: warning: no bootstrap intervals: a token has probability 0, so every "
              "resampled corpus containing it has perplexity inf", file=sys.stderr)
        return corpus
    from ...scoring import compare

    cmp = compare({"model": model}, texts, tokenizer=tok, n_boot=args.n_boot, seed=args.seed,
                  stride=args.stride, bos_per_window=args.bos_per_window)
    row = cmp.models.iloc[0]
    for figure, name in (("perplexity including OOVs (KenLM)", "perplexity"),
                         ("bits per token", "bits_per_token"), ("bits per byte", "bits_per_byte")):
        at = corpus.index[corpus["figure"] == figure][0]
        corpus.loc[at, list(CI_COLUMNS)] = [float(row[f"{name}_low"]), float(row[f"{name}_high"])]
    return corpus
