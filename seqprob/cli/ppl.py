"""``seqprob ppl``: corpus perplexity with KenLM's and SRILM's conventions."""
from __future__ import annotations

from ._common import add_model_options, add_format_option, load_model, load_tokenizer_arg, print_frame


def register(sub) -> None:
    p = sub.add_parser(
        "ppl", help="perplexity of a test corpus (KenLM / SRILM conventions)",
        description="Score TEST (one sentence per line, '-' = stdin, .gz accepted) with <s> as "
                    "context and </s> predicted at the end of each line, and print: sentences, "
                    "words, OOVs, the log10 total, KenLM's perplexity including and excluding "
                    "OOVs and SRILM's ppl / ppl1. Blank lines are skipped (and counted).")
    p.add_argument("test", metavar="TEST", help="test corpus")
    add_model_options(p)
    p.add_argument("--per-sentence", action="store_true", help="also print one line per sentence")
    add_format_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """Print the corpus figures of :func:`seqprob.scoring.evaluate` (and per sentence)."""
    import pandas as pd

    from .._io import read_lines
    from ..scoring import evaluate, score, summarize

    model = load_model(args.model)
    tok = load_tokenizer_arg(args.tokenizer, model)
    lines = args.test  # evaluate streams a file (n-gram models: a few MB at a time)
    if args.per_sentence:
        lines = list(read_lines(args.test))
        kept = [t for t in lines if t]
        per = summarize(score({"model": model}, kept, tokenizer=tok, distribution=False))
        per = per.rename(columns={"seq": "sentence", "n_tokens": "tokens", "n_oov": "oovs"})
        print_frame(per[["sentence", "tokens", "oovs", "log10prob", "perplexity", "text"]], args.format)
    ev = evaluate(model, lines, tokenizer=tok)
    rows = [("sentences", ev.n_sentences), ("words", ev.n_words), ("OOVs", ev.n_oov),
            ("zero-probability words", ev.n_zeros), ("tokens scored", ev.n_tokens),
            ("log10 total", ev.log10prob), ("perplexity including OOVs (KenLM)", ev.perplexity),
            ("perplexity excluding OOVs (KenLM)", ev.perplexity_excl_oov),
            ("ppl (SRILM)", ev.ppl), ("ppl1 (SRILM)", ev.ppl1), ("bits per token", ev.bits_per_token)]
    if ev.n_skipped_empty:  # KenLM's query would score each as a sentence of just </s>
        rows.append(("blank lines skipped", ev.n_skipped_empty))
    print_frame(pd.DataFrame(rows, columns=["figure", "value"], dtype=object), args.format)
    return 0
