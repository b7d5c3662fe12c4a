"""``seqprob ppl``: corpus perplexity with KenLM's and SRILM's conventions."""
from __future__ import annotations

import math

from ._common import (add_format_option, add_model_options, add_window_options, load_model, load_tokenizer_arg,
                      print_document, print_frame, seed_int, warn_unknown)


def register(sub) -> None:
    p = sub.add_parser(
        "ppl", help="perplexity of a test corpus (KenLM / SRILM conventions)",
        description="Score TEST (one sentence per line, '-' = stdin, .gz accepted) with <s> as "
                    "context and </s> predicted at the end of each line, and print: sentences, "
                    "words, OOVs, the log10 total, KenLM's perplexity including and excluding "
                    "OOVs and SRILM's ppl / ppl1. Blank lines are skipped (and counted).")
    p.add_argument("test", metavar="TEST", help="test corpus")
    add_model_options(p)
    p.add_argument("--per-sentence", action="store_true",
                   help="also one row per sentence (json: one object {sentences, corpus}; csv: the "
                        "per-sentence table only)")
    p.add_argument("--ci", action="store_true",
                   help="add 95%% bootstrap intervals (resampling sentences) of perplexity and bits")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates for --ci (>= 100)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the bootstrap for --ci")
    add_window_options(p)
    add_format_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """Print the corpus figures of :func:`seqprob.scoring.evaluate` (and per sentence)."""
    import pandas as pd

    from ..._io import read_lines
    from ...scoring import evaluate, score, summarize

    model = load_model(args.model)
    tok = load_tokenizer_arg(args.tokenizer, model)
    # evaluate streams a path (n-gram models: a few MB at a time); the per-sentence table and
    # the bootstrap need the lines themselves
    lines = list(read_lines(args.test)) if (args.per_sentence or args.ci) else args.test
    ev = evaluate(model, lines, tokenizer=tok, stride=args.stride, bos_per_window=args.bos_per_window)
    warn_unknown(ev.n_oov, ev.n_tokens, model, default=args.model is None)
    rows = [("sentences", ev.n_sentences), ("words", ev.n_words), ("OOVs", ev.n_oov),
            ("zero-probability words", ev.n_zeros), ("tokens scored", ev.n_tokens),
            ("log10 total", ev.log10prob), ("perplexity including OOVs (KenLM)", ev.perplexity),
            ("perplexity excluding OOVs (KenLM)", ev.perplexity_excl_oov),
            ("ppl (SRILM)", ev.ppl), ("ppl1 (SRILM)", ev.ppl1), ("bits per token", ev.bits_per_token)]
    if args.ci and not math.isfinite(ev.log10prob):  # compare() refuses: no interval exists
        rows.append(("bootstrap intervals", "none: a token has P = 0"))
    elif args.ci:
        rows += _interval_rows(model, [t for t in lines if t], tok, args)
    if ev.n_skipped_empty:  # KenLM's query would score each as a sentence of just </s>
        rows.append(("blank lines skipped", ev.n_skipped_empty))
    corpus = pd.DataFrame(rows, columns=["figure", "value"], dtype=object)
    if not args.per_sentence:
        print_frame(corpus, args.format)
        return 0
    per = summarize(score({"model": model}, [t for t in lines if t], tokenizer=tok, distribution=False))
    per = per.rename(columns={"seq": "sentence", "n_tokens": "tokens", "n_oov": "oovs"})
    per = per[["sentence", "tokens", "oovs", "log10prob", "perplexity", "text"]]
    print_document({"sentences": per, "corpus": corpus}, args.format, csv_key="sentences")
    return 0


def _interval_rows(model, texts, tok, args) -> list:
    """Rows of the bootstrap intervals (:func:`seqprob.compare`)."""
    from ...scoring import compare

    cmp = compare({"model": model}, texts, tokenizer=tok, n_boot=args.n_boot, seed=args.seed,
                  stride=args.stride, bos_per_window=args.bos_per_window)
    row = cmp.models.iloc[0]
    level = f"{cmp.confidence:.0%} CI, {cmp.n_boot} bootstrap draws of sentences"
    return [(f"perplexity {level}", f"[{row.perplexity_low:.4f}, {row.perplexity_high:.4f}]"),
            (f"bits per token {level}", f"[{row.bits_per_token_low:.4f}, {row.bits_per_token_high:.4f}]"),
            ("bits per byte", row.bits_per_byte),
            (f"bits per byte {level}", f"[{row.bits_per_byte_low:.4f}, {row.bits_per_byte_high:.4f}]")]
