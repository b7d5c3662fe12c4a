"""``seqprob score``: per-token log-probabilities of texts under a model."""
from __future__ import annotations

from ._common import (add_format_option, add_model_options, add_window_options, load_model, load_tokenizer_arg,
                      print_frame, progress_wanted, read_texts, warn_unknown)

#: Columns the terminal table leaves out first when it is too wide (csv/json keep them all).
TOKEN_DROP = ("log10prob", "token_id", "is_eos", "model", "seq", "is_oov", "rank")
SUMMARY_DROP = ("log10prob", "bits_per_char", "model", "seq")


def register(sub) -> None:
    """Add the ``score`` sub-command to ``sub``."""
    p = sub.add_parser(
        "score", help="per-token log-probs, surprisal and entropy of texts",
        description="Score each TEXT token by token: log P(x_t | x_<t) for every token, the "
                    "first one included (x_0 = <s>), and </s> at the end. Prints one row per "
                    "token; --summary prints one row per text instead. Without TEXT or --file, the texts are "
                    "read from standard input, one per line (echo \"the cat sat\" | seqprob score).")
    p.add_argument("texts", nargs="*", metavar="TEXT", help="text(s) to score ('-' = the lines of stdin)")
    p.add_argument("--file", help="also score each line of FILE ('-' = stdin)")
    add_model_options(p)
    p.add_argument("--no-bos", action="store_true", help="do not prepend <s> (first token unscored)")
    p.add_argument("--bos-token", metavar="TOKEN",
                   help="the token to start every text from (x_0); default: the model's BOS, else its EOS")
    p.add_argument("--no-eos", action="store_true", help="do not score </s> at the end")
    p.add_argument("--no-distribution", action="store_true",
                   help="skip entropy_bits and rank (no full next-token rows: for huge vocabularies)")
    p.add_argument("--summary", action="store_true", help="one row per text: log P, perplexity, bits")
    p.add_argument("--context", metavar="TEXT",
                   help="read TEXT before each text without scoring it (column spans_join marks a "
                        "token that straddles the join)")
    add_window_options(p)
    add_format_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """Score the texts and print the table; returns the exit status."""
    from ...scoring import score, summarize

    texts = read_texts(args.texts, args.file)
    model = load_model(args.model, progress_wanted(args), "score", args.revision)
    tok = load_tokenizer_arg(args.tokenizer, model)
    shown = not (args.no_distribution or args.summary)  # the summary shows no entropy or rank
    df = score({args.model or "default": model}, texts, tokenizer=tok,
               bos=False if args.no_bos else (args.bos_token or True), eos=not args.no_eos, distribution=shown,
               context=args.context, stride=args.stride, bos_per_window=args.bos_per_window)
    warn_unknown(int(df["is_oov"].sum()), len(df), model, default=args.model is None)
    drop = _droppable(df, TOKEN_DROP)
    if args.summary:
        df = summarize(df)[["model", "seq", "text", "n_tokens", "n_oov", "logprob", "log10prob",
                            "perplexity", "bits_per_token", "bits_per_char"]]
        drop = _droppable(df, SUMMARY_DROP)
    print_frame(df, args.format, drop=drop)
    return 0


def _droppable(df, names) -> list:
    """``names`` the table may leave out; ``model`` and ``seq`` only while they hold one value."""
    return [n for n in names if n in df.columns and (n not in ("model", "seq") or df[n].nunique() <= 1)]
